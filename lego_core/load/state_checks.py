"""Writes to state that torch.export captures wrongly or not at all: refused by name.

``lego_core.load.state`` carries a forward's writes into buffers and plain tensor
attributes of the model's modules.  Three other ways of keeping state look
the same in eager and would make a silently wrong plan, or an internal error
far from their cause; each is refused before the search, with what to change:

* :func:`data_write_error`: a write through ``.data`` (``self.ema.data = ...``,
  ``self.ema.data.mul_(0.9)``).  It bypasses the tensor's version counter,
  so torch.export neither sees nor captures it (it fails with "We found a
  fake tensor in the exported program constant's list").
* :func:`alias_error`: a write into a buffer or attribute that shares memory
  with another name of the model (one tensor registered in two modules, a
  buffer that is a view of another).  torch.export captures no write through
  such an alias.
* :func:`outside_fingerprints` / :func:`outside_state_error`: state kept
  outside the model's modules, in a global of the model file (a dict, a
  list, a tensor, a counter), a class attribute (``Model.calls += 1``) or
  a helper object held by a module (``self.memory = Memory()``);
  :func:`fake_tensor_holders` finds, after capture, any place the trace
  left a fake tensor in (a module kept in a plain dict).  Eager changes it on every call; torch.export
  bakes the value it finds into the plan, and while tracing it writes fake
  tensors into it.
"""
from __future__ import annotations

import re
import types

import torch

from lego_core.load.module_attributes import MODULE_INTERNALS, NOT_STATE, class_state, held, helper_object, user_classes, user_modules
from lego_core.load.spec import ProblemError


def _refusal(message: str, path: str | None, hint: str) -> ProblemError:
    error = ProblemError(message, path, None, hint=hint)
    error.kind = "stateful forward"
    return error


def data_write_error(probe: dict, path: str | None) -> ProblemError | None:
    """The refusal of the writes through ``.data`` that ``probe``
    (``state.probe_writes``: ``{dotted name: (what, how)}``) found, or None."""
    names = [t for t, (_what, how) in probe.items() if how == "through .data"]
    if not names:
        return None
    leaf = names[0].rpartition(".")[2]
    return _refusal(
        f"Model.forward writes {', '.join(f'self.{n}' for n in names)} through .data (`self.{leaf}.data = ...` or "
        f"`self.{leaf}.data.mul_(...)`), which bypasses the tensor's version counter, so torch.export cannot capture "
        "the write and an optimized model would lose it",
        path,
        f"write the tensor itself in place instead: self.{leaf}.copy_(new_value) or self.{leaf}.mul_(0.9).add_(...) "
        "(inside torch.no_grad() if it must not be tracked by autograd); LEGO carries such writes.",
    )


def _named_tensors(model: torch.nn.Module) -> list[tuple[str, torch.Tensor]]:
    """Every buffer, parameter and plain tensor attribute of ``model``, under
    every name it has (a tensor registered in two modules appears twice)."""
    found = []
    for prefix, module in model.named_modules(remove_duplicate=False):
        dotted = f"{prefix}." if prefix else ""
        for name, value in (*module._buffers.items(), *module._parameters.items(), *vars(module).items()):
            if isinstance(value, torch.Tensor) and value.numel():
                found.append((dotted + name, value))
    return found


def alias_error(model: torch.nn.Module, written: list[str], path: str | None) -> ProblemError | None:
    """The refusal of a forward that writes one of ``written`` (dotted names,
    from ``state.probe_writes``) while it shares memory with another name of
    ``model``, or None.  Two names alias when their storages are the same
    (the same tensor registered twice, or a view of another)."""
    tensors = _named_tensors(model)
    for target in written:
        mine = [t for n, t in tensors if n == target]
        if not mine:
            continue
        storage = mine[0].untyped_storage().data_ptr()
        others = sorted({n for n, t in tensors if n != target and t.untyped_storage().data_ptr() == storage})
        if others:
            listed = ", ".join(f"self.{n}" for n in others[:3])
            return _refusal(
                f"Model.forward writes self.{target}, which shares its memory with {listed} (one tensor registered "
                "under two names, or a buffer that is a view of another); torch.export does not capture writes through "
                "such an alias, so an optimized model would lose them",
                path,
                f"give the state one name: register the tensor once and reach it through its owner from the other "
                f"module (or pass it in); if the names are meant to hold separate values, register a copy "
                f"(register_buffer({target.rpartition('.')[2]!r}, tensor.clone())).",
            )
    return None


def _print(value, home: str | None):
    """A fingerprint of ``value`` that changes when a forward changes it:
    ``module_attributes.held`` (a tensor's identity and version counter, a container's
    contents two levels deep, anything else's identity; a number or string
    changes identity with its value), and for a helper object of the model
    file (``module_attributes.helper_object``) the same of each of its own attributes."""
    if helper_object(value, home):
        return (type(value).__name__, id(value), tuple((k, held(v, 1)) for k, v in list(vars(value).items())[:64]))
    return held(value)


