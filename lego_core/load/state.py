"""Module state a forward writes: carried by the plan, preserved around eager runs.

A stateful forward writes module state on every call: it reassigns a plain
tensor attribute (``self.hidden = torch.tanh(...)``, an RNN cell's hidden
state) or updates a registered buffer in place (``self.calls += 1``,
running statistics).  LEGO carries both:

* :func:`probe_writes`: one eager forward (undone) lists every buffer and
  plain tensor attribute forward writes, and how (in place or reassigned).
* :func:`as_buffers`: while ``capture_graph`` exports, the plain tensor
  attributes forward writes are registered as non-persistent buffers, so
  torch.export captures them as graph inputs and their new values as
  ``BUFFER_MUTATION`` outputs (a plain attribute would be frozen as a
  constant); :func:`reassign_as_copy` turns a reassignment into a copy into
  the buffer while exporting (torch.export drops a buffer reassigned in a
  submodule).  The model is given back as it was.
* :class:`StateUpdate`: one written tensor, its module path and name, and
  how eager writes it (``"in place"``: ``tensor.copy_(new)``, the same
  tensor object; ``"reassigned"``: ``setattr``, a new tensor).  The graph
  makes the new values extra outputs (``Graph.state_updates``), so the plan
  computes them and the verifier checks them like any output;
  ``optimized_model.py`` reads the state at every call and writes it back
  (``lego_runtime.read_state`` / ``write_state``).
* :func:`preserved`: every eager reference run (the loader's check, the
  probe, the fast-path check, the end-to-end reference, torch.compile's
  reference, the benchmark's candidates) leaves the state as it found it,
  so candidate and reference start alike; :func:`with_state` adds the
  state after a call to what the end-to-end judge compares.

Not carried (refused by name, with what to change): writes into parameters
or the caller's inputs (``faithful_capture.check_stateless``), state whose
shape or dtype changes between calls (``capture.check_state_fits``), a
plain Python value kept as state (:func:`python_state_error`, at load),
tensors kept in lists, tuples or dicts, state that starts as None or is
created on the first call (:func:`uncarried_state_error`, at load),
forward hooks on the model itself (:func:`hooks_error`, at load), and
(``lego_core.load.state_checks``) writes through ``.data``, writes into a tensor
that shares memory with another name, and state kept outside the model's
modules (a global of the model file, a helper object).
"""
from __future__ import annotations

import contextlib
import dataclasses

import torch

from lego_core.load import state_checks
from lego_core.load.module_attributes import CONTAINERS, MODULE_INTERNALS, baked_attributes, held, tensor_version, user_modules
from lego_core.load.spec import ProblemError


@dataclasses.dataclass(frozen=True)
class StateUpdate:
    """One tensor of module state a forward writes.

    ``target``: its dotted name (``"hidden"``, ``"cell.running_mean"``);
    ``kind``: ``"in place"`` (eager writes into the tensor the module holds:
    ``self.calls += 1``, ``self.running_mean.mul_(...)``) or ``"reassigned"``
    (eager stores a new tensor: ``self.hidden = torch.tanh(...)``, on a
    plain attribute or a registered buffer); ``node``: the
    name of the graph node holding the new value; ``placeholder``: the name
    of the graph input that reads the current value."""

    target: str
    kind: str
    node: str
    placeholder: str | None = None


def _owner(model: torch.nn.Module, target: str) -> tuple[torch.nn.Module, str]:
    path, _, name = target.rpartition(".")
    return (model.get_submodule(path) if path else model), name


def read(model: torch.nn.Module, target: str) -> torch.Tensor:
    """The current tensor of ``target``: a registered buffer or a plain tensor attribute."""
    module, name = _owner(model, target)
    value = module._buffers.get(name) if name in module._buffers else vars(module).get(name)
    if not isinstance(value, torch.Tensor):
        raise AttributeError(f"{target} is not a tensor of the model (got {type(value).__name__})")
    return value


