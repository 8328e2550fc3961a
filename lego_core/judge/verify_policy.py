"""What a candidate may do while it runs: the judge's reading of a call trace.

``lego_core.judge.verify_trace.CallTrace`` records what one candidate call did (ATen
ops, Triton launches, TF32 dots, global state, files, replaced functions) as
plain data; :func:`trace_problem` turns that summary into a reason to reject,
or ``""``.  The mechanism (the trace) can run wherever the candidate runs;
this policy runs where the reference is.

Outside its Triton kernels a candidate may allocate, view, copy and fill
tensors (:data:`HOST_OPS`), plus the ops its sub-problem hands to the library
on purpose (a ``conv_bn`` group's convolution: ``FusionGroup.library_ops``).
Any other ATen op is compute done by PyTorch, whatever Python spelling
produced it.

Op facts (which ops host code may run) come from the op registry,
``lego_core.ops``.
"""
from __future__ import annotations

import hmac
import secrets
from collections.abc import Sequence

from lego_core import ops
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
MAX_HOST_SCALARS = 64


def trace_problem(summary: dict, *, library_ops: Sequence[str] = (), region_ops: Sequence[str] = (), fp32: bool = False) -> str:
    """A one-line reason why the traced call is not acceptable, or ``""``.

    ``summary``: ``CallTrace.summary()``.  ``library_ops``: ATen ops the
    sub-problem hands to the library on purpose (allowed).  ``region_ops``:
    the region's own ATen ops; a structural op in :data:`HOST_OPS`
    (:data:`MASK_OPS`) is not allowed when the region itself computes it.
    ``fp32``: the problem is fp32, so a TF32 ``tl.dot`` is not acceptable.
    The rules, in order: global state changed; torch or lego_core functions
    replaced; files written or processes started; PyTorch compute outside
    Triton kernels; too many scalars read to the host; no Triton kernel ran;
    a launch on another CUDA stream; TF32 on fp32 operands."""
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
    if fp32 and summary.get("tf32_dots"):
        return (f"tl.dot on fp32 operands in TF32 in {', '.join(summary['tf32_dots'])}: an fp32 problem needs "
                'input_precision="ieee" (TF32 rounds operands to 10 mantissa bits)')
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
