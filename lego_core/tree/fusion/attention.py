"""Attention groups: find softmax(scale * Q K^T + mask) V in a captured graph.

``find_attention(nodes)`` returns one :class:`AttentionGroup` (a FusionGroup
of kind ``attention``) per attention layer whose nodes all lie in ``nodes``;
``attention_group(nodes)`` says whether an exact node list is one (the
payload rebuilds groups with it).  The template agent turns a group into a
flash-attention kernel (``agents/template/attention_codegen.py``).

Two forms are recognised:

1. *The math form* (hand-written attention, and ``F.scaled_dot_product_attention``
   as core ATen decomposes it on the CPU): a score ``aten.bmm`` [G, M, D] @
   [G, D, N], then along single-user values: views, scalings (``mul`` /
   ``div`` by a Python number), at most one mask (``add`` of a float tensor,
   or ``where(cond, fill, s)`` / ``where(cond, s, fill)`` with a 0-d fill,
   its ``bitwise_not`` / ``logical_not`` absorbed), dtype casts, then
   ``aten._softmax`` over the last dimension, optionally SDPA's
   "fully masked row -> 0" pattern (``eq -inf``, ``logical_not``, ``any``,
   ``logical_not``, ``full_like``, ``where``), then layout ops to [G, M, N]
   and the value ``aten.bmm`` (P first), plus a trailing view of its result.
2. *The fused form*: one ``aten.scaled_dot_product_attention`` /
   ``_scaled_dot_product_{flash,efficient,cudnn}_attention`` /
   ``_scaled_dot_product_flash_attention_for_cpu`` node (as captured on a
   GPU), without dropout, with its ``getitem`` 0.

Operands.  From each GEMM operand (q, k, v) the group absorbs, walking
backwards, the layout-only ops (views, permutes, expands, clones, slices,
selects, unsqueezes) and scalings whose only user is the previous node of
the same walk; the first other node is the *source*, a boundary input.  So
the GQA head broadcast (``repeat_interleave`` = unsqueeze / expand / clone /
view) and the head split of a QKV projection are read in place.  How the
kernel addresses a source is found numerically (``_fit``): the walk is run
on integer index tensors of the source's shape, and each source dimension's
index must be an affine function of (batch b, head h // rep, row, column);
the per-dimension coefficients (``OperandMap``) turn the source's runtime
strides into the kernel's strides.  G = B * H is split by the first 4-D
[B, H, M, N] value of the score chain (else B = G, H = 1).

Legality: every group node but the output has all its users inside the
group (the scores and probabilities are never read elsewhere), no boundary
input depends on a group node (no cycle), one mask at most.

Op facts (the SDPA entry points, the views, layout ops and scalings a walk
passes) come from the op registry, ``lego_core.ops`` (``Op.fuse``,
``Op.view``).
"""
from __future__ import annotations

import dataclasses
import math

import torch
import torch.fx as fx

from lego_core import ops
from lego_core.load.capture import op_name, value_info
from lego_core.tree.fusion.groups import FusionGroup, broadcasts_to

BMM = "aten.bmm.default"
SOFTMAX = "aten._softmax.default"
NOT, ANY = "aten.logical_not.default", "aten.any.dim"  # SDPA's empty-row guard: not(any(not(eq)))
VIEW_OPS = ops.view_overloads("reshape")  # view, _unsafe_view, reshape
# a value-preserving op, replayed as the identity on index tensors (clone, alias, detach)
IDENTITY_OPS = ops.view_overloads("identity")
# what a walk back from q / k / v reads through: views, permutes, expands,
# repeat_interleave, selects, slices and the identities
WALK_LAYOUT = ops.view_overloads("reshape", "unit_dim", "reorder", "broadcast", "subset", "identity")
# scalings by a number: the mul and div overloads the pointwise template generates
SCALE_OPS = frozenset(n for n in ops.fusion_overloads("pointwise") if ops.op_name(n) in ("mul", "div"))
SDPA_OPS = ops.fusion_overloads("attention")
ATTENTION_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
FIT_CHUNK = 1 << 22  # index elements checked at once (bounds the matcher's memory)


