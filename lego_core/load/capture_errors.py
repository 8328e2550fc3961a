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

A failure of no class (``other``) carries torch's telling lines in the
message itself (:func:`failure_summary`: its first line, the op it was
executing and the source line it names), since nothing else is printed.

When torch.export captures the model but ``run_decompositions`` fails and
keeping ops whole does not help (``lego_core.load.decompose``), the class is
``decomposition`` (:func:`decomposition_error`): it says the model was
captured, quotes torch's line, the op and the line, and never suggests
running ``torch.export.export``, which works on such a file.

Two more classes are found after a capture succeeds, on the graph itself:
``data-dependent shape`` (:func:`data_dependent_shape_error`: boolean
indexing, ``nonzero``, ``unique`` give sizes known only at run time) and,
in ``lego_core.load.state``, writes torch.export captures wrongly or not at all
(through ``.data``, into a buffer that shares memory with another, into
state held outside the model's modules).

A forward that *reassigns* a plain tensor attribute (``self.hidden = ...``)
does not fail torch.export: it warns and captures the attribute's value as a
constant, so the plan would reuse the first value for ever.
:func:`reassigned_attributes` reads those warnings; ``capture_graph`` exports
again with those attributes registered as buffers (``lego_core.load.state``), so
the plan carries the state, and refuses with :func:`state_error` only what it
cannot carry.  A plain tensor attribute written in place (``mutated
constant``) is carried the same way.
"""
from __future__ import annotations

import dataclasses
import re
import traceback

import torch

from lego_core.load.spec import ProblemError

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
GENERIC_FIX = ("LEGO does not sort this failure of torch.export into a class; torch's words are quoted in the message. "
               "Common causes: Python control flow on tensor values, `.data` or `.item()` in forward, one tensor registered in "
               "two modules or a buffer that is a view of another, an operation torch.export cannot trace. "
               "torch.export.export(Model(*get_init_inputs()).eval(), tuple(get_inputs())) on the file shows torch's whole "
               "report; if that call works, please report it with the model file.")
DECOMPOSITION_WHAT = ("torch.export captured the model, but decomposing its graph to core ATen (the op set LEGO plans "
                      "with) failed")
# a decomposition gave a tensor other strides than the op it replaced, and a later .view() relies on the op's
VIEW_PATTERNS = (r"Cannot view a tensor", r"view size is not compatible with input tensor's size and stride")
DECOMPOSITION_VIEW_FIX = ("the model itself exports: one op's core-ATen decomposition gives a tensor other strides than "
                          "the op does, and the .view() the message names relies on the op's. At that line use .reshape(...) "
                          "instead of .view(...) (or .contiguous() before it); in a library model, pick another "
                          "implementation of the op before it (a Hugging Face model: attn_implementation=\"eager\" in "
                          "its config). If neither helps, please report it with the model file.")
DECOMPOSITION_FIX = ("the model itself exports: torch's core-ATen decomposition of an op fails on it "
                     "(torch.export.export(...).run_decompositions() reproduces it). Compute that part with other "
                     "operations (in a library model, pick another implementation of the op, e.g. a Hugging Face "
                     "model's attn_implementation), or please report it with the model file.")


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
    ``message`` what happened, then torch's first line (for a failure of no
    class, where it failed too: the op and the innermost source line torch
    names, :func:`failure_summary`); ``hint`` the class's fix; ``kind`` the
    class name (``other`` for none); ``raw`` torch's whole message."""
    kind, groups = classify(exc)
    entry = next((c for c in CLASSES if c[0] == kind), None)
    raw = raw_lines(exc)  # a class's own sentence says what happened: torch's first line is enough beside it
    if entry is None:  # torch's words are all there is: its first line and where it failed
        message = f"torch.export could not capture the model: {failure_summary(exc, path)}"
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


def decomposition_error(exc: BaseException, path: str | None, line: int | None, tried: list[str] = ()) -> ProblemError:
    """The ProblemError (class ``decomposition``) for a program that
    torch.export captured but ``run_decompositions`` could not decompose,
    even with the ops ``tried`` kept whole (``lego_core.load.decompose``):
    ``message`` says so, quotes torch's first line and where it failed (the
    op, the innermost source line and the model file's line,
    :func:`failure_summary`); ``hint`` what to try (a view that relies on an
    op's strides: reshape; else another implementation, or a report);
    ``raw`` torch's whole message.  It never suggests running
    torch.export.export, which works on such a file."""
    tried_text = f"; LEGO also tried {' and '.join(tried)}, which failed too" if tried else ""
    message = f"{DECOMPOSITION_WHAT}: {failure_summary(exc, path)}{tried_text}"
    text = str(exc)
    hint = DECOMPOSITION_VIEW_FIX if any(re.search(p, text) for p in VIEW_PATTERNS) else DECOMPOSITION_FIX
    error = ProblemError(message, path, line, hint=hint)
    error.kind = "decomposition"
    error.raw = f"{type(exc).__name__}: {exc}"
    return error


@dataclasses.dataclass(frozen=True)
class FailureSite:
    """Where torch says a failure happened.  ``op``: the ATen op of the graph
    node it was executing (``aten.view.default``), from torch's "While
    executing %node : ... target=torch.ops.aten.view.default" line, or "";
    ``frame``: the innermost source frame of the user stack torch printed
    ("Original traceback:" / "File ..., line N"), as (file, line, text), or
    None; ``user``: the last frame of that stack in the model file ``path``,
    as (line, text), or None."""

    op: str
    frame: tuple | None
    user: tuple | None


_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+)(?:, in [^\n]*)?\n(?P<text>[^\n]*)')


