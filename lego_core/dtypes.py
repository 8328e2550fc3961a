"""Dtype facts shared by every stage: names (``as_dtype("bf16") -> torch.bfloat16``)
and the tolerance an output of each dtype is judged with (``tolerances``: the
loader's fast-path check, the verifier, each kernel's shipped test)."""
from __future__ import annotations

import dataclasses

import torch

_DTYPE_NAMES: dict[str, torch.dtype] = {
    "fp64": torch.float64, "float64": torch.float64, "double": torch.float64,
    "fp32": torch.float32, "float32": torch.float32, "float": torch.float32,
    "fp16": torch.float16, "float16": torch.float16, "half": torch.float16,
    "bf16": torch.bfloat16, "bfloat16": torch.bfloat16,
}  # fmt: skip


def as_dtype(dtype: torch.dtype | str) -> torch.dtype:
    """``torch.float32`` from a torch dtype or a name (``"fp32"``, ``"bf16"``,
    ``"float16"``, ``"torch.int64"``...).  Raises ``ValueError`` if unknown."""
    if isinstance(dtype, torch.dtype):
        return dtype
    name = str(dtype).strip().lower().removeprefix("torch.")
    if name in _DTYPE_NAMES:
        return _DTYPE_NAMES[name]
    found = getattr(torch, name, None)
    if isinstance(found, torch.dtype):
        return found
    raise ValueError(f"unknown dtype {dtype!r}: use a torch.dtype or one of fp32, bf16, fp16")


# --------------------------------------------------------------------------
# Tolerances: how far an output of each dtype may be from the reference
# --------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Tolerance:
    """Acceptance thresholds for one output dtype.

    ``atol`` and ``rtol`` bound every element:
    ``|a - e| <= max(atol * scale, abs_floor) + rtol * |e|`` where ``scale``
    is ``max(floor, rms(e))``, the reference's root-mean-square magnitude
    (``floor`` 1, or the magnitude of an input set drawn at another scale:
    ``lego_core.judge.inputs.DISTRIBUTIONS``).  ``norm_rel`` bounds the whole
    tensor: ``||a - e||_2 / ||e||_2``.  All three are 0 for integer and bool
    outputs, which must match exactly.  ``abs_floor`` (output units; 0 in
    the tables below) is an absolute allowance per element that an edge
    set's tolerance derives from eager's own error there
    (``lego_core.judge.verify.edge_tolerances``).
    """

    atol: float
    rtol: float
    norm_rel: float
    abs_floor: float = 0.0

    @property
    def exact(self) -> bool:
        """True when every element must match bit for bit (ints, bools)."""
        return self.atol == 0.0 and self.rtol == 0.0 and self.norm_rel == 0.0 and self.abs_floor == 0.0


# Why these numbers.  A fused kernel legitimately differs from eager PyTorch
# in the order of its additions, in where it rounds intermediates to the
# storage dtype, and in fast-math approximations of exp/rsqrt.  The unit
# roundoff u is 2^-24 (fp32), 2^-11 (fp16), 2^-8 (bf16); one ulp of relative
# difference in the final rounding is 2u.
#  * fp32: reordering a length-K sum costs about sqrt(K)*u relative in norm
#    (K = 4096: ~4e-6), so 1e-5 norm-relative passes honest kernels and fails
#    TF32 matmuls (~5e-4): an fp32 region must use input_precision="ieee" or
#    "tf32x3".  Elementwise 1e-4 leaves room for single elements near
#    cancellation.
#  * bf16: outputs differ by one or two ulps (2u = 7.8e-3) after rounding,
#    so 2e-2 elementwise; RMS error of correct kernels is ~u to 2u, so 1e-2
#    norm-relative still catches a wrong term (a missing bias, a skipped
#    block) whose contribution exceeds 1%.
#  * fp16: 2u = 9.8e-4, so 5e-3 elementwise (~5 ulps) and 2e-3 in norm.
#  * fp64 is here for completeness (references computed in double).
# atol is scaled by the reference's RMS magnitude (at least 1).  Measured on
# an H200: an IEEE-fp32 Triton GEMM with K = 4096 differs from cuBLAS by up
# to 3.5e-4 on elements near cancellation (-0.02485 vs -0.02450, while the
# output's RMS is ~64): a fixed atol of 1e-4 rejected a correct kernel.  The
# rounding error of a sum scales with the magnitude of its terms, not of its
# result, so the absolute slack must scale with the data; an element wrong
# by a fraction 1e-4 of the typical output magnitude still fails.
#  * fp8 outputs: 2u is 0.25 (e4m3) and 0.5 (e5m2); accepted loosely.
_FLOAT_TOLERANCES: dict[torch.dtype, Tolerance] = {
    torch.float64: Tolerance(atol=1e-7, rtol=1e-7, norm_rel=1e-9),
    torch.float32: Tolerance(atol=1e-4, rtol=1e-4, norm_rel=1e-5),
    torch.float16: Tolerance(atol=5e-3, rtol=5e-3, norm_rel=2e-3),
    torch.bfloat16: Tolerance(atol=2e-2, rtol=2e-2, norm_rel=1e-2),
}
for _name, _tol in (("float8_e4m3fn", Tolerance(0.125, 0.25, 0.1)), ("float8_e5m2", Tolerance(0.25, 0.5, 0.2))):
    if hasattr(torch, _name):
        _FLOAT_TOLERANCES[getattr(torch, _name)] = _tol

EXACT = Tolerance(atol=0.0, rtol=0.0, norm_rel=0.0)


def tolerances(dtype: torch.dtype | str) -> Tolerance:
    """Tolerance for outputs of ``dtype`` (torch dtype or ``"fp32"`` etc.).

    Floating dtypes get the table above; integer, unsigned and bool dtypes get
    :data:`EXACT`.  Raises ``ValueError`` for a dtype with no rule (complex
    dtypes are compared through their real part's dtype).
    """
    dtype = as_dtype(dtype)
    if dtype.is_complex:
        return tolerances(dtype.to_real())
    if dtype in _FLOAT_TOLERANCES:
        return _FLOAT_TOLERANCES[dtype]
    if dtype == torch.bool or not dtype.is_floating_point:
        return EXACT
    raise ValueError(f"no tolerance rule for dtype {dtype}")