@dataclasses.dataclass(frozen=True)
class OperandMap:
    """How logical element [b, h, row, col] of q / k / v (or the output) sits in its source.

    ``coeffs[k] = (c0, cb, ch, crow, ccol)``: source index along dimension k
    is ``c0 + cb*b + ch*(h // rep) + crow*row + ccol*col``.  With the
    source's strides s_k (elements) the address is ``offset + b*stride_b +
    (h // rep)*stride_h + row*stride_row + col*stride_col``, each the sum of
    ``coeff * s_k`` (``strides``).
    """

    coeffs: tuple
    rep: int = 1

    def strides(self, stride: tuple) -> tuple[int, int, int, int, int]:
        """(offset, stride_b, stride_h, stride_row, stride_col) in elements for a source of ``stride``."""
        return tuple(sum(c[j] * s for c, s in zip(self.coeffs, stride)) for j in range(5))


@dataclasses.dataclass
class AttentionSpec:
    """Everything the attention kernel needs, found by the matcher.

    Sizes: batch ``b``, query heads ``h``, query rows ``m``, key rows ``n``,
    head dims ``d`` (q, k) and ``dv`` (v, out).  ``q``/``k``/``v``/``mask``:
    the boundary nodes read (``mask`` None without one); ``*_map``: their
    :class:`OperandMap` (``k_map.rep`` = query heads per kv head, GQA).
    ``scale`` multiplies Q K^T before the mask, ``post_scale`` after it.
    ``mask_kind``: ``none``, ``add`` (float, added), ``keep`` (bool, True
    keeps the score) or ``fill`` (bool, True replaces it by ``fill``);
    ``mask_shape``: the mask's own shape; ``mask_target``: the scores it is
    broadcast to, [b, h, m, n] (4-D) or [b*h, m, n] (3-D).  ``causal``: keep only key n <= query m (SDPA's
    top-left ``is_causal``).  ``zero_empty_rows``: a row with every score
    -inf gives 0 (SDPA) rather than NaN (a plain softmax).
    """

    b: int
    h: int
    m: int
    n: int
    d: int
    dv: int
    q: fx.Node
    k: fx.Node
    v: fx.Node
    q_map: OperandMap
    k_map: OperandMap
    v_map: OperandMap
    out_map: OperandMap
    output: fx.Node
    dtype: torch.dtype
    scale: float = 1.0
    post_scale: float = 1.0
    mask: fx.Node | None = None
    mask_kind: str = "none"
    mask_shape: tuple = ()
    mask_target: tuple = ()
    fill: float = -math.inf
    causal: bool = False
    zero_empty_rows: bool = False
    form: str = "math"


@dataclasses.dataclass
class AttentionGroup(FusionGroup):
    """A FusionGroup of kind ``attention`` with its :class:`AttentionSpec`."""

    spec: AttentionSpec | None = None


class _NoMatch(Exception):
    pass


def _need(cond: bool, reason: str) -> None:
    if not cond:
        raise _NoMatch(reason)


def _number(x) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else None


def _shape(node) -> tuple | None:
    info = value_info(node) if isinstance(node, fx.Node) else None
    return tuple(info.shape) if info else None


# ---------------------------------------------------------------------------
# public entry points
# ---------------------------------------------------------------------------


def find_attention(nodes: list[fx.Node]) -> list[AttentionGroup]:
    """Every attention group whose nodes all lie in ``nodes`` (call_function
    nodes of one captured graph, topological order), in schedule order."""
    inside = {n.name for n in nodes}
    found: list[AttentionGroup] = []
    taken: set[str] = set()
    for node in nodes:
        name = op_name(node) if node.op == "call_function" else ""
        if name != BMM and name not in SDPA_OPS:
            continue
        group, _ = _match(node)
        if group is None or not group.names <= inside or group.names & taken:
            continue
        taken |= group.names
        found.append(group)
    return found


