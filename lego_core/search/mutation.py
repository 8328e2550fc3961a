"""Bottom-up mutation: propose speculative fusions of neighbouring plan items.

Once items of the current best plan are verified, ``propose_fusions``
lists the fusions worth trying, best first:

- *producer into consumer*: an item and an item that reads its output,
  possibly through layout-only items between them (views, permutes), which
  the fusion absorbs; this covers pointwise chains, reduction + pointwise and
  GEMM + epilogue;
- *reductions over the same rows*: two items that read a common input.

Each proposal is checked by ``fusion.legality.fusion_verdict`` (the rules
live there) and ranked by the bytes it saves: the boundary traffic of the
items apart minus that of the fused sub-problem.  An agent then writes the
fused kernel; the search keeps it only if it verifies and is cheaper.

Op facts (the GEMM heads) come from the op registry, ``lego_core.ops``,
through ``fusion.legality``.
"""
from __future__ import annotations

import dataclasses

import torch.fx as fx

from lego_core.cost import costmodel
from lego_core.load.capture import op_name
from lego_core.tree.fusion.legality import CONV_OP, GEMM_OPS, fusion_verdict
from lego_core.search.plan import graph_index, item_dependencies
from lego_core.tree.subproblem import SubProblem, make_subproblem
from lego_core.tree.fusion_tree import OrNode


@dataclasses.dataclass
class FusionProposal:
    """Fuse ``items`` (plan items, schedule order) into ``sub``; ``bytes_saved``
    is the boundary traffic avoided; ``kind`` names the pattern."""

    items: list[OrNode]
    sub: SubProblem
    bytes_saved: int
    kind: str

    @property
    def key(self) -> frozenset:
        return frozenset(n.name for item in self.items for n in item.sub.nodes)

    def label(self) -> str:
        names = " + ".join(_short(item) for item in self.items)
        return f"mutation: {self.kind}: {names}"


def _short(item: OrNode) -> str:
    ops = [op_name(n).split(".")[1] for n in item.sub.nodes if op_name(n) != "getitem"]
    shown = ",".join(dict.fromkeys(ops[:3])) + ("…" if len(set(ops)) > 3 else "")
    return f"{item.id}[{shown}]"


def io_bytes(sub: SubProblem) -> int:
    """Bytes a one-kernel implementation of ``sub`` reads and writes (its boundary)."""
    return costmodel.tensor_bytes([s for s in sub.input_specs + sub.output_specs if s is not None])


def _layout_only(item: OrNode) -> bool:
    return all(op_name(n) == "getitem" or costmodel.is_layout_op(n.target) for n in item.sub.nodes)


def _candidate_groups(items: list[OrNode]) -> list[tuple[list[OrNode], str]]:
    """Item sets worth fusing: producer -> (layout items ->) consumer, and siblings reading a common input."""
    deps = item_dependencies(items)
    by_id = {item.id: item for item in items}
    found: list[tuple[list[OrNode], str]] = []
    for item in items:
        if _layout_only(item):
            continue
        frontier = [(succ, []) for succ in deps.successors(item.id)]
        while frontier:
            succ_id, via = frontier.pop()
            succ = by_id[succ_id]
            if _layout_only(succ) and len(via) < 3:
                frontier.extend((s, via + [succ]) for s in deps.successors(succ_id))
                continue
            head = op_name(item.sub.nodes[0])
            kind = "GEMM epilogue" if head in GEMM_OPS else "conv + BatchNorm fold" if head == CONV_OP else "producer-consumer"
            found.append(([item, *via, succ], kind))
    readers: dict[str, list[OrNode]] = {}
    for item in items:
        if _layout_only(item) or item.sub.kind != "row_reduction":
            continue
        for value in item.sub.inputs:
            readers.setdefault(value.name, []).append(item)
    for group in readers.values():
        for a, b in zip(group, group[1:]):
            if not deps.has_edge(a.id, b.id):
                found.append(([a, b], "reductions over the same rows"))
    return found


def propose_fusions(items: list[OrNode], graph_outputs: list[fx.Node], tried: set[frozenset]) -> tuple[list[FusionProposal], list[tuple[str, str]]]:
    """Legal fusions of the plan's ``items`` not in ``tried``, most bytes saved first.

    Returns (proposals, rejections) where rejections are (label, reason)
    for illegal ones, for the transcript."""
    deps = item_dependencies(items)
    proposals: list[FusionProposal] = []
    rejected: list[tuple[str, str]] = []
    seen: set[frozenset] = set()
    for group, kind in _candidate_groups(items):
        ordered = sorted(group, key=lambda it: min(graph_index(n) for n in it.sub.nodes))
        nodes = sorted({n for it in ordered for n in it.sub.nodes}, key=graph_index)
        key = frozenset(n.name for n in nodes)
        if key in tried or key in seen:
            continue
        seen.add(key)
        verdict = fusion_verdict(nodes, [it.sub.nodes for it in ordered], deps, [it.id for it in ordered])
        if not verdict.legal:
            rejected.append((" + ".join(_short(it) for it in ordered), verdict.reason))
            continue
        sub = make_subproblem("", list(verdict.group.nodes), graph_outputs, verdict.group.kind, group=verdict.group)
        saved = sum(io_bytes(it.sub) for it in ordered) - io_bytes(sub)
        if saved <= 0:
            rejected.append((" + ".join(_short(it) for it in ordered), "saves no bytes"))
            continue
        proposals.append(FusionProposal(ordered, sub, saved, kind))
    proposals.sort(key=lambda p: -p.bytes_saved)
    return proposals, rejected
