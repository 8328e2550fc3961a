"""lego_core.tree.fusion (groups + policy) and lego_core.tree.fusion_tree: top-down FusionTree construction.

Structural invariants are checked on every reference model at its tiny
sizes; the grouping rules on small hand-written modules written to tmp_path.
"""
import functools
import json
import textwrap

import pytest

from lego_core.load.capture import capture_graph, module_path, op_name, value_info
from lego_core.tree.fusion import policy
from lego_core.tree.fusion.groups import FusionGroup, Role, partition
from lego_core.load.problem import ProblemSpec, load_problem
from lego_core.tree.fusion_tree import AndNode, FusionTree, OrNode, build_tree
from conftest import SHARED_MODELS  # ../shared/models, or $LEGO_MODELS_DIR where they were carried

# torch.export's own deprecation noise and the LSTM's flat-weights notice
pytestmark = pytest.mark.filterwarnings(
    "ignore:.*LeafSpec.*:FutureWarning", "ignore:The tensor attributes:UserWarning"
)

MODELS = SHARED_MODELS
TINY = json.loads((MODELS / "tiny.json").read_text()) if (MODELS / "tiny.json").is_file() else {}
LEAF_KINDS = {"pointwise", "row_reduction", "layout", "heavy", "attention", "depthwise_conv1d", "scan"}


@functools.lru_cache(maxsize=None)
def reference(name: str):
    """(graph, tree) of a reference model at its tiny sizes, built once."""
    if not TINY:
        pytest.skip(f"reference models not found at {MODELS}")
    problem = load_problem(ProblemSpec(str(MODELS / name), TINY[name]))
    graph = capture_graph(problem)
    return graph, build_tree(graph)


HEAD = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n"


def capture_module(tmp_path, body: str, inputs: str, init: str = "[]"):
    """Capture a hand-written ``Model`` (``body``) with ``get_inputs`` returning ``inputs``."""
    source = HEAD + textwrap.dedent(body) + f"\n\ndef get_inputs():\n    return {inputs}\n\n\ndef get_init_inputs():\n    return {init}\n"
    path = tmp_path / "handwritten.py"
    path.write_text(source)
    return capture_graph(load_problem(ProblemSpec(str(path))))


def groups_of(tmp_path, body, inputs, init="[]"):
    graph = capture_module(tmp_path, body, inputs, init)
    return graph, partition(graph.compute_nodes)


def ops(group: FusionGroup) -> list[str]:
    return [op_name(n) for n in group.nodes]


def short(group: FusionGroup) -> list[str]:
    return [o.split(".")[1] if o != "getitem" else o for o in ops(group)]


def check_schedule(groups_nodes, available):
    """Every group reads only ``available`` values, its own earlier members or earlier groups."""
    available = set(available)
    for nodes in groups_nodes:
        inside = set()
        for node in nodes:
            for arg in node.all_input_nodes:
                assert arg.name in available or arg.name in inside, f"{node.name} reads {arg.name} before it is computed"
            inside.add(node.name)
        available |= inside


# --------------------------------------------------------------------------
# invariants on every reference model
# --------------------------------------------------------------------------

ALL_MODELS = sorted(TINY) or ["gpt_stack.py"]


@pytest.mark.parametrize("name", ALL_MODELS)
def test_leaves_partition_the_graph_in_schedule_order(name):
    graph, tree = reference(name)
    leaves = tree.first_decomposition_leaves()
    assert leaves
    names = [n.name for leaf in leaves for n in leaf.sub.nodes]
    assert len(names) == len(set(names)), "a node is in two leaves"
    assert sorted(names) == sorted(n.name for n in graph.compute_nodes), "leaves must cover every compute node"
    check_schedule([leaf.sub.nodes for leaf in leaves], {p.name for p in graph.placeholders})
    # the model's output is produced by exactly one leaf, which reports it as an output
    out = graph.output_nodes[0]
    owners = [leaf for leaf in leaves if out in leaf.sub.nodes]
    assert len(owners) == 1 and out in owners[0].sub.outputs