def attention_group(nodes: list[fx.Node]) -> tuple[AttentionGroup | None, str]:
    """The attention group made of exactly ``nodes``, or ``(None, reason)``."""
    names = {n.name for n in nodes}
    reasons = []
    for node in nodes:
        if node.op == "call_function" and (op_name(node) == BMM or op_name(node) in SDPA_OPS):
            group, reason = _match(node)
            if group is not None and group.names == names:
                return group, ""
            reasons.append(reason or f"the attention at {node.name} has other nodes")
    return None, reasons[0] if reasons else "no score GEMM or attention op among the nodes"


def _match(head: fx.Node) -> tuple[AttentionGroup | None, str]:
    """The attention group starting at ``head`` (memoised in ``head.meta``: the tree asks per region)."""
    if "lego_attention" not in head.meta:
        head.meta["lego_attention"] = _match_uncached(head)
    group, reason = head.meta["lego_attention"]
    if group is None:
        return None, reason
    return AttentionGroup(list(group.nodes), "attention", shape=group.shape, spec=group.spec), ""


def _match_uncached(head: fx.Node) -> tuple[AttentionGroup | None, str]:
    try:
        if op_name(head) in SDPA_OPS:
            spec, members = _match_fused(head)
        else:
            spec, members = _match_math(head)
        _check_legal(members, spec.output)
    except _NoMatch as exc:
        return None, str(exc)
    order = {n: k for k, n in enumerate(head.graph.nodes)}
    ordered = sorted(members, key=order.__getitem__)
    out_shape = _shape(spec.output)
    return AttentionGroup(ordered, "attention", shape=out_shape, spec=spec), ""


# ---------------------------------------------------------------------------
# the math form
# ---------------------------------------------------------------------------


