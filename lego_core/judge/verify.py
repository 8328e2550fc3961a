"""Candidate verification: does a kernel compute what the reference computes?

A *candidate* is a callable ``run(inputs, out) -> list[Tensor]``.  ``inputs``
is the sub-problem's boundary inputs in order; ``out`` is either ``None`` (the
candidate allocates its outputs) or a list of preallocated tensors that the
candidate must write into and return.  The *reference* is
``ref(inputs) -> list[Tensor]``, the eager ATen ops of the region.

Rules (docs/DESIGN "Correctness and timing rules"; docs/SEARCH.md,
*Verification*), in the order a candidate meets them:

1. a static check of the source (:func:`calls_back_into_reference`): a
   ``@triton.jit`` kernel is defined and launched; host code calls no
   PyTorch version of a region op nor any heavy op, no private PyTorch API,
   no ``eval``/``exec``, assigns nothing to ``torch``/``triton``/
   ``lego_core``, imports nothing that runs work the call trace cannot see
   (threads, processes, NumPy, ctypes), and jit bodies do not reach torch;
2. importing the file (``judge.inputs.load_module``) changes no global torch
   state, rebinds no torch or lego_core function, writes no file;
3. at least three input sets, each built from a seed that is drawn at random
   per run unless fixed (messages name sets by a one-way label,
   ``verify_policy.seed_label``, never by seed); the sets after the first
   hold the sub-problem's activations redrawn from other distributions
   (``judge.inputs.DISTRIBUTIONS``: scaled by 1e3 and 1e-3, shifted,
   uniform, positive; a mix drawn from the seeds), so a kernel that samples
   its input and computes honestly only on N(0, 1)-looking data meets data
   it did not expect (a failure names the set's distribution);
4. the candidate is called on every set twice, in two shuffled passes, once
   with poisoned preallocated outputs (NaN for floats; for integers and
   bools two runs with two fills) and once with ``out=None``, then on each
   edge-case set (``edge_sets``, ``lego_core.judge.edge_inputs``: NaN, +-inf,
   large values, constant and zero rows); every call gets the same input
   tensors refilled with its set (:func:`call_schedule`);
5. each call runs under ``verify_trace.CallTrace`` and must pass
   ``verify_policy.trace_problem``: no change of global torch state, no
   function rebound, no file written, no PyTorch compute outside Triton
   kernels except the sub-problem's ``library_ops``, at least one Triton
   launch, none on another CUDA stream, no ``tl.dot`` less precise than
   the problem's dtype (``verify_policy.dot_problem``: the dtypes of its
   operands and accumulator and its input precision, e.g. no fp16 hi/lo
   parts nor TF32 for an fp32 problem, no fp16 operands for bf16, an fp32
   accumulator for every float problem);
6. the call leaves every input bit for bit as it was (parameters included);
7. ``out=`` calls return the given buffers; ``out=None`` calls return
   outputs with the reference's strides;
8. shapes and dtypes match; no NaN/inf where the reference has a finite
   value (on edge sets, NaN/inf exactly where the reference has them);
   elementwise ``|a - e| <= atol * scale + rtol * |e|`` (``scale``: the
   reference's RMS, at least 1, or at least the set's magnitude when its
   activations were drawn smaller, ``inputs.InputSet.magnitude``) and
   norm-relative ``||a - e|| / ||e|| <= norm_rel`` with dtype-aware
   tolerances (``lego_core.dtypes.tolerances``); on an edge set, the
   tolerance is widened to what eager's own error there allows
   (:func:`edge_tolerances`: LayerNorm of a constant row is
   ill-conditioned) and never tightened,
   and the same again over the elements that are not fill values
   (:func:`fill_values`: ``masked_fill(x, mask, -1e9)``); a 16-bit output
   must be no further from a float64 run of the reference than eager's own
   output, by :data:`PRECISION_FACTOR`.

Timing is guarded apart (``lego_core.judge.timing_guard``).

The verifier never raises because a candidate is bad: an exception, a wrong
return value or a mismatch is a failed :class:`VerifyReport` whose ``reason``
is one readable line.  It does raise ``ValueError`` for misuse (fewer than
three input sets) and ``RuntimeError`` when the *reference* itself fails,
since that is a bug in the caller, not in the candidate.

Usage: ``python -m lego_core.judge.verify`` checks a small built-in example
(a correct and a broken PyTorch stand-in for a kernel, without the call
trace) and prints both reports.
"""
from __future__ import annotations

import dataclasses
import hashlib
import math
import random
from typing import Callable, Sequence

import torch

from lego_core.dtypes import Tolerance, as_dtype, tolerances
from lego_core.judge.static_check import calls_back_into_reference, forbidden_names, op_base_name  # noqa: F401 - part of this module's API
from lego_core.judge.verify_policy import seed_label, trace_problem
from lego_core.judge.verify_trace import CallTrace

Tensor = torch.Tensor
Candidate = Callable[[list[Tensor], "list[Tensor] | None"], list[Tensor]]
Reference = Callable[[list[Tensor]], list[Tensor]]

MIN_INPUT_SETS = 3


def _tolerance_for(output_dtype: torch.dtype, problem_dtype: torch.dtype | str | None) -> Tolerance:
    """The looser of the output dtype's and the problem dtype's tolerances.

    A bf16 model whose region returns an fp32 tensor still computed in bf16,
    so it is judged as bf16; an fp32 model with a bf16 output is judged as
    bf16 too.  Integer and bool outputs are always exact.
    """
    own = tolerances(output_dtype)
    if own.exact or problem_dtype is None:
        return own
    other = tolerances(problem_dtype)
    if other.exact:
        return own
    return Tolerance(max(own.atol, other.atol), max(own.rtol, other.rtol), max(own.norm_rel, other.norm_rel))


# --------------------------------------------------------------------------
# Comparing outputs
# --------------------------------------------------------------------------


@dataclasses.dataclass
class Comparison:
    """Result of :func:`compare`.

    ``max_abs_error``: the largest ``|a - e|`` over elements where both are
    finite, over all outputs (0.0 when nothing was comparable, ``inf`` when
    the outputs could not be compared at all: wrong count, shape or dtype).
    ``norm_rel_error``: the largest ``||a - e|| / ||e||`` over float outputs
    (0.0 for an all-zero reference, where only the elementwise test applies).
    ``reason``: one line; ``""`` when ``passed``.
    """

    passed: bool
    max_abs_error: float
    norm_rel_error: float
    reason: str = ""


def compare(actual: Sequence[Tensor], expected: Sequence[Tensor], dtype: torch.dtype | str | None = None, *,
            tolerances_for: Sequence[Tolerance | None] | None = None, scale_floor: float = 1.0) -> Comparison:
    """Compare a candidate's outputs with the reference's.

    ``actual`` and ``expected``: lists of tensors, same count, each pair the
    same shape, dtype and device type.  ``dtype``: the problem's compute dtype
    (torch dtype or ``"fp32"``/``"bf16"``/``"fp16"``); each float output is
    judged by the looser of its own dtype's and ``dtype``'s tolerances; None
    uses each output's own dtype.  ``tolerances_for``: per output, a
    tolerance that replaces that one (None: the usual; an edge set's,
    :func:`edge_tolerances`).  ``scale_floor``: the least RMS magnitude the
    elementwise ``atol`` is scaled by (1; an input set drawn at a smaller
    magnitude passes its own, ``inputs.InputSet.magnitude``, so that a
    region's outputs at 1e-3 are judged relative to 1e-3, not to 1).
    Never raises for bad ``actual`` values.
    """
    if not isinstance(actual, (list, tuple)):
        return Comparison(False, math.inf, math.inf, f"candidate returned {type(actual).__name__}, expected a list of {len(expected)} tensors")
    if len(actual) != len(expected):
        return Comparison(False, math.inf, math.inf, f"candidate returned {len(actual)} outputs, expected {len(expected)}")
    max_abs, max_norm = 0.0, 0.0
    for index, (a, e) in enumerate(zip(actual, expected)):
        given = tolerances_for[index] if tolerances_for is not None and index < len(tolerances_for) else None
        result = _compare_one(index, a, e, dtype, given, scale_floor)
        max_abs = max(max_abs, result.max_abs_error)
        max_norm = max(max_norm, result.norm_rel_error)
        if not result.passed:
            return Comparison(False, max_abs, max_norm, result.reason)
    return Comparison(True, max_abs, max_norm, "")


