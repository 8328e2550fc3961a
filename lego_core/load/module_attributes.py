"""What a model's modules hold, read without running it: one home for these facts.

torch.export bakes the plain Python values a forward reads into the graph,
and a forward can keep state in places torch.export does not carry.  Both
the loader (``lego_core.load.state`` and ``state_checks``: what a forward
may write) and the output folder (``lego_core.compose.folder`` and
``baked_globals``: what ``ModelNew`` guards at every call) need the same
reading of a model:

* :func:`is_plain`, :func:`baked_attributes`, :func:`baked_fields`: the
  plain settings (bool, int, float, short str, None, short containers of
  them) of the model's modules and of the settings objects they hold;
* :func:`user_modules`, :func:`user_classes`, :func:`class_state`,
  :func:`helper_object`: the model's own modules and classes (not torch's),
  the class attributes that could hold state, and the model file's helper
  objects;
* :func:`held` and :func:`tensor_version`: fingerprints that change when a
  forward changes what an attribute holds.
"""
from __future__ import annotations

import functools
import types

import torch

PLAIN_TYPES = (bool, int, float, str, type(None))
# nn.Module's own bookkeeping attributes (hook flags), not the user's
MODULE_INTERNALS = frozenset(vars(torch.nn.Module())) | {"training"}
# containers an attribute may hold state in (compared by what they hold, two levels deep)
CONTAINERS = (list, tuple, dict, set)
# values that are code or types, never state
NOT_STATE = (types.ModuleType, type, types.FunctionType, types.BuiltinFunctionType, types.MethodType,
             functools.partial, torch.nn.Module, torch.dtype, torch.device)


def is_plain(value) -> bool:
    """Whether ``value`` is a setting torch.export may bake: a bool, int,
    float, short str or None, or a short tuple, list or dict of them (a
    dict's keys plain scalars; a module's ``self.hparams = {"shift": 0.5}``)."""
    if isinstance(value, (tuple, list)):
        return len(value) <= 16 and all(is_plain(v) for v in value)
    if type(value) is dict:
        return len(value) <= 64 and all(isinstance(k, PLAIN_TYPES) and is_plain(v) for k, v in value.items())
    return isinstance(value, PLAIN_TYPES) and (not isinstance(value, str) or len(value) <= 200)


def baked_attributes(model: torch.nn.Module, created: list[str] | tuple = ()) -> tuple:
    """``((module path, name, value), ...)``: every plain attribute (bool,
    int, float, str, None, short tuples of them) of ``model`` and its
    submodules, as ``torch.export`` saw them (it bakes the values the
    forward reads into the graph: a temperature, an ``eps``, a flag).
    ``optimized_model.py`` keeps them so that ``ModelNew`` notices when one
    is changed after construction and runs the original forward instead of
    a plan that still uses the old value (``lego_runtime.forward_mode``).
    ``created``: attributes (``"path.name"``) the model's first forward
    created (``Problem.created_attributes``: transformers' flag that it
    installed its output hooks), left out: a ModelNew whose plan runs never
    creates them, and their absence is no changed setting."""
    baked = []
    skip = set(created)
    for path, module in model.named_modules():
        for name, value in vars(module).items():
            if (f"{path}.{name}" if path else name) in skip:
                continue
            if name not in MODULE_INTERNALS and not name.startswith("_lego") and is_plain(value):
                if isinstance(value, float) and value != value:
                    continue  # NaN never equals itself: not checkable, and rare as a setting
                baked.append((path, name, tuple(value) if isinstance(value, list) else value))
    return tuple(baked)


_NOT_SETTINGS = (dict, list, tuple, set, frozenset, str, bytes, type)
MAX_FIELDS = 256  # plain fields kept per settings object (a Hugging Face config has 40-100)