@pytest.mark.parametrize("name", ALL_MODELS)
def test_and_or_structure(name):
    graph, tree = reference(name)
    root = tree.root
    assert isinstance(root, OrNode) and root.parent is None
    assert {n.name for n in root.sub.nodes} == {n.name for n in graph.compute_nodes}
    ids = [n.id for n in tree.walk()]
    assert len(ids) == len(set(ids)), "node ids must be unique"
    seen = set()
    for node in tree.walk():
        seen.add(node.id)
        if node.parent is not None:
            assert node.parent in seen, "walk() yields parents before children"
        if isinstance(node, OrNode):
            assert all(isinstance(c, AndNode) for c in node.children), "OR children are AND nodes"
            # top-down construction makes one decomposition, two where a region has
            # child modules: by module hierarchy, and by heavy-op seams across them;
            # a region holding an attention layer whole gets an "attention" one last,
            # one holding a depthwise conv1d / scan group a "sequence mixer" one
            labels = [c.label for c in node.children]
            if labels and labels[-1] == "sequence mixer":
                labels = labels[:-1]
            if labels and labels[-1] == "attention":
                labels = labels[:-1]
            assert len(labels) <= 2
            if len(labels) == 2:
                assert labels == ["by module hierarchy", "by heavy-op seams"]
            if node.is_leaf:
                assert node.sub.kind in LEAF_KINDS
                assert isinstance(node.sub.group, FusionGroup)
                assert [n.name for n in node.sub.group.nodes] == [n.name for n in node.sub.nodes]
                assert node.sub.group.kind == node.sub.kind
            else:
                assert node.sub.kind == "region"
        else:
            assert isinstance(node, AndNode)
            assert node.label in ("by module hierarchy", "by heavy-op seams", "fusion groups", "attention", "sequence mixer")
            assert node.children, "an AND node needs children"
            assert all(isinstance(c, OrNode) for c in node.children)
            # (see test_or_children_point_at_their_and_node for which id that should be)
            assert all(c.parent in (node.id, node.parent) for c in node.children)


@pytest.mark.parametrize("name", ALL_MODELS)
def test_and_children_are_an_ordered_split_of_their_parent(name):
    graph, tree = reference(name)
    ors = {n.id: n for n in tree.walk() if isinstance(n, OrNode)}
    for node in tree.walk():
        if not isinstance(node, AndNode):
            continue
        parent = ors[node.parent]
        parent_names = [n.name for n in parent.sub.nodes]
        child_names = [n.name for c in node.children for n in c.sub.nodes]
        assert sorted(child_names) == sorted(parent_names), f"{node.id} does not split {parent.id} exactly"
        if node.label == "by module hierarchy":
            assert child_names == parent_names  # consecutive runs keep the order
        outside = {n.name for n in graph.placeholders} | ({n.name for n in graph.compute_nodes} - set(parent_names))
        check_schedule([c.sub.nodes for c in node.children], outside)


@pytest.mark.parametrize("name", ALL_MODELS)
def test_leaf_boundaries_are_explicit(name):
    graph, tree = reference(name)
    for leaf in tree.leaves():
        inside = {n.name for n in leaf.sub.nodes}
        reads = {a.name for n in leaf.sub.nodes for a in n.all_input_nodes} - inside
        assert {n.name for n in leaf.sub.inputs} == reads
        assert len(leaf.sub.input_specs) == len(leaf.sub.inputs)
        for node in leaf.sub.outputs:
            assert node.name in inside
        assert leaf.sub.outputs, f"{leaf.id} computes nothing anyone reads"


