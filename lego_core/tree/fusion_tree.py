"""The FusionTree: an AND-OR tree over sub-problems, built top-down.

An :class:`OrNode` is a sub-problem with alternative implementations: its
own candidates (one fused kernel, or the library op) and/or decompositions.
An :class:`AndNode` is one decomposition of its parent into ordered child
sub-problems that must all be solved.

``build_tree(graph)`` constructs the tree top-down, one decomposition kind
per level:

1. the root OR node is the whole model;
2. ``by module hierarchy``: a region with child modules is split into the
   maximal consecutive runs of nodes that belong to the same child module (or
   to the region's own ops); consecutive runs of a topological order can
   never form a cycle;
3. ``by heavy-op seams``: a region is split at its heavy ops (GEMM, conv,
   attention matmuls, recurrent layers): each heavy op alone, and the chains
   of pointwise / reduction / layout ops between them.  A region with child
   modules gets this as a second decomposition next to the module one (its
   chains cross the child modules' seams, e.g. a residual add and the next
   block's LayerNorm); a region without child modules gets only this one;
4. ``fusion groups``: a chain is split into fusion groups
   (``fusion.groups.partition``); each group is a leaf OR node whose
   candidates the agents propose.

Sub-problems that appear in several decompositions (the same fusion group
under the module split and under the seam split) have equal signatures, so
structure-aware dedupe solves them once.  The search adds more alternatives while it runs:
``FusionTree.add_finer_split`` (a leaf whose direct candidates keep failing
verification is split into smaller groups) and ``FusionTree.add_mutation``
(a fused sub-problem replacing neighbouring plan items, as a new
decomposition of their common ancestor).  A mutation's AND node *shares* the
untouched items with the decomposition they came from (``AndNode.shared``),
so the tree is a DAG for plan selection, while ``walk`` visits every node
once through the ``children`` that own it.
"""
from __future__ import annotations

import dataclasses
import itertools
from typing import Iterator

import torch.fx as fx

from lego_core.load.capture import Graph
from lego_core.load.capture import op_name
from lego_core.events import NodeCreated
from lego_core.tree.fusion import policy
from lego_core.tree.fusion.attention import find_attention
from lego_core.tree.fusion.groups import FusionGroup, partition
from lego_core.tree.fusion.sequence import find_sequence_groups
from lego_core.tree.subproblem import SubProblem, make_subproblem


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
    fused_from: list[str] | None = None  # mutation: the plan items this node fuses
    feedback: list[str] = dataclasses.field(default_factory=list)
    retry_agents: list[str] = dataclasses.field(default_factory=list)  # the agents a retry asks again

    @property
    def is_leaf(self) -> bool:
        return not self.children


@dataclasses.dataclass
class AndNode:
    """One decomposition of ``parent`` into child OR nodes.

    ``children`` are owned by this node (created for it); ``shared`` are OR
    nodes owned elsewhere that this decomposition reuses (mutations keep the
    untouched items of a plan).  ``label`` names the kind of decomposition:
    ``by module hierarchy``, ``by heavy-op seams``, ``fusion groups``,
    ``finer split`` or ``mutation: ...``.
    """

    id: str
    parent: str
    label: str
    children: list[OrNode] = dataclasses.field(default_factory=list)
    shared: list[OrNode] = dataclasses.field(default_factory=list)

    @property
    def parts(self) -> list[OrNode]:
        """Every OR node this decomposition needs: owned children and shared ones."""
        return self.children + self.shared


