"""Sequence-mixer groups: a depthwise 1-D convolution over time, and a scan (cumsum).

Two fusion group kinds that replace library calls which are slow on
strided operands (cuDNN's depthwise conv1d, ``cumsum`` over a
non-contiguous dim) with one generated kernel each, pointwise ops fused:

``depthwise_conv1d``: ``nodes`` in topological order hold

1. ``aten.convolution.default`` with x of shape [B, C, T_in] (any strides:
   a transposed view of [B, T, C] needs no copy), weight [C, 1, K] with
   K <= ``MAX_KERNEL``, groups == C, stride 1, dilation 1, not transposed,
   any zero padding p, optional [C] bias; float dtypes;
2. optionally ``aten.slice.Tensor`` of the conv output over dim 2 with step
   1 (``[..., :t]`` makes a padded conv causal), when the conv has no other
   reader;
3. optionally ``aten.permute.default(·, [0, 2, 1])`` (the transpose back to
   [B, T, C]), when the slice (or conv) has no other reader;
4. a pointwise *tail* (possibly empty; every other node): ops of ``policy.category``
   ``pointwise`` (no eval BatchNorm) whose values broadcast to the view's
   shape S and whose tensor inputs from outside broadcast to S.

``scan``: exactly one ``aten.cumsum.default`` (no dtype argument) over any
dim of its input, with S its shape, plus pointwise ops (the rules of 4.):
those before it in ``nodes`` are its *prologue*, those after its
*epilogue*.

In both, every value the group hands outside (read by a node outside, or a
graph output) has shape S, and no input of a member may depend on a member
(no cycles).  ``find_sequence_groups`` forms the groups of a region: each
head (conv, cumsum), then greedily the pointwise consumers that read the
group, then the pointwise producers all of whose readers are in the group
(per-channel factors such as ``exp(-decay * steps)``).  A conv's tail stops
before a value a cumsum reads: that is the scan's prologue (so the scan also
takes the factors it shares with its epilogue, and no extra kernel is left).
"""
from __future__ import annotations

import dataclasses

import torch.fx as fx

from lego_core.load.capture import op_name, value_info
from lego_core.tree.fusion import policy
from lego_core.tree.fusion.groups import FusionGroup, Role, broadcasts_to

CONV_OP = "aten.convolution.default"
SLICE_OP = "aten.slice.Tensor"
PERMUTE_OP = "aten.permute.default"
CUMSUM_OP = "aten.cumsum.default"
MAX_KERNEL = 8


@dataclasses.dataclass(frozen=True)
class DepthwiseConvSpec:
    """What a ``depthwise_conv1d`` kernel computes: conv output [B, C, T_conv]
    (T_conv = T_in + 2 * padding - K + 1), keeping time steps
    [start, start + T) of it; ``permuted``: the view S is [B, T, C], else [B, C, T]."""

    conv: fx.Node
    view: fx.Node  # the last of conv / slice / permute: the value the tail reads
    kernel_size: int
    padding: int
    start: int
    length: int
    permuted: bool
    tail: tuple


@dataclasses.dataclass(frozen=True)
class ScanSpec:
    """A ``scan`` group: the cumsum node, its dim (>= 0), prologue and epilogue nodes."""

    cumsum: fx.Node
    dim: int
    prologue: tuple
    epilogue: tuple


def _shape(node: fx.Node) -> tuple | None:
    info = value_info(node) if isinstance(node, fx.Node) else None
    return tuple(info.shape) if info is not None else None


def _floating(node: fx.Node) -> bool:
    info = value_info(node)
    return info is not None and info.dtype.is_floating_point


def conv_head_reason(conv: fx.Node) -> str:
    """Why ``conv`` cannot head a ``depthwise_conv1d`` group (rule 1), or ``""``."""
    if conv.op != "call_function" or op_name(conv) != CONV_OP or len(conv.args) < 9:
        return f"{conv.name} is not aten.convolution"
    x, weight, bias, stride, padding, dilation, transposed, _out_pad, groups = conv.args[:9]
    xs, ws = _shape(x), _shape(weight)
    if xs is None or ws is None or len(xs) != 3 or len(ws) != 3:
        return f"{conv.name} is not a 1-D convolution of a [B, C, T] tensor"
    if transposed or list(stride) != [1] or list(dilation) != [1]:
        return f"{conv.name}: only stride 1, dilation 1, not transposed"
    if groups != xs[1] or ws[0] != xs[1] or ws[1] != 1:
        return f"{conv.name} is not depthwise (groups {groups}, weight {list(ws)}, {xs[1]} channels)"
    if ws[2] > MAX_KERNEL:
        return f"{conv.name}: kernel size {ws[2]} > {MAX_KERNEL}"
    if bias is not None and _shape(bias) != (xs[1],):
        return f"{conv.name}: the bias is not a [C] tensor"
    if not all(_floating(n) for n in [x, weight, conv] + ([bias] if bias is not None else [])):
        return f"{conv.name}: not a float convolution"
    return ""


