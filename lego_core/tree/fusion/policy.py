"""Fusion policy: which ATen ops are pointwise, reductions, layout or heavy.

This is the one place that says what may fuse with what; ``groups.py`` is
the mechanism that applies it (the torch.fx partitioner's split between a
support policy and the partitioner).  Categories:

- ``pointwise``: elementwise ops the template agent can generate (with
  broadcasting); they fuse into chains and into reduction prologues and
  epilogues.
- ``reduction``: reductions over the last dimension (row reductions) and the
  composite row ops that core ATen keeps whole (softmax, log_softmax,
  layer_norm).
- ``layout``: metadata-only ops (views, permutes, slices). They move no
  bytes and always stay library calls.
- channel affine (counted as ``pointwise``): eval BatchNorm
  (``_native_batch_norm_legit_no_training``), whose output 0 is
  ``(x - mean) * rsqrt(var + eps) * weight + bias`` with the [C] statistics
  and affine parameters indexed by dim 1 of x; its other outputs are empty in
  eval mode and must be unused (``is_channel_affine``).  Not in row groups.
- ``heavy``: everything else (GEMM, conv, LSTM pieces, topk, scatter, cat,
  cumsum, factories); each is its own fusion group and stays a library call
  in this version.

The op facts (which overloads are pointwise, reductions, layout, channel
affine) come from the op registry, ``lego_core.ops`` (``Op.fuse``); this
module adds the per-node conditions (dtypes, arguments, row length).
"""
from __future__ import annotations

import torch.fx as fx

from lego_core import ops
from lego_core.load.capture import op_name, value_info

# The op sets come from the op registry (``lego_core.ops``: ``Op.fuse``).
POINTWISE_OPS = ops.fusion_overloads("pointwise")
# Reductions over the last dimension (checked per node by ``is_row_reduction``).
REDUCTION_OPS = ops.fusion_overloads("reduction")
LAYOUT_OPS = ops.fusion_overloads("layout")
# Tuple-returning ops whose output 0 is a per-channel affine of args[0]
# (channel = dim 1); args 1..4 are weight, bias (optional), mean, var, all [C].
CHANNEL_AFFINE_OPS = ops.fusion_overloads("channel_affine")
# The row softmaxes (x, dim, half_to_float) among the reductions.
SOFTMAX_OPS = ops.softmax_overloads()

FLOAT_OR_BOOL = ("float", "bfloat16", "half", "bool")
MAX_ROW_LENGTH = 32768  # one row must fit one program's registers


def category(node: fx.Node) -> str:
    """``pointwise``, ``reduction``, ``layout`` or ``heavy`` for a call_function node."""
    name = op_name(node)
    if name == "getitem":
        return "getitem"
    if name in LAYOUT_OPS:
        return "layout"
    if name in POINTWISE_OPS and _fusable_dtypes(node) and _supported_pointwise(node):
        return "pointwise"
    if name in CHANNEL_AFFINE_OPS and is_channel_affine(node):
        return "pointwise"
    if name in REDUCTION_OPS and _fusable_dtypes(node) and is_row_reduction(node):
        return "reduction"
    return "heavy"


def is_channel_affine(node: fx.Node) -> bool:
    """True for an eval BatchNorm node the pointwise template can generate:
    x of rank >= 2 (float), mean and var (and weight / bias when given) float
    tensors of shape [C] with C = x.shape[1], only output 0 used (getitems of
    index 0), and float eps.  Source: ATen's batch_norm inference formula
    (aten/src/ATen/native/Normalization.cpp)."""
    if op_name(node) not in CHANNEL_AFFINE_OPS or len(node.args) < 7 or not isinstance(node.args[6], (int, float)):
        return False
    x = value_info(node.args[0]) if isinstance(node.args[0], fx.Node) else None
    if x is None or len(x.shape) < 2 or not x.dtype.is_floating_point:
        return False
    for k, arg in enumerate(node.args[1:5], start=1):
        if arg is None and k in (1, 2):
            continue
        info = value_info(arg) if isinstance(arg, fx.Node) else None
        if info is None or info.shape != (x.shape[1],) or not info.dtype.is_floating_point:
            return False
    return all(op_name(u) == "getitem" and u.args[1] == 0 for u in node.users)


def channel_operands(node: fx.Node) -> list[fx.Node]:
    """The [C] tensors a channel-affine node reads along dim 1 of its input."""
    return [a for a in node.args[1:5] if isinstance(a, fx.Node)]


def _fusable_dtypes(node: fx.Node) -> bool:
    """Generated kernels compute in fp32 on float and bool values only."""
    vals = [node] + [a for a in node.all_input_nodes]
    for v in vals:
        info = value_info(v)
        if v is node and info is None and op_name(node) in ("aten.native_layer_norm.default",):
            continue
        if info is None or not str(info.dtype).removeprefix("torch.").startswith(FLOAT_OR_BOOL):
            return False
    return True


def _supported_pointwise(node: fx.Node) -> bool:
    name = op_name(node)
    if name in ("aten.div.Tensor", "aten.div.Scalar") and node.kwargs.get("rounding_mode") is not None:
        return False
    if name == "aten.pow.Tensor_Scalar":
        return node.args[1] in ops.POW_EXPONENTS
    if name == "aten._to_copy.default":
        extra = set(node.kwargs) - {"dtype", "layout", "device"}
        return not extra and node.kwargs.get("dtype") is not None
    if name in ("aten.add.Tensor", "aten.sub.Tensor") and len(node.args) > 2:
        return False
    return True


def reduction_dims(node: fx.Node) -> list[int] | None:
    """The dimensions a reduction reduces over (normalized to >= 0)."""
    name = op_name(node)
    x = node.args[0]
    rank = len(value_info(x).shape) if value_info(x) else 0
    if name in SOFTMAX_OPS:
        dims = [node.args[1]]
    elif name == "aten.native_layer_norm.default":
        dims = list(range(rank - len(node.args[1]), rank))
    else:
        dims = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")
        if dims is None:
            return None
        dims = [dims] if isinstance(dims, int) else list(dims)
    return sorted(d % rank for d in dims) if rank else None


def is_row_reduction(node: fx.Node) -> bool:
    """True when the node reduces exactly the last dimension of its input,
    the row is short enough for one program, and the op has no options the
    template does not implement (dtype arguments, half_to_float)."""
    info = value_info(node.args[0])
    if info is None or not info.shape:
        return False
    dims = reduction_dims(node)
    if dims != [len(info.shape) - 1] or info.shape[-1] > MAX_ROW_LENGTH:
        return False
    name = op_name(node)
    if name in SOFTMAX_OPS and node.args[2]:
        return False
    if name in ("aten.sum.dim_IntList", "aten.mean.dim") and node.kwargs.get("dtype") is not None:
        return False
    return True


def keepdim(node: fx.Node) -> bool:
    """Whether a sum/mean/amax/amin keeps the reduced dimension."""
    if len(node.args) > 2:
        return bool(node.args[2])
    return bool(node.kwargs.get("keepdim", False))
