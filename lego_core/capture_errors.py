"""What torch.export's failures mean for a LEGO user: one message and fix per class.

torch.export raises many exception types with long messages written for
PyTorch developers.  :func:`explain` sorts a failure into one of the classes
below (by exception type and message; first match wins) and returns a
``ProblemError`` whose message says what happened in the model and whose
hint says what to change; torch's own message stays underneath (its first
line at the end of the message, all of it in the error's ``raw``).

| class | seen as (torch 2.x) |
| --- | --- |
| ``mutated constant`` | ``Constant hidden is mutated in the forward method`` (a plain tensor attribute written in place) |
| ``data-dependent control flow`` | ``GuardOnDataDependentSymNode``: ``Could not guard on data-dependent expression``, ``Could not extract specialized integer from data-dependent expression`` (``if x.sum() > 0``, ``int(x.max())``) |
| ``dynamic shapes`` | ``Constraints violated``, ``ConstraintViolationError``, a dimension marked dynamic that the code specialised |
| ``non-tensor output`` | ``Found <class ...> in output, which is not a known type`` (an object that is not a tensor, number or container of them) |
| ``unsupported operation`` | ``Unsupported``, ``There was no fake impl registered``, ``.numpy() is not supported``, ``NotImplementedError``, an op with no Meta kernel |

Two more classes are found after a capture succeeds, on the graph itself:
``data-dependent shape`` (:func:`data_dependent_shape_error`: boolean
indexing, ``nonzero``, ``unique`` give sizes known only at run time) and,
in ``lego_core.state``, writes torch.export captures wrongly or not at all
(through ``.data``, into a buffer that shares memory with another, into
state held outside the model's modules).

A forward that *reassigns* a plain tensor attribute (``self.hidden = ...``)
does not fail torch.export: it warns and captures the attribute's value as a
constant, so the plan would reuse the first value for ever.
:func:`reassigned_attributes` reads those warnings; ``capture_graph`` exports
again with those attributes registered as buffers (``lego_core.state``), so
the plan carries the state, and refuses with :func:`state_error` only what it
cannot carry.  A plain tensor attribute written in place (``mutated
constant``) is carried the same way.
"""
from __future__ import annotations

import re

import torch

from lego_core.spec import ProblemError

STATE_FIX = (
    "keep the state in a tensor: a registered buffer (self.register_buffer(name, tensor)) or a plain tensor "
    "attribute of the module, which LEGO carries; or pass it to forward as an input and return the new value as "
    "an output (h = cell(x, h))."
)

# (class, exception type names, message patterns, what happened, fix)
CLASSES = (
    ("mutated constant", (), (r"Constant (?P<name>[\w.]+) is mutated",),
     "Model.forward writes in place into self.{name}, a plain tensor attribute (not a registered buffer or "
     "parameter), and torch.export cannot capture a write to a constant",
     STATE_FIX),
    ("data-dependent control flow", ("GuardOnDataDependentSymNode", "DataDependentOutputException"),
     (r"data-dependent", r"Dynamic control flow is not supported", r"data dependent"),
     "Model.forward takes a Python decision on the value of a tensor (`if x.sum() > 0`, `int(x.max())` as a "
     "size), which a captured graph cannot follow",
     "remove the data-dependent Python control flow: compute both branches and choose with torch.where (or use "
     "torch.cond); sizes and loop counts must come from shapes or constants, not from tensor values; write at a "
     "position held in a tensor with index ops (cache.index_copy_(1, pos.view(1), value.unsqueeze(1)) instead of cache[:, pos] = "
     "value; a boolean mask with torch.where(mask, new, old) instead of x[mask] = ...)."),
    ("dynamic shapes", ("ConstraintViolationError",),
     (r"Constraints violated", r"marked .* as dynamic", r"dynamic_shapes"),
     "the model asks for dynamic shapes (a dimension marked dynamic), but LEGO captures and optimizes one set of "
     "static shapes, those of get_inputs()",
     "remove torch._dynamo.mark_dynamic / torch.export.Dim annotations from the model file; LEGO specialises to "
     "get_inputs()' shapes (optimize again with other sizes through --set)."),
    ("non-tensor output", (),
     (r"in output, which is not a known type", r"register a pytree", r"Unsupported .*output", r"output .* not supported"),
     "Model.forward returns a value that is neither a tensor nor a number, nor a tuple, list or dict of them",
     "return tensors (or tuples, lists or dicts of tensors) from forward; compute other values outside forward."),
    ("unsupported operation", ("Unsupported", "NotImplementedError"),
     (r"no fake impl", r"fake impl", r"is not supported", r"not implemented", r"Meta backend", r"'Meta'",
      r"Could not run"),
     "Model.forward calls something torch.export cannot trace: an operation without a meta/fake implementation "
     "(a custom op, a C extension), NumPy or other non-PyTorch code on tensors, or an unsupported Python feature",
     "use PyTorch operations only in forward (no .numpy(), no Python-side math on tensor values); give a custom "
     "operator a fake implementation (torch.library.register_fake)."),
)
# torch.export names a tensor that no module attribute holds "lifted_tensor_N"
LIFTED_WHAT = ("Model.forward writes in place into a tensor that is neither a buffer, a parameter nor an attribute of "
               "the model's modules (torch.export calls it lifted_tensor): a tensor held by a closure, a class attribute, "
               "a cache such as functools.lru_cache, or a module kept in a plain list or dict")
