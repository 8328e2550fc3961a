"""Checks that a captured graph computes what the user's eager forward computes.

torch.export captures one pure function of (parameters, buffers, inputs).
Two kinds of model break that promise, and each is refused at capture with a
``ProblemError`` that says why and how to fix it, instead of failing after
the whole search with "composed model does not match eager":

* ``check_stateless``: a forward that writes into a parameter or one of its
  inputs (``self.weight.mul_(0.9)``, ``x.add_(1)``).  torch.export lists
  such writes as extra graph outputs (``graph_signature.output_specs``:
  ``PARAMETER_MUTATION``, ``USER_INPUT_MUTATION``); LEGO's plan never writes
  parameters or the caller's tensors back, so it refuses them.  Writes into
  registered buffers (``BUFFER_MUTATION``: ``self.calls += 1``, running
  statistics) are carried: the plan computes the new values and
  ``ModelNew`` writes them back in place (``lego_core.load.state``).
* ``check_fast_paths``: in eval mode without autograd, PyTorch runs
  ``nn.MultiheadAttention``, ``nn.TransformerEncoderLayer`` and
  ``nn.TransformerEncoder`` through fused fast paths (nested tensors,
  ``torch._native_multi_head_attention``, ``torch._transformer_encoder_layer_fwd``)
  that torch.export cannot capture, so ``capture_graph`` turns them off
  (pytorch issue 115511).  Where the fast path computes other values than
  the ordinary path on the example inputs (nested tensors return 0 at
  positions padded by ``src_key_padding_mask``; the fused kernels return NaN
  for a query whose keys are all masked, where the ordinary path returns
  finite values), the plan could never match eager, and capture says so.
"""
from __future__ import annotations

import re

import torch
from torch.export import ExportedProgram
from torch.export.graph_signature import OutputKind

from lego_core.dtypes import tolerances
from lego_core.load.spec import ProblemError

FAST_PATH_MODULES = (torch.nn.MultiheadAttention, torch.nn.TransformerEncoderLayer, torch.nn.TransformerEncoder)

# graph output kinds that write state back: (kind name, what is written, signature attribute of its target)
_MUTATIONS = {
    "PARAMETER_MUTATION": "parameter",
    "USER_INPUT_MUTATION": "input",
}


def _stack_line(node, path: str) -> int | None:
    """The last line of the user's file in a node's recorded stack trace."""
    trace = node.meta.get("stack_trace") or ""
    lines = re.findall(rf'File "{re.escape(path)}", line (\d+)', trace)
    return int(lines[-1]) if lines else None


def check_stateless(ep: ExportedProgram, path: str | None = None) -> None:
    """Raise ProblemError when the exported forward writes into a parameter
    or a user input (see the module docstring); ``path``: the model file, for
    the line of the first write.  Returns None otherwise (buffer writes are
    carried, not refused)."""
    output = next(n for n in ep.graph.nodes if n.op == "output")
    leaves = torch.utils._pytree.tree_leaves(output.args[0])
    writes: list[tuple[str, str]] = []
    line = None
    for k, spec in enumerate(ep.graph_signature.output_specs):
        what = _MUTATIONS.get(spec.kind.name)
        if what is None:
            continue
        writes.append((what, str(spec.target)))
        if line is None and path and k < len(leaves) and isinstance(leaves[k], torch.fx.Node):
            line = _stack_line(leaves[k], path)
    if not writes:
        return
    named = ", ".join(f"{what} {target!r}" for what, target in writes)
    raise ProblemError(
        f"Model.forward writes into {named} in place; LEGO carries state only in registered buffers (updated "
        "in place or reassigned) and plain tensor attributes: its plan never writes parameters or the caller's "
        "input tensors back, so the optimized model would lose this update",
        path,
        line,
        hint="keep the state in a buffer (self.register_buffer(name, tensor)) instead of a parameter, and copy an "
        "input (x = x.clone()) before changing it in place; or update it in a separate method outside forward.",
    )


def _fast_path_modules(model: torch.nn.Module) -> list[str]:
    """The outermost fast-path modules, as ``"path (Type)"`` (an encoder's own layers are not listed again)."""
    found: list[str] = []
    names: list[str] = []
    for name, m in model.named_modules():
        if isinstance(m, FAST_PATH_MODULES) and not any(name.startswith(f"{outer}.") or not outer for outer in names):
            names.append(name)
            found.append(f"{name or 'the model'} ({type(m).__name__})")
    return found