def _compare_one(index: int, a: object, e: Tensor, dtype: torch.dtype | str | None, given: Tolerance | None = None, scale_floor: float = 1.0) -> Comparison:
    """Compare output ``index``; see :func:`compare`."""
    where = f"output {index}"
    mismatch = _metadata_mismatch(a, e)
    if mismatch:
        return Comparison(False, math.inf, math.inf, f"{where}: {mismatch}")
    assert isinstance(a, Tensor)
    if a.numel() == 0:
        return Comparison(True, 0.0, 0.0)
    tol = _tolerance_for(e.dtype, dtype)
    if tol.exact:
        return _compare_exact(where, a, e)
    if given is not None:
        tol = given
    if e.is_complex():
        a, e = torch.view_as_real(a), torch.view_as_real(e)
    return _compare_float(where, a.detach(), e.detach(), tol, scale_floor)


def _metadata_mismatch(a: object, e: Tensor) -> str:
    """Why ``a`` cannot be compared with ``e`` elementwise, or ``""``."""
    if not isinstance(a, Tensor):
        return f"got {type(a).__name__}, expected a tensor"
    if tuple(a.shape) != tuple(e.shape):
        return f"shape {tuple(a.shape)} != expected {tuple(e.shape)}"
    if a.dtype != e.dtype:
        return f"dtype {a.dtype} != expected {e.dtype}"
    if a.device.type != e.device.type:
        return f"device {a.device} != expected {e.device}"
    return ""


# Outputs are compared in float64 piece by piece: a whole-tensor float64 copy of
# a large output (a 16384 x 16384 score matrix per head) costs 4x its bf16 size
# per temporary, many times the model's own memory.  Pieces of at most this
# many elements (8 MiB per float64 temporary) keep the comparison's memory small.
COMPARE_CHUNK_ELEMENTS = 1 << 20