@pytest.mark.parametrize("name", ALL_MODELS)
def test_fusable_groups_have_an_iteration_shape_and_roles(name):
    _, tree = reference(name)
    for leaf in tree.leaves():
        group = leaf.sub.group
        if group.kind in ("pointwise", "row_reduction"):
            assert group.shape is not None
            # members' roles, plus the roles outside values are read with
            assert set(group.roles) <= group.names | {n.name for n in leaf.sub.inputs}
            for node in group.nodes:
                if op_name(node) != "getitem":
                    assert node.name in group.roles, f"{node.name} has no role in {leaf.id}"
            if not group.fusable:
                assert group.reason
        elif group.kind == "attention":
            assert group.spec is not None and group.shape == tuple(leaf.sub.output_specs[0].shape)
        elif group.kind in ("depthwise_conv1d", "scan"):  # one conv or cumsum with pointwise ops, outputs of the iteration shape
            assert all(tuple(s.shape) == group.shape for s in leaf.sub.output_specs)
        else:
            alone = [n for n in group.nodes if op_name(n) != "getitem"]
            assert len(alone) == 1 if group.kind == "heavy" else len(alone) <= 1, "layout/heavy ops stand alone"


def test_gpt_stack_blocks_have_identical_signatures():
    _, tree = reference("gpt_stack.py")

    def block_leaves(i):
        prefix = f"blocks.{i}"
        return [leaf for leaf in tree.first_decomposition_leaves() if leaf.sub.module_path == prefix or leaf.sub.module_path.startswith(prefix + ".")]

    first, second = block_leaves(0), block_leaves(1)
    assert len(first) == len(second) > 20
    assert [leaf.sub.signature for leaf in first] == [leaf.sub.signature for leaf in second]
    assert [leaf.sub.kind for leaf in first] == [leaf.sub.kind for leaf in second]
    assert {leaf.sub.module_path for leaf in first}.isdisjoint({leaf.sub.module_path for leaf in second})
    # the regions above the leaves repeat too (in the first decomposition, by
    # module hierarchy: other decompositions of the root, cut at heavy-op seams,
    # have pieces that straddle two blocks and are named by their own ops' module)
    def first_regions(node=None):
        node = node or tree.root
        if node.is_leaf:
            return []
        return [node] + [r for child in node.children[0].children for r in first_regions(child)]

    def block_regions(i):
        prefix = f"blocks.{i}"
        return [
            (n.sub.label.replace(prefix, "blocks.*"), n.sub.signature)
            for n in first_regions()
            if (n.sub.module_path + ".").startswith(prefix + ".")
        ]

    assert len(block_regions(0)) >= 3
    assert block_regions(0) == block_regions(1)


def test_signatures_tell_different_shapes_apart():
    _, tree = reference("gpt_stack.py")
    gemms = {leaf.sub.module_path: leaf.sub.signature for leaf in tree.leaves() if leaf.sub.ops == ["aten.addmm.default"]}
    assert gemms["blocks.0.attn.qkv"] != gemms["blocks.0.fc"]  # 64->192 vs 64->256
    assert gemms["blocks.0.fc"] != gemms["blocks.0.out"]
    assert gemms["blocks.0.fc"] == gemms["blocks.1.fc"]


def test_gpt_stack_splits_along_the_module_hierarchy():
    _, tree = reference("gpt_stack.py")
    root_split = tree.root.children[0]
    assert root_split.label == "by module hierarchy"
    assert [c.sub.module_path for c in root_split.children] == ["blocks.0", "blocks.1", "ln_f"]
    ln_f = root_split.children[2]
    assert ln_f.is_leaf and ln_f.sub.kind == "row_reduction"
    assert ln_f.sub.ops == ["aten.native_layer_norm.default"]
    attention_softmax = [leaf for leaf in tree.first_decomposition_leaves() if "aten._softmax.default" in leaf.sub.ops]
    assert len(attention_softmax) == 2
    for leaf in attention_softmax:
        # scale, causal mask and softmax fuse into one row reduction
        assert leaf.sub.kind == "row_reduction" and leaf.sub.group.fusable
        assert {"aten.div.Tensor", "aten.where.self", "aten._softmax.default"} <= set(leaf.sub.ops)