def _match_math(score: fx.Node) -> tuple[AttentionSpec, set[fx.Node]]:
    a, bt = score.args[0], score.args[1]
    g, m, d = _shape(a)
    n = _shape(bt)[2]
    members = {score}
    state = {"scale": 1.0, "post": 1.0, "mask": None, "kind": "none", "fill": -math.inf, "bh": None}
    cur = score
    while True:
        users = list(cur.users)
        shape = _shape(cur)
        if shape is not None and len(shape) == 4 and state["bh"] is None and shape[-2:] == (m, n):
            state["bh"] = shape[:2]
        if len(users) == 2 and {op_name(u) for u in users} == {SOFTMAX, "aten.eq.Scalar"}:
            users = [u for u in users if op_name(u) == SOFTMAX]
        _need(len(users) == 1, f"{cur.name}: the scores have {len(users)} users")
        u = users[0]
        name = op_name(u)
        if name == SOFTMAX:
            break
        _need(u.args[0] is cur or name in ("aten.add.Tensor", "aten.where.self"), f"{u.name} ({name}) does not take the scores first")
        if name in VIEW_OPS:
            _need(_shape(u)[-1] == n and math.prod(_shape(u)) == g * m * n, f"{u.name}: a view that changes the score rows")
        elif name == "aten._to_copy.default":
            _need(set(u.kwargs) <= {"dtype"}, f"{u.name}: a copy with options other than dtype")
        elif name in SCALE_OPS:
            c = _number(u.args[1])
            _need(c is not None and c != 0, f"{u.name}: scaling by a tensor")
            c = c if name.startswith("aten.mul") else 1.0 / c
            state["post" if state["mask"] is not None else "scale"] *= c
        elif name in ("aten.add.Tensor", "aten.where.self"):
            _need(state["kind"] == "none", f"{u.name}: a second mask")
            _mask(u, cur, state, members, _shape(cur))
        else:
            raise _NoMatch(f"{u.name} ({name}) between the score GEMM and the softmax")
        members.add(u)
        cur = u
    soft = users[0]
    _need(soft.args[1] in (-1, len(_shape(cur)) - 1) and not soft.args[2], f"{soft.name}: softmax not over the last dimension")
    members.add(soft)
    p = soft
    zero_empty = False
    pre = cur
    if len(pre.users) == 2:
        p = _empty_rows(pre, soft, members)
        zero_empty = True
    while True:
        users = list(p.users)
        _need(len(users) == 1, f"{p.name}: the probabilities have {len(users)} users")
        u = users[0]
        name = op_name(u)
        if name == BMM:
            _need(u.args[0] is p, f"{u.name}: the probabilities are not the left operand")
            break
        _need(name in WALK_LAYOUT or (name == "aten._to_copy.default" and set(u.kwargs) <= {"dtype"}), f"{u.name} ({name}) between the softmax and the value GEMM")
        _need(u.args[0] is p and math.prod(_shape(u)) == g * m * n and _shape(u)[-2:] == (m, n), f"{u.name}: a layout op that changes the probabilities")
        if name == "aten.expand.default":
            _need(_shape(u) == _shape(p) or _shape(u)[-3:] == (g, m, n), f"{u.name}: an expand that broadcasts the probabilities")
        members.add(u)
        p = u
    value = users[0]
    members.add(value)
    dv = _shape(value)[2]
    out = value
    outs = list(value.users)
    if len(outs) == 1 and op_name(outs[0]) in VIEW_OPS and _shape(outs[0])[-2:] == (m, dv) and math.prod(_shape(outs[0])) == g * m * dv:
        out = outs[0]
        members.add(out)
    bh = state["bh"] or (_shape(out)[:2] if len(_shape(out)) == 4 else (g, 1))
    _need(bh[0] * bh[1] == g, "the batch-head split does not multiply to the GEMM batch")
    b, h = bh
    q_src, q_chain, q_scale = _walk_back(a, members)
    k_src, k_chain, k_scale = _walk_back(bt, members)
    v_src, v_chain, v_scale = _walk_back(value.args[1], members)
    _need(v_scale == 1.0, "a scaled value operand")
    q_map = _fit(q_src, q_chain, (b, h, m, d), transpose=False)
    k_map = _fit(k_src, k_chain, (b, h, n, d), transpose=True)
    v_map = _fit(v_src, v_chain, (b, h, n, dv), transpose=False)
    out_map = _output_map(out, (b, h, m, dv))
    spec = AttentionSpec(
        b, h, m, n, d, dv, q_src, k_src, v_src, q_map, k_map, v_map, out_map, out, _dtype(q_src, k_src, v_src, out),
        scale=state["scale"] * q_scale * k_scale, post_scale=state["post"], mask=state["mask"], mask_kind=state["kind"],
        mask_shape=_shape(state["mask"]) if state["mask"] is not None else (), fill=state["fill"], zero_empty_rows=zero_empty,
        mask_target=tuple(state.get("target", ())),
    )
    _need(spec.mask is None or len(spec.mask_target) in (3, 4), "the mask is applied to scores that are neither [B, H, M, N] nor [B*H, M, N]")
    return spec, members


def _mask(u: fx.Node, cur: fx.Node, state: dict, members: set, scores_shape: tuple) -> None:
    """Record the mask that ``u`` (an add or a where) applies to the scores ``cur``."""
    if op_name(u) == "aten.add.Tensor":
        _need(len(u.args) == 2 and not u.kwargs.get("alpha", 1) != 1, f"{u.name}: add with alpha")
        other = u.args[1] if u.args[0] is cur else u.args[0]
        _need(isinstance(other, fx.Node) and value_info(other) is not None and value_info(other).dtype.is_floating_point, f"{u.name}: not an additive float mask")
        _need(broadcasts_to(_shape(other), scores_shape), f"{u.name}: the mask does not broadcast to the scores")
        state["mask"], state["kind"], state["target"] = other, "add", scores_shape
        return
    cond, x, y = u.args
    if y is cur and x is not cur:
        fill_node, kind = x, "fill"
    elif x is cur and y is not cur:
        fill_node, kind = y, "keep"
    else:
        raise _NoMatch(f"{u.name}: a where that does not select between the scores and a constant")
    _need(isinstance(fill_node, fx.Node) and op_name(fill_node) == "aten.scalar_tensor.default" and len(fill_node.users) == 1, f"{u.name}: the fill is not a scalar constant")
    members.add(fill_node)
    state["fill"] = float(fill_node.args[0])
    _need(isinstance(cond, fx.Node) and value_info(cond) is not None and value_info(cond).dtype == torch.bool, f"{u.name}: the condition is not a bool tensor")
    if op_name(cond) in ("aten.bitwise_not.default", "aten.logical_not.default") and len(cond.users) == 1:
        members.add(cond)
        cond = cond.args[0]
        kind = "keep" if kind == "fill" else "fill"
        _need(value_info(cond) is not None and value_info(cond).dtype == torch.bool, f"{u.name}: a negated non-bool mask")
    _need(broadcasts_to(_shape(cond), scores_shape), f"{u.name}: the mask does not broadcast to the scores")
    state["mask"], state["kind"], state["target"] = cond, kind, scores_shape