def _pieces(a: Tensor, e: Tensor, limit: int | None = None):
    """Yield ``(offset, a_piece, e_piece)``: flat row-major pieces of ``a`` and
    ``e`` (same shape), each at most ``limit`` elements when the shape allows
    (split along leading dimensions), ``offset`` the flat index of the first."""
    limit = COMPARE_CHUNK_ELEMENTS if limit is None else limit
    if a.numel() <= limit or a.dim() == 0:
        yield 0, a.reshape(-1), e.reshape(-1)
        return
    inner = a[0].numel() if a.shape[0] else 1
    if inner > limit:  # one row is too big: split inside each row
        for i in range(a.shape[0]):
            for offset, ap, ep in _pieces(a[i], e[i], limit):
                yield i * inner + offset, ap, ep
        return
    rows = max(1, limit // max(1, inner))
    for i in range(0, a.shape[0], rows):
        yield i * inner, a[i : i + rows].reshape(-1), e[i : i + rows].reshape(-1)


def _compare_exact(where: str, a: Tensor, e: Tensor) -> Comparison:
    """Integer/bool outputs: every element equal."""
    count, max_abs, first = 0, 0.0, None
    for offset, ap, ep in _pieces(a, e):
        wrong = ap != ep
        n = int(wrong.sum())
        if n and first is None:
            first = offset + int(wrong.nonzero()[0])
        count += n
        max_abs = max(max_abs, float((ap.double() - ep.double()).abs().max()))
    if count == 0:
        return Comparison(True, max_abs, 0.0)
    first = _unravel(first, a.shape)
    reason = (
        f"{where}: {count} of {a.numel()} elements differ (exact match required for {e.dtype}), "
        f"first at index {first}: {_fmt(a[first])} vs {_fmt(e[first])}"
    )
    return Comparison(False, max_abs, math.inf, reason)


def _compare_float(where: str, a: Tensor, e: Tensor, tol: Tolerance, scale_floor: float = 1.0) -> Comparison:
    """Float outputs: NaN/inf pattern, elementwise, norm; each piece
    (:func:`_pieces`) is compared in float64.  When the reference holds fill
    values (:func:`fill_values`: ``masked_fill(x, mask, -1e9)``), the other
    elements are judged once more on their own: the fills dominate both the
    norm and the RMS scale of the atol, so an output with every other element
    zeroed or 10% off would pass the whole-tensor check."""
    overall = _compare_float_part(where, a, e, tol, scale_floor=scale_floor)
    if not overall.passed:
        return overall
    fills = fill_values(e)
    if not fills:
        return overall
    rest = _compare_float_part(where, a, e, tol, fills, scale_floor=scale_floor)
    if rest.passed:
        return overall
    shown = ", ".join(f"{v:g}" for v in fills)
    return Comparison(False, overall.max_abs_error, rest.norm_rel_error, f"{rest.reason} (judged apart from the elements holding the fill value {shown})")


# A reference value that repeats exactly and is this many times larger than
# every other element is a fill (-1e9, finfo.min), not data.
FILL_RATIO = 1.0e4
MAX_FILL_VALUES = 3


def fill_values(e: Tensor) -> tuple[float, ...]:
    """Fill values of the reference output ``e``: a finite value ``v`` (or a
    pair ``v``, ``-v``) held by at least two elements, that every element of
    magnitude at least ``|v| / 2`` holds, and that is at least
    :data:`FILL_RATIO` times the magnitude of every other element.  Up to
    :data:`MAX_FILL_VALUES`, largest first; ``()`` when there is none."""
    fills: list[float] = []
    while len(fills) < MAX_FILL_VALUES:
        top = _max_magnitude(e, fills)
        if top <= 0.0:
            break
        values: set[float] = set()
        count = 0
        for _, _, ep in _pieces(e, e):
            ep = ep.double()
            big = torch.isfinite(ep) & (ep.abs() >= top / 2) & ~_isin(ep, fills)
            picked = ep[big]
            count += picked.numel()
            values.update(float(v) for v in torch.unique(picked)[:3])
            if len(values) > 2:
                break
        if len(values) > 2 or count < 2 or any(abs(v) != top for v in values):
            break
        rest = _max_magnitude(e, fills + sorted(values))
        if rest * FILL_RATIO > top:
            break
        fills += sorted(values, key=abs, reverse=True)
    return tuple(fills)


def _max_magnitude(e: Tensor, skip: list[float]) -> float:
    """The largest finite ``|e|`` over elements not holding a value in ``skip``."""
    top = 0.0
    for _, _, ep in _pieces(e, e):
        ep = ep.double()
        keep = torch.isfinite(ep) & ~_isin(ep, skip)
        if bool(keep.any()):
            top = max(top, float(ep[keep].abs().max()))
    return top


def _isin(x: Tensor, values: Sequence[float]) -> Tensor:
    if not values:
        return torch.zeros_like(x, dtype=torch.bool)
    return torch.isin(x, torch.tensor(list(values), dtype=x.dtype, device=x.device))


def _compare_float_part(where: str, a: Tensor, e: Tensor, tol: Tolerance, fills: Sequence[float] = (), scale_floor: float = 1.0) -> Comparison:
    """:func:`_compare_float` over the elements whose reference value is not in
    ``fills`` (every element when ``fills`` is empty).  Elementwise bound:
    ``max(atol * scale, abs_floor) + rtol * |e|``, ``scale`` the reference's
    RMS, at least ``scale_floor``."""
    max_abs, ref_sq, diff_sq, finite, judged = 0.0, 0.0, 0.0, 0, 0
    for offset, ap, ep in _pieces(a, e):
        ap, ep = ap.double(), ep.double()
        a_fin, e_fin = torch.isfinite(ap), torch.isfinite(ep)
        if fills:
            e_fin &= ~_isin(ep, fills)  # a fill counts as a value not compared here
        diff = torch.where(a_fin & e_fin, ap - ep, torch.zeros((), dtype=ap.dtype, device=ap.device))
        max_abs = max(max_abs, float(diff.abs().max()))
        if not fills:
            bad_special = _nonfinite_mismatch(where, ap, ep, a_fin, e_fin, offset, a, e)
            if bad_special:
                return Comparison(False, max_abs, math.inf, bad_special)
        ref_sq += float(torch.linalg.vector_norm(torch.where(e_fin, ep, 0.0))) ** 2
        diff_sq += float(torch.linalg.vector_norm(diff)) ** 2
        n_fin = int(e_fin.sum())
        finite += n_fin
        judged += n_fin if fills else ap.numel()
    ref_norm, diff_norm = math.sqrt(ref_sq), math.sqrt(diff_sq)
    norm_rel = diff_norm / ref_norm if ref_norm > 0 else 0.0

    scale = max(scale_floor, ref_norm / math.sqrt(max(1, finite)))  # RMS of the reference
    outside, worst, worst_excess = 0, 0, -math.inf
    for offset, ap, ep in _pieces(a, e):
        ap, ep = ap.double(), ep.double()
        both = torch.isfinite(ap) & torch.isfinite(ep)
        if fills:
            both &= ~_isin(ep, fills)
        diff = torch.where(both, ap - ep, torch.zeros((), dtype=ap.dtype, device=ap.device))
        e_abs = torch.where(torch.isfinite(ep), ep, 0.0).abs()
        excess = diff.abs() - (max(tol.atol * scale, tol.abs_floor) + tol.rtol * e_abs)
        outside += int((excess > 0).sum())
        if excess.numel():
            k = int(excess.argmax())
            if float(excess[k]) > worst_excess:
                worst, worst_excess = offset + k, float(excess[k])
    if outside:
        worst = _unravel(worst, a.shape)
        atol_text = f"atol {tol.atol:g}" + (f" x reference RMS {scale:.3g}" if scale != 1.0 else "")
        if tol.abs_floor > tol.atol * scale:
            atol_text += f", at least {tol.abs_floor:.3g} from eager's own error on this set"
        reason = (
            f"{where}: {outside} of {judged} elements outside tolerance "
            f"({atol_text}, rtol {tol.rtol:g}), worst at index {worst}: "
            f"{_fmt(a[worst])} vs {_fmt(e[worst])}"
        )
        return Comparison(False, max_abs, norm_rel, reason)
    if norm_rel > tol.norm_rel:
        reason = f"{where}: norm-relative error {norm_rel:.3g} > {tol.norm_rel:g} (every element within tolerance)"
        return Comparison(False, max_abs, norm_rel, reason)
    return Comparison(True, max_abs, norm_rel)


_REFERENCE_NONFINITE = "elements where the reference is NaN/inf and the candidate differs"


def _nonfinite_mismatch(where: str, a: Tensor, e: Tensor, a_fin: Tensor, e_fin: Tensor, offset: int = 0, a_full: Tensor | None = None, e_full: Tensor | None = None) -> str:
    """A reason when NaN/inf in ``a`` do not sit exactly where ``e`` has them.

    ``a``/``e`` may be flat pieces starting at flat index ``offset`` of
    ``a_full``/``e_full`` (indices in the reason refer to the full tensors)."""
    a_full = a if a_full is None else a_full
    e_full = e if e_full is None else e_full

    def first_index(mask: Tensor) -> tuple:
        return _unravel(offset + int(mask.flatten().nonzero()[0]), a_full.shape)

    a_nan, e_nan = torch.isnan(a), torch.isnan(e)
    new_nan = int((a_nan & ~e_nan).sum())
    if new_nan:
        return f"{where}: NaN at {new_nan} elements where the reference has none (first at index {first_index(a_nan & ~e_nan)})"
    a_inf = ~a_fin & ~a_nan
    new_inf = a_inf & e_fin
    if int(new_inf.sum()):
        return f"{where}: inf at {int(new_inf.sum())} elements where the reference is finite (first at index {first_index(new_inf)})"
    differs = (~e_fin) & ~((a_nan & e_nan) | (a_inf & (a == e)))
    if int(differs.sum()):
        first = first_index(differs)
        return (
            f"{where}: {int(differs.sum())} {_REFERENCE_NONFINITE}, "
            f"first at index {first}: {_fmt(a_full[first])} vs {_fmt(e_full[first])}"
        )
    return ""


def _unravel(flat: int, shape: torch.Size) -> tuple[int, ...]:
    """Flat index to a multi-index tuple (``()`` for a 0-d tensor)."""
    index = []
    for size in reversed(tuple(shape)):
        index.append(flat % size)
        flat //= size
    return tuple(reversed(index))


def _fmt(value: Tensor) -> str:
    """One element as a short number."""
    item = value.item()
    return f"{item:.6g}" if isinstance(item, float) else str(item)


# --------------------------------------------------------------------------
# Poisoning
# --------------------------------------------------------------------------


def poisoned_outputs(expected_like: Sequence[Tensor], variant: int = 0) -> list[Tensor]:
    """Fresh output buffers shaped like ``expected_like``, full of garbage.

    Each buffer has the shape, dtype, device and (for dense tensors) strides
    of its model (``torch.empty_like``): a candidate writes its outputs in the
    layout the reference produces, which later ops (views) rely on.  Floats are filled with NaN in both
    variants.  Integers get ``iinfo.max`` (variant 0) or ``iinfo.min``
    (variant 1); bools get True (0) or False (1): an element the candidate
    never writes keeps the fill and fails in at least one of the two runs.
    ``variant`` must be 0 or 1 (``ValueError`` otherwise).
    """
    if variant not in (0, 1):
        raise ValueError(f"variant must be 0 or 1, got {variant}")
    buffers = []
    for like in expected_like:
        buf = torch.empty_like(like)
        buf.fill_(poison_value(like.dtype, variant))
        buffers.append(buf)
    return buffers


def poison_value(dtype: torch.dtype, variant: int) -> float | int | bool:
    """The fill for one dtype and variant (see :func:`poisoned_outputs`)."""
    if dtype == torch.bool:
        return variant == 0
    if dtype.is_floating_point or dtype.is_complex:
        return math.nan
    info = torch.iinfo(dtype)
    return info.max if variant == 0 else info.min


def needs_two_runs(expected_like: Sequence[Tensor]) -> bool:
    """True when some output cannot hold NaN, so poisoning needs two fills."""
    return any(not (t.dtype.is_floating_point or t.dtype.is_complex) for t in expected_like)


# --------------------------------------------------------------------------
# verify()
# --------------------------------------------------------------------------


@dataclasses.dataclass
class VerifyReport:
    """Outcome of :func:`verify`.

    ``passed``: every call on every input set matched and broke no rule.
    ``max_abs_error`` / ``norm_rel_error``: the worst over the seeded sets'
    calls that were compared (``inf`` if a call could not be compared; see
    :class:`Comparison`); ``max_abs_error`` in the outputs' units, over the
    sets of the model's own values only (a set redrawn at 1e3,
    ``inputs.DISTRIBUTIONS``, has errors 1e3 times larger), unless such a
    set failed.  ``reason``: one line; on success a summary.  It
    names input sets by :func:`lego_core.judge.verify_policy.seed_label`, never by
    seed.  ``seeds``: the seeds of the input sets, in order, for the record
    (not in :meth:`to_dict`: they may still be in use).  ``runs``: how many
    candidate calls were made.
    """

    passed: bool
    max_abs_error: float
    norm_rel_error: float
    reason: str
    seeds: list[int]
    runs: int = 0

    def to_dict(self) -> dict:
        """Plain-data form for events: non-finite numbers become None; seeds
        are given as their one-way labels (``seed_labels``)."""
        data = dataclasses.asdict(self)
        data["seed_labels"] = [seed_label(s) for s in data.pop("seeds")]
        for key in ("max_abs_error", "norm_rel_error"):
            if not math.isfinite(data[key]):
                data[key] = None
        return data


def verify(
    run: Candidate,
    ref: Reference,
    input_sets: Sequence[Sequence[Tensor]],
    dtype: torch.dtype | str | None,
    seeds: Sequence[int],
    *,
    check_allocating_call: bool = True,
    edge_sets: Sequence[tuple[str, Sequence[Tensor]]] = (),
    trace: bool = True,
    library_ops: Sequence[str] | None = None,
    region_ops: Sequence[str] | None = None,
    precise_limit_bytes: int | None = None,
) -> VerifyReport:
    """Check candidate ``run`` against ``ref`` on every input set.

    ``input_sets``: at least three lists of input tensors (``ValueError``
    otherwise), each built from the seed at the same position in ``seeds``
    (``len(seeds) == len(input_sets)``, ``ValueError`` otherwise).  ``dtype``:
    the problem's compute dtype, see :func:`compare`.

    The candidate is called many times (:func:`call_schedule`): on every
    seeded set with poisoned preallocated outputs (twice, with two fills,
    when an output is integer or bool) and, with ``check_allocating_call``,
    with ``out=None``; then once more on every seeded set, in another
    shuffled order; then on each of ``edge_sets`` (``(label, inputs)``,
    ``lego_core.judge.edge_inputs``: NaN, +-inf, large values, constant and zero
    rows), where NaN/inf must sit where the reference has them, judged with
    the tolerance eager's own error there allows (:func:`edge_tolerances`;
    two more float64 runs of the reference per edge set, when twice
    :func:`float64_working_bytes` fits ``precise_limit_bytes``, else the
    normal tolerance).  An input set that carries ``magnitude`` (an
    ``inputs.InputSet`` whose activations were redrawn smaller) is judged
    relative to it (:func:`compare`'s ``scale_floor``), and a failure on a
    set that carries ``distribution`` names it.  Every call
    gets the same input tensors (same objects, usually the same addresses;
    see :class:`_InputBuffers`) refilled with that call's set, and must leave
    them bit for bit as they were; the reference runs on them too.  A 16-bit
    float output is also judged against a float64 reference
    (:func:`precision_mismatch`), unless that reference's memory (estimated
    by :func:`float64_working_bytes`) exceeds ``precise_limit_bytes`` (None:
    no limit): a float64 run of a 16k-token attention region holds 4x its
    score matrices, more than the run's memory bound.  Stops at the first
    failure.

    ``trace``: each call runs under ``verify_trace.CallTrace`` (or, when
    ``run`` has a ``traced(inputs, out) -> (outputs, summary)`` method, as
    a proxy for a candidate in another process does, that summary is used)
    and :func:`lego_core.judge.verify_policy.trace_problem` judges it: no PyTorch
    compute outside Triton kernels except ``library_ops``, at least one
    Triton launch, no other CUDA stream, no ``tl.dot`` less precise than
    ``dtype`` (operand, accumulator and input precision; dtypes the region
    itself holds are allowed, :func:`dtypes_of_reference`), no change of
    global torch state, no files written.  False skips these
    rules (pure-PyTorch test doubles).  ``library_ops`` / ``region_ops``:
    ATen op names; None takes them from the sub-problem whose
    ``run_reference`` is ``ref`` (``SubProblem.group.library_ops``,
    ``SubProblem.ops``), else empty.

    Raises ``RuntimeError`` if the reference raises or returns something that
    is not a list of tensors; never raises for a bad candidate.
    """
    if len(input_sets) < MIN_INPUT_SETS:
        raise ValueError(f"verify needs at least {MIN_INPUT_SETS} input sets, got {len(input_sets)}")
    if len(seeds) != len(input_sets):
        raise ValueError(f"got {len(seeds)} seeds for {len(input_sets)} input sets; record one seed per set")
    seeds = [int(s) for s in seeds]
    rules = _CallRules(trace, dtype, *ops_of_reference(ref, library_ops, region_ops), region_dtypes=dtypes_of_reference(ref))
    buffers = _InputBuffers(keep=bool(getattr(input_sets, "keep_call_buffers", True)))
    worst_abs, worst_norm, runs = 0.0, 0.0, 0
    schedule = call_schedule(len(input_sets), len(edge_sets), check_allocating_call, seeds)
    n_seeded = len(input_sets)
    earlier = None  # (call number, outputs the last call gave, a copy of them): a later call must leave them alone
    for set_index, modes in schedule:
        # one input set alive at a time: ``input_sets`` may build each set on
        # demand (lego_core.judge.inputs.InputSets), and the sets of a large
        # sub-problem need not fit in device memory together
        if set_index < n_seeded:
            inputs = input_sets[set_index]
            drawn = getattr(inputs, "distribution", "")
            label = f"input set {set_index} (seed label {seed_label(seeds[set_index])})"
        else:
            drawn = ""
            what, inputs = edge_sets[set_index - n_seeded]
            label = f"edge input set {set_index - n_seeded} ({what})"
        # the reference runs on the call buffers (refilled before every call), not on one more copy
        expected = _run_reference(ref, buffers.fill(inputs), label, clone=False)
        wide_bytes = float64_working_bytes(ref, inputs, expected) if precise_limit_bytes is not None else 0
        wide_ok = precise_limit_bytes is None or wide_bytes <= precise_limit_bytes
        # an input set drawn at a smaller magnitude (inputs.InputSet.magnitude) is judged relative to it
        scale_floor = min(1.0, float(getattr(inputs, "magnitude", 1.0) or 1.0))
        tols = None
        if (set_index >= n_seeded or drawn) and (precise_limit_bytes is None or 2 * wide_bytes <= precise_limit_bytes):
            # an edge set, or a set redrawn from another distribution (shifted rows make LayerNorm's
            # mean subtraction cancel): its tolerance from eager's own error there (a float64 run,
            # and one on nudged inputs); never looser than the normal one where eager is exact
            truth = float64_outputs(ref, inputs, expected)
            tols = edge_tolerances(ref, inputs, expected, dtype, truth, seed=seeds[0] + set_index)
            precise = _sixteen_bit(truth, expected)
            del truth
        else:
            precise = precise_reference(ref, inputs, expected) if wide_ok else None
        for mode in _with_second_fill(modes, expected):
            runs += 1
            given: list = []
            result = _check_one_call(run, inputs, expected, mode, dtype, precise, inf_for_nan=set_index >= n_seeded, rules=rules, buffers=buffers, given=given,
                                     tols=tols, scale_floor=scale_floor)
            if result.passed and earlier is not None:
                changed = _changed_since(earlier)
                if changed:
                    result = Comparison(False, math.inf, math.inf, changed)
            if result.passed and runs == 1 and buffers.keep and rules.state is not None:
                result = _repeat_call(run, inputs, expected, mode, dtype, precise, rules, buffers, scale_floor)
                runs += 1
            earlier = _remember(runs, given, buffers.tensors, precise_limit_bytes) if result.passed else None
            del given  # only what _remember kept stays alive
            if set_index < n_seeded:  # the reported error is the seeded sets'; edge sets (huge values) pass or fail
                if not drawn or not result.passed:  # in output units: the sets of the model's own values (not a set at 1e3)
                    worst_abs = max(worst_abs, result.max_abs_error)
                worst_norm = max(worst_norm, result.norm_rel_error)
            if not result.passed:
                how = "allocating call (out=None)" if mode is None else f"poison variant {mode}"
                on = f" (this set's activations drawn {drawn})" if drawn else ""
                return VerifyReport(False, worst_abs, worst_norm, f"{label}, call {runs}, {how}: {result.reason}{on}", seeds, runs)
        del inputs, expected, precise, tols
    buffers.release()
    summary = (
        f"{len(input_sets)} input sets" + (f" and {len(edge_sets)} edge sets" if edge_sets else "") + f", {runs} candidate calls in shuffled order matched the reference "
        f"(max abs error {worst_abs:.3g} on the sets of the model's own values, norm-relative {worst_norm:.3g} on every seeded set)"
    )
    return VerifyReport(True, worst_abs, worst_norm, summary, seeds, runs)


def call_schedule(n_sets: int, n_edge: int, allocating: bool, seeds: Sequence[int]) -> list[tuple[int, list[int | None]]]:
    """The order of candidate calls: ``[(set index, [mode]), ...]``, a mode
    being a poison variant (0; 1 is added where an output needs two fills)
    or None (``out=None``).  Every seeded set is visited twice, in two
    shuffled passes, once with poisoned outputs and (``allocating``) once
    with ``out=None``, the pass that gets which mode drawn per set (the very
    first call is a poisoned one); the second pass never starts with the set
    the first ended on.  Then the edge sets (indices ``n_sets`` on), one
    poisoned call each.  The shuffle is
    drawn from the seeds: secret seeds give a secret order, fixed seeds a
    reproducible one.  A candidate that keeps state between calls (right
    only on its first allocating call, or for its first N calls, or
    memoised by input identity or address) meets another set's values on a
    later call."""
    rng = random.Random(hashlib.sha256(repr(list(seeds)).encode()).digest())
    first = list(range(n_sets))
    rng.shuffle(first)
    again = list(range(n_sets))
    rng.shuffle(again)
    while n_sets > 1 and again[0] == first[-1]:
        rng.shuffle(again)
    modes: dict[int, list[int | None]] = {}
    for k in range(n_sets):
        pair: list[int | None] = [0, None] if allocating else [0, 0]
        if k != first[0]:  # the first call is poisoned: its failure says the most
            rng.shuffle(pair)
        modes[k] = pair
    schedule = [(k, [modes[k][0]]) for k in first] + [(k, [modes[k][1]]) for k in again]
    return schedule + [(n_sets + j, [0]) for j in range(n_edge)]


def _with_second_fill(modes: list[int | None], expected: list[Tensor]) -> list[int | None]:
    """``modes`` with poison variant 1 after each 0 when an output cannot hold NaN."""
    if not needs_two_runs(expected):
        return modes
    return [m for mode in modes for m in ((0, 1) if mode == 0 else (mode,))]


def ops_of_reference(ref: Reference, library_ops, region_ops) -> tuple[tuple, tuple]:
    """``(library_ops, region_ops)``: as given, or from the sub-problem whose
    bound ``run_reference`` is ``ref`` (see :func:`verify`)."""
    sub = getattr(ref, "__self__", None)
    if library_ops is None:
        library_ops = getattr(getattr(sub, "group", None), "library_ops", ()) or ()
    if region_ops is None:
        region_ops = getattr(sub, "ops", ()) or ()
    return tuple(library_ops), tuple(region_ops)


def dtypes_of_reference(ref: Reference) -> frozenset:
    """The dtypes of the values of the sub-problem whose bound ``run_reference``
    is ``ref`` (its inputs, its nodes' values and its outputs, from the
    captured graph's ``meta["val"]``); empty for any other reference."""
    sub = getattr(ref, "__self__", None)
    found = set()
    for node in [*(getattr(sub, "inputs", None) or ()), *(getattr(sub, "nodes", None) or ()), *(getattr(sub, "outputs", None) or ())]:
        meta = getattr(node, "meta", None)
        val = meta.get("val") if isinstance(meta, dict) else None
        for v in val if isinstance(val, (list, tuple)) else (val,):
            if isinstance(v, Tensor):
                found.add(v.dtype)
    return frozenset(found)


@dataclasses.dataclass
class _CallRules:
    """What :func:`_check_one_call` enforces beyond the values."""

    trace: bool
    dtype: object
    library_ops: tuple
    region_ops: tuple
    # the kernel file's state after the last call (``module_state`` of a
    # traced call's summary, sent by the executor; None: not known): :func:`state_kept`
    state: str | None = None

    # dtypes the region's own values hold (``region_dtypes``): a ``tl.dot`` in one is what the reference does
    region_dtypes: frozenset = frozenset()

    def fp32(self, expected: Sequence[Tensor]) -> bool:
        """An fp32 problem (or, with no problem dtype, fp32 outputs)."""
        return self.problem_dtype(expected) == torch.float32

    def problem_dtype(self, expected: Sequence[Tensor]) -> torch.dtype | None:
        """The dtype every ``tl.dot`` is judged against
        (``verify_policy.dot_problem``): the problem's, or with none given
        float32 when an output is fp32, else the first float output's dtype
        (None when no output is a float)."""
        if self.dtype is not None:
            return as_dtype(self.dtype)
        floats = [e.dtype for e in expected if isinstance(e, Tensor) and e.is_floating_point()]
        return torch.float32 if torch.float32 in floats else (floats[0] if floats else None)

    def dtypes_with(self, inputs: Sequence[object], expected: Sequence[Tensor]) -> frozenset:
        """:attr:`region_dtypes` and the dtypes of this call's inputs and expected outputs."""
        return self.region_dtypes | {x.dtype for x in [*inputs, *expected] if isinstance(x, Tensor)}


class _InputBuffers:
    """The tensors every candidate call gets as its inputs: one copy of an
    input set, refilled (``copy_``) with each call's set.  The same Python
    objects, usually at the same addresses, carry new values on every call,
    so a candidate that memoises by identity, ``data_ptr`` or call count
    returns stale results, and a write into an input is seen by comparing
    the buffer with the set it was filled from (no second copy).

    ``keep`` False (``input_sets.keep_call_buffers``: a store building sets
    within a memory bound that has no room for one more copy of a set): the
    copy is dropped after every call, as a plain per-call clone would be,
    and made again for the next (identity is then lost; the allocator
    usually hands out the same block again)."""

    def __init__(self, keep: bool = True) -> None:
        self.keep = keep
        self.tensors: list | None = None

    def after_call(self) -> None:
        if not self.keep:
            self.tensors = None

    def fill(self, inputs: Sequence[object]) -> list:
        if self.tensors is None or not self._fits(inputs):
            self.tensors = _clone_inputs(inputs)
        else:
            for buf, x in zip(self.tensors, inputs):
                if isinstance(x, Tensor):
                    buf.copy_(x)
        return list(self.tensors)  # a new list, the same tensors

    def _fits(self, inputs: Sequence[object]) -> bool:
        if len(inputs) != len(self.tensors):
            return False
        for buf, x in zip(self.tensors, inputs):
            if isinstance(x, Tensor) != isinstance(buf, Tensor):
                return False
            if isinstance(x, Tensor) and (buf.shape != x.shape or buf.dtype != x.dtype or buf.device != x.device):
                return False
            if not isinstance(x, Tensor) and buf is not x:
                return False
        return True

    def release(self) -> None:
        self.tensors = None


def _clone_inputs(inputs: Sequence[Tensor]) -> list[Tensor]:
    """Fresh copies (same strides) of every tensor input; others pass as is."""
    return [x.clone() if isinstance(x, Tensor) else x for x in inputs]


def _run_reference(ref: Reference, inputs: Sequence[Tensor], label: str, clone: bool = True) -> list[Tensor]:
    """Reference outputs as a list of tensors (run on copies of ``inputs``
    unless ``clone`` is False); ``RuntimeError`` if it fails."""
    try:
        with torch.no_grad():
            outputs = ref(_clone_inputs(inputs) if clone else list(inputs))
    except Exception as exc:
        raise RuntimeError(f"the reference failed on {label}: {type(exc).__name__}: {exc}") from exc
    if isinstance(outputs, Tensor):
        outputs = [outputs]
    if not isinstance(outputs, (list, tuple)) or not all(isinstance(t, Tensor) for t in outputs):
        raise RuntimeError(f"the reference returned {type(outputs).__name__} on {label}, expected a list of tensors")
    return [t.detach() for t in outputs]


def _call(run: Candidate, inputs: list, out: list | None, trace: bool) -> tuple[object, dict | None]:
    """Call the candidate (under a ``CallTrace`` when ``trace``): (returned, summary or None)."""
    traced = getattr(run, "traced", None)
    with torch.no_grad():
        if trace and traced is not None:
            return traced(inputs, out)
        if not trace:
            return run(inputs, out), None
        with CallTrace() as call_trace:
            returned = run(inputs, out)
        return returned, call_trace.summary()


def bits_digest(t: Tensor) -> tuple:
    """A fingerprint of ``t``'s bits, computed piece by piece (no full-size
    temporary): the sums of its elements' bit patterns as int64 and of
    those times a per-piece position weight.  Two tensors with the same
    digest almost surely hold the same bits (enough to see a kernel write
    into an output it gave before; not a cryptographic hash)."""
    t = t.detach()
    if t.is_complex():
        t = torch.view_as_real(t)
    bits = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}.get(t.element_size())
    total, weighted = 0, 0
    for offset, piece, _ in _pieces(t, t):
        if bits is not None and piece.dtype != bits:
            piece = piece.contiguous().view(bits)
        values = piece.to(torch.int64)
        total += int(values.sum())
        weighted += int((values * torch.arange(1, values.numel() + 1, device=values.device)).sum()) * (offset + 1)
    return tuple(t.shape), t.dtype, total, weighted