def not_tensors(model: torch.nn.Module, names: list[str]) -> list[str]:
    """Those of ``names`` that are not plain tensor attributes of ``model``."""
    bad = []
    for target in names:
        try:
            module, name = _owner(model, target)
        except AttributeError:
            bad.append(target)
            continue
        value = vars(module).get(name)
        if not isinstance(value, torch.Tensor) or isinstance(value, torch.nn.Parameter) or name in module._buffers:
            bad.append(target)
    return bad


@contextlib.contextmanager
def as_buffers(model: torch.nn.Module, names: list[str]):
    """Inside: the plain tensor attributes ``names`` (dotted) of ``model`` are
    registered non-persistent buffers holding the same tensors; on exit they
    are plain attributes again, holding what they held on entry."""
    moved = []
    try:
        for target in names:
            module, name = _owner(model, target)
            value = vars(module)[name]
            del module.__dict__[name]
            module.register_buffer(name, value, persistent=False)
            moved.append((module, name, value))
        yield
    finally:
        for module, name, value in reversed(moved):
            module._buffers.pop(name, None)
            module.__dict__[name] = value


def probe_writes(model: torch.nn.Module, inputs: list) -> dict[str, tuple[str, str]]:
    """What one eager forward of ``model`` on ``inputs`` writes, undone
    afterwards (as :func:`preserved` undoes it): ``{dotted name: (what, how)}`` with
    ``what`` ``"buffer"`` or ``"attribute"`` (a plain tensor attribute) and
    ``how`` ``"reassigned"`` (another tensor stored), ``"in place"`` (its
    version counter moved) or ``"through .data"`` (its values or storage
    changed and its version counter did not: ``self.ema.data = ...``,
    ``self.ema.data.mul_(...)``, which torch.export cannot capture).
    torch.export misses some of these (a buffer reassigned in a submodule),
    so capture compares its graph with them."""
    before = {}
    for prefix, module in model.named_modules():
        for name, buf in module._buffers.items():
            if buf is not None:
                before[f"{prefix}.{name}" if prefix else name] = ("buffer", buf, tensor_version(buf))
        for name, value in vars(module).items():
            if isinstance(value, torch.Tensor) and not isinstance(value, torch.nn.Parameter):
                before[f"{prefix}.{name}" if prefix else name] = ("attribute", value, tensor_version(value))
    saved = _snapshot(model)  # the copies that undo the call also tell a write through .data
    copies = {(id(module), name): (copy, obj.data_ptr()) for module, name, _kind, obj, copy, _v in saved}
    found = {}
    try:
        with torch.no_grad():
            model(*inputs)
        for target, (what, obj, version) in before.items():
            try:
                now = read(model, target)
            except (AttributeError, KeyError):
                continue
            copy, pointer = copies[(id(_owner(model, target)[0]), target.rpartition(".")[2])]
            if now is not obj:
                found[target] = (what, "reassigned")
            elif version is None or tensor_version(now) != version:
                found[target] = (what, "in place")
            elif now.data_ptr() != pointer or not _same_values(now, copy):
                found[target] = (what, "through .data")
    finally:
        _restore(saved)
    return found


