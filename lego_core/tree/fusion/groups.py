"""Fusion groups: split an ordered list of graph nodes into fusable groups.

The mechanism behind ``policy.py``.  One pass over the nodes in topological
order keeps one *open* group and decides for each node:

1. ``getitem`` joins the group of the value it unpacks;
2. a pointwise or row-reduction node joins the open group when its shapes fit
   the group's iteration space (``_GroupShape.admits``);
3. a node that cannot join and does not read the open group is placed
   *before* it (hoisted), so the open group stays open across independent
   side computations (mask slicing, a parallel branch);
4. otherwise the open group is closed and the node starts the next one.

Every group only reads values of groups placed before it, so the sequence is
a valid schedule with no cycles by construction.

Iteration space.  A pointwise group has one shape S; every member's output
broadcasts into S.  A row-reduction group additionally reduces the last
dimension of S (length N = S[-1]); each value in it has a *role*: ``vec``
(varies along the row) or ``scal`` (one number per row), and a *form*:
``full`` (rank of S, broadcasting into S right-aligned) or ``rows`` (shape
S[:-1], as left by a reduction without keepdim or a squeeze).  Members whose
shape is smaller than S may only feed the group itself; at close time such a
member that is read outside the group is moved out before it.

Op facts (which ops are pointwise, row reductions, softmaxes) come from the
op registry, ``lego_core.ops``, through ``policy``.
"""
from __future__ import annotations

import dataclasses

import torch.fx as fx

from lego_core.load.capture import op_name, value_info
from lego_core.tree.fusion import policy


@dataclasses.dataclass(frozen=True)
class Role:
    """How a value is laid out over a row program: ``kind`` vec/scal, ``form`` full/rows."""

    kind: str
    form: str = "full"


@dataclasses.dataclass
class FusionGroup:
    """An ordered set of nodes that becomes one sub-problem.

    ``kind`` is ``pointwise``, ``row_reduction``, ``layout`` or ``heavy``;
    ``shape`` the iteration shape S for fusable kinds; ``roles`` maps node
    names to :class:`Role` (fusable kinds only); ``fusable`` is False with a
    ``reason`` when the group cannot be generated and stays a library call.
    """

    nodes: list[fx.Node]
    kind: str
    shape: tuple | None = None
    roles: dict = dataclasses.field(default_factory=dict)
    fusable: bool = True
    reason: str = ""
    library_ops: tuple = ()  # ATen ops the group's kernel file hands to the library on purpose (a conv_bn's conv)

    @property
    def names(self) -> set[str]:
        return {n.name for n in self.nodes}


def broadcasts_to(shape: tuple, target: tuple) -> bool:
    """Whether ``shape`` broadcasts to ``target`` under torch's right-aligned rules."""
    if len(shape) > len(target):
        return False
    for a, b in zip(reversed(shape), reversed(target)):
        if a != b and a != 1:
            return False
    return True


def _shape(node: fx.Node) -> tuple | None:
    info = value_info(node)
    if info is None and policy.is_channel_affine(node):
        info = value_info(node.args[0])  # eval BatchNorm: output 0 has its input's shape
    return info.shape if info else None