# the previous call's outputs are kept for the check while they take at most
# this fraction of the memory the caller leaves the verification (``precise_limit_bytes``)
EARLIER_OUTPUTS_SHARE = 8


def _remember(call: int, outputs: list, inputs: Sequence | None = None, limit: int | None = None) -> tuple | None:
    """``(call, outputs, digests)`` of the outputs a call gave (kept alive,
    fingerprinted with :func:`bits_digest`), or None when there are none or
    keeping them would take more than ``1/EARLIER_OUTPUTS_SHARE`` of
    ``limit`` bytes (a check near the memory bound skips this one).
    Outputs that alias one of ``inputs`` (the call buffers, refilled for the
    next call: a view is allowed to follow its input) are left out."""
    held = {x.untyped_storage().data_ptr() for x in (inputs or ()) if isinstance(x, Tensor)}
    tensors = [t for t in outputs if isinstance(t, Tensor) and t.untyped_storage().data_ptr() not in held]
    if not tensors:
        return None
    kept = sum(t.untyped_storage().nbytes() for t in tensors)  # a view keeps its whole base alive
    if limit is not None and EARLIER_OUTPUTS_SHARE * kept > limit:
        return None
    return call, tensors, [bits_digest(t) for t in tensors]


def _changed_since(earlier: tuple) -> str:
    """A reason when a later call changed the outputs an earlier one gave (a
    kernel that keeps its last output and writes into it: the caller's
    earlier result goes wrong behind its back), else ``""``."""
    call, tensors, digests = earlier
    for k, (now, then) in enumerate(zip(tensors, digests)):
        if bits_digest(now) != then:
            return f"the next call changed output {k} of call {call} (a kernel must not write into outputs it gave before)"
    return ""


