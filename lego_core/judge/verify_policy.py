"""What a candidate may do while it runs: the judge's reading of a call trace.

``lego_core.judge.verify_trace.CallTrace`` records what one candidate call did (ATen
ops, Triton launches, the dtypes and precision of every ``tl.dot``, global
state, files, replaced functions) as plain data; :func:`trace_problem` turns
that summary into a reason to reject, or ``""``.  The mechanism (the trace) can run wherever the candidate runs;
this policy runs where the reference is.

Outside its Triton kernels a candidate may allocate, view, copy and fill
tensors (:data:`HOST_OPS`), plus the ops its sub-problem hands to the library
on purpose (a ``conv_bn`` group's convolution: ``FusionGroup.library_ops``).
Any other ATen op is compute done by PyTorch, whatever Python spelling
produced it.

Precision (:func:`dot_problem`, issue 27).  Every ``tl.dot`` a candidate
runs is checked against the problem's dtype: its operands may not be less
precise than the problem's dtype, in mantissa bits or in exponent range
(an fp32 problem: no fp16, bf16 or fp8 operand, no TF32 nor BF16x3 on fp32
operands; a bf16 problem: no fp16 (range) or fp8 operand; an fp16 problem:
no bf16 (mantissa) or fp8 operand), and a float dot accumulates in at least
fp32.  A candidate that splits fp32 operands into fp16 hi/lo parts and sums
three fp16 dots is as accurate as fp32 on N(0, 1) data and overflows past
65504.  A dtype the region itself holds (an fp32 model's region that casts
to fp16 and multiplies there, an int8 region) is allowed; integer dots are
allowed only then.

Op facts (which ops host code may run) come from the op registry,
``lego_core.ops``.
"""
from __future__ import annotations

import hmac
import secrets
from collections.abc import Iterable, Sequence

import torch

from lego_core import ops
from lego_core.dtypes import as_dtype
from lego_core.judge.static_check import op_base_name

# ATen ops host code may run (names as ``static_check.op_base_name`` gives
# them): allocation, copies and fills, views and layout, reading a handful of
# scalars (sizes, flags) back to the host, testing a mask's structure (the
# attention template's "is this the causal mask?"): ``Op.host_run``.
HOST_OPS = ops.host_names(run=True)
# Host ops that compute something a region may itself be made of: allowed
# only when the region does not hold them (equal, triu, tril: ``Op.mask_test``).
MASK_OPS = ops.host_names(mask_test=True)

# More scalars read back to the host than this per call is the work done in Python.
# A kernel file reads a handful legitimately (a 0-d scale or eps tensor, a flag);
# the allowance is a bound on work done in Python, not a defence against a
# kernel that samples its input to decide what to compute: a few samples (or
# ``.tolist()``, which reads on the CPU without an ATen op) are enough for
# that, and no count tells a sample from a scale.  What catches such a branch
# is data it did not expect: the input sets of other distributions
# (``lego_core.judge.inputs.DISTRIBUTIONS``: scaled, shifted, uniform,
# positive), a different mix per run.
MAX_HOST_SCALARS = 64


def trace_problem(summary: dict, *, library_ops: Sequence[str] = (), region_ops: Sequence[str] = (), fp32: bool = False,
                  dtype=None, region_dtypes: Iterable = ()) -> str:
    """A one-line reason why the traced call is not acceptable, or ``""``.

    ``summary``: ``CallTrace.summary()``.  ``library_ops``: ATen ops the
    sub-problem hands to the library on purpose (allowed).  ``region_ops``:
    the region's own ATen ops; a structural op in :data:`HOST_OPS`
    (:data:`MASK_OPS`) is not allowed when the region itself computes it.
    ``dtype``: the problem's compute dtype (a torch dtype or a name,
    ``"fp32"``; None: not checked), against which every ``tl.dot`` of the
    summary's ``dots`` is judged (:func:`dot_problem`); ``fp32=True`` is the
    older spelling of ``dtype=torch.float32``.  ``region_dtypes``: dtypes
    (torch dtypes or names) the region's own values hold, which a dot may
    use whatever the problem's dtype.
    The rules, in order: global state changed; torch or lego_core functions
    replaced; files written or processes started; PyTorch compute outside
    Triton kernels; too many scalars read to the host; no Triton kernel ran;
    a launch on another CUDA stream; a ``tl.dot`` less precise than the
    problem (TF32 on fp32 operands, narrower operands, a narrow accumulator)."""
    changes = summary.get("state_changes") or {}
    if changes:
        name, (before, after) = next(iter(changes.items()))
        more = f" (and {len(changes) - 1} more)" if len(changes) > 1 else ""
        return f"changed global torch state: {name} {before!r} -> {after!r}{more}; a kernel must leave flags, default dtype and RNG as it found them"
    if summary.get("replaced"):
        return f"replaced {', '.join(summary['replaced'][:3])} while running; a candidate must not patch PyTorch or the verifier"
    if summary.get("writes"):
        return f"wrote files while running ({summary['writes'][0]}); a kernel call must not touch the file system"
    if summary.get("processes"):
        return f"started a process or loaded a library while running ({summary['processes'][0]})"
    region = {op_base_name(op) for op in region_ops}
    allowed = (HOST_OPS - (MASK_OPS & region)) | {op_base_name(op) for op in library_ops}
    ops = summary.get("ops") or {}
    compute = sorted(op for op in ops if op_base_name(op) not in allowed)
    if compute:
        listed = ", ".join(compute[:4]) + (f" and {len(compute) - 4} more" if len(compute) > 4 else "")
        return f"ran PyTorch compute outside Triton kernels: {listed} (host code may only allocate, view, copy and fill)"
    scalars = sum(n for op, n in ops.items() if op_base_name(op) == "local_scalar_dense")
    if scalars > MAX_HOST_SCALARS:
        return f"read {scalars} scalars back to the host in one call (.item()): the work must run in Triton kernels"
    if not summary.get("launches"):
        return "no Triton kernel ran during the call"
    if summary.get("foreign_streams"):
        return "launched a Triton kernel on a CUDA stream other than the caller's current stream (its time escapes the measurement)"
    if dtype is None and fp32:
        dtype = torch.float32
    if dtype is not None:
        return dot_problem(summary, dtype, region_dtypes)
    return ""