def _empty_rows(pre: fx.Node, soft: fx.Node, members: set) -> fx.Node:
    """SDPA's ``where(~any(s != -inf, -1), 0, softmax(s))``; returns the where."""
    eq = next(u for u in pre.users if u is not soft)
    chain = [eq]
    for expect in (NOT, ANY, NOT):
        users = list(chain[-1].users)
        _need(len(users) == 1 and op_name(users[0]) == expect, f"{chain[-1].name}: not SDPA's empty-row guard")
        chain.append(users[0])
    _need(eq.args[1] == -math.inf, f"{eq.name}: not a comparison with -inf")
    users = list(chain[-1].users)
    _need(len(users) == 1 and op_name(users[0]) == "aten.where.self", f"{chain[-1].name}: not SDPA's empty-row guard")
    where = users[0]
    zero = where.args[1]
    _need(where.args[0] is chain[-1] and where.args[2] is soft and isinstance(zero, fx.Node), f"{where.name}: not SDPA's empty-row guard")
    _need(op_name(zero) == "aten.full_like.default" and zero.args[0] is soft and zero.args[1] == 0 and len(zero.users) == 1, f"{where.name}: the guard does not write zeros")
    _need(set(soft.users) == {zero, where}, f"{soft.name}: the softmax has other users")
    members.update(chain + [zero, where])
    return where


# ---------------------------------------------------------------------------
# the fused form
# ---------------------------------------------------------------------------


def _arguments(node: fx.Node) -> dict:
    schema = node.target._schema
    values = {}
    for k, arg in enumerate(schema.arguments):
        if k < len(node.args):
            values[arg.name] = node.args[k]
        elif arg.name in node.kwargs:
            values[arg.name] = node.kwargs[arg.name]
        else:
            values[arg.name] = arg.default_value if arg.has_default_value() else None
    return values


def _match_fused(node: fx.Node) -> tuple[AttentionSpec, set[fx.Node]]:
    args = _arguments(node)
    _need(not args.get("dropout_p"), f"{node.name}: attention with dropout")
    q, k, v = args["query"], args["key"], args["value"]
    _need(all(len(_shape(x) or ()) == 4 for x in (q, k, v)), f"{node.name}: q, k, v are not 4-D")
    b, h, m, d = _shape(q)
    hk, n, dv = _shape(k)[1], _shape(k)[2], _shape(v)[3]
    gqa = bool(args.get("enable_gqa"))
    _need(hk == h or (gqa and h % hk == 0), f"{node.name}: {h} query heads and {hk} key heads")
    members = {node}
    if op_name(node) == "aten.scaled_dot_product_attention.default":
        out = node
    else:
        getters = list(node.users)
        _need(all(op_name(u) == "getitem" for u in getters), f"{node.name}: its tuple is used whole")
        firsts = [u for u in getters if u.args[1] == 0]
        _need(len(firsts) == 1, f"{node.name}: its output is not read once")
        _need(all(not u.users for u in getters if u.args[1] != 0), f"{node.name}: its log-sum-exp or other outputs are read")
        members.update(getters)
        out = firsts[0]
    q_src, q_chain, q_scale = _walk_back(q, members)
    k_src, k_chain, k_scale = _walk_back(k, members)
    v_src, v_chain, v_scale = _walk_back(v, members)
    _need(v_scale == 1.0, "a scaled value operand")
    rep = h // _shape(k)[1]
    q_map = _fit(q_src, q_chain, (b, h, m, d), transpose=False)
    k_map = _fit(k_src, k_chain, (b, h, n, d), transpose=False, head_rep=rep)
    v_map = _fit(v_src, v_chain, (b, h, n, dv), transpose=False, head_rep=rep)
    mask = args.get("attn_mask", args.get("attn_bias"))
    kind = "none"
    if mask is not None:
        _need(isinstance(mask, fx.Node) and broadcasts_to(_shape(mask), (b, h, m, n)), f"{node.name}: the mask does not broadcast to the scores")
        kind = "keep" if value_info(mask).dtype == torch.bool else "add"
    scale = args.get("scale")
    spec = AttentionSpec(
        b, h, m, n, d, dv, q_src, k_src, v_src, q_map, k_map, v_map, _output_map(out, (b, h, m, dv)), out,
        _dtype(q_src, k_src, v_src, out), scale=(1.0 / math.sqrt(d) if scale is None else float(scale)) * q_scale * k_scale,
        mask=mask, mask_kind=kind, mask_shape=_shape(mask) if mask is not None else (), mask_target=(b, h, m, n), causal=bool(args.get("is_causal")),
        zero_empty_rows=True, form="fused",
    )
    return spec, members