def _check_one_call(run: Candidate, inputs: Sequence[Tensor], expected: list[Tensor], variant: int | None, dtype, precise: list | None = None, inf_for_nan: bool = False, rules: _CallRules | None = None, buffers: _InputBuffers | None = None, given: list | None = None, refill: bool = True,
                    tols: Sequence[Tolerance | None] | None = None, scale_floor: float = 1.0) -> Comparison:
    """Call the candidate once (poisoned ``out`` or ``out=None``) and judge
    the call: the trace (:func:`lego_core.judge.verify_policy.trace_problem`), its
    inputs left as they were, the returned buffers (``out=``) or strides
    (``out=None``), then the values (:func:`compare`, and for 16-bit outputs
    with a ``precise`` reference :func:`precision_mismatch`).
    ``inf_for_nan`` (edge sets): an infinity where the reference is NaN is
    accepted; eager itself does not agree with itself there (CPU GELU of +inf
    is inf on its scalar path and NaN on its vectorized one), while a finite
    value where the reference is NaN still fails."""
    rules = rules or _CallRules(False, dtype, (), ())
    buffers = buffers or _InputBuffers()
    out = None if variant is None else poisoned_outputs(expected, variant)
    try:
        given_inputs = buffers.fill(inputs) if refill or buffers.tensors is None else list(buffers.tensors)
        returned, summary = _call(run, given_inputs, out, rules.trace)
        del given_inputs  # a fresh copy of the inputs must not stay alive while the outputs are judged (the memory bound)
        _synchronize(expected)
    except Exception as exc:  # a bad candidate is a result, not an error
        return Comparison(False, math.inf, math.inf, f"candidate raised {_describe_exception(exc)}")
    finally:
        written = _written_inputs(buffers.tensors or (), inputs)
        buffers.after_call()
    if summary is not None:
        rules.state = summary.get("module_state")
        problem = trace_problem(summary, library_ops=rules.library_ops, region_ops=rules.region_ops,
                                dtype=rules.problem_dtype(expected), region_dtypes=rules.dtypes_with(inputs, expected))
        if problem:
            return Comparison(False, math.inf, math.inf, problem)
    if written:
        return Comparison(False, math.inf, math.inf, written)
    if isinstance(returned, Tensor):
        returned = [returned]
    if out is not None:
        not_written_in_place = _returned_other_buffers(returned, out)
        if not_written_in_place:
            return Comparison(False, math.inf, math.inf, not_written_in_place)
        returned = out
    else:
        strides = _stride_mismatch(returned, expected)
        if strides:
            return Comparison(False, math.inf, math.inf, strides)
    if given is not None and isinstance(returned, (list, tuple)):
        given.extend(returned)
    return judge_values(returned, expected, dtype, precise, inf_for_nan, tolerances_for=tols, scale_floor=scale_floor)