# --------------------------------------------------------------------------
# Precision of tl.dot
# --------------------------------------------------------------------------

# (mantissa bits, exponent bits) of what a dot multiplies: an operand dtype, or
# fp32 operands at a reduced input precision (TF32 keeps 10 mantissa bits;
# BF16x3 about 16, three bf16 products; TF32x3 and BF16x6 count as fp32's 23:
# their error is within fp32's tolerance, ``lego_core.dtypes``).
_FORMATS = {
    "float64": (52, 11), "float32": (23, 8), "tfloat32": (10, 8), "bfloat16": (7, 8), "float16": (10, 5),
    "float8_e4m3fn": (3, 4), "float8_e4m3fnuz": (3, 4), "float8_e5m2": (2, 5), "float8_e5m2fnuz": (2, 5),
    "float8_e4b15": (3, 4), "e4m3": (3, 4), "e5m2": (2, 5), "e2m3": (3, 2), "e3m2": (2, 3), "e2m1": (1, 2),
}  # fmt: skip
_FP32_AT = {"ieee": (23, 8), "tf32x3": (23, 8), "bf16x6": (23, 8), "bf16x3": (16, 8), "tf32": (10, 8)}
_INTEGERS = {"int8", "uint8", "int16", "int32", "int64"}
_FIX = {
    "float32": 'compute the dot in float32 with input_precision="ieee"',
    "bfloat16": "load the operands as bfloat16 (or float32) and accumulate in float32",
    "float16": "load the operands as float16 (or float32) and accumulate in float32",
    "float64": "compute the dot in float64",
}


def _dtype_name(dtype) -> str:
    """Torch's spelling (``float32``) of a torch dtype or a name (``"fp32"``)."""
    if isinstance(dtype, str) and (dtype in _FORMATS or dtype in _INTEGERS):
        return dtype
    try:
        return str(as_dtype(dtype)).removeprefix("torch.")
    except (ValueError, TypeError):
        return str(dtype).removeprefix("torch.")


def _multiplied(record: dict, operand: str) -> tuple[int, int] | None:
    """(mantissa, exponent) bits a dot multiplies operand ``operand`` ("a"/"b") at."""
    name = record.get(operand, "?")
    if name == "float32":
        return _FP32_AT.get(record.get("precision", "ieee"), _FORMATS["float32"])
    return _FORMATS.get(name)