# ---------------------------------------------------------------------------
# operands: walk back to the source, fit the index map
# ---------------------------------------------------------------------------


def _walk_back(operand: fx.Node, members: set) -> tuple[fx.Node, list[fx.Node], float]:
    """(source, chain from the source to ``operand`` in order, scale factor):
    layout ops and scalings whose only user is the next node of the chain."""
    chain: list[fx.Node] = []
    scale = 1.0
    cur = operand
    nxt = None
    while isinstance(cur, fx.Node) and cur.op == "call_function":
        name = op_name(cur)
        if nxt is not None and set(cur.users) != {nxt}:
            break
        if nxt is None and len(cur.users) != 1:
            break
        if name in SCALE_OPS:
            c = _number(cur.args[1]) if len(cur.args) > 1 else None
            if c is None or c == 0:
                break
            scale *= c if name.startswith("aten.mul") else 1.0 / c
        elif name not in WALK_LAYOUT:
            break
        chain.append(cur)
        nxt, cur = cur, cur.args[0]
    _need(isinstance(cur, fx.Node) and value_info(cur) is not None, f"{operand.name}: its source is not a tensor")
    chain.reverse()
    members.update(chain)
    return cur, chain, scale


def _index_dtype(shape: tuple) -> torch.dtype:
    return torch.int32 if math.prod(shape) < 2**31 else torch.int64


def _replay(chain: list[fx.Node], value: torch.Tensor) -> torch.Tensor:
    """Run the chain's layout ops on ``value`` (scalings and clones are the identity on indices)."""
    for node in chain:
        name = op_name(node)
        if name in SCALE_OPS or name in IDENTITY_OPS:
            continue
        if name in VIEW_OPS:
            value = value.reshape(node.args[1])
        else:
            value = node.target(value, *node.args[1:], **node.kwargs)
    return value


def _fit(source: fx.Node, chain: list[fx.Node], logical: tuple, transpose: bool, head_rep: int = 1) -> OperandMap:
    """The OperandMap of ``source`` read through ``chain`` as a [b, h, rows, cols] operand.

    ``transpose``: the chain yields [.., cols, rows] (the score GEMM's K^T);
    ``head_rep``: the chain yields ``h / head_rep`` heads (SDPA's
    ``enable_gqa``).  Raises _NoMatch when an index is not affine."""
    shape = _shape(source)
    b, h, rows, cols = logical
    itype = _index_dtype(shape)
    heads = h // head_rep
    want = (b, heads, cols, rows) if transpose else (b, heads, rows, cols)
    indices = []
    for dim, size in enumerate(shape):
        index = torch.arange(size, dtype=itype).view([-1 if j == dim else 1 for j in range(len(shape))]).expand(shape)
        r = _replay(chain, index)
        _need(r.numel() == math.prod(want), f"{source.name}: the operand has {r.numel()} elements, not {math.prod(want)}")
        r = r.reshape(want)
        if transpose:
            r = r.transpose(-1, -2)
        if head_rep > 1:
            r = r.repeat_interleave(head_rep, dim=1)
        indices.append(r)
    for rep in [x for x in range(1, h + 1) if h % x == 0]:
        coeffs = [_coefficients(r, rep) for r in indices]
        if all(_affine(r, c, rep) for r, c in zip(indices, coeffs)):
            return OperandMap(tuple(coeffs), rep)
    raise _NoMatch(f"{source.name} is not read with an affine index per (batch, head, row, column)")


