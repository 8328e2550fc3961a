"""GEMM + epilogue groups: what may fuse into a matrix multiplication.

The policy for the template agent's ``gemm_epilogue`` kernels (one GEMM whose
[M, N] result is finished in registers before it is stored).  Bottom-up
mutation proposes an ordered node list (a verified GEMM leaf and the verified
pointwise leaves that consume it); ``gemm_epilogue_group(nodes)`` says whether
that list is a legal GEMM epilogue and, if so, returns its FusionGroup.
``grow_epilogue(gemm)`` proposes the longest such list for one GEMM.

Rules (``nodes`` in topological order):

1. *One GEMM, first.*  ``nodes[0]`` is ``aten.mm.default`` or
   ``aten.addmm.default`` with ``beta == alpha == 1``, 2-D operands
   A [M, K] and B [K, N], float32 / bfloat16 / float16.  Its operands come
   from outside the group: no prologue fusion.  Layout-only input ops (the
   ``permute`` / ``t`` of a Linear's weight) stay outside too; the kernel
   reads A and B through their strides.  The addmm bias may be any tensor
   that broadcasts to [M, N] ([N], [1, N], [M, 1], [M, N]).
2. *No second GEMM* and no other heavy op, no reduction: a row reduction
   needs whole rows, which a [BLOCK_M, BLOCK_N] tile does not hold.
3. *Views of the result.*  ``view`` / ``_unsafe_view`` / ``reshape`` of a
   group value that keep the number of elements and the last dimension N
   ([M, N] -> [B, T, N] and back).  A view is a row-major reshape, so in the
   kernel's logical (m, n) tile it is the identity, whatever the memory
   layout; every value of the group therefore has a *full form*: M*N
   elements with last dimension N.  Other layout ops of group values
   (permute, slice, expand, a view that splits N) do not fuse; layout ops of
   outside values belong outside the group.
4. *Pointwise epilogue.*  Every other node is pointwise
   (``policy.category(node) == "pointwise"``).  Each tensor operand is a
   group value or an outside tensor that broadcasts to the op's output: a
   bias [N], a residual [..., N], a per-row scale [..., 1], a 0-d scalar.
   An op's output is a full form, or smaller (an op on outside values only,
   such as ``scale * 2`` of shape [N]): such a value is computed per tile,
   broadcast to the one view its users in the group read it in.
5. *Outputs.*  Only full-form values may be read outside the group (the
   kernel stores each of them through its strides); a smaller value that is
   read outside, or read in two different views, keeps the group from
   forming.
6. *No cycles.*  No outside operand of a group node may depend on a group
   value (the group would have to run both before and after it).

The group's ``shape`` is the last node's shape (the output iteration shape,
a full form); its ``roles``: every full-form member ``vec``; smaller
members, outside values read by the epilogue and the addmm bias ``vec`` when
they vary along N, ``scal`` when they are one number per row or a scalar;
the GEMM operands ``gemm_a`` / ``gemm_b``.  ``value_forms(nodes)`` gives the
view of [M, N] each member is computed in (what the kernel needs).

Op facts (the GEMM heads, the views of rule 3) come from the op registry,
``lego_core.ops``.
"""
from __future__ import annotations

import math

import torch
import torch.fx as fx

from lego_core import ops
from lego_core.load.capture import op_name, value_info
from lego_core.tree.fusion import policy
from lego_core.tree.fusion.groups import FusionGroup, Role, broadcasts_to

GEMM_OPS = ops.fusion_overloads("gemm")  # mm, addmm
VIEW_OPS = ops.view_overloads("reshape")  # view, _unsafe_view, reshape
GEMM_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


def gemm_epilogue_group(nodes: list[fx.Node]) -> tuple[FusionGroup | None, str]:
    """The ``gemm_epilogue`` FusionGroup of ``nodes``, or ``(None, reason)``.

    ``nodes``: call_function nodes of one captured graph (every node carries
    ``meta["val"]``), in topological order, the GEMM first.  ``reason`` is
    one line naming the node and the rule it breaks (module docstring);
    it is ``""`` on success.
    """
    if not nodes:
        return None, "no nodes"
    gemm = nodes[0]
    reason = gemm_reason(gemm)
    if reason:
        return None, reason
    m, n = value_info(gemm).shape
    inside = {gemm.name}
    for node in nodes[1:]:
        reason = epilogue_reason(node, inside, m, n)
        if reason:
            return None, reason
        inside.add(node.name)
    reason = _cycle_reason(nodes, inside)  # also checks the order, which _resolve_forms needs
    if reason:
        return None, reason
    forms, reason = _resolve_forms(nodes, inside, m, n)
    if reason:
        return None, reason
    group = FusionGroup(list(nodes), "gemm_epilogue", shape=tuple(value_info(nodes[-1]).shape))
    group.roles = _roles(nodes, inside, forms)
    return group, ""