class FusionTree:
    """The tree plus lookups; ``root`` is the whole model.

    ``graph_outputs`` are the model's output values (a sub-problem's boundary
    includes them); ``nodes`` maps every node id to its node.
    """

    def __init__(self, root: OrNode, graph_outputs: list[fx.Node] | None = None, next_id=None):
        self.root = root
        self.graph_outputs = graph_outputs or []
        self._next_id = next_id or _id_counter()
        self.nodes: dict[str, OrNode | AndNode] = {n.id: n for n in self.walk()}

    def walk(self) -> Iterator[OrNode | AndNode]:
        """Every node once, parents before children (the order events are sent in)."""
        stack: list[OrNode | AndNode] = [self.root]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(reversed(node.children))

    def leaves(self) -> list[OrNode]:
        """Leaf OR nodes (no decomposition) in schedule order."""
        return [n for n in self.walk() if isinstance(n, OrNode) and n.is_leaf]

    def first_decomposition_leaves(self) -> list[OrNode]:
        """The leaves reached by taking every OR node's first decomposition
        (by module hierarchy where there is one): a partition of the graph's
        compute nodes, in schedule order."""
        leaves: list[OrNode] = []

        def visit(node: OrNode) -> None:
            if node.is_leaf:
                leaves.append(node)
            else:
                for child in node.children[0].children:
                    visit(child)

        visit(self.root)
        return leaves

    def or_nodes(self) -> list[OrNode]:
        return [n for n in self.walk() if isinstance(n, OrNode)]

    def parent_or(self, node: OrNode) -> OrNode | None:
        """The OR node whose decomposition owns ``node`` (None for the root)."""
        if node.parent is None:
            return None
        return self.nodes[self.nodes[node.parent].parent]

    def ancestors(self, node: OrNode) -> list[OrNode]:
        """``node``'s OR ancestors, nearest first (``node`` itself included)."""
        chain = [node]
        while (up := self.parent_or(chain[-1])) is not None:
            chain.append(up)
        return chain

    def add_finer_split(self, node: OrNode) -> AndNode | None:
        """A new decomposition of a fusion-group leaf into smaller groups:
        its nodes cut in two halves at the middle, each half regrouped
        (``partition``).  None when the leaf has a single op.  The leaf keeps
        its own candidates; the split is an alternative to them."""
        nodes = [n for n in node.sub.nodes]
        compute = [n for n in nodes if n.op == "call_function" and op_name(n) != "getitem"]
        if len(compute) < 2:
            return None
        half = len(nodes) // 2
        while half < len(nodes) and op_name(nodes[half]) == "getitem":
            half += 1  # a tuple and its getitems stay together
        if half in (0, len(nodes)):
            return None
        split = self.new_and(node, "finer split")
        for part in (nodes[:half], nodes[half:]):
            for group in partition(part):
                self.new_or(make_subproblem("", group.nodes, self.graph_outputs, group.kind, group=group), split)
        return split

    def add_mutation(self, host: OrNode, fused: SubProblem, replaced: list[OrNode], kept: list[OrNode], label: str) -> tuple[AndNode, OrNode]:
        """Record a speculative fusion: a new decomposition of ``host`` made
        of the fused sub-problem (a new OR node) plus the ``kept`` OR nodes of
        host's current plan (shared, not copied).  ``replaced`` are the items
        the fused node stands in for (for the report and events)."""
        split = self.new_and(host, label)
        split.shared = list(kept)
        node = self.new_or(fused, split)
        node.fused_from = [r.id for r in replaced]
        return split, node

    def new_and(self, parent: OrNode, label: str) -> AndNode:
        node = AndNode(self._next_id("and"), parent.id, label)
        parent.children.append(node)
        self.nodes[node.id] = node
        return node

    def new_or(self, sub: SubProblem, parent: AndNode) -> OrNode:
        node_id = self._next_id("or")
        if not sub.id:
            sub.id = f"sp{node_id[2:]}"
        node = OrNode(node_id, sub, parent.id)
        parent.children.append(node)
        self.nodes[node.id] = node
        return node