def _repeat_call(run: Candidate, inputs, expected, variant, dtype, precise, rules: _CallRules, buffers: _InputBuffers, scale_floor: float = 1.0) -> Comparison:
    """The first call made once more on the same input tensors, not refilled
    (the same objects, addresses, versions and values): its values judged as
    any call's, and the kernel file's state after it required to be what it
    was after the first (:func:`state_kept`)."""
    before = rules.state
    result = _check_one_call(run, inputs, expected, variant, dtype, precise, rules=rules, buffers=buffers, refill=False, scale_floor=scale_floor)
    kept = state_kept(before, rules.state) if result.passed else ""
    if kept:
        return Comparison(False, math.inf, math.inf, f"repeated call: {kept}")
    return result


def state_kept(state_before: str | None, state_after: str | None) -> str:
    """A reason when the kernel file's state (``module_state`` of the
    executor's summary: :func:`lego_core.judge.verify_trace.module_state_digest`)
    after a call differs from the state before it, the call having had the
    same inputs, unrefilled, as the one before; ``""`` otherwise, and when
    either is unknown (a candidate called in this process)."""
    if state_before is None or state_after is None or state_before == state_after:
        return ""
    return ("called again on the same inputs, the kernel file's state changed (module globals, function defaults, closures "
            "or attributes it keeps): it counts its calls or keeps results; a kernel must compute every call from its inputs")


def judge_values(returned, expected: list[Tensor], dtype, precise: list | None = None, inf_for_nan: bool = False, *,
                 tolerances_for: Sequence[Tolerance | None] | None = None, scale_floor: float = 1.0) -> Comparison:
    """The values of one call judged as the verifier judges them (the timing
    guard's calls after timing too): :func:`compare` against eager's
    ``expected``; for 16-bit outputs with a float64 reference ``precise``
    (:func:`precise_reference`), an output that fails only on values, or
    only where eager's result is NaN/inf, passes when it is within the same
    tolerance of the float64 result rounded once to its dtype; and a 16-bit
    output must then be no further from the float64 result than eager's
    (:func:`precision_mismatch`).  ``inf_for_nan``: edge sets (see
    ``_check_one_call``).  ``tolerances_for`` / ``scale_floor``: see
    :func:`compare` (an edge set's tolerances, a scaled set's magnitude)."""
    if inf_for_nan:
        expected = [_inf_for_nan(a, e) for a, e in zip(returned, expected)]
    result = compare(returned, expected, dtype, tolerances_for=tolerances_for, scale_floor=scale_floor)
    if not result.passed and precise and (_values_only(result) or _reference_overflowed(result)):
        # eager's own 16-bit rounding can be what differs (a cumsum of values
        # scaled by exp(+7) and back: 9% on one element of a bf16 scan that
        # kept fp32 inside), or eager's intermediate overflowed where the
        # result is finite (the same scan at T=1024 on the H200: inf where
        # the float64 result is 0.0011): the output passes when it is within
        # the same tolerance of the float64 result rounded once to its dtype,
        # NaN/inf then required exactly where that result has them
        exact = _correctly_rounded(returned, expected, precise, inf_for_nan)
        if exact is not None and compare(returned, exact, dtype, tolerances_for=tolerances_for, scale_floor=scale_floor).passed:
            result = dataclasses.replace(result, passed=True, reason="")
        del exact
    if result.passed and precise:
        for k, (a, e, hi) in enumerate(zip(returned, expected, precise)):
            reason = precision_mismatch(f"output {k}", a, e, hi)
            if reason:
                return Comparison(False, result.max_abs_error, result.norm_rel_error, reason)
    return result


def _values_only(result: Comparison) -> bool:
    """Whether a failed comparison failed on values (not on shapes, dtypes or NaN/inf placement)."""
    return "outside tolerance" in result.reason or "norm-relative" in result.reason


def _reference_overflowed(result: Comparison) -> bool:
    """Whether a failed comparison failed only because the reference holds
    NaN/inf where the candidate holds something else (not a NaN or inf of the
    candidate's own where the reference is finite)."""
    return _REFERENCE_NONFINITE in result.reason