def _same_values(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether ``a`` holds ``b``'s shape, dtype and values (NaN equal to NaN)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if torch.equal(a, b):
        return True
    return bool(((a == b) | (a.isnan() & b.isnan())).all()) if a.is_floating_point() or a.is_complex() else False


@contextlib.contextmanager
def reassign_as_copy(model: torch.nn.Module, targets: list[str], mismatched: list):
    """Inside: storing a tensor in one of the buffers ``targets`` (dotted)
    writes it into the buffer (``copy_``) instead, so torch.export records
    the write (it drops a buffer reassigned in a submodule).  A value of
    another shape or dtype than the buffer's is stored as usual and
    ``(target, value shape, value dtype)`` appended to ``mismatched``."""
    redirected = {}
    for target in targets:
        module, name = _owner(model, target)
        redirected[(id(module), name)] = target
    classes = {type(m) for m in model.modules() if any((id(m), n) in redirected for _id, n in redirected)}
    originals = {}

    def make(cls, original):
        def __setattr__(self, name, value):
            target = redirected.get((id(self), name))
            current = self._buffers.get(name) if target is not None and "_buffers" in vars(self) else None
            if target is not None and isinstance(value, torch.Tensor) and isinstance(current, torch.Tensor):
                if tuple(value.shape) == tuple(current.shape) and value.dtype == current.dtype:
                    current.copy_(value)
                    return
                mismatched.append((target, tuple(value.shape), value.dtype))
            original(self, name, value)
        return __setattr__

    try:
        for cls in classes:
            originals[cls] = cls.__dict__.get("__setattr__")
            cls.__setattr__ = make(cls, cls.__setattr__)
        yield
    finally:
        for cls, original in originals.items():
            if original is None:
                del cls.__setattr__
            else:
                cls.__setattr__ = original


def with_state(output, model: torch.nn.Module, targets) -> object:
    """``output`` as the end-to-end judge compares it: unchanged without
    ``targets``; else ``(output, (state after the call, ...))``, copies of the
    tensors ``targets`` (dotted names) that ``model`` holds now, so a plan
    whose state update is wrong fails the judge like a wrong output."""
    if not targets:
        return output
    return output, tuple(read(model, t).detach().clone() for t in targets)


def plain_values(model: torch.nn.Module) -> dict:
    """``{"path.name": value}``: the plain Python attributes (numbers,
    strings, None, short tuples of them) of ``model`` and its submodules that
    torch.export bakes into a graph (``module_attributes.baked_attributes``)."""
    return {f"{p}.{n}" if p else n: v for p, n, v in baked_attributes(model)}


def python_state_error(before: dict, after: dict, path: str | None):
    """A ProblemError naming the plain Python attributes one forward changed
    (``before``/``after``: :func:`plain_values` around it), or None.  Such
    state (``self.steps += 1`` on an int) cannot be carried: torch.export
    bakes its value at capture into the graph."""
    changed = [name for name in before if name in after and after[name] != before[name]]
    if not changed:
        return None
    listed = ", ".join(f"self.{n} ({type(before[n]).__name__}: {before[n]!r} before the call, {after[n]!r} after)" for n in changed)
    first = changed[0].rpartition(".")[2]
    error = ProblemError(
        f"Model.forward changes {listed}, a plain Python value kept as module state; torch.export bakes such a "
        "value into the captured graph, so an optimized model would use its first value on every call (LEGO "
        "carries module state only in tensors: registered buffers and plain tensor attributes)",
        path,
        None,
        hint=f"keep it in a tensor: self.register_buffer({first!r}, torch.tensor({before[changed[0]]!r})) in __init__ and "
        f"update it in place in forward ({_in_place_example(first, before[changed[0]], after[changed[0]])}); or update it "
        "outside forward.",
    )
    error.kind = "stateful forward"
    return error


_MISSING_VALUE = ("missing",)


def attribute_names(model: torch.nn.Module) -> set[str]:
    """Dotted names of every attribute and buffer of ``model``'s own modules."""
    return {prefix + name for prefix, module in user_modules(model) for name in (*vars(module), *module._buffers)}


def uncarried_candidates(model: torch.nn.Module) -> set[str]:
    """Dotted names of the attributes of ``model``'s own modules that could
    hold state LEGO does not carry: containers (lists, tuples, dicts, sets),
    attributes and buffers that are None.  (Tensors are carried,
    :func:`probe_writes`; plain numbers are refused, :func:`python_state_error`.)"""
    found = set()
    for prefix, module in user_modules(model):
        found |= {prefix + name for name, buf in module._buffers.items() if buf is None}
        for name, value in vars(module).items():
            if name not in MODULE_INTERNALS and not name.startswith("_lego") and (value is None or isinstance(value, CONTAINERS)):
                found.add(prefix + name)
    return found


def attribute_fingerprints(model: torch.nn.Module, names: set[str]) -> dict:
    """``{dotted name: fingerprint}`` (``module_attributes.held``) of what each of
    ``names`` holds now (a buffer's tensor, an attribute's value), or a
    marker when it does not exist."""
    prints = {}
    for name in names:
        owner_path, _, leaf = name.rpartition(".")
        try:
            owner = model.get_submodule(owner_path) if owner_path else model
        except AttributeError:
            prints[name] = _MISSING_VALUE
            continue
        if leaf in owner._buffers:
            prints[name] = held(owner._buffers[leaf])
        elif leaf in vars(owner):
            prints[name] = held(vars(owner)[leaf])
        else:
            prints[name] = _MISSING_VALUE
    return prints


def uncarried_state_error(model: torch.nn.Module, call, path: str | None, outside=None):
    """Run ``call()`` (one eager forward) and, when it changed an attribute
    that could hold state LEGO does not carry (:func:`uncarried_candidates`)
    or created one, run it again: what the second call changes again is
    such state, and a ProblemError naming it is returned (else None; the
    first call's result is returned beside it).  A value made once and kept
    (a lazily built mask, a cache filled on the first call) is not state.

    Refused so: a tuple, list or dict of tensors stored anew or filled in
    forward (``self.state = (h, c)``, ``self.history.append(y)``), state
    that starts as None (``self.hidden = None`` in ``__init__``), an
    attribute created on the first call and changed later.  torch.export
    would bake their values into the plan, so the optimized model would
    silently keep them.  ``outside``: a function giving more fingerprints to
    watch alike (``state_checks.outside_fingerprints``: globals of the model
    file, helper objects), refused with ``state_checks.outside_state_error``."""
    outside = outside or dict
    candidates = uncarried_candidates(model)
    names_before = attribute_names(model)
    before = attribute_fingerprints(model, candidates)
    outside_before = outside()
    out = call()
    created = attribute_names(model) - names_before
    watched = candidates | created
    first = attribute_fingerprints(model, watched)
    outside_first = outside()
    if not created and first == before and outside_first == outside_before:
        return out, None
    call()
    again = attribute_names(model) - names_before - created
    second = attribute_fingerprints(model, watched)
    changed = sorted(name for name in watched if second[name] != first[name]) + sorted(again)
    moved_outside = state_checks.changed(outside_first, outside())
    if not changed and moved_outside:
        return out, state_checks.outside_state_error(moved_outside, path)
    if not changed:
        return out, None
    none = held(None)

    def describe(name: str) -> str:
        if name in created or name in again:
            return f"self.{name} (created during the call)"
        if before.get(name) == none:
            return f"self.{name} (None before the first call)"
        return f"self.{name} (a {before[name][0]})"

    listed = ", ".join(describe(n) for n in changed[:4]) + (" and more" if len(changed) > 4 else "")
    name = changed[0]
    leaf = name.rpartition(".")[2]
    kind = before.get(name, _MISSING_VALUE)[0]
    if kind in ("list", "tuple", "dict", "set"):
        hint = (f"keep each tensor of self.{name} in a buffer or tensor attribute of its own, created in __init__ "
                f"(self.{leaf}_h, self.{leaf}_c = ...), or torch.stack them into one tensor; or pass the state in and return it.")
    else:
        hint = (f"create self.{name} in __init__ as a tensor of its final shape and dtype (torch.zeros(...), or "
                f"self.register_buffer({leaf!r}, torch.zeros(...))) and store new values in it; or pass the state in and return it.")
    error = ProblemError(
        f"Model.forward changes {listed} on every call: module state LEGO cannot carry (it carries tensors that exist "
        "before the call: registered buffers and plain tensor attributes); torch.export would bake the values into the "
        "plan, so the optimized model would silently keep the first ones",
        path,
        None,
        hint=hint,
    )
    error.kind = "stateful forward"
    return out, error


def hooks_error(model: torch.nn.Module, path: str | None):
    """A ProblemError when forward hooks or pre-hooks are registered on the
    model itself or globally (``register_module_forward_hook``), else None:
    torch.export captures what they do into the plan, and calling ModelNew
    (a subclass of the model, so it registers them too) runs them again
    around the plan, so their effect would be applied twice."""
    from torch.nn.modules import module as module_impl

    found = []
    for attr, what in (("_forward_hooks", "forward hook"), ("_forward_pre_hooks", "forward pre-hook")):
        for hook in getattr(model, attr, {}).values():
            found.append(f"a {what} on the model ({getattr(hook, '__qualname__', type(hook).__name__)})")
        for hook in getattr(module_impl, f"_global{attr}", {}).values():
            found.append(f"a global {what} ({getattr(hook, '__qualname__', type(hook).__name__)})")
    if not found:
        return None
    error = ProblemError(
        f"{'; '.join(found)}: torch.export captures what a hook on the model does into the plan, and ModelNew's call "
        "would run it again around the plan, applying it twice (a counter counted twice, an output scaled twice)",
        path,
        None,
        hint="register the hook on a submodule instead (hooks inside the model are captured once), or apply it to the "
        "model's output outside the model.",
    )
    error.kind = "forward hook"
    return error


def _in_place_example(name: str, before, after) -> str:
    """How forward would update the buffer ``name`` that replaces a Python
    value going from ``before`` to ``after`` (a bool flag, a float, a count)."""
    if isinstance(after, bool) or isinstance(before, bool):
        return (f"self.{name}.fill_({after!r}), or self.{name}.logical_not_() to toggle it, and choose with "
                f"torch.where(self.{name}, a, b) where forward says `if self.{name}:`")
    if isinstance(after, float) or isinstance(before, float):
        return f"self.{name}.mul_(0.9), self.{name}.add_(x.mean()) or self.{name}.fill_(value)"
    return f"self.{name} += 1"


def _snapshot(model: torch.nn.Module, targets=None) -> list:
    saved = []
    wanted = None if targets is None else {_owner(model, t) for t in targets}
    wanted = None if wanted is None else {(id(m), n) for m, n in wanted}
    for module in model.modules():
        for name, buf in module._buffers.items():
            if wanted is not None and (id(module), name) not in wanted:
                continue
            if buf is not None:
                saved.append((module, name, "buffer", buf, buf.detach().clone(), tensor_version(buf)))
        for name, value in vars(module).items():
            if wanted is not None and (id(module), name) not in wanted:
                continue
            if isinstance(value, torch.Tensor) and not isinstance(value, torch.nn.Parameter):
                saved.append((module, name, "attribute", value, value.detach().clone(), tensor_version(value)))
    return saved


def _restore(saved: list) -> None:
    for module, name, kind, obj, copy, version in saved:
        if kind == "buffer":
            if module._buffers.get(name) is not obj:
                module._buffers[name] = obj
            if version is None or tensor_version(obj) != version:
                with torch.no_grad():
                    obj.copy_(copy)
        else:
            if vars(module).get(name) is not obj:
                module.__dict__[name] = obj
            if version is None or tensor_version(obj) != version:
                with torch.no_grad():
                    obj.copy_(copy)


@contextlib.contextmanager
def preserved(model: torch.nn.Module, targets: list[str] | None = None):
    """Inside: run ``model`` freely; on exit every buffer holds the values it
    held on entry (the same tensor objects, written back in place when a
    forward changed them), and so does every plain tensor attribute.  Costs
    one copy of the buffers and plain tensor attributes.  ``targets``: only
    these (dotted names; once capture knows what forward writes,
    ``problem.state_targets``); empty: nothing to copy."""
    saved = _snapshot(model, targets) if targets is None or targets else []
    try:
        yield
    finally:
        _restore(saved)
