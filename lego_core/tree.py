"""The FusionTree: an AND-OR tree over sub-problems, built top-down.

An :class:`OrNode` is a sub-problem with alternative implementations: its
own candidates (one fused kernel, or the library op) and/or decompositions.
An :class:`AndNode` is one decomposition of its parent into ordered child
sub-problems that must all be solved.

``build_tree(graph)`` constructs the tree top-down:

1. the root OR node is the whole model;
2. a region is split along the module hierarchy (``nn_module_stack``) into
   maximal consecutive runs of nodes that belong to the same child module
   (or to the region's own module); consecutive runs of a topological order
   can never form a cycle;
3. a region with no child modules left is split into fusion groups
   (``fusion.groups.partition``); each group is a leaf OR node whose
   candidates the agents propose.
"""
from __future__ import annotations

import dataclasses
import itertools
from typing import Iterator

import torch.fx as fx

from lego_core.capture import Graph
from lego_core.fusion.groups import FusionGroup, partition
from lego_core.subproblem import SubProblem, make_subproblem


@dataclasses.dataclass
class Candidate:
    """One implementation of a leaf sub-problem.

    ``implementation`` is ``triton`` or ``library``; ``source`` the kernel
    file's text (triton only); ``verified`` the verification report (None
    until checked; library candidates are the reference and need none);
    ``time_ms`` with ``time_kind`` ``measured`` or ``estimated``.
    """

    id: str
    node_id: str
    agent: str
    implementation: str
    source: str = ""
    kernel_name: str = ""
    verified: object = None
    time_ms: float | None = None
    time_kind: str = "estimated"
    rejected_reason: str = ""

    @property
    def usable(self) -> bool:
        return self.implementation == "library" or bool(self.verified is not None and self.verified.passed)


@dataclasses.dataclass
class OrNode:
    """A sub-problem with alternatives: ``candidates`` (leaves) and/or ``children`` (AND nodes)."""

    id: str
    sub: SubProblem
    parent: str | None
    children: list["AndNode"] = dataclasses.field(default_factory=list)
    candidates: list[Candidate] = dataclasses.field(default_factory=list)
    chosen: Candidate | None = None
    reused_from: str | None = None

    @property
    def is_leaf(self) -> bool:
        return not self.children


@dataclasses.dataclass
class AndNode:
    """One decomposition of ``parent`` into ordered child OR nodes."""

    id: str
    parent: str
    label: str
    children: list[OrNode] = dataclasses.field(default_factory=list)


class FusionTree:
    """The tree plus lookups; ``root`` is the whole model."""

    def __init__(self, root: OrNode):
        self.root = root

    def walk(self) -> Iterator[OrNode | AndNode]:
        """Every node, parents before children (the order events are sent in)."""
        stack: list[OrNode | AndNode] = [self.root]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(reversed(node.children))

    def leaves(self) -> list[OrNode]:
        """Leaf OR nodes (fusion groups) in schedule order."""
        return [n for n in self.walk() if isinstance(n, OrNode) and n.is_leaf]


def _module_chain(node: fx.Node) -> list[tuple[str, str]]:
    """(path, class name) of the modules a node was called in, outermost first."""
    stack = node.meta.get("nn_module_stack") or {}
    return [(path, str(getattr(typ, "__name__", typ)).rsplit(".", 1)[-1]) for path, typ in stack.values() if path]


def build_tree(graph: Graph) -> FusionTree:
    """Top-down construction of the FusionTree of a captured graph."""
    ids = itertools.count()

    def next_id(prefix: str) -> str:
        return f"{prefix}{next(ids):03d}"

    outputs = graph.output_nodes
    root_sub = make_subproblem("sp_model", graph.compute_nodes, outputs, "region", label="Model")
    root_sub.module_path = ""
    root = OrNode(next_id("or"), root_sub, None)
    _expand(root, depth=0, outputs=outputs, next_id=next_id)
    return FusionTree(root)


def _expand(node: OrNode, depth: int, outputs: list[fx.Node], next_id) -> None:
    runs = _module_runs(node.sub.nodes, depth)
    if len(runs) > 1 or (runs and runs[0][0] is not None):
        split = AndNode(next_id("and"), node.id, "by module hierarchy")
        node.children.append(split)
        for key, nodes in runs:
            child_id = next_id("or")
            path = key[0] if key is not None else node.sub.module_path
            label = f"{key[0]} ({key[1]})" if key is not None else f"{path or 'model'} (own ops)"
            sub = make_subproblem(f"sp{child_id[2:]}", nodes, outputs, "region", label=label)
            sub.module_path = path
            child = OrNode(child_id, sub, split.id)
            split.children.append(child)
            if key is not None:
                _expand(child, depth + 1, outputs, next_id)
            else:
                _split_groups(child, outputs, next_id)
        return
    _split_groups(node, outputs, next_id)


def _module_runs(nodes: list[fx.Node], depth: int) -> list[tuple[tuple[str, str] | None, list[fx.Node]]]:
    """Maximal consecutive runs of nodes by their module (path, class) at
    ``depth`` (None: the region's own ops)."""
    runs: list[tuple[str | None, list[fx.Node]]] = []
    for n in nodes:
        chain = _module_chain(n)
        key = chain[depth] if len(chain) > depth else None
        if runs and runs[-1][0] == key:
            runs[-1][1].append(n)
        else:
            runs.append((key, [n]))
    return runs


def _split_groups(node: OrNode, outputs: list[fx.Node], next_id) -> None:
    groups = partition(node.sub.nodes)
    if len(groups) == 1:
        _make_leaf(node, groups[0])
        return
    split = AndNode(next_id("and"), node.id, "fusion groups")
    node.children.append(split)
    for group in groups:
        child_id = next_id("or")
        sub = make_subproblem(f"sp{child_id[2:]}", group.nodes, outputs, group.kind, group=group)
        split.children.append(OrNode(child_id, sub, split.id))


def _make_leaf(node: OrNode, group: FusionGroup) -> None:
    node.sub.kind = group.kind
    node.sub.group = group
