"""Conv + eval BatchNorm groups: BatchNorm folded into a library convolution.

An eval BatchNorm right after a convolution is an affine map per output
channel, so it can be folded into the convolution's weights (Ioffe &
Szegedy 2015; PyTorch's ``torch.nn.utils.fusion.fuse_conv_bn_weights``):

    s  = gamma * rsqrt(running_var + eps)            per out-channel, [C_out]
    W' = W * s[:, None, None, ...]                   (weight [C_out, C_in/g, k...])
    b' = (b - running_mean) * s + beta               (b = 0 without a conv bias)

A ``conv_bn`` group is the conv, the BN, the BN's ``getitem(·, 0)`` and an
optional pointwise *tail* (activation, residual add ...) that reads the BN
output.  Its kernel file (``agents.template.conv_codegen``) folds W' and b'
from the live tensors it is given (a weight-sized Triton kernel, cached per
source tensor version), runs ONE library convolution (cuDNN on a GPU) and the
tail as one generated pointwise kernel.

When it pays (bytes moved; y = the conv output): conv + BN alone moves
|x| + |W| + 3|y| (conv writes y, BN reads y and writes it again); folded,
|x| + |W| + |y|.  With a tail after the BN, conv + one fused (BN + tail)
kernel and folded conv + tail kernel both move |x| + |W| + 3|y| (+ the
tail's other operands): the same, so the search (which measures on a GPU)
decides; the cost model prices the tail's round trip of y
(``intermediate_bytes``).

Rules (``nodes`` in topological order):

1. ``nodes[0]`` is ``aten.convolution.default``, not transposed, with a
   float weight of rank >= 3 (``[C_out, C_in/groups, k...]``) and an optional
   [C_out] bias.
2. ``nodes[1]`` is an eval BatchNorm (``policy.is_channel_affine``) of the
   conv's output, and the conv output has no other reader (nor is it a
   model output): the folded conv no longer produces it.
3. ``nodes[2]`` is ``getitem(bn, 0)``.
4. The remaining nodes (possibly none) form exactly one pointwise fusion
   group (``groups.partition``) that reads the BN output.
"""
from __future__ import annotations

import torch.fx as fx

from lego_core.load.capture import op_name, value_info
from lego_core.tree.fusion import policy
from lego_core.tree.fusion.groups import FusionGroup, partition

CONV_OP = "aten.convolution.default"


def conv_bn_group(nodes: list[fx.Node]) -> tuple[FusionGroup | None, str]:
    """The ``conv_bn`` FusionGroup of ``nodes`` or ``(None, reason)`` (rules above).

    The group's ``shape`` is the conv output's, ``library_ops`` is
    ``("aten.convolution.default",)`` (the op its kernel file hands to the
    library on purpose) and ``roles`` those of the tail group (empty without
    a tail).
    """
    if len(nodes) < 3:
        return None, "a conv + BatchNorm group needs the conv, the BatchNorm and its getitem"
    conv, bn, item, tail = nodes[0], nodes[1], nodes[2], list(nodes[3:])
    reason = conv_reason(conv)
    if reason:
        return None, reason
    if not policy.is_channel_affine(bn) or bn.args[0] is not conv:
        return None, f"{bn.name} ({op_name(bn)}) is not an eval BatchNorm of {conv.name}"
    if len(conv.users) != 1:
        return None, f"{conv.name} is read by {len(conv.users)} nodes; a folded conv no longer produces the un-normalised value"
    if op_name(item) != "getitem" or item.args[0] is not bn or item.args[1] != 0:
        return None, f"{item.name} is not getitem({bn.name}, 0)"
    roles: dict = {}
    if tail:
        groups = partition(tail)
        if len(groups) != 1 or groups[0].kind != "pointwise" or not groups[0].fusable:
            return None, "the nodes after the BatchNorm do not form one pointwise group"
        if not any(item in n.all_input_nodes for n in tail):
            return None, "the pointwise tail does not read the BatchNorm output"
        if groups[0].shape != value_info(conv).shape:
            return None, f"the tail's iteration shape {list(groups[0].shape)} is not the conv output's"
        roles = groups[0].roles
    return FusionGroup(list(nodes), "conv_bn", shape=tuple(value_info(conv).shape), roles=roles, library_ops=(CONV_OP,)), ""


def conv_reason(conv: fx.Node) -> str:
    """Why ``conv`` cannot head a conv + BatchNorm group (rule 1), or ``""``."""
    if conv.op != "call_function" or op_name(conv) != CONV_OP:
        return f"{conv.name} is not aten.convolution"
    if len(conv.args) < 9 or conv.args[6]:
        return f"{conv.name} is a transposed convolution; its weight is [C_in, C_out/g, k...] and is not folded"
    weight = value_info(conv.args[1]) if isinstance(conv.args[1], fx.Node) else None
    out = value_info(conv)
    if weight is None or out is None or len(weight.shape) < 3 or not weight.dtype.is_floating_point:
        return f"{conv.name}: the weight is not a float tensor [C_out, C_in/groups, k...]"
    bias = conv.args[2]
    if bias is not None and (not isinstance(bias, fx.Node) or value_info(bias) is None or value_info(bias).shape != weight.shape[:1]):
        return f"{conv.name}: the bias is not a [C_out] tensor"
    return ""


def intermediate_bytes(group: FusionGroup) -> int:
    """Bytes the kernel file moves beyond its boundary: with a tail, the
    conv writes y and the tail reads it back (2 |y|); without one, 0."""
    if len(group.nodes) <= 3:
        return 0
    info = value_info(group.nodes[0])
    return 2 * info.nbytes
