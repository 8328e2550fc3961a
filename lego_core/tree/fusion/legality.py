"""Legality of a speculative fusion: the rules bottom-up mutation obeys, in one place.

Mutation proposes to replace neighbouring items of a plan (OR nodes
implemented directly) by one fused sub-problem.  ``fusion_verdict`` says
whether that is legal and, if so, the fusion group the fused kernel will
implement.  The rules, each a function below:

1. **Related** (``related``): the items must share data: one reads a value
   another produces (producer into consumer, possibly through layout-only
   items between them, which are absorbed), or they read a common input over
   the same rows (reductions over the same rows).  Unrelated items save no
   bytes.
2. **No library-only op** (``library_only_ops``): every op must be one a
   template can generate (``policy.category`` pointwise, reduction, layout or
   a getitem).  The one exception is a GEMM (``aten.mm`` / ``aten.addmm``) at
   the head of a GEMM epilogue.  Convolutions, batched matmuls, attention,
   recurrent layers, top-k, scatter, factories ... stay library calls, so
   no fusion ever goes through one.
3. **What may fuse into a GEMM** (``fusion.gemm.gemm_epilogue_group``):
   only an epilogue: the GEMM first, its operands from outside (no
   prologue), then views of its result and pointwise ops on values of the
   full output shape; no reductions.  A convolution heads only a conv +
   eval-BatchNorm fold (``fusion.conv_bn.conv_bn_group``).
4. **One iteration space** (``partition``): the union must form exactly one
   fusion group (pointwise chain or row reduction) under the same rules as
   top-down grouping (``groups.py``), or a GEMM epilogue group.
5. **No cycles** (``creates_cycle``): merging must keep the plan's item
   graph acyclic: no path from one merged item to another through an item
   outside the merge.

Sources: the legality conditions of producer/consumer fusion in XLA's
``FusionDecision``/``InstructionFusion`` and TVM's operator fusion (no cycle,
injective ops into an "out-fusable" GEMM/conv as epilogue only).

Op facts (the GEMM heads) come from the op registry, ``lego_core.ops``.
"""
from __future__ import annotations

import dataclasses

import networkx as nx
import torch.fx as fx

from lego_core import ops
from lego_core.load.capture import op_name
from lego_core.tree.fusion import policy
from lego_core.tree.fusion.groups import FusionGroup, partition

GEMM_OPS = ops.fusion_overloads("gemm")  # mm, addmm: the heads of a GEMM epilogue
CONV_OP = "aten.convolution.default"  # heads a conv + BatchNorm fold (fusion.conv_bn)


@dataclasses.dataclass
class Verdict:
    """``legal`` with the ``group`` to generate, or not with the ``reason``."""

    legal: bool
    reason: str = ""
    group: FusionGroup | None = None


def library_only_ops(nodes: list[fx.Node]) -> list[str]:
    """Ops of ``nodes`` no template can generate (a GEMM head excepted)."""
    bad = []
    for k, n in enumerate(nodes):
        cat = policy.category(n)
        if cat in ("pointwise", "reduction", "layout", "getitem"):
            continue
        if k == 0 and (op_name(n) in GEMM_OPS or op_name(n) == CONV_OP):
            continue
        bad.append(op_name(n))
    return bad


def related(parts: list[list[fx.Node]]) -> bool:
    """Whether some part reads a value another part produces, or two parts read a common input."""
    names = [{n.name for n in part} for part in parts]
    reads = [{a.name for n in part for a in n.all_input_nodes} - own for part, own in zip(parts, names)]
    for i in range(len(parts)):
        for j in range(len(parts)):
            if i != j and (reads[j] & names[i] or (i < j and reads[i] & reads[j])):
                return True
    return False


def creates_cycle(deps: nx.DiGraph, merged: list[str]) -> bool:
    """Whether contracting the ``merged`` item ids of the item DAG ``deps`` makes a cycle."""
    merged_set = set(merged)
    # a cycle appears iff some path leaves the merged set and comes back
    outside_reach = set()
    for m in merged:
        for succ in deps.successors(m):
            if succ not in merged_set:
                outside_reach.add(succ)
                outside_reach |= nx.descendants(deps, succ)
    return bool(outside_reach & merged_set)


def fusion_verdict(nodes: list[fx.Node], parts: list[list[fx.Node]], deps: nx.DiGraph | None = None, part_ids: list[str] | None = None) -> Verdict:
    """Is fusing ``parts`` (node lists of plan items, whose union in schedule
    order is ``nodes``) legal?  ``deps``/``part_ids``: the plan's item DAG
    and the ids of the merged items, for the cycle rule."""
    if not related(parts):
        return Verdict(False, "the items share no data: fusing them saves nothing")
    bad = library_only_ops(nodes)
    if bad:
        return Verdict(False, f"{bad[0]} must stay a library call; no fusion goes through it")
    if deps is not None and part_ids and creates_cycle(deps, part_ids):
        return Verdict(False, "fusing them would create a cycle through another item")
    if op_name(nodes[0]) in GEMM_OPS:
        from lego_core.tree.fusion.gemm import gemm_epilogue_group

        group, reason = gemm_epilogue_group(nodes)
        return Verdict(group is not None, reason if group is None else "", group)
    if op_name(nodes[0]) == CONV_OP:
        from lego_core.tree.fusion.conv_bn import conv_bn_group

        group, reason = conv_bn_group(nodes)
        return Verdict(group is not None, reason if group is None else "", group)
    groups = partition(nodes)
    if len(groups) != 1:
        return Verdict(False, f"the ops form {len(groups)} fusion groups, not one iteration space")
    group = groups[0]
    if group.kind not in ("pointwise", "row_reduction") or not group.fusable:
        return Verdict(False, group.reason or f"a {group.kind} group is not generated")
    return Verdict(True, "", group)