def baked_fields(model: torch.nn.Module, written: list[str] | tuple = ()) -> tuple:
    """``((module path, attribute, field, value), ...)``: the plain fields of
    the settings objects ``model``'s modules hold as attributes (a Hugging
    Face module's ``self.config``, whose ``use_return_dict``,
    ``output_attentions`` or ``layer_norm_epsilon`` forward reads at call
    time; an ``argparse.Namespace``; a dataclass of settings), each object
    once, under the first module that holds it.  torch.export bakes what
    forward read of them into the graph, so ``ModelNew`` checks them at
    every call (``lego_runtime.BoundTensors.fields_fit``) and runs the
    original forward, naming the field, once one changed
    (``new.gpt.config.output_hidden_states = True``).  Modules, tensors,
    callables and containers are not settings objects; the object's own
    public attributes are read from its ``__dict__``, at most
    :data:`MAX_FIELDS` (a private one is the library's bookkeeping, such as
    a ``GenerationConfig``'s ``_original_object_hash``, which differs in
    every instance: guarding it made ModelNew fall back on every call);
    ``written``: fields (``"path.attribute.field"``) that forward writes
    without changing its outputs (``Problem.written_fields``), left out."""
    found, seen, skip = [], set(), set(written)
    for path, module in model.named_modules():
        for name, value in vars(module).items():
            if (name in MODULE_INTERNALS or name.startswith("_lego") or id(value) in seen or callable(value)
                    or isinstance(value, (torch.nn.Module, torch.Tensor, *_NOT_SETTINGS, *PLAIN_TYPES))
                    or not isinstance(getattr(value, "__dict__", None), dict)):
                continue
            seen.add(id(value))
            fields = [(field, v) for field, v in vars(value).items()
                      if not field.startswith("_") and is_plain(v) and not (isinstance(v, float) and v != v)]
            found += [(path, name, field, tuple(v) if isinstance(v, list) else v) for field, v in fields[:MAX_FIELDS]
                      if ".".join(p for p in (path, name, field) if p) not in skip]
    return tuple(found)


def _is_torch_module(module: torch.nn.Module) -> bool:
    return type(module).__module__.split(".")[0] == "torch"


def user_modules(model: torch.nn.Module):
    """``(prefix, module)`` for ``model`` and its submodules not defined by
    torch (torch's modules keep caches of their own: an RNN's flat weights);
    ``prefix`` is the dotted path with a trailing dot (``""`` for the model)."""
    for path, module in model.named_modules():
        if not _is_torch_module(module):
            yield (f"{path}." if path else ""), module


def user_classes(model: torch.nn.Module) -> list[type]:
    """The classes of ``model``'s own modules and their bases, not torch's."""
    found = []
    for _prefix, module in user_modules(model):
        for cls in type(module).__mro__:
            if cls.__module__.split(".")[0] not in ("torch", "builtins") and cls not in found:
                found.append(cls)
    return found


def class_state(cls: type) -> dict:
    """A class's own attributes that could hold state: not dunders, methods,
    properties or nested classes."""
    return {name: value for name, value in vars(cls).items()
            if not name.startswith("__") and not isinstance(value, (*NOT_STATE, staticmethod, classmethod, property))
            and not callable(value)}


def helper_object(value, home: str | None) -> bool:
    """Whether ``value`` is an object of a class the model file ``home``
    (its module name) defines: a helper that may keep state in its
    attributes.  Objects of other libraries (a ``logging.Logger``, which
    fills a level cache as it is used) are compared by identity only."""
    return (home is not None and type(value).__module__ == home and hasattr(value, "__dict__")
            and not isinstance(value, (torch.Tensor, *NOT_STATE)))


def tensor_version(t: torch.Tensor) -> int | None:
    """``t``'s version counter (moves at every in-place write), or None for
    an inference-mode tensor, which keeps none."""
    try:
        return t._version
    except RuntimeError:  # an inference-mode tensor keeps none
        return None


def held(value, depth: int = 0) -> tuple:
    """A fingerprint of ``value``: a tensor's identity and version counter,
    a container's identity and what it holds (two levels deep, so a tensor
    written in place inside a list shows), anything else's identity."""
    if isinstance(value, torch.Tensor):
        return ("tensor", id(value), tensor_version(value))
    if isinstance(value, set):
        return ("set", id(value), len(value))
    if depth >= 2 or not isinstance(value, CONTAINERS):
        return ("object", id(value))
    if isinstance(value, dict):
        inner = tuple((repr(k), held(v, depth + 1)) for k, v in list(value.items())[:64])
    else:
        inner = tuple(held(v, depth + 1) for v in list(value)[:64])
    return (type(value).__name__, id(value), inner, len(value))
