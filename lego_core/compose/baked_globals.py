"""The model file's globals and class attributes a plan bakes in, for ModelNew to guard.

torch.export reads a forward's Python values once, at capture, and bakes
them into the graph: a global setting (``ALPHA = 0.5``, ``CFG = {"eps":
1e-5}``, a config dataclass's ``CFG.eps``), a class attribute (``Model.factor = 2.0``), the values of a global
or class-level tensor (saved in constants.pt).  Change one after optimizing
and eager follows it while the plan would silently keep the old value.
``optimized_model.py`` lists them (``BAKED_GLOBALS``, ``GLOBAL_TENSORS``) and
``lego_runtime.BoundTensors.globals_fit`` checks them at every call: a
changed one runs the original forward, with a warning naming it, as a
changed plain attribute of a module does (``lego_core.load.module_attributes.baked_attributes``).

Only names the forward's code can read are listed: the globals named in the
code of the model file's own classes (every method but ``__init__``, whose
reads only shape the model as built; a library's classes read their own
module's globals) and of the model file's functions they call,
transitively; a size constant that only ``get_inputs`` reads is not.  The
module's identity (``__name__``, ``__file__``...) is never listed.
"""
from __future__ import annotations

import types

import torch

from lego_core.load.module_attributes import class_state, helper_object, is_plain, user_classes


def _plain(value) -> bool:
    """``is_plain``, and a dict of up to 64 plain keys whose values are
    plain or such dicts themselves (``CFG = {"eps": 1e-5}``)."""
    if isinstance(value, dict):
        return len(value) <= 64 and all(is_plain(k) and (is_plain(v) or _plain(v)) for k, v in value.items())
    return is_plain(value)


def _codes(function) -> list[types.CodeType]:
    """``function``'s code object and those nested in it (closures, comprehensions)."""
    code = getattr(function, "__code__", None)
    found, stack = [], [code] if code is not None else []
    while stack:
        c = stack.pop()
        found.append(c)
        stack += [k for k in c.co_consts if isinstance(k, types.CodeType)]
    return found


def read_names(model: torch.nn.Module, namespace: types.ModuleType) -> set[str]:
    """The global names the code of ``model``'s own classes (not ``__init__``)
    and of the model file's functions they call may read."""
    names: set[str] = set()
    pending = []
    for cls in user_classes(model):
        if cls.__module__ != namespace.__name__:
            continue  # a library's class (transformers' GPT2Block) reads its own module's globals, never the model file's
        for name, value in vars(cls).items():
            function = value.__func__ if isinstance(value, (staticmethod, classmethod)) else getattr(value, "fget", value)
            if name != "__init__" and callable(function):
                pending += _codes(function)
    seen = set()
    while pending:
        code = pending.pop()
        if id(code) in seen:
            continue
        seen.add(id(code))
        names |= set(code.co_names)
        for name in code.co_names:  # a function of the model file that forward calls
            value = vars(namespace).get(name)
            if isinstance(value, types.FunctionType) and value.__module__ == namespace.__name__:
                pending += _codes(value)
    return names


def _identity(name: str) -> bool:
    """Whether a global is the module's identity or Python's bookkeeping
    (``__name__``, ``__file__``, ``__spec__``, ``__builtins__``...), never a
    setting: ModelNew imports the model file under another module name and
    path than LEGO did, so such a value always differs, and guarding it made
    every call fall back to the original forward."""
    return name.startswith("__") and name.endswith("__")


def baked_globals(model: torch.nn.Module, namespace: types.ModuleType | None) -> tuple:
    """``(("global", "", name, value) | ("object", global name, field, value) |
    ("class", class name, name, value), ...)``: the plain values (numbers,
    strings, None, short tuples, small dicts of them) the plan may have baked
    in, as they are now; ``"object"``: a field of a global object of a class
    the model file defines (a config dataclass, ``CFG.eps``).  NaN is left out (it
    equals nothing, not even itself)."""
    if namespace is None:
        return ()
    found = []
    read = read_names(model, namespace)
    for name in sorted(read):
        value = vars(namespace).get(name)
        if name not in vars(namespace) or _identity(name):
            continue
        if _plain(value) and value == value and not isinstance(value, types.ModuleType):
            found.append(("global", "", name, tuple(value) if isinstance(value, list) else value))
        elif helper_object(value, namespace.__name__):  # a config object of the model file: its plain fields
            found += [("object", name, field, tuple(v) if isinstance(v, list) else v)
                      for field, v in vars(value).items() if _plain(v) and v == v]
    for cls in _top_level_classes(model, namespace):
        for name, value in class_state(cls).items():
            if _plain(value) and value == value:
                found.append(("class", cls.__name__, name, tuple(value) if isinstance(value, list) else value))
    return tuple(found)


def global_tensors(model: torch.nn.Module, namespace: types.ModuleType | None) -> tuple:
    """``(("global", "", name) | ("class", class name, name), ...)``: the
    tensors held by globals the forward may read and by class attributes,
    whose values a plan keeps as saved constants."""
    if namespace is None:
        return ()
    read = read_names(model, namespace)
    found = [("global", "", n) for n in sorted(read) if not _identity(n) and isinstance(vars(namespace).get(n), torch.Tensor)]
    for cls in _top_level_classes(model, namespace):
        found += [("class", cls.__name__, n) for n, v in class_state(cls).items() if isinstance(v, torch.Tensor)]
    return tuple(found)


def _top_level_classes(model: torch.nn.Module, namespace: types.ModuleType) -> list[type]:
    """The model's own classes that the model file defines at its top level
    (ModelNew finds them there by name)."""
    return [c for c in user_classes(model) if vars(namespace).get(c.__name__) is c]