class _GroupShape:
    """Incremental shape and role bookkeeping of the open fusable group."""

    def __init__(self) -> None:
        self.shape: tuple | None = None
        self.is_row = False
        self.roles: dict[str, Role] = {}
        self.external: dict[str, Role] = {}  # roles of values read from outside, by torch's broadcasting
        self.channel_affine = False  # holds an eval BatchNorm (indexed by dim 1): no row reduction may join

    def role_of(self, arg: fx.Node) -> Role | None:
        """Role of an operand: its in-group role, or the one its shape implies."""
        if arg.name in self.roles:
            return self.roles[arg.name]
        shp = _shape(arg)
        if shp is None or self.shape is None:
            return None
        if broadcasts_to(shp, self.shape):
            varies = len(shp) >= 1 and shp[-1] != 1 and self.shape[-1] != 1
            return Role("vec" if varies or not self.is_row else "scal")
        return None

    def admits(self, node: fx.Node) -> dict[str, Role] | None:
        """Roles the node's values would take in this group, or None if it cannot join."""
        cat = policy.category(node)
        if cat == "pointwise":
            return self._admit_pointwise(node)
        if cat == "reduction":
            return self._admit_reduction(node)
        if cat == "layout":
            return self._admit_row_squeeze(node)
        return None

    def _admit_pointwise(self, node: fx.Node) -> dict[str, Role] | None:
        out = _shape(node)
        if out is None:
            return None
        affine = policy.is_channel_affine(node)
        if affine and self.is_row:
            return None  # a per-channel affine indexes dim 1; row programs index rows
        if self.shape is None:
            return {node.name: Role("vec")}
        if affine and out != self.shape:
            return None  # its [C] operands are read along dim 1 of the iteration shape itself
        operands = [a for a in node.all_input_nodes]
        if self.is_row:
            roles = [self.role_of(a) for a in operands]
            if any(r is None for r in roles):
                return None
            if out == self.shape[:-1] and out != self.shape:
                if all(r.form == "rows" or _shape(a) == () for r, a in zip(roles, operands)):
                    return {node.name: Role("scal", "rows")}
                return None
            if any(r.form == "rows" for r in roles) or not broadcasts_to(out, self.shape):
                return None
            kind = "vec" if any(r.kind == "vec" for r in roles) else "scal"
            if kind == "scal" and out[-1:] != (1,) and out != ():
                return None
            return {node.name: Role(kind)}
        if broadcasts_to(out, self.shape) or (broadcasts_to(self.shape, out) and not self.channel_affine):
            return {node.name: Role("vec")}  # with a channel affine inside, S keeps its rank (dim 1 = channel)
        return None

    def _admit_reduction(self, node: fx.Node) -> dict[str, Role] | None:
        if self.channel_affine:
            return None
        x = node.args[0]
        xs = _shape(x)
        if self.shape is not None and xs != self.shape:
            return None
        if self.shape is not None:
            role = self.role_of(x)
            if role is None or role.kind != "vec" or role.form != "full":
                return None
        name = op_name(node)
        if name in policy.SOFTMAX_OPS:
            return {node.name: Role("vec")}
        if name == "aten.native_layer_norm.default":
            for w in node.args[2:4]:
                if isinstance(w, fx.Node) and _shape(w) != xs[-1:]:
                    return None
            return {node.name: Role("vec")}  # a tuple; getitems take per-output roles
        form = "full" if policy.keepdim(node) else "rows"
        return {node.name: Role("scal", form)}

    def _admit_row_squeeze(self, node: fx.Node) -> dict[str, Role] | None:
        """A squeeze/unsqueeze/view of a per-row scalar is free inside a row group."""
        if not self.is_row or not node.all_input_nodes:
            return None
        src = node.args[0]
        role = self.roles.get(src.name) if isinstance(src, fx.Node) else None
        out = _shape(node)
        if role is None or role.kind != "scal" or out is None:
            return None
        rows = self.shape[:-1]
        if out == rows:
            return {node.name: Role("scal", "rows")}
        if out == rows + (1,):
            return {node.name: Role("scal", "full")}
        return None

    def add(self, node: fx.Node, roles: dict[str, Role]) -> None:
        cat = policy.category(node)
        if cat == "reduction":
            self.shape = _shape(node.args[0])
            self.is_row = True
        elif cat == "pointwise":
            out = _shape(node)
            if self.shape is None or (not self.is_row and broadcasts_to(self.shape, out) and out != self.shape):
                self.shape = out
        if policy.is_channel_affine(node):
            self.channel_affine = True
            channel = {a.name for a in policy.channel_operands(node)}
        else:
            channel = set()
        for arg in node.all_input_nodes:
            if arg.name in channel:
                continue  # read along dim 1, not by broadcasting (codegen: channel operands)
            if arg.name not in self.roles and arg.name not in self.external:
                role = self.role_of(arg)
                if role is not None:
                    self.external[arg.name] = role
        self.roles.update(roles)