def _correctly_rounded(returned, expected: list[Tensor], precise: list, inf_for_nan: bool) -> list[Tensor] | None:
    """Each 16-bit output's float64 reference rounded once to its dtype (the
    best answer that dtype can hold), the eager output where there is no
    float64 reference; None when no output has one."""
    if not isinstance(returned, (list, tuple)) or not any(hi is not None for hi in precise):
        return None
    exact = [e if hi is None else hi.to(device=e.device, dtype=e.dtype) for e, hi in zip(expected, precise)]
    if inf_for_nan:
        exact = [_inf_for_nan(a, e) if isinstance(a, Tensor) else e for a, e in zip(returned, exact)]
    return exact


def _written_inputs(given: Sequence[object], inputs: Sequence[object]) -> str:
    """A reason when the candidate changed a tensor it was given as an input
    (bit for bit: NaN payloads and -0.0 count), or ``""``."""
    for k, (buf, x) in enumerate(zip(given, inputs)):
        if isinstance(buf, Tensor) and isinstance(x, Tensor) and not same_bits(buf, x):
            return f"wrote into input {k} (shape {tuple(x.shape)}); inputs, the model's parameters among them, must be left as they were"
    return ""


def same_bits(a: Tensor, b: Tensor) -> bool:
    """Whether ``a`` and ``b`` (same shape and dtype) hold the same bits,
    compared piece by piece (:func:`_pieces`) so no full-size temporary is made."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.is_complex():
        a, b = torch.view_as_real(a), torch.view_as_real(b)
    bits = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}.get(a.element_size())
    for _, ap, bp in _pieces(a.detach(), b.detach()):
        if bits is not None and ap.dtype != bits:
            ap, bp = ap.contiguous().view(bits), bp.contiguous().view(bits)
        if not torch.equal(ap, bp):
            return False
    return True


def _stride_mismatch(returned: object, expected: Sequence[Tensor]) -> str:
    """A reason when an allocated output's strides differ from the reference's
    (dimensions of size 1 have no meaningful stride and are skipped), or
    ``""``.  A reference output that is a view into a larger buffer (not
    dense) sets no layout: a kernel cannot allocate a part of a buffer."""
    if not isinstance(returned, (list, tuple)):
        return ""
    for k, (a, e) in enumerate(zip(returned, expected)):
        if not isinstance(a, Tensor) or a.shape != e.shape:
            return ""  # compare() names the problem
        if not _dense(e):
            continue
        got = [s for s, n in zip(a.stride(), a.shape) if n > 1]
        want = [s for s, n in zip(e.stride(), e.shape) if n > 1]
        if got != want:
            return f"output {k}: strides {tuple(a.stride())} != the reference's {tuple(e.stride())} (later ops read the output through them)"
    return ""


def _dense(t: Tensor) -> bool:
    """Whether ``t``'s elements fill their span of memory exactly once, in some
    order of dimensions (contiguous, channels-last, a transpose)."""
    dims = sorted((s, n) for s, n in zip(t.stride(), t.shape) if n > 1)
    expected = 1
    for stride, size in dims:
        if stride != expected:
            return False
        expected *= size
    return True


def _inf_for_nan(actual: object, expected: Tensor) -> Tensor:
    """``expected`` with the candidate's infinity where it has NaN (see ``_check_one_call``)."""
    if not (isinstance(actual, Tensor) and expected.is_floating_point() and actual.shape == expected.shape and actual.dtype == expected.dtype):
        return expected
    swap = torch.isnan(expected) & torch.isinf(actual)
    return torch.where(swap, actual, expected) if bool(swap.any()) else expected


# A 16-bit output may be no further from the float64 result than eager's own
# 16-bit result, times this factor, plus PRECISION_FLOOR of the result's norm
# (a 16th of a bf16 ulp: room for an eager output that is exact).  Rounding
# once to nearest (a fused kernel keeping fp32 inside) is at most as far as
# eager; truncating to bf16 (Triton's interpreter without rounding) is about
# twice as far, which the factor rejects (issue 10).
PRECISION_FACTOR = 1.5
PRECISION_FLOOR = 2.0**-12
_SIXTEEN_BIT = (torch.bfloat16, torch.float16)


def float64_working_bytes(ref: Reference, inputs: Sequence[Tensor], expected: list[Tensor]) -> int:
    """Bytes a float64 run of ``ref`` allocates (an estimate): float64 copies
    of the floating inputs, its outputs, and, when ``ref`` is a sub-problem's
    ``run_reference``, twice its largest intermediate, all at 8 bytes an
    element."""
    def wide(t) -> int:
        return 8 * t.numel() if isinstance(t, Tensor) and t.is_floating_point() else 0

    total = sum(wide(x) for x in inputs) + 2 * sum(wide(e) for e in expected)
    sub = getattr(ref, "__self__", None)
    nodes = getattr(sub, "nodes", None)
    if nodes:
        sizes = [v.numel() for n in nodes for v in [n.meta.get("val")] if isinstance(v, Tensor) and v.is_floating_point()]
        total += 2 * 8 * max(sizes, default=0)
    return total


def precise_reference(ref: Reference, inputs: Sequence[Tensor], expected: list[Tensor]) -> list[Tensor | None] | None:
    """The reference run on float64 copies of the floating inputs, for 16-bit
    outputs only (None where an output is not 16-bit, or for all when none is,
    or when the region does not run in float64: then there is no such check)."""
    if not any(e.dtype in _SIXTEEN_BIT for e in expected):
        return None
    return _sixteen_bit(float64_outputs(ref, inputs, expected), expected)


def _sixteen_bit(wide: list | None, expected: list[Tensor]) -> list | None:
    """The 16-bit outputs' entries of :func:`float64_outputs` (None elsewhere)."""
    if wide is None or not any(e.dtype in _SIXTEEN_BIT for e in expected):
        return None
    return [w if e.dtype in _SIXTEEN_BIT else None for w, e in zip(wide, expected)]


def float64_outputs(ref: Reference, inputs: Sequence[Tensor], expected: list[Tensor]) -> list[Tensor | None] | None:
    """The reference run on float64 copies of the floating inputs: one float64
    tensor per float output of ``expected`` (None for an output that is not
    a float or comes back in another shape); None when the region does not
    run in float64 (a cast, a dtype keyword) or returns another count."""
    wide = [x.double() if isinstance(x, Tensor) and x.is_floating_point() else x for x in inputs]
    try:
        with torch.no_grad():
            outputs = ref(wide)
    except Exception:  # noqa: BLE001 - a region that needs its dtype (a cast, a dtype kwarg) gets no float64 check
        return None
    if isinstance(outputs, Tensor):
        outputs = [outputs]
    if not isinstance(outputs, (list, tuple)) or len(outputs) != len(expected):
        return None
    return [
        o.detach().double() if e.is_floating_point() and isinstance(o, Tensor) and o.is_floating_point() and o.shape == e.shape else None
        for o, e in zip(outputs, expected)
    ]


# --------------------------------------------------------------------------
# Edge sets: a tolerance from eager's own error there
# --------------------------------------------------------------------------

# Relative size of the perturbation of every floating input (random sign per
# element) whose effect on the float64 result measures how sensitive a region
# is on a set, in fp32 ulps (fp32's whatever the dtype: a kernel computes in
# fp32 inside).  Sixteen: the rounding of the ops upstream of a region in a
# model, and what an honest fp32 reduction may be off by: the lane-wise sums
# of Triton's tutorial LayerNorm are 8 ulps off the mean of a 4096-wide
# constant row, 30 off a 16384-wide one; a 1% error on such a row still
# fails, up to row values of about 5.
NUDGE_ULPS = 16.0


def nudged_inputs(inputs: Sequence[object], seed: int = 0) -> list:
    """Float64 copies of the floating inputs, each element moved by
    ``NUDGE_ULPS`` fp32 ulps of its own magnitude, up or down at random
    (``torch.Generator().manual_seed(seed)``); other inputs as they are.
    NaN, inf and zero stay what they are."""
    gen = torch.Generator().manual_seed(int(seed))
    step = NUDGE_ULPS * torch.finfo(torch.float32).eps
    nudged = []
    for x in inputs:
        if isinstance(x, Tensor) and x.is_floating_point():
            sign = torch.randint(0, 2, x.shape, generator=gen).to(device=x.device, dtype=torch.float64) * 2 - 1
            wide = x.double()
            x = wide + wide * (step * sign)
        nudged.append(x)
    return nudged