def _view_chain(conv: fx.Node, nodes: list[fx.Node]) -> list[fx.Node]:
    """conv, then the slice over time and the transpose back that follow it (rules 2, 3)."""
    chain = [conv]
    allowed = {n.name for n in nodes} if nodes else None
    for test in (_is_time_slice, _is_transpose):
        last = chain[-1]
        if len(last.users) != 1:
            break
        (user,) = last.users
        if (allowed is not None and user.name not in allowed) or not test(user, last):
            continue
        chain.append(user)
    return chain


def _is_time_slice(node: fx.Node, src: fx.Node) -> bool:
    if op_name(node) != SLICE_OP or node.args[0] is not src:
        return False
    dim = node.args[1] if len(node.args) > 1 else 0
    step = node.args[4] if len(node.args) > 4 else 1
    return dim in (2, -1) and step == 1


def _is_transpose(node: fx.Node, src: fx.Node) -> bool:
    return op_name(node) == PERMUTE_OP and node.args[0] is src and list(node.args[1]) in ([0, 2, 1], [0, -1, 1])


def _pointwise_ok(node: fx.Node, shape: tuple) -> bool:
    """Rule 4: a pointwise op (no eval BatchNorm) whose value and tensor inputs broadcast to ``shape``."""
    if node.op != "call_function" or policy.category(node) != "pointwise" or policy.is_channel_affine(node):
        return False
    out = _shape(node)
    if out is None or not broadcasts_to(out, shape):
        return False
    return all(_shape(a) is not None and broadcasts_to(_shape(a), shape) for a in node.all_input_nodes)


def _check_members(nodes: list[fx.Node], shape: tuple, inner: set[str]) -> str:
    """Rules shared by both kinds: outputs of shape S, no member input depending on a member.
    ``inner``: names of members whose values never leave the group (conv, slice)."""
    names = {n.name for n in nodes}
    for n in nodes:
        outside = [u for u in n.users if u.name not in names]
        if outside and (n.name in inner or _shape(n) != shape):
            return f"{n.name} is read outside the group but is not a value of shape {list(shape)}"
    reach: set[str] = set()
    stack = [u for n in nodes for u in n.users if u.name not in names]
    while stack:
        u = stack.pop()
        if u.name in reach:
            continue
        reach.add(u.name)
        stack.extend(u.users)
    for n in nodes:
        for a in n.all_input_nodes:
            if a.name not in names and a.name in reach:
                return f"{n.name} reads {a.name}, which depends on the group: a cycle"
    return ""


def depthwise_conv1d_spec(nodes: list[fx.Node]) -> tuple[DepthwiseConvSpec | None, str]:
    """The spec of a ``depthwise_conv1d`` group of ``nodes`` or ``(None, reason)``."""
    convs = [n for n in nodes if op_name(n) == CONV_OP]
    if len(convs) != 1:
        return None, f"a depthwise conv1d group holds exactly one convolution, not {len(convs)}"
    conv = convs[0]
    reason = conv_head_reason(conv)
    if reason:
        return None, reason
    chain = _view_chain(conv, nodes)
    view = chain[-1]
    tail = [n for n in nodes if n not in chain]
    shape = _shape(view)
    if shape is None or len(shape) != 3:
        return None, f"{view.name} has no [B, T, C] / [B, C, T] shape"
    bad = [n.name for n in tail if not _pointwise_ok(n, shape)]
    if bad:
        return None, f"{bad[0]} is not a pointwise op over {list(shape)}"
    reason = _check_members(list(nodes), shape, {n.name for n in chain[:-1]})
    if reason:
        return None, reason
    k = _shape(conv.args[1])[2]
    pad = int(conv.args[4][0])
    t_conv = _shape(conv)[2]
    start, length = 0, t_conv
    if len(chain) > 1 and op_name(chain[1]) == SLICE_OP:
        start, length = _slice_range(chain[1], t_conv)
    spec = DepthwiseConvSpec(conv, view, k, pad, start, length, op_name(view) == PERMUTE_OP, tuple(tail))
    return spec, ""


def _slice_range(node: fx.Node, size: int) -> tuple[int, int]:
    start = node.args[2] if len(node.args) > 2 and node.args[2] is not None else 0
    end = node.args[3] if len(node.args) > 3 and node.args[3] is not None else size
    start = max(0, min(size, start + size if start < 0 else start))
    end = max(start, min(size, end + size if end < 0 else end))
    return start, end - start