def test_scores_chain_tail_is_one_row_reduction():
    graph, tree = reference("scores_chain.py")
    leaves = tree.first_decomposition_leaves()
    gemm = next(n for n in graph.compute_nodes if op_name(n) == "aten.addmm.default")
    after = graph.compute_nodes[graph.compute_nodes.index(gemm) + 1:]
    tail = [leaf for leaf in leaves if leaf.sub.kind == "row_reduction"]
    assert len(tail) == 1
    tail = tail[0]
    assert [n.name for n in tail.sub.nodes] == [n.name for n in after]
    assert tail.sub.group.fusable and tail.sub.group.shape == (16, 30)
    for op in ("aten._softmax.default", "aten.amax.default", "aten.exp.default", "aten.log.default", "aten.sum.dim_IntList"):
        assert op in tail.sub.ops
    assert tail is leaves[-1]
    assert sorted(leaf.sub.kind for leaf in leaves) == ["heavy", "layout", "row_reduction"]


def test_vit_attention_and_patch_embedding_leaves():
    _, tree = reference("vit_encoder.py")
    kinds = {}
    attention = [leaf for leaf in tree.leaves() if leaf.sub.kind == "attention"]
    for leaf in tree.leaves():
        for op in leaf.sub.ops:
            if leaf.sub.kind != "attention":  # the fused alternative; the library path is below
                kinds.setdefault(op, set()).add(leaf.sub.kind)
    assert len(attention) == 2 and all(leaf.sub.ops.count("aten.bmm.default") == 2 for leaf in attention)
    assert kinds["aten.convolution.default"] == {"heavy"}
    assert kinds["aten.bmm.default"] == {"heavy"}
    assert kinds["aten.cat.default"] == {"heavy"}
    assert kinds["aten._softmax.default"] == {"row_reduction"}
    assert kinds["aten.native_layer_norm.default"] == {"row_reduction"}
    assert kinds["aten.view.default"] == {"layout"}


def test_or_children_point_at_their_and_node():
    _, tree = reference("gpt_stack.py")
    for node in tree.walk():
        if isinstance(node, AndNode):
            assert [c.parent for c in node.children] == [node.id] * len(node.children)


def test_region_labels_name_the_modules_own_class():
    _, tree = reference("gpt_stack.py")
    labels = {n.sub.label for n in tree.walk() if isinstance(n, OrNode)}
    assert "blocks.0 (Block)" in labels
    assert "blocks.0.attn (CausalSelfAttention)" in labels


def test_model_own_ops_are_not_attributed_to_a_child_module():
    _, tree = reference("scores_chain.py")
    assert tree.root.sub.module_path == ""
    labels = [c.sub.label for c in tree.root.children[0].children]
    assert "model (own ops)" in labels


# --------------------------------------------------------------------------
# grouping rules on hand-written modules
# --------------------------------------------------------------------------


def test_pointwise_chain_is_one_group(tmp_path):
    graph, groups = groups_of(
        tmp_path,
        """\
        class Model(nn.Module):
            def forward(self, x, y):
                return F.gelu(x + y) * 2.0
        """,
        "[torch.randn(4, 8), torch.randn(4, 8)]",
    )
    assert len(groups) == 1
    group = groups[0]
    assert group.kind == "pointwise" and group.fusable and group.shape == (4, 8)
    assert short(group) == ["add", "gelu", "mul"]
    assert all(role == Role("vec") for role in group.roles.values())
    # a model that is one group is a single leaf: the root itself
    tree = build_tree(graph)
    assert tree.root.is_leaf and tree.root.sub.kind == "pointwise"
    assert tree.leaves() == [tree.root]


def test_broadcast_bias_joins_the_pointwise_group(tmp_path):
    _, groups = groups_of(
        tmp_path,
        """\
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.b = nn.Parameter(torch.randn(8))

            def forward(self, x):
                return torch.sigmoid(x + self.b) * x
        """,
        "[torch.randn(4, 8)]",
    )
    assert [(g.kind, short(g)) for g in groups] == [("pointwise", ["add", "sigmoid", "mul"])]
    assert groups[0].shape == (4, 8)