def edge_tolerances(ref: Reference, inputs: Sequence[Tensor], expected: list[Tensor], dtype, truth: list | None = None, seed: int = 0) -> list[Tolerance | None] | None:
    """Per output, the tolerance an edge set (``lego_core.judge.edge_inputs``)
    is judged with: the normal one (:func:`_tolerance_for`), widened to what
    eager's own error on this set says the set allows, the way the
    end-to-end judge measures it (``end_to_end.e2e_judge``: errors against a
    float64 run of the same region, ``e2e_judge._errors``; allowed: its
    ``MULTIPLIER`` times eager's error, plus one eager error more since the
    candidate is compared with eager, not with the float64 result; 3 for an
    fp32 problem, 4 for bf16 and fp16).

    Eager's error is the larger of two, both against the float64 result
    ``truth`` (:func:`float64_outputs`; computed here when not given): eager's
    output itself, and the float64 reference run on the inputs nudged by
    :data:`NUDGE_ULPS` fp32 ulps (:func:`nudged_inputs`), the error eager
    carries in a model whose inputs come rounded from the ops before it (and
    the size of an honest fp32 reduction's own error).
    On a well-conditioned set both are a few fp32 ulps (under 1e-5 norm-
    relative, and under ``rtol`` per element) and the tolerance is the
    normal one, never looser.  Where the set is ill-conditioned
    (LayerNorm of a constant row: ``x - mean`` is scaled by ``1/sqrt(eps)``,
    316 for eps 1e-5, so one ulp of error in the mean is 4e-5 of the output
    while eager's mean happens to be exact there) it is widened: an absolute
    elementwise allowance (output units, :attr:`Tolerance.abs_floor`) of the
    allowance times the worst element's error, less what ``rtol`` already
    allows that element (:func:`_absolute_allowance`), and ``norm_rel`` to
    the allowance times the norm-relative error.  A kernel 1% off on those
    rows is still 10x to 100x outside.

    None for an output that is not a float (exact) or has no float64 result,
    and for all when the region does not run in float64; the caller then
    uses the normal tolerance.  Raises nothing."""
    from lego_core.judge.end_to_end.e2e_judge import MULTIPLIER, _errors  # e2e_judge imports this module

    truth = float64_outputs(ref, inputs, expected) if truth is None else truth
    if truth is None or not any(t is not None for t in truth):
        return None
    nudged = float64_outputs(ref, nudged_inputs(inputs, seed), expected)
    tols: list[Tolerance | None] = []
    for k, (e, t) in enumerate(zip(expected, truth)):
        n = nudged[k] if nudged is not None else None
        if t is None or not e.is_floating_point() or e.numel() == 0:
            tols.append(None)
            continue
        normal = _tolerance_for(e.dtype, dtype)
        own = _errors([e], [e], [t])
        moved = _errors([n], [e], [t]) if n is not None else own
        relative = max(own.norm_rel, moved.norm_rel)
        allowance = MULTIPLIER.get(as_dtype(dtype) if dtype is not None else e.dtype, 2.0) + 1.0
        floor = _absolute_allowance(e, t, n, allowance, normal.rtol)
        if not (math.isfinite(floor) and math.isfinite(relative)):
            tols.append(None)
            continue
        tols.append(dataclasses.replace(normal, norm_rel=max(normal.norm_rel, allowance * relative), abs_floor=floor))
    return tols


def _absolute_allowance(e: Tensor, truth: Tensor, nudged: Tensor | None, allowance: float, rtol: float) -> float:
    """The absolute elementwise allowance of an edge set (output units): the
    largest ``allowance * eager_error - rtol * |e|`` over the elements where
    eager and the float64 result are finite, ``eager_error`` the larger of
    eager's distance to the float64 result and the nudged float64 result's
    (0 when none is positive): what ``rtol`` does not already allow (a large
    element's rounding is relative; a constant row's error is not)."""
    t = truth.to(e.device)
    e64 = e.double()
    finite = torch.isfinite(e64) & torch.isfinite(t)
    zero = torch.zeros((), dtype=torch.float64, device=e.device)
    error = torch.where(finite, (e64 - t).abs(), zero)
    if nudged is not None:
        n = nudged.to(e.device)
        error = torch.maximum(error, torch.where(finite & torch.isfinite(n), (n - t).abs(), zero))
    excess = torch.where(finite, allowance * error - rtol * e64.abs(), zero)
    return max(0.0, float(excess.max())) if excess.numel() else 0.0



def precision_mismatch(where: str, actual: Tensor, expected: Tensor, precise: Tensor | None) -> str:
    """A reason when 16-bit ``actual`` is further from the float64 ``precise``
    result than eager's ``expected`` by more than :data:`PRECISION_FACTOR`
    (L2 norms over the elements finite in all three); "" otherwise, and when
    ``precise`` is None."""
    if precise is None or not isinstance(actual, Tensor) or actual.shape != precise.shape:
        return ""
    a, e, hi = actual.double(), expected.double(), precise.to(actual.device)
    finite = torch.isfinite(a) & torch.isfinite(e) & torch.isfinite(hi)
    zero = torch.zeros((), dtype=torch.float64, device=a.device)
    err_a = float(torch.linalg.vector_norm(torch.where(finite, a - hi, zero)))
    err_e = float(torch.linalg.vector_norm(torch.where(finite, e - hi, zero)))
    norm = float(torch.linalg.vector_norm(torch.where(finite, hi, zero)))
    bound = PRECISION_FACTOR * err_e + PRECISION_FLOOR * norm
    if err_a > bound:
        return (
            f"{where}: {str(actual.dtype).removeprefix('torch.')} result is {err_a / max(err_e, 1e-300):.2f}x as far from a float64 "
            f"reference as eager's (L2 error {err_a:.3g} vs {err_e:.3g}; allowed {PRECISION_FACTOR}x + {PRECISION_FLOOR:g} of the norm): "
            "round to nearest even when converting to 16 bits"
        )
    return ""


def _returned_other_buffers(returned: object, out: list[Tensor]) -> str:
    """A reason when the candidate did not return the buffers it was given."""
    if not isinstance(returned, (list, tuple)) or len(returned) != len(out):
        count = len(returned) if isinstance(returned, (list, tuple)) else type(returned).__name__
        return f"candidate returned {count} outputs, expected the {len(out)} preallocated buffers"
    for index, (got, buf) in enumerate(zip(returned, out)):
        same = isinstance(got, Tensor) and got.data_ptr() == buf.data_ptr() and got.shape == buf.shape
        if not same:
            return f"output {index}: candidate returned a new tensor instead of writing into the preallocated output"
    return ""


def _synchronize(tensors: Sequence[Tensor]) -> None:
    """Wait for queued GPU work so asynchronous kernel errors surface here."""
    if any(t.is_cuda for t in tensors):
        torch.cuda.synchronize()


def _describe_exception(exc: BaseException) -> str:
    """``Name: first line of the message`` (at most 300 characters)."""
    message = str(exc).strip().splitlines()
    first = message[0] if message else ""
    text = f"{type(exc).__name__}: {first}" if first else type(exc).__name__
    return text if len(text) <= 300 else text[:297] + "..."


# --------------------------------------------------------------------------
# python -m lego_core.judge.verify
# --------------------------------------------------------------------------


def _demo() -> None:
    """Verify a correct and a broken candidate of ``relu(x) + 1``."""

    def ref(inputs: list[Tensor]) -> list[Tensor]:
        return [torch.relu(inputs[0]) + 1]

    def good(inputs: list[Tensor], out: list[Tensor] | None) -> list[Tensor]:
        out = out or [torch.empty_like(inputs[0])]
        out[0].copy_(inputs[0].clamp_min(0) + 1)
        return out

    def bad(inputs: list[Tensor], out: list[Tensor] | None) -> list[Tensor]:
        out = out or [torch.empty_like(inputs[0])]
        out[0][1:].copy_(inputs[0][1:].clamp_min(0) + 1)  # forgets row 0
        return out

    seeds = [101, 202, 303]
    sets = [[torch.randn(4, 8, generator=torch.Generator().manual_seed(s))] for s in seeds]
    for name, candidate in (("good", good), ("bad", bad)):  # PyTorch stand-ins for kernels: no call trace
        print(name, verify(candidate, ref, sets, "fp32", seeds, trace=False))


if __name__ == "__main__":
    _demo()