def _getitem_role(item: fx.Node, parent_role: Role | None) -> Role:
    if op_name(item.args[0]) == "aten.native_layer_norm.default" and item.args[1] != 0:
        return Role("scal")
    return parent_role or Role("vec")


def partition(nodes: list[fx.Node]) -> list[FusionGroup]:
    """Split topologically ordered nodes into an ordered list of fusion groups.

    Each node lands in exactly one group; the groups, in the order returned,
    form a valid schedule (a group reads only values of earlier groups or of
    nodes outside ``nodes``).
    """
    done: list[FusionGroup] = []
    where: dict[str, FusionGroup] = {}
    open_group: FusionGroup | None = None
    tracker = _GroupShape()

    def close() -> None:
        nonlocal open_group, tracker
        if open_group is not None:
            _finish(open_group, tracker, done, where)
        open_group, tracker = None, _GroupShape()

    def place_alone(node: fx.Node, kind: str) -> None:
        group = FusionGroup([node], kind)
        done.append(group)
        where[node.name] = group

    for node in nodes:
        cat = policy.category(node)
        if cat == "getitem":
            parent = node.args[0]
            group = where.get(parent.name) if isinstance(parent, fx.Node) else None
            if group is None and open_group is not None and parent.name in open_group.names:
                group = open_group
            if group is None:
                place_alone(node, "layout")
                continue
            group.nodes.append(node)
            where[node.name] = group
            if group is open_group:
                tracker.roles[node.name] = _getitem_role(node, tracker.roles.get(parent.name))
            continue
        reads_open = open_group is not None and any(a.name in open_group.names for a in node.all_input_nodes)
        if open_group is not None:
            roles = tracker.admits(node)
            if roles is not None and (cat != "layout" or reads_open):
                open_group.nodes.append(node)
                where[node.name] = open_group
                tracker.add(node, roles)
                if cat == "reduction":
                    open_group.kind = "row_reduction"
                continue
            if not reads_open and cat in ("layout", "heavy"):
                place_alone(node, cat)  # hoisted before the open group
                continue
            close()
        if cat in ("pointwise", "reduction"):
            roles = tracker.admits(node)
            if roles is None:
                place_alone(node, "heavy")
                continue
            open_group = FusionGroup([node], "row_reduction" if cat == "reduction" else "pointwise")
            where[node.name] = open_group
            tracker.add(node, roles)
        else:
            place_alone(node, cat)
    close()
    return done


def _finish(group: FusionGroup, tracker: _GroupShape, done: list, where: dict) -> None:
    """Close a fusable group: move out members smaller than the iteration
    shape that are read outside it, then record shape and roles."""
    members = group.names
    evicted: list[fx.Node] = []
    for node in list(group.nodes):
        shp = _shape(node)
        role = tracker.roles.get(node.name)
        if shp is None or role is None or role.form == "rows" or role.kind == "scal":
            continue
        if shp == tracker.shape:
            continue
        read_outside = any(u.name not in members for u in node.users) or not node.users
        if not read_outside:
            continue
        if all(a.name not in members for a in node.all_input_nodes):
            evicted.append(node)
            members.discard(node.name)
        else:
            group.fusable = False
            group.reason = f"{node.name} has shape {list(shp)}, smaller than the group's {list(tracker.shape)}, and is read outside it"
    for node in evicted:
        group.nodes.remove(node)
        alone = FusionGroup([node], "pointwise", shape=_shape(node), roles={node.name: Role("vec")})
        done.append(alone)
        where[node.name] = alone
    group.shape = tracker.shape
    # members' roles, and the roles outside values were read with (an [N] weight in
    # an [N, N] row group is a row vector, as torch broadcasts it, not a per-row scalar)
    group.roles = {k: v for k, v in tracker.roles.items() if k in group.names}
    group.roles.update({k: v for k, v in tracker.external.items() if k not in group.names})
    if not group.nodes:
        return
    done.append(group)