def test_softmax_with_scale_prologue_and_residual_epilogue(tmp_path):
    _, groups = groups_of(
        tmp_path,
        """\
        class Model(nn.Module):
            def forward(self, x, residual):
                return torch.softmax(x * 0.125, dim=-1) + residual
        """,
        "[torch.randn(4, 8), torch.randn(4, 8)]",
    )
    assert len(groups) == 1
    group = groups[0]
    assert group.kind == "row_reduction" and group.fusable and group.shape == (4, 8)
    assert short(group) == ["mul", "_softmax", "add"]


def test_rmsnorm_is_one_row_reduction(tmp_path):
    graph, groups = groups_of(
        tmp_path,
        """\
        class RMSNorm(nn.Module):
            def __init__(self, dim, eps=1e-6):
                super().__init__()
                self.eps = eps
                self.w = nn.Parameter(torch.ones(dim))

            def forward(self, x):
                return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.w


        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.norm = RMSNorm(8)
                self.proj = nn.Linear(8, 8)

            def forward(self, x):
                return self.proj(self.norm(x))
        """,
        "[torch.randn(2, 4, 8)]",
    )
    norm_nodes = [n for n in graph.compute_nodes if module_path(n) == "norm"]
    norm_groups = partition(norm_nodes)
    assert len(norm_groups) == 1
    group = norm_groups[0]
    assert group.kind == "row_reduction" and group.fusable and group.shape == (2, 4, 8)
    assert short(group) == ["pow", "mean", "add", "rsqrt", "mul", "mul"]
    mean = next(n for n in group.nodes if op_name(n) == "aten.mean.dim")
    assert group.roles[mean.name] == Role("scal", "full")  # keepdim: one number per row
    # in the tree: the norm module is one row-reduction leaf, the Linear its own region
    tree = build_tree(graph)
    norm_leaf = next(leaf for leaf in tree.leaves() if leaf.sub.module_path == "norm")
    assert norm_leaf.sub.kind == "row_reduction"
    assert [n.name for n in norm_leaf.sub.nodes] == [n.name for n in norm_nodes]


def test_layer_norm_with_prologue_and_epilogue(tmp_path):
    _, groups = groups_of(
        tmp_path,
        """\
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.ln = nn.LayerNorm(8)

            def forward(self, x):
                return F.gelu(self.ln(x + 1.0)) * 3
        """,
        "[torch.randn(4, 8)]",
    )
    assert [(g.kind, short(g)) for g in groups] == [("row_reduction", ["add", "native_layer_norm", "getitem", "gelu", "mul"])]


def test_row_max_without_keepdim_and_log_sum_exp(tmp_path):
    _, groups = groups_of(
        tmp_path,
        """\
        class Model(nn.Module):
            def forward(self, x):
                m = x.amax(dim=-1)
                return (x - m[:, None]).exp().sum(-1).log() + m
        """,
        "[torch.randn(4, 8)]",
    )
    assert len(groups) == 1 and groups[0].kind == "row_reduction" and groups[0].fusable
    roles = {op_name(n): groups[0].roles[n.name] for n in groups[0].nodes}
    assert roles["aten.amax.default"] == Role("scal", "rows")
    assert roles["aten.unsqueeze.default"] == Role("scal", "full")
    assert roles["aten.sub.Tensor"] == Role("vec")
    assert roles["aten.log.default"] == Role("scal", "rows")