def dot_problem(summary: dict, dtype, region_dtypes: Iterable = ()) -> str:
    """A one-line reason why a ``tl.dot`` of the traced call is less precise
    than a problem of ``dtype`` allows, or ``""``.

    ``summary``: ``CallTrace.summary()``; its ``dots`` (``verify_trace.dot_record``:
    kernel, operand dtypes ``a`` / ``b``, accumulator dtype ``acc``,
    ``precision``) are judged, or with none recorded its ``tf32_dots``.
    ``dtype``: the problem's dtype (a torch dtype or ``"fp32"``, ``"bf16"``,
    ``"fp16"``); an integer problem's dots are not judged.
    ``region_dtypes``: dtypes the region's own values hold: a dot in one of
    those is what the reference does (an fp32 model's region that casts to
    fp16), as is an integer dot of such a region.

    Refused: an operand multiplied with fewer mantissa bits or a narrower
    exponent range than ``dtype`` has (an fp32 problem: float16, bfloat16,
    fp8 operands, fp32 operands in TF32 or BF16x3; bf16: float16 (range
    65504) and fp8; fp16: bfloat16 (8 mantissa bits) and fp8) unless the
    region holds that dtype itself, a float dot that accumulates in fewer
    than fp32's bits (eager accumulates 16-bit products in fp32), a
    microscaled ``tl.dot_scaled``, and an integer dot outside an integer
    region.  The reason names the kernel, the dtypes and the fix."""
    problem = _dtype_name(dtype)
    if problem not in _FORMATS:
        return ""  # an integer (or unknown) problem dtype: nothing to compare dots with
    own = {_dtype_name(d) for d in region_dtypes}
    want = _FORMATS[problem]
    dots = list(summary.get("dots") or ())
    if not dots:  # a summary from before dot records: the TF32 kernels only
        dots = [{"kernel": k, "a": "float32", "b": "float32", "acc": "float32", "precision": "tf32"} for k in summary.get("tf32_dots") or ()]
    fix = _FIX.get(problem, f"compute the dot in {problem}")
    for dot in dots:
        kernel, a, b, acc = dot.get("kernel", "kernel"), dot.get("a", "?"), dot.get("b", "?"), dot.get("acc", "?")
        if dot.get("scaled"):
            return f"tl.dot_scaled on {a} x {b} operands in kernel {kernel} for a {problem} problem: {fix}"
        if a in _INTEGERS or b in _INTEGERS:
            if a in own and b in own:
                continue
            return (f"tl.dot on {a} operands in kernel {kernel} for a {problem} problem (integer operands the region does not hold: "
                    f"its values quantised): {fix}")
        if problem == "float32" and (a, b) == ("float32", "float32") and dot.get("precision") == "tf32":
            return (f"tl.dot on fp32 operands in TF32 in kernel {kernel}: a float32 problem needs input_precision=\"ieee\" "
                    "(TF32 rounds operands to 10 mantissa bits)")
        for name, operand in ((a, "a"), (b, "b")):
            bits = _multiplied(dot, operand)
            if bits is None or (name in own and name != "float32"):  # fp32 in the region says nothing of TF32
                continue
            if bits[0] < want[0] or bits[1] < want[1]:
                shown = name if name != "float32" else f"float32 ({dot.get('precision')})"
                return f"tl.dot on {shown} operands in kernel {kernel} for a {problem} problem: {fix}"
        acc_bits = _FORMATS.get(acc)
        if acc_bits is not None and acc_bits[0] < _FORMATS["float32"][0]:  # eager accumulates 16-bit products in fp32 too
            return f"tl.dot accumulates in {acc} in kernel {kernel} for a {problem} problem: accumulate in float32 (out_dtype=tl.float32, the default)"
    return ""


def import_problem(summary: dict) -> str:
    """A reason why importing a candidate file is not acceptable (the import's
    ``CallTrace`` summary, ops not recorded), or ``""``."""
    changes = summary.get("state_changes") or {}
    if changes:
        name, (before, after) = next(iter(changes.items()))
        return f"importing it changed global torch state: {name} {before!r} -> {after!r}"
    if summary.get("replaced"):
        return f"importing it replaced {', '.join(summary['replaced'][:3])}; a kernel file must not patch PyTorch or the verifier"
    if summary.get("writes"):
        return f"importing it wrote files ({summary['writes'][0]})"
    if summary.get("processes"):
        return f"importing it started a process or loaded a library ({summary['processes'][0]})"
    return ""


# --------------------------------------------------------------------------
# Seeds
# --------------------------------------------------------------------------

_LABEL_KEY = secrets.token_bytes(16)  # per process: labels cannot be inverted to seeds


def seed_label(seed: int) -> str:
    """A one-way label for ``seed`` (8 hex digits of an HMAC with a key of this
    process): failure messages name input sets by label, so an agent that
    reads them learns nothing about the seeds still in use.  ``report.json``
    lists each seed with its label after the run."""
    return hmac.new(_LABEL_KEY, str(int(seed)).encode(), "sha256").hexdigest()[:8]


def seeds_record(config) -> dict:
    """``report.json["verification"]``: the run's seeds, now that no candidate
    is checked on them any more, each with the label messages used."""
    return {
        "seeds": list(config.verify_seeds),
        "labels": [seed_label(s) for s in config.verify_seeds],
        "drawn": bool(getattr(config, "seeds_drawn", False)),
        "e2e_seed": config.e2e_seed,
    }