LIFTED_FIX = ("register the tensor as a buffer of the module that writes it (self.register_buffer(name, tensor) in "
              "__init__, written in place in forward), which LEGO carries; hold submodules in nn.ModuleList / "
              "nn.ModuleDict, not in plain lists or dicts; or pass the state in and return it.")
GENERIC_FIX = ("read torch.export's message above (a failure LEGO does not sort into a class). Common causes: Python control "
               "flow on tensor values, `.data` or `.item()` in forward, one tensor registered in two modules or a buffer that "
               "is a view of another, an operation torch.export cannot trace. Check that "
               "torch.export.export(Model(*get_init_inputs()).eval(), tuple(get_inputs())) works on the file; if it does, "
               "please report it with the model file.")


def classify(exc: BaseException) -> tuple[str, dict]:
    """(class name, named groups of the matching pattern) of a torch.export
    failure; ``("other", {})`` when no class matches."""
    text = str(exc)
    kinds = {cls.__name__ for cls in type(exc).__mro__}
    for name, types, patterns, _what, _fix in CLASSES:
        for pattern in patterns:
            found = re.search(pattern, text)
            if found:
                return name, found.groupdict()
        if kinds & set(types):
            return name, {}
    return "other", {}


def raw_lines(exc: BaseException, limit: int = 1, chars: int = 140) -> str:
    """The first ``limit`` non-empty lines of the exception (at most ``chars``), prefixed with its type."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    text = " ".join(lines[:limit])
    return f"{type(exc).__name__}: {text if len(text) <= chars else text[:chars].rstrip() + '...'}".strip()


def explain(exc: BaseException, path: str | None, line: int | None) -> ProblemError:
    """The ProblemError for torch.export's ``exc`` (see the module docstring):
    ``message`` what happened, then torch's first line; ``hint`` the class's
    fix; ``kind`` the class name; ``raw`` torch's whole message."""
    kind, groups = classify(exc)
    entry = next((c for c in CLASSES if c[0] == kind), None)
    raw = raw_lines(exc)
    if entry is None:
        message = f"torch.export could not capture the model: {raw}"
        hint = GENERIC_FIX
    elif kind == "mutated constant" and groups.get("name", "").startswith("lifted_tensor"):
        message = f"torch.export could not capture the model: {kind}: {LIFTED_WHAT}. torch.export said: {raw}"
        hint = LIFTED_FIX
    else:
        what = entry[3].format(name=groups.get("name", "?"))
        message = f"torch.export could not capture the model: {kind}: {what}. torch.export said: {raw}"
        hint = entry[4]
    error = ProblemError(message, path, line, hint=hint)
    error.kind = kind
    error.raw = f"{type(exc).__name__}: {exc}"
    return error


# one attribute: "The tensor attribute self.hidden was assigned ..."; several:
# "The tensor attributes self.cells.1.hidden, self.cells.0.hidden were assigned ..."
_REASSIGNED = re.compile(r"The tensor attributes? (?P<names>self\.[\w.]+(?:, self\.[\w.]+)*) (?:was|were) assigned during export")


def reassigned_attributes(warnings: list) -> list[str]:
    """Names of plain tensor attributes that forward reassigned, from the
    warnings recorded while torch.export ran (``warnings.catch_warnings(record=True)``)."""
    names = []
    for w in warnings:
        found = _REASSIGNED.search(str(getattr(w, "message", w)))
        for name in found["names"].split(", ") if found else ():
            name = name.removeprefix("self.")
            if name not in names:
                names.append(name)
    return names