@pytest.mark.parametrize(
    "expr, inputs, heavy_op",
    [
        ("torch.relu(a @ b)", "[torch.randn(4, 8), torch.randn(8, 6)]", "aten.mm.default"),
        ("torch.relu(torch.bmm(a, b))", "[torch.randn(2, 4, 8), torch.randn(2, 8, 6)]", "aten.bmm.default"),
        ("torch.relu(F.conv2d(a, b))", "[torch.randn(1, 3, 8, 8), torch.randn(4, 3, 3, 3)]", "aten.convolution.default"),
    ],
)
def test_gemm_and_conv_are_heavy_and_alone(tmp_path, expr, inputs, heavy_op):
    _, groups = groups_of(tmp_path, f"class Model(nn.Module):\n    def forward(self, a, b):\n        return {expr}\n", inputs)
    heavy = [g for g in groups if heavy_op in ops(g)]
    assert len(heavy) == 1 and heavy[0].kind == "heavy" and ops(heavy[0]) == [heavy_op]
    relu = [g for g in groups if "aten.relu.default" in ops(g)]
    assert len(relu) == 1 and relu[0].kind == "pointwise" and ops(relu[0]) == ["aten.relu.default"]
    assert groups.index(heavy[0]) < groups.index(relu[0])


def test_linear_is_layout_plus_heavy_gemm_then_epilogue(tmp_path):
    _, groups = groups_of(
        tmp_path,
        """\
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.l = nn.Linear(8, 6)

            def forward(self, x):
                return torch.tanh(self.l(x))
        """,
        "[torch.randn(4, 8)]",
    )
    assert [(g.kind, short(g)) for g in groups] == [("layout", ["permute"]), ("heavy", ["addmm"]), ("pointwise", ["tanh"])]


@pytest.mark.parametrize(
    "expr, shape, reduced",
    [
        ("x.sum(dim=0) * 2.0", "4, 8", "aten.sum.dim_IntList"),
        ("x.mean(dim=1) + 1", "2, 4, 8", "aten.mean.dim"),
        ("torch.softmax(x, dim=0) * 2", "4, 8", "aten._softmax.default"),
        ("x.amax(dim=(0, 1)) - 1", "2, 4, 8", "aten.amax.default"),
    ],
)
def test_reduction_over_a_non_last_dim_is_heavy(tmp_path, expr, shape, reduced):
    _, groups = groups_of(tmp_path, f"class Model(nn.Module):\n    def forward(self, x):\n        return {expr}\n", f"[torch.randn({shape})]")
    red = next(n for g in groups for n in g.nodes if op_name(n) == reduced)
    assert policy.category(red) == "heavy" and not policy.is_row_reduction(red)
    group = next(g for g in groups if red in g.nodes)
    assert group.kind == "heavy" and group.nodes == [red]
    assert not any(g.kind == "row_reduction" for g in groups)


def test_reduction_over_the_last_dim_without_keepdim(tmp_path):
    _, groups = groups_of(tmp_path, "class Model(nn.Module):\n    def forward(self, x):\n        return (x * 2).sum(-1) + 1\n", "[torch.randn(4, 8)]")
    assert [(g.kind, short(g)) for g in groups] == [("row_reduction", ["mul", "sum", "add"])]
    red = groups[0].nodes[1]
    assert policy.reduction_dims(red) == [1] and not policy.keepdim(red)


def test_row_too_long_for_one_program_is_heavy(tmp_path):
    n = policy.MAX_ROW_LENGTH + 1
    _, groups = groups_of(tmp_path, "class Model(nn.Module):\n    def forward(self, x):\n        return torch.softmax(x, dim=-1)\n", f"[torch.randn(1, {n})]")
    assert [(g.kind, short(g)) for g in groups] == [("heavy", ["_softmax"])]


def test_views_are_layout(tmp_path):
    _, groups = groups_of(
        tmp_path,
        """\
        class Model(nn.Module):
            def forward(self, x):
                y = x.view(2, 2, 8).permute(0, 2, 1)
                z = y[:, 1:3, :].expand(2, 2, 2).unsqueeze(0)
                return z.squeeze(0).reshape(8)
        """,
        "[torch.randn(4, 8)]",
    )
    layout = [g for g in groups if g.kind == "layout"]
    assert [short(g) for g in layout] == [["view"], ["permute"], ["slice"], ["expand"], ["unsqueeze"], ["squeeze"], ["view"]]
    for group in layout:
        assert len(group.nodes) == 1 and policy.category(group.nodes[0]) == "layout"
        assert op_name(group.nodes[0]) in policy.LAYOUT_OPS
    # the copy that reshape needs is a (pointwise) clone, not a layout op
    assert [short(g) for g in groups if g.kind != "layout"] == [["clone"]]