def value_forms(nodes: list[fx.Node]) -> dict[str, tuple]:
    """The view of [M, N] each node of a legal GEMM epilogue group is computed
    in: a full-form node's own shape; a smaller node's, that of its users.
    ``ValueError`` if ``nodes`` is not a legal group."""
    group, reason = gemm_epilogue_group(nodes)
    if group is None:
        raise ValueError(reason)
    m, n = value_info(nodes[0]).shape
    return _resolve_forms(nodes, group.names, m, n)[0]


def _resolve_forms(nodes: list[fx.Node], inside: set[str], m: int, n: int) -> tuple[dict[str, tuple], str]:
    """Rule 5 for values smaller than a full form: each is read only inside
    the group, in one view, to which it broadcasts.  Users come after their
    producers, so one backward pass settles every form."""
    forms: dict[str, tuple] = {}
    for node in reversed(nodes):
        shape = tuple(value_info(node).shape)
        if is_full_form(shape, m, n):
            forms[node.name] = shape
            continue
        name = op_name(node)
        if any(u.name not in inside for u in node.users):
            return {}, f"{node.name} ({name}) has shape {list(shape)}, smaller than the [{m}, {n}] output, and is read outside the group; only full-shape values may leave it"
        views = {forms[u.name] for u in node.users}
        if len(views) != 1:
            return {}, f"{node.name} ({name}) has shape {list(shape)} and is read in {len(views)} views of the result; a smaller value must be read in one"
        view = views.pop()
        if not broadcasts_to(shape, view):
            return {}, f"{node.name} ({name}) has shape {list(shape)}, which does not broadcast to {list(view)}"
        forms[node.name] = view
    return forms, ""


def gemm_reason(node: fx.Node) -> str:
    """Why ``node`` cannot start a GEMM epilogue group (rule 1), or ``""``."""
    name = op_name(node) if node.op == "call_function" else node.op
    if name not in GEMM_OPS:
        return (
            f"the first node must be aten.mm or aten.addmm, got {node.name} ({name}): no prologue fusion; "
            "layout-only inputs (the weight's permute) stay outside the group"
        )
    if name == "aten.addmm.default":
        beta = node.args[3] if len(node.args) > 3 else node.kwargs.get("beta", 1)
        alpha = node.args[4] if len(node.args) > 4 else node.kwargs.get("alpha", 1)
        if beta != 1 or alpha != 1:
            return f"{node.name}: addmm with beta={beta}, alpha={alpha}; only beta = alpha = 1 fuses"
    a, b, bias = gemm_operands(node)
    operands = [("A", a), ("B", b)] + ([("bias", bias)] if bias is not None else [])
    out = value_info(node)
    if out is None or len(out.shape) != 2:
        return f"{node.name}: the GEMM result is not a 2-D tensor"
    for what, arg in operands:
        info = value_info(arg) if isinstance(arg, fx.Node) else None
        if info is None:
            return f"{node.name}: operand {what} is not a tensor"
        if info.dtype not in GEMM_DTYPES:
            return f"{node.name}: operand {what} is {str(info.dtype).removeprefix('torch.')}; only float32, bfloat16 and float16 GEMMs fuse"
        if what != "bias" and len(info.shape) != 2:
            return f"{node.name}: operand {what} has shape {list(info.shape)}; the GEMM template takes 2-D operands"
        if what == "bias" and not broadcasts_to(info.shape, out.shape):
            return f"{node.name}: the bias {list(info.shape)} does not broadcast to {list(out.shape)}"
    return ""


def gemm_operands(node: fx.Node) -> tuple:
    """``(A, B, bias)`` of an ``aten.mm`` (bias None) or ``aten.addmm`` node."""
    if op_name(node) == "aten.addmm.default":
        return node.args[1], node.args[2], node.args[0]
    return node.args[0], node.args[1], None


def is_full_form(shape: tuple, m: int, n: int) -> bool:
    """A shape the [M, N] GEMM result can be viewed as: M*N elements, last dimension N."""
    return len(shape) >= 1 and shape[-1] == n and math.prod(shape) == m * n


