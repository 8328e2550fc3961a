"""Plan selection: the cheapest complete plan of an AND-OR FusionTree.

A plan makes one choice at every OR node it reaches: one of the node's own
usable candidates, or one of its decompositions, whose parts are all chosen
in turn.  ``best_plan`` is the textbook bottom-up dynamic programme over an
AND-OR graph (cost of an OR node = min over its alternatives; cost of an AND
node = sum over its parts), memoised because mutation decompositions share
parts with others (the tree is a DAG for plan selection).

The plan's *items* are the OR nodes implemented directly (by a kernel or the
library); their node sets partition the graph's compute nodes.  Items come
back in a valid schedule: a topological order of the items' data
dependencies (``networkx``), ties broken by graph position.
"""
from __future__ import annotations

import dataclasses
import math

import networkx as nx

from lego_core.tree.fusion_tree import AndNode, Candidate, FusionTree, OrNode

IMPROVEMENT = 1e-6  # relative: a plan must be this much cheaper to count as better (summing
# the same costs in another order differs by ~1e-8 ms, which is no improvement)


def cheaper(a: float, b: float) -> bool:
    """Whether cost ``a`` (ms) is really below cost ``b`` (ms), not by rounding."""
    return a < b * (1 - IMPROVEMENT)


@dataclasses.dataclass
class Plan:
    """A complete plan: ``items`` in schedule order (each with ``chosen``
    set), ``cost_ms`` the sum of the chosen candidates' times and
    ``cost_kind`` ``measured`` when every one was measured on a GPU."""

    items: list[OrNode]
    cost_ms: float
    cost_kind: str

    @property
    def item_ids(self) -> list[str]:
        return [item.id for item in self.items]


def direct_options(node: OrNode, force_triton: bool = False) -> list[Candidate]:
    """Usable candidates of a node with a time, cheapest first (a verified
    Triton candidate first whatever its cost when ``force_triton``)."""
    usable = [c for c in node.candidates if c.usable and c.time_ms is not None]
    return sorted(usable, key=lambda c: (force_triton and c.implementation != "triton", c.time_ms))


def best_plan(tree: FusionTree, force_triton: bool = False, root: OrNode | None = None) -> Plan:
    """The cheapest complete plan under ``root`` (default: the whole model).

    Raises ValueError when no complete plan exists (a leaf without a usable
    candidate: leaves always get the library candidate before planning).
    """
    memo: dict[str, tuple[float, object]] = {}

    def cost(node: OrNode) -> float:
        if node.id in memo:
            return memo[node.id][0]
        memo[node.id] = (math.inf, None)  # a cycle guard; trees built here have none
        best: tuple[float, object] = (math.inf, None)
        options = direct_options(node, force_triton)
        if options:
            best = (options[0].time_ms, options[0])
            if force_triton and options[0].implementation == "triton":
                memo[node.id] = best
                return best[0]
        for split in node.children:
            total = sum(cost(part) for part in split.parts)
            if total < best[0]:
                best = (total, split)
        memo[node.id] = best
        return best[0]

    start = root or tree.root
    total = cost(start)
    if math.isinf(total):
        raise ValueError(f"no complete plan under {start.id}: some sub-problem has no usable candidate")
    items: list[OrNode] = []

    def collect(node: OrNode) -> None:
        choice = memo[node.id][1]
        if isinstance(choice, AndNode):
            for part in choice.parts:
                collect(part)
        else:
            node.chosen = choice
            items.append(node)

    collect(start)
    ordered = schedule(items)
    kinds = {item.chosen.time_kind for item in ordered}
    return Plan(ordered, sum(item.chosen.time_ms for item in ordered), "measured" if kinds == {"measured"} else "estimated")


def item_dependencies(items: list[OrNode]) -> nx.DiGraph:
    """Items as a DAG: an edge a -> b when b reads a value a produces."""
    producer = {n.name: item.id for item in items for n in item.sub.nodes}
    deps = nx.DiGraph()
    deps.add_nodes_from(item.id for item in items)
    for item in items:
        for value in item.sub.inputs:
            source = producer.get(value.name)
            if source is not None and source != item.id:
                deps.add_edge(source, item.id)
    return deps


def schedule(items: list[OrNode]) -> list[OrNode]:
    """Items in a valid execution order (graph position breaks ties).

    Raises ValueError when the items' dependencies form a cycle."""
    position = {}
    for item in items:
        first = min((graph_index(n) for n in item.sub.nodes), default=0)
        position[item.id] = first
    deps = item_dependencies(items)
    try:
        order = list(nx.lexicographical_topological_sort(deps, key=lambda i: position[i]))
    except nx.NetworkXUnfeasible as exc:
        raise ValueError("the plan's items depend on each other in a cycle") from exc
    by_id = {item.id: item for item in items}
    return [by_id[i] for i in order]


def graph_index(node) -> int:
    """Position of an fx node in its graph (fx keeps nodes in a linked list)."""
    index = node.meta.get("lego_index")
    if index is None:
        for k, n in enumerate(node.graph.nodes):
            n.meta["lego_index"] = k
        index = node.meta["lego_index"]
    return index