def test_a_view_of_the_open_group_closes_it(tmp_path):
    _, groups = groups_of(tmp_path, "class Model(nn.Module):\n    def forward(self, x):\n        return (x * 2).t() + 1\n", "[torch.randn(4, 8)]")
    assert [(g.kind, short(g)) for g in groups] == [("pointwise", ["mul"]), ("layout", ["permute"]), ("pointwise", ["add"])]
    assert groups[2].shape == (8, 4)


def test_independent_heavy_node_is_hoisted_before_the_open_group(tmp_path):
    _, groups = groups_of(
        tmp_path,
        """\
        class Model(nn.Module):
            def forward(self, x, y):
                a = x * 2.0
                h = y.sum(0)
                return torch.relu(a) + h
        """,
        "[torch.randn(4, 8), torch.randn(5, 8)]",
    )
    assert [(g.kind, short(g)) for g in groups] == [("heavy", ["sum"]), ("pointwise", ["mul", "relu", "add"])]


def test_smaller_member_read_outside_is_moved_out_before_the_group(tmp_path):
    graph, groups = groups_of(
        tmp_path,
        """\
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.w = nn.Parameter(torch.randn(8))

            def forward(self, x):
                c = self.w * 2
                y = torch.relu(x + c)
                return y @ c[:, None]
        """,
        "[torch.randn(4, 8)]",
    )
    assert [(g.kind, short(g), g.shape) for g in groups[:2]] == [("pointwise", ["mul"], (8,)), ("pointwise", ["add", "relu"], (4, 8))]
    assert all(g.fusable for g in groups)
    check_schedule([g.nodes for g in groups], {p.name for p in graph.placeholders})


def test_smaller_member_computed_in_the_group_and_read_outside_is_not_fusable(tmp_path):
    graph, groups = groups_of(
        tmp_path,
        """\
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.w = nn.Parameter(torch.randn(8))

            def forward(self, x):
                c = torch.exp(self.w)
                d = c * 2
                return (x + d).sum(-1) + d.sum()
        """,
        "[torch.randn(4, 8)]",
    )
    first = groups[0]
    assert first.kind == "row_reduction" and short(first) == ["exp", "mul", "add", "sum"]
    assert first.fusable is False
    assert "smaller than the group's [4, 8]" in first.reason and "read outside it" in first.reason
    check_schedule([g.nodes for g in groups], {p.name for p in graph.placeholders})
    tree = build_tree(graph)
    assert any(leaf.sub.group is first or leaf.sub.group.reason == first.reason for leaf in tree.leaves())


@pytest.mark.parametrize(
    "args, expr, inputs, heavy",
    [
        ("x, i", "x + (i + 1).float()", "[torch.randn(4, 8), torch.randint(0, 3, (4, 8))]", "aten.add.Tensor"),  # int add
        ("x", "x.abs() ** 1.7", "[torch.randn(4, 8)]", "aten.pow.Tensor_Scalar"),  # exponent the template lacks
        ("x", "torch.div(x, 3.0, rounding_mode='floor') + 1", "[torch.randn(4, 8)]", "aten.div"),  # rounding mode
    ],
)
def test_ops_the_template_cannot_generate_are_heavy(tmp_path, args, expr, inputs, heavy):
    _, groups = groups_of(tmp_path, f"class Model(nn.Module):\n    def forward(self, {args}):\n        return {expr}\n", inputs)
    hits = [g for g in groups if any(op_name(n).startswith(heavy) for n in g.nodes) and g.kind == "heavy"]
    assert hits, [(g.kind, ops(g)) for g in groups]
    assert all(len(g.nodes) == 1 for g in hits)


def test_pow_with_a_supported_exponent_is_pointwise(tmp_path):
    _, groups = groups_of(tmp_path, "class Model(nn.Module):\n    def forward(self, x):\n        return x.pow(2) + x ** -0.5\n", "[torch.rand(4, 8) + 1]")
    assert [(g.kind, short(g)) for g in groups] == [("pointwise", ["pow", "pow", "add"])]