def scan_spec(nodes: list[fx.Node]) -> tuple[ScanSpec | None, str]:
    """The spec of a ``scan`` group of ``nodes`` or ``(None, reason)``."""
    scans = [k for k, n in enumerate(nodes) if op_name(n) == CUMSUM_OP]
    if len(scans) != 1:
        return None, f"a scan group holds exactly one cumsum, not {len(scans)}"
    at = scans[0]
    cumsum = nodes[at]
    shape = _shape(cumsum)
    if shape is None or not shape or cumsum.kwargs.get("dtype") is not None or not _floating(cumsum):
        return None, f"{cumsum.name}: a float cumsum over a tensor, without a dtype argument"
    if not _floating(cumsum.args[0]) or _shape(cumsum.args[0]) != shape:
        return None, f"{cumsum.name}: the input is not a float tensor of its shape"
    others = nodes[:at] + nodes[at + 1:]
    bad = [n.name for n in others if not _pointwise_ok(n, shape)]
    if bad:
        return None, f"{bad[0]} is not a pointwise op over {list(shape)}"
    reason = _check_members(list(nodes), shape, set())
    if reason:
        return None, reason
    dim = cumsum.args[1] % len(shape)
    return ScanSpec(cumsum, dim, tuple(nodes[:at]), tuple(nodes[at + 1:])), ""


def depthwise_conv1d_group(nodes: list[fx.Node]) -> tuple[FusionGroup | None, str]:
    """The ``depthwise_conv1d`` FusionGroup of ``nodes`` (shape: the view's S) or ``(None, reason)``."""
    spec, reason = depthwise_conv1d_spec(nodes)
    if spec is None:
        return None, reason
    shape = _shape(spec.view)
    return FusionGroup(list(nodes), "depthwise_conv1d", shape=shape, roles={n.name: Role("vec") for n in nodes}), ""


def scan_group(nodes: list[fx.Node]) -> tuple[FusionGroup | None, str]:
    """The ``scan`` FusionGroup of ``nodes`` (shape: the cumsum's) or ``(None, reason)``."""
    spec, reason = scan_spec(nodes)
    if spec is None:
        return None, reason
    return FusionGroup(list(nodes), "scan", shape=_shape(spec.cumsum), roles={n.name: Role("vec") for n in nodes}), ""


def _grow(members: list[fx.Node], nodes: list[fx.Node], shape: tuple, taken: set[str], leave_scan_input: bool = False) -> list[fx.Node]:
    """``members`` plus the pointwise consumers (in order) that read them, then
    the pointwise producers all of whose readers are members; in ``nodes`` order.
    ``leave_scan_input``: consumers read by a cumsum are left out (they are the
    scan's prologue, so the scan can also absorb the factors they read)."""
    names = {n.name for n in members}
    start = max(nodes.index(n) for n in members)
    for n in nodes[start + 1:]:
        if n.name in taken or not any(a.name in names for a in n.all_input_nodes):
            continue
        if leave_scan_input and any(op_name(u) == CUMSUM_OP for u in n.users):
            continue
        if _pointwise_ok(n, shape):
            names.add(n.name)
    changed = True
    while changed:
        changed = False
        for n in reversed(nodes):
            if n.name in names or n.name in taken or not n.users or not _pointwise_ok(n, shape):
                continue
            if all(u.name in names for u in n.users):
                names.add(n.name)
                changed = True
    return [n for n in nodes if n.name in names]


def find_sequence_groups(nodes: list[fx.Node]) -> list[FusionGroup]:
    """The ``depthwise_conv1d`` groups, then the ``scan`` groups, of a region
    (``nodes`` in topological order), disjoint, each verified by its ``*_group`` rule;
    groups whose greedy growth breaks a rule are retried with their head chain alone."""
    found: list[FusionGroup] = []
    taken: set[str] = set()
    heads = [(n, "conv") for n in nodes if op_name(n) == CONV_OP and not conv_head_reason(n)]
    heads += [(n, "scan") for n in nodes if op_name(n) == CUMSUM_OP]
    for head, kind in heads:
        if head.name in taken:
            continue
        chain = _view_chain(head, nodes) if kind == "conv" else [head]
        if any(n.name in taken for n in chain):
            continue
        shape = _shape(chain[-1])
        if shape is None:
            continue
        make = depthwise_conv1d_group if kind == "conv" else scan_group
        group = None
        for members in (_grow(chain, nodes, shape, taken, leave_scan_input=kind == "conv"), chain):
            group, _ = make(members)
            if group is not None:
                break
        if group is not None:
            found.append(group)
            taken |= group.names
    return sorted(found, key=lambda g: nodes.index(g.nodes[0]))