def epilogue_reason(node: fx.Node, inside: set[str], m: int, n: int) -> str:
    """Why ``node`` cannot join a GEMM epilogue whose members are ``inside``
    (names) and whose GEMM result is [m, n] (rules 2 to 4), or ``""``."""
    if node.op != "call_function":
        return f"{node.name} is a {node.op}, not an op"
    name = op_name(node)
    if name in GEMM_OPS:
        return f"{node.name} is a second GEMM ({name}); a kernel fuses one GEMM with its epilogue"
    reads_group = [a for a in node.all_input_nodes if a.name in inside]
    cat = policy.category(node)
    out = value_info(node)
    if cat == "layout":
        if not reads_group:
            return f"{node.name} ({name}) is a layout op of an outside value; it stays outside the group (the kernel reads inputs through their strides)"
        if name not in VIEW_OPS:
            return f"{node.name} ({name}) changes the layout of a group value; only views that keep the last dimension N fuse"
        if out is None or not is_full_form(out.shape, m, n):
            shape = list(out.shape) if out else None
            return f"{node.name} ({name}) views the [{m}, {n}] result as {shape}; a fused view must keep M*N elements and the last dimension N"
        return ""
    if cat == "reduction":
        return f"{node.name} ({name}) is a reduction; only pointwise ops fuse into a GEMM epilogue (a tile holds no whole row)"
    if cat != "pointwise":
        return f"{node.name} ({name}) is not pointwise (policy: {cat}); only pointwise ops fuse into a GEMM epilogue"
    if out is None:
        return f"{node.name} ({name}) has no single tensor output"
    if not is_full_form(out.shape, m, n) and math.prod(out.shape) >= m * n:
        return f"{node.name} ({name}) has shape {list(out.shape)}: not a view of the [{m}, {n}] result"
    for arg in node.all_input_nodes:
        info = value_info(arg)
        if arg.name not in inside and (info is None or not broadcasts_to(info.shape, out.shape)):
            return f"{node.name} ({name}): operand {arg.name} does not broadcast to {list(out.shape)}"
    return ""


def _cycle_reason(nodes: list[fx.Node], inside: set[str]) -> str:
    """Rule 6: an outside operand that depends on a group value (a cycle), or ``""``."""
    order = {node: k for k, node in enumerate(nodes[0].graph.nodes)}
    first = min(order[node] for node in nodes)
    for node in nodes:
        for arg in node.all_input_nodes:
            if arg.name in inside:
                if order[arg] > order[node]:
                    return f"{node.name} reads {arg.name}, which comes after it: the nodes are not in topological order"
                continue
            culprit = _group_ancestor(arg, inside, order, first)
            if culprit:
                return f"{node.name} reads {arg.name}, which is computed outside the group from the group's {culprit}: a cycle"
    return ""


def _group_ancestor(start: fx.Node, inside: set[str], order: dict, first: int) -> str:
    """Name of a group node that ``start`` (outside) depends on, or ``""``.
    Nodes placed before the group's first node cannot depend on it, so the
    walk stops there."""
    stack, seen = [start], {start}
    while stack:
        node = stack.pop()
        for arg in node.all_input_nodes:
            if arg.name in inside:
                return arg.name
            if arg not in seen and order[arg] > first:
                seen.add(arg)
                stack.append(arg)
    return ""


def _roles(nodes: list[fx.Node], inside: set[str], forms: dict[str, tuple]) -> dict[str, Role]:
    def by_shape(shape: tuple) -> Role:
        return Role("vec" if shape and shape[-1] != 1 and forms[nodes[0].name][-1] != 1 else "scal")

    roles = {}
    for node in nodes:
        shape = tuple(value_info(node).shape)
        roles[node.name] = Role("vec") if shape == forms[node.name] else by_shape(shape)
    for node in nodes:
        for arg in node.all_input_nodes:
            if arg.name not in inside and arg.name not in roles:
                roles[arg.name] = by_shape(tuple(value_info(arg).shape))
    a, b, _ = gemm_operands(nodes[0])
    roles[a.name], roles[b.name] = Role("gemm_a"), Role("gemm_b")
    return roles


def grow_epilogue(gemm: fx.Node) -> list[fx.Node]:
    """The longest legal epilogue of ``gemm``, greedily: the GEMM, then every
    later node of its graph that reads a group value and may join (rules 2
    to 4), in graph order.  A node that reads a group value and may not join
    stays outside, and so does everything that depends on it (rule 6).
    ``[]`` when ``gemm`` cannot start a group (rule 1)."""
    if gemm_reason(gemm):
        return []
    m, n = value_info(gemm).shape
    nodes, inside, tainted = [gemm], {gemm.name}, set()
    order = list(gemm.graph.nodes)
    for node in order[order.index(gemm) + 1 :]:
        if node.op != "call_function":
            continue
        args = {a.name for a in node.all_input_nodes}
        if not args & (inside | tainted):
            continue
        if args & tainted or epilogue_reason(node, inside, m, n):
            tainted.add(node.name)
            continue
        nodes.append(node)
        inside.add(node.name)
    return nodes