def failure_site(exc: BaseException, path: str | None = None) -> FailureSite:
    """The :class:`FailureSite` torch's message for ``exc`` names."""
    text = str(exc)
    found = re.search(r"While executing %\S+ : .*?target=(?:torch\.ops\.)?(?P<op>[\w.]+)", text)
    frames = [(m["file"], int(m["line"]), m["text"].strip()) for m in _FRAME.finditer(text)]
    frames = [f for f in frames if not f[2].startswith("File ")]  # a frame whose source line torch left out
    user = [(line, source) for file, line, source in frames if path is not None and file == path]
    return FailureSite(found["op"] if found else "", frames[-1] if frames else None, user[-1] if user else None)


def short_file(file: str) -> str:
    """A library file's path from its package on (``transformers/pytorch_utils.py``), else its name."""
    parts = re.split(r"[\\/](?:site|dist)-packages[\\/]", file)
    return parts[-1] if len(parts) > 1 else file.replace("\\", "/").rsplit("/", 1)[-1]


def failure_summary(exc: BaseException, path: str | None = None) -> str:
    """torch's telling lines for ``exc`` in one sentence: its first line
    (``raw_lines``), then where (:func:`failure_site`): the op it was
    executing, the innermost source line, and the model file's line when
    that is another frame.  ``ValueError: Cannot view a tensor ... at
    aten.view.default, in transformers/pytorch_utils.py line 119
    (`x = torch.addmm(...)`), reached from line 33 of the model file
    (`return self.gpt(...).logits`)``."""
    summary = raw_lines(exc, chars=240)
    site = failure_site(exc, path)
    if site.op:
        summary += f" at {site.op}"
    if site.frame is not None:
        file, line, text = site.frame
        own = path is not None and file == path
        summary += f", {'in the model file' if own else 'in ' + short_file(file)} line {line}" + (f" (`{_clip(text)}`)" if text else "")
        if site.user is not None and not own:
            summary += f", reached from line {site.user[0]} of the model file" + (f" (`{_clip(site.user[1])}`)" if site.user[1] else "")
    return summary


def _clip(text: str, chars: int = 120) -> str:
    return text if len(text) <= chars else text[:chars].rstrip() + "..."


def user_line(exc: BaseException, path: str | None) -> int | None:
    """The last line of the model file ``path`` named in the exception: in its
    traceback, or in the user stack torch.export writes into its message."""
    if path is None:
        return None
    frames = [f.lineno for f in traceback.extract_tb(exc.__traceback__) if f.filename == path]
    mentioned = [int(m) for m in re.findall(rf'File "{re.escape(path)}", line (\d+)', str(exc))]
    lines = frames + mentioned
    return lines[-1] if lines else None


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