def node_created(node: OrNode | AndNode, estimate_ms: float | None = None) -> NodeCreated:
    """The ``NodeCreated`` event announcing a tree node; ``estimate_ms``: an
    OR node's library time as the cost model estimates it (ms), or None."""
    if isinstance(node, AndNode):
        return NodeCreated(node_id=node.id, kind="and", parent=node.parent, label=node.label, shared=[p.id for p in node.shared])
    sub = node.sub
    shapes = [list(s.shape) if s else None for s in sub.output_specs]
    input_shapes = [list(s.shape) if s else None for s in sub.input_specs]
    return NodeCreated(
        node_id=node.id, kind="or", parent=node.parent, label=sub.label, signature=sub.signature, ops=sub.ops,
        shapes=shapes, input_shapes=input_shapes, reference=sub.reference_source("reference"),
        module_path=sub.module_path or "", region_kind=sub.kind or "",
        estimate_ms=None if estimate_ms is None else round(float(estimate_ms), 9),
    )


def node_id_for(sub_id: str) -> str:
    """The OR node id of a sub-problem id made by the tree (``sp012`` ->
    ``or012``; the root's ``sp_model`` -> ``or000``): how an agent that sees
    only the sub-problem names the node in its events."""
    return "or000" if sub_id == "sp_model" else f"or{sub_id[2:]}"


def _id_counter():
    ids = itertools.count()

    def next_id(prefix: str) -> str:
        return f"{prefix}{next(ids):03d}"

    return next_id


def _module_chain(node: fx.Node) -> list[tuple[str, str]]:
    """(path, class name) of the modules a node was called in, outermost first."""
    stack = node.meta.get("nn_module_stack") or {}
    return [(path, str(getattr(typ, "__name__", typ)).rsplit(".", 1)[-1]) for path, typ in stack.values() if path]


def build_tree(graph: Graph) -> FusionTree:
    """Top-down construction of the FusionTree of a captured graph."""
    next_id = _id_counter()
    outputs = graph.output_nodes
    root_sub = make_subproblem("sp_model", graph.compute_nodes, outputs, "region", label="Model")
    root_sub.module_path = ""
    root = OrNode(next_id("or"), root_sub, None)
    _expand(root, depth=0, outputs=outputs, next_id=next_id)
    return FusionTree(root, outputs, next_id)


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
                _split_seams(child, outputs, next_id)
        _split_seams(node, outputs, next_id)  # the alternative: heavy-op seams across the child modules
        return
    _split_seams(node, outputs, next_id)


def _split_seams(node: OrNode, outputs: list[fx.Node], next_id) -> None:
    """Split a region without child modules at its heavy ops; chains between them go on to fusion groups."""
    pieces = _heavy_seams(node.sub.nodes)
    if len(pieces) <= 1:
        if not node.children:
            _split_groups(node, outputs, next_id)
        _split_attention(node, outputs, next_id)
        _split_sequence(node, outputs, next_id)
        return
    split = AndNode(next_id("and"), node.id, "by heavy-op seams")
    node.children.append(split)
    for is_heavy, nodes in pieces:
        child_id = next_id("or")
        sub = make_subproblem(f"sp{child_id[2:]}", nodes, outputs, "region")
        sub.module_path = node.sub.module_path or sub.module_path  # at the model's root: its own ops' common module
        child = OrNode(child_id, sub, split.id)
        split.children.append(child)
        _split_groups(child, outputs, next_id)
    _split_attention(node, outputs, next_id)  # last: the first decompositions stay the library's
    _split_sequence(node, outputs, next_id)


def _heavy_seams(nodes: list[fx.Node]) -> list[tuple[bool, list[fx.Node]]]:
    """Each heavy op alone (with the getitems that unpack it) and the maximal chains between them."""
    pieces: list[tuple[bool, list[fx.Node]]] = []
    where: dict[str, int] = {}
    for n in nodes:
        cat = policy.category(n)
        if cat == "getitem" and isinstance(n.args[0], fx.Node) and n.args[0].name in where and pieces[where[n.args[0].name]][0]:
            pieces[where[n.args[0].name]][1].append(n)
        elif cat == "heavy":
            pieces.append((True, [n]))
        elif pieces and not pieces[-1][0]:
            pieces[-1][1].append(n)
        else:
            pieces.append((False, [n]))
        where[n.name] = len(pieces) - 1
    return pieces


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


