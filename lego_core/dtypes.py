"""Dtype names: ``as_dtype("bf16") -> torch.bfloat16``, shared by every module."""
from __future__ import annotations

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