def outside_fingerprints(model: torch.nn.Module, namespace: types.ModuleType | None) -> dict[str, tuple]:
    """``{description: fingerprint}`` of the state a forward could keep
    outside the model's modules: the globals of the model file
    ``namespace`` (not its imports, classes, functions or modules), the
    attributes of the model's own classes, and the helper objects
    (``module_attributes.helper_object``) that the model's own modules hold."""
    home = namespace.__name__ if namespace is not None else None
    found = {}
    for name, value in (vars(namespace).items() if namespace is not None else ()):
        if not name.startswith("__") and not isinstance(value, NOT_STATE):
            found[f"the global {name} of the model file ({type(value).__name__})"] = _print(value, home)
    for prefix, module in user_modules(model):
        for name, value in vars(module).items():
            if name not in MODULE_INTERNALS and not name.startswith("_lego") and helper_object(value, home):
                found[f"self.{prefix}{name} (a {type(value).__name__} object, not a module)"] = _print(value, home)
    for cls in user_classes(model):
        for name, value in class_state(cls).items():
            found[f"the class attribute {cls.__name__}.{name} ({type(value).__name__})"] = _print(value, home)
    return found


def fake_tensor_holders(model: torch.nn.Module, namespace: types.ModuleType | None, limit: int = 4) -> list[str]:
    """Where a fake tensor (``torch._subclasses.FakeTensor``, what torch.export
    traces with) is held after capture: a forward that stored a value during
    the trace somewhere torch.export does not restore (an unregistered
    module in a plain dict, a class attribute, a helper object).  Searched
    from the model's modules, its own classes and the model file's globals,
    ``limit`` attribute or item steps deep; dotted descriptions."""
    from torch._subclasses.fake_tensor import FakeTensor

    found, seen = [], set()
    roots = [(f"self.{p}" if p else "self", m) for p, m in model.named_modules()]
    roots += [(c.__name__, class_state(c)) for c in user_classes(model)]
    if namespace is not None:
        roots += [("the model file's globals", {k: v for k, v in vars(namespace).items()
                                                if not k.startswith("__") and not isinstance(v, NOT_STATE)})]
    stack = [(where, value, 0) for where, value in roots]
    while stack and len(found) < 8:
        where, value, depth = stack.pop()
        if isinstance(value, FakeTensor):
            found.append(where)
            continue
        if id(value) in seen or depth > limit or isinstance(value, torch.Tensor):
            continue
        seen.add(id(value))
        if isinstance(value, dict):
            items = [(f"{where}[{k!r}]", v) for k, v in list(value.items())[:256]]
        elif isinstance(value, (list, tuple, set, frozenset)):
            items = [(f"{where}[{k}]", v) for k, v in enumerate(list(value)[:256])]
        elif isinstance(value, torch.nn.Module) or (hasattr(value, "__dict__") and not isinstance(value, NOT_STATE)):
            own = {k: v for k, v in vars(value).items() if k not in ("_modules", "_parameters")}
            own.update(own.pop("_buffers", None) or {})
            items = [(f"{where}.{k}", v) for k, v in own.items()]
        else:
            continue
        stack += [(w, v, depth + 1) for w, v in items]
    return found


def changed(before: dict, after: dict) -> list[str]:
    """The descriptions whose fingerprint differs between ``before`` and ``after``."""
    return [name for name in before if name in after and after[name] != before[name]]


def outside_state_error(names: list[str], path: str | None, during: str = "on every call") -> ProblemError:
    """The refusal of a forward that changes the outside state ``names``
    (descriptions from :func:`outside_fingerprints`) ``during`` its calls."""
    listed = ", ".join(names[:3]) + (" and more" if len(names) > 3 else "")
    found = re.match(r"the global (\w+)|the class attribute \w+\.(\w+)", names[0])
    if found:
        leaf = next(g for g in found.groups() if g).lower()
    else:  # self.parts['a'].tot -> tot
        leaf = (re.findall(r"[A-Za-z_]\w*", names[0].split(" ")[0])[-1:] or ["state"])[0]
    unregistered = " A module kept in a plain dict or list is not part of the model: hold it in nn.ModuleDict or nn.ModuleList." if "[" in names[0] else ""
    return _refusal(
        f"Model.forward changes {listed} {during}: state kept outside the model's modules, which LEGO cannot carry "
        "(torch.export bakes the value it finds into the plan, so an optimized model would silently keep it)",
        path,
        f"keep the state in the model: a buffer created in __init__ (self.register_buffer({leaf!r}, torch.zeros(...))) "
        f"and written in place in forward (self.{leaf}.copy_(new)), or a plain tensor attribute of a module; or pass "
        f"the state in and return it.{unregistered}",
    )