def _split_attention(node: OrNode, outputs: list[fx.Node], next_id) -> None:
    """An ``attention`` decomposition of a region holding attention layers
    (``fusion.attention.find_attention``) that no child module holds whole:
    the nodes the attention group needs before it, the group (a leaf the
    template agent writes a flash-attention kernel for), the rest; layers in
    order.  Added after the region's other decompositions, which keep the
    library path.  Each non-attention piece is split at heavy-op seams."""
    if node.is_leaf and node.sub.kind != "region":
        return  # already one fusion group
    groups = find_attention(node.sub.nodes)
    inner = [c for c in node.children[0].children] if node.children and node.children[0].label == "by module hierarchy" else []
    groups = [g for g in groups if not any(g.names <= {n.name for n in c.sub.nodes} for c in inner)]
    if not groups:
        return
    _split_around(node, outputs, next_id, groups, "attention")


def _split_sequence(node: OrNode, outputs: list[fx.Node], next_id) -> None:
    """A ``sequence mixer`` decomposition of a region holding depthwise conv1d
    or scan (cumsum) groups (``fusion.sequence.find_sequence_groups``) that no
    child module holds whole, built like the attention one: the groups become
    leaves the template agent writes kernels for, the nodes between them are
    split at heavy-op seams.  An alternative: the library path stays."""
    if node.is_leaf and node.sub.kind != "region":
        return  # already one fusion group
    groups = find_sequence_groups(node.sub.nodes)
    inner = [c for c in node.children[0].children] if node.children and node.children[0].label == "by module hierarchy" else []
    groups = [g for g in groups if not any(g.names <= {n.name for n in c.sub.nodes} for c in inner)]
    if groups:
        _split_around(node, outputs, next_id, groups, "sequence mixer")


def _split_around(node: OrNode, outputs: list[fx.Node], next_id, groups: list[FusionGroup], label: str) -> None:
    """A decomposition of ``node`` labelled ``label``: for each group in order,
    the nodes it needs before it, the group (a leaf of the group's kind), then the rest."""
    pieces: list[tuple[str, list[fx.Node], FusionGroup | None]] = []
    rest = list(node.sub.nodes)
    for group in groups:
        members = group.names
        needed = _ancestors_in(group.nodes, rest, members)
        first = min(rest.index(n) for n in group.nodes)
        before = [n for k, n in enumerate(rest) if n.name not in members and (k < first or n.name in needed)]
        taken = {n.name for n in before} | members
        if before:
            pieces.append(("region", before, None))
        pieces.append((group.kind, group.nodes, group))
        rest = [n for n in rest if n.name not in taken]
    if rest:
        pieces.append(("region", rest, None))
    split = AndNode(next_id("and"), node.id, label)
    node.children.append(split)
    for kind, nodes, group in pieces:
        child_id = next_id("or")
        if group is not None:
            sub = make_subproblem(f"sp{child_id[2:]}", nodes, outputs, kind, group=group)
            sub.module_path = node.sub.module_path or sub.module_path
            sub.label = f"{sub.module_path or 'model'} · {kind}"
            split.children.append(OrNode(child_id, sub, split.id))
            continue
        sub = make_subproblem(f"sp{child_id[2:]}", nodes, outputs, "region")
        sub.module_path = node.sub.module_path or sub.module_path
        child = OrNode(child_id, sub, split.id)
        split.children.append(child)
        _split_seams(child, outputs, next_id)


def _ancestors_in(start: list[fx.Node], pool: list[fx.Node], exclude: set[str]) -> set[str]:
    """Names of the nodes of ``pool`` (not in ``exclude``) that ``start`` depends on."""
    names = {n.name for n in pool}
    found: set[str] = set()
    stack = list(start)
    while stack:
        node = stack.pop()
        for arg in node.all_input_nodes:
            if arg.name in names and arg.name not in exclude and arg.name not in found:
                found.add(arg.name)
                stack.append(arg)
    return found