def _coefficients(r: torch.Tensor, rep: int) -> tuple:
    b, h, rows, cols = r.shape
    c0 = int(r[0, 0, 0, 0])
    step = lambda idx, size: int(r[idx]) - c0 if size > 1 else 0  # noqa: E731
    return (c0, step((1, 0, 0, 0), b), step((0, rep, 0, 0), h // rep), step((0, 0, 1, 0), rows), step((0, 0, 0, 1), cols))


def _affine(r: torch.Tensor, c: tuple, rep: int) -> bool:
    """Whether every element of ``r`` [b, h, rows, cols] is c0 + cb*b + ch*(h//rep) + crow*row + ccol*col."""
    b, h, rows, cols = r.shape
    grid = c[0] + c[3] * torch.arange(rows, dtype=torch.int64)[:, None] + c[4] * torch.arange(cols, dtype=torch.int64)[None, :]
    per = max(1, FIT_CHUNK // max(1, rows * cols))
    flat = r.reshape(b * h, rows, cols)
    for start in range(0, b * h, per):
        g = torch.arange(start, min(b * h, start + per), dtype=torch.int64)
        base = c[1] * (g // h) + c[2] * ((g % h) // rep)
        if not torch.equal(flat[start : start + per].to(torch.int64), base[:, None, None] + grid):
            return False
    return True


def _output_map(out: fx.Node, logical: tuple) -> OperandMap:
    """The output's OperandMap: [b, h, m, dv] itself, or [b*h, m, dv]."""
    shape = _shape(out)
    b, h, _, _ = logical
    if len(shape) == 4:
        _need(shape == logical, f"{out.name}: output shape {list(shape)}, not {list(logical)}")
        eye = [(0, 1, 0, 0, 0), (0, 0, 1, 0, 0), (0, 0, 0, 1, 0), (0, 0, 0, 0, 1)]
        return OperandMap(tuple(eye))
    _need(len(shape) == 3 and shape[0] == b * h, f"{out.name}: output shape {list(shape)}")
    return OperandMap(((0, h, 1, 0, 0), (0, 0, 0, 1, 0), (0, 0, 0, 0, 1)))


def _dtype(*nodes: fx.Node) -> torch.dtype:
    dtypes = {value_info(n).dtype for n in nodes}
    _need(len(dtypes) == 1 and next(iter(dtypes)) in ATTENTION_DTYPES, f"q, k, v and the output are {sorted(map(str, dtypes))}; one of float32, bfloat16, float16 is needed")
    return dtypes.pop()


def _check_legal(members: set[fx.Node], output: fx.Node) -> None:
    """Only the output is read outside; no boundary input depends on a member (a cycle)."""
    names = {n.name for n in members}
    for node in members:
        if node is not output:
            outside = [u.name for u in node.users if u.name not in names]
            _need(not outside, f"{node.name} is read outside the attention ({', '.join(outside)})")
    order = {n: k for k, n in enumerate(output.graph.nodes)}
    first = min(order[n] for n in members)
    for node in members:
        for arg in node.all_input_nodes:
            if arg.name in names:
                continue
            stack, seen = [arg], {arg}
            while stack:
                cur = stack.pop()
                for up in cur.all_input_nodes:
                    _need(up.name not in names, f"{arg.name} is computed from the attention's {up.name}: a cycle")
                    if up not in seen and order[up] > first:
                        seen.add(up)
                        stack.append(up)