def state_error(names: list[str], path: str | None) -> ProblemError:
    """The refusal of a forward that writes the attributes ``names`` in a way
    LEGO cannot carry (not plain tensors of the model, or state that is
    still not captured after registering them as buffers)."""
    listed = ", ".join(f"self.{n}" for n in names)
    error = ProblemError(
        f"Model.forward stores a new value in {listed} on every call, and LEGO carries module state only in "
        "registered buffers and plain tensor attributes of the model; torch.export would capture this value at "
        "capture time as a constant, so an optimized model would reuse that first value on every later call "
        "instead of the updated state",
        path,
        None,
        hint=STATE_FIX,
    )
    error.kind = "stateful forward"
    return error


DATA_DEPENDENT_SHAPE_FIX = (
    "keep every shape fixed by the input shapes: write through a mask with torch.where (a[m] = b[m] becomes "
    "a.copy_(torch.where(m, b, a))), reduce over a mask by multiplying (x[m].sum() becomes (x * m).sum(), "
    "torch.where(m, x, 0).sum()), and keep torch.nonzero, masked_select, unique and boolean indexing out of forward."
)


def _user_frame(node, path: str | None) -> tuple[int | None, str]:
    """(line number, source text) of the last frame of the user's file ``path``
    in ``node``'s stack trace (torch.export records it), or ``(None, "")``."""
    lines = (node.meta.get("stack_trace") or "").splitlines()
    found = (None, "")
    for k, line in enumerate(lines):
        m = re.search(r'File "(?P<file>[^"]+)", line (?P<line>\d+)', line)
        if m and (path is None or m["file"] == path):
            found = (int(m["line"]), lines[k + 1].strip() if k + 1 < len(lines) else "")
    return found


def data_dependent_shape_error(graph_module, path: str | None) -> ProblemError | None:
    """The ProblemError for a captured graph whose tensor shapes depend on
    tensor values (class ``data-dependent shape``), else None.

    torch.export captures boolean indexing (``x[mask]``, ``buf[mask] = y[mask]``),
    ``torch.nonzero``, ``masked_select`` and ``unique`` with *unbacked* sizes
    (symbols ``u0, u1, ...`` whose value is known only when the graph runs).
    LEGO plans, verifies and times kernels for one set of static shapes, so
    such a graph cannot be optimized; the first node that makes an unbacked
    size is named with its ATen op and the user's line.  ``graph_module``:
    the exported program's ``graph_module`` (after decomposition)."""
    from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

    for node in graph_module.graph.nodes:
        value = node.meta.get("val")
        if node.op != "call_function" or value is None:
            continue
        try:
            symbols = free_unbacked_symbols(value)
        except Exception:  # noqa: BLE001 - a value free_unbacked_symbols does not walk (an opaque object)
            continue
        if not symbols:
            continue
        line, text = _user_frame(node, path)
        op = str(node.target) if isinstance(node.target, torch._ops.OpOverload) else getattr(node.target, "__name__", str(node.target))
        source = f" (`{text}`)" if text else ""
        if node.target is torch.ops.aten._local_scalar_dense.default:
            error = ProblemError(
                f"Model.forward turns a tensor into a Python number{source} (.item(), float(t), int(t)), whose value "
                "torch.export cannot follow: the captured graph would need it as a constant",
                path,
                line,
                hint="keep the value a tensor and compute with it (x * self.scale instead of x * self.scale.item()); "
                "sizes and loop counts must come from shapes or constants.",
            )
            error.kind = "data-dependent control flow"
            error.raw = f"{op} makes the unbacked value {', '.join(sorted(map(str, symbols)))}"
            return error
        error = ProblemError(
            f"Model.forward computes a tensor whose size depends on tensor values: {op}{source} gives a size "
            "known only at run time (boolean indexing, torch.nonzero, masked_select or unique), and LEGO optimizes "
            "fixed shapes, those of get_inputs()",
            path,
            line,
            hint=DATA_DEPENDENT_SHAPE_FIX,
        )
        error.kind = "data-dependent shape"
        error.raw = f"{op} makes the unbacked size {', '.join(sorted(map(str, symbols)))}"
        return error
    return None