def test_partition_of_nothing_and_of_a_sub_range(tmp_path):
    assert partition([]) == []
    graph = capture_module(tmp_path, "class Model(nn.Module):\n    def forward(self, x):\n        return torch.relu(x * 2) + 1\n", "[torch.randn(4, 8)]")
    tail = graph.compute_nodes[1:]  # inputs from outside the range are fine
    groups = partition(tail)
    assert [(g.kind, short(g)) for g in groups] == [("pointwise", ["relu", "add"])]


def test_build_tree_splits_own_ops_and_child_module_runs(tmp_path):
    graph = capture_module(
        tmp_path,
        """\
        class Inner(nn.Module):
            def forward(self, x):
                return torch.softmax(x, dim=-1)


        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.inner = Inner()

            def forward(self, x):
                return self.inner(x * 2) @ x.t()
        """,
        "[torch.randn(4, 8)]",
    )
    tree = build_tree(graph)
    assert isinstance(tree, FusionTree)
    walked = list(tree.walk())
    kinds = [type(n).__name__ for n in walked]
    assert kinds[0] == "OrNode" and kinds[1] == "AndNode"
    runs = [c.sub.label for c in tree.root.children[0].children]
    assert runs[1].startswith("inner (")
    # mul (own) | softmax (inner) | t + mm (own): three consecutive runs
    assert len(runs) == 3
    assert [leaf.sub.kind for leaf in tree.first_decomposition_leaves()] == ["pointwise", "row_reduction", "layout", "heavy"]
    assert value_info(tree.first_decomposition_leaves()[-1].sub.outputs[0]).shape == (4, 4)


@pytest.mark.parametrize("name", ["gpt_stack.py", "llama_stack.py", "gated_conv_mixer.py"])
def test_seam_decomposition_is_a_second_partition_across_module_seams(name):
    graph, tree = reference(name)
    root = tree.root
    assert [c.label for c in root.children] == ["by module hierarchy", "by heavy-op seams"]
    seams = root.children[1]
    # heavy ops stand alone; some chain between them crosses child modules
    for child in seams.children:
        heavy = [n for n in child.sub.nodes if policy.category(n) == "heavy"]
        assert len(heavy) <= 1
        if heavy:
            assert all(n is heavy[0] or op_name(n) == "getitem" for n in child.sub.nodes)
    assert any(len({module_path(n) for n in c.sub.nodes}) > 1 for c in seams.children)

    # its leaves partition the graph too
    def leaves_under(node):
        if node.is_leaf:
            return [node]
        return [leaf for c in node.children[0].children for leaf in leaves_under(c)]

    leaves = [leaf for c in seams.children for leaf in leaves_under(c)]
    names = [n.name for leaf in leaves for n in leaf.sub.nodes]
    assert sorted(names) == sorted(n.name for n in graph.compute_nodes)
    check_schedule([leaf.sub.nodes for leaf in leaves], {p.name for p in graph.placeholders})


def test_pieces_cut_at_the_roots_seams_are_named_by_their_own_module():
    """A region at the model's root (module path "") cut at heavy-op seams:
    each piece takes its own ops' common module path (the page showed "—"
    for every one of them), never a path its ops are not all under."""
    from lego_core.load.capture import module_path
    from lego_core.tree.subproblem import _common_prefix

    _, tree = reference("gpt_stack.py")
    regions = [n for n in tree.walk() if isinstance(n, OrNode) and n is not tree.root]
    named = [n for n in regions if _common_prefix([module_path(x) for x in n.sub.nodes if module_path(x)])]
    assert named and all(n.sub.module_path for n in named), [n.sub.label for n in named if not n.sub.module_path]
    for n in regions:
        assert all((module_path(x) + ".").startswith(n.sub.module_path + ".") for x in n.sub.nodes if n.sub.module_path), n.sub.label