def _divergence(fast: torch.Tensor, slow: torch.Tensor, dtype: torch.dtype) -> str | None:
    """Where ``fast`` and ``slow`` (same shape) differ beyond rounding, else None.

    NaN or inf in one and not the other always counts; otherwise both the
    elementwise and the norm-relative tolerance of ``dtype``
    (``lego_core.dtypes.tolerances``, 4x for 16-bit dtypes whose fused kernels round
    differently) must be exceeded."""
    if fast.shape != slow.shape:
        return f"shape {list(fast.shape)} with the fast path, {list(slow.shape)} without"
    if not fast.is_floating_point():
        bad = (fast != slow).nonzero()
        return None if bad.numel() == 0 else f"index {tuple(bad[0].tolist())}: {fast[tuple(bad[0])].item()} vs {slow[tuple(bad[0])].item()}"
    a, b = fast.double(), slow.double()
    for test in (torch.isnan, torch.isposinf, torch.isneginf):
        bad = (test(a) != test(b)).nonzero()
        if bad.numel():
            at = tuple(bad[0].tolist())
            return f"index {at}: {a[at].item():.4g} with the fast path, {b[at].item():.4g} without"
    tol = tolerances(dtype)
    scale = 1.0 if dtype in (torch.float32, torch.float64) else 4.0
    finite = torch.isfinite(a) & torch.isfinite(b)
    a, b = torch.where(finite, a, 0.0), torch.where(finite, b, 0.0)
    excess = (a - b).abs() - scale * (tol.atol + tol.rtol * b.abs())
    norm = torch.linalg.vector_norm(b).item()
    norm_rel = torch.linalg.vector_norm(a - b).item() / norm if norm > 0 else torch.linalg.vector_norm(a - b).item()
    if excess.max().item() <= 0 or norm_rel <= scale * tol.norm_rel:
        return None
    at = tuple(int(i) for i in torch.unravel_index(excess.argmax(), excess.shape))
    return f"index {at}: {a[at].item():.4g} with the fast path, {b[at].item():.4g} without (norm-relative difference {norm_rel:.3g})"


def check_fast_paths(model: torch.nn.Module, inputs: list, dtype: torch.dtype, path: str | None = None) -> None:
    """Raise ProblemError when ``model`` (eval mode) holds fast-path modules
    (``FAST_PATH_MODULES``) and its forward on ``inputs`` under
    ``torch.no_grad()`` gives other outputs with PyTorch's fast path on (as
    the user's eager runs it) than with it off (what ``capture_graph``
    captures).  Nothing is run when the fast path is already off
    (``torch.backends.mha.get_fastpath_enabled()``, which a model file may
    set) or the model has no such module; otherwise costs two forwards.
    ``dtype``: the problem's compute dtype (sets the rounding allowed)."""
    if not torch.backends.mha.get_fastpath_enabled():
        return
    modules = _fast_path_modules(model)
    if not modules:
        return
    try:
        with torch.no_grad():
            fast = model(*inputs)
            torch.backends.mha.set_fastpath_enabled(False)
            slow = model(*inputs)
    finally:
        torch.backends.mha.set_fastpath_enabled(True)
    leaves = [(f, s) for f, s in zip(torch.utils._pytree.tree_leaves(fast), torch.utils._pytree.tree_leaves(slow)) if isinstance(f, torch.Tensor)]
    for k, (f, s) in enumerate(leaves):
        where = _divergence(f, s, dtype)
        if where is None:
            continue
        raise ProblemError(
            f"in eval mode PyTorch runs {', '.join(modules)} through its fused fast path, which torch.export cannot "
            f"capture (pytorch issue 115511), and on the example inputs the fast path computes other values than "
            f"the ordinary path LEGO captures: output {k}, {where}. (The fast path returns 0 at positions padded by "
            "src_key_padding_mask when nn.TransformerEncoder packs them into nested tensors, and NaN for a query "
            "whose keys are all masked.) The optimized model could not match eager",
            path,
            None,
            hint="make eager compute what LEGO captures: call torch.backends.mha.set_fastpath_enabled(False) at the "
            "top of the model file, or (nested tensors only) construct nn.TransformerEncoder(..., "
            "enable_nested_tensor=False); then optimize again.",
        )
