"""Convolution with eval BatchNorm: BN as a fused per-channel affine, and BN folded into the conv.

On the reference CNNs at tiny sizes (``tiny.json``), fp32 on the CPU through
Triton's interpreter:

- eval BatchNorm (``_native_batch_norm_legit_no_training``) is pointwise for
  the fusion policy, so BN + activation + residual add after a library conv
  form ONE pointwise fusion group whose generated kernel verifies;
- a conv followed by BN (and its pointwise tail) fuses into a ``conv_bn``
  group (``fusion.conv_bn``): one library conv with weights folded from the
  live parameters, then the tail kernel; it verifies, and stays right after
  ``load_state_dict`` of new weights and after in-place weight updates.
"""
from __future__ import annotations

import json
import os

os.environ.setdefault("TRITON_INTERPRET", "1")  # before triton is imported anywhere

import pytest
import torch

from lego_core.agents.template.codegen import generate
from lego_core.load.capture import capture_graph
from lego_core.load.problem import ProblemSpec, load_problem
from lego_core.judge.inputs import leaf_input_sets, load_module
from lego_core.tree.fusion_tree import build_tree
from lego_core.judge.verify import calls_back_into_reference, verify
from lego_core.judge.static_check import unsafe_host_code
from conftest import SHARED_MODELS  # ../shared/models, or $LEGO_MODELS_DIR where they were carried

MODELS = SHARED_MODELS
SEEDS = (11, 22, 33)
BN = "aten._native_batch_norm_legit_no_training.default"


def built(name: str):
    tiny = json.loads((MODELS / "tiny.json").read_text())[name]
    problem = load_problem(ProblemSpec(str(MODELS / name), dict(tiny)))
    graph = capture_graph(problem)
    return problem, graph, build_tree(graph)


def input_sets(problem, graph, sub_leaf):
    activations = [graph.run(problem.model, problem.make_inputs(seed)) for seed in SEEDS]
    parameters = {name for name, src in graph.sources.items() if src.kind == "parameter"}
    return leaf_input_sets(sub_leaf, activations, parameters, SEEDS)


def check(tmp_path, problem, graph, leaf, source):
    path = tmp_path / f"k_{leaf.id}_{abs(hash(source)) % 10**8}.py"
    path.write_text(source)
    module = load_module(path, f"lego_test_convbn_{path.stem}")
    report = verify(lambda inputs, out: module.launch(*inputs, out=out), leaf.sub.run_reference,
                    input_sets(problem, graph, leaf), torch.float32, list(SEEDS))
    assert report.passed, f"{leaf.sub.ops}: {report.reason}\n{source}"
    return module


def fused_leaves(tree, ops: list[str]):
    return [leaf for leaf in tree.leaves() if leaf.sub.ops == ops and leaf.sub.group is not None and leaf.sub.group.fusable]


@pytest.mark.parametrize(
    "name, ops",
    [
        ("resnet_stage.py", [BN, "aten.add.Tensor", "aten.relu.default"]),
        ("resnet_stage.py", [BN, "aten.relu.default"]),
        ("mobile_se_block.py", [BN, "aten.add.Tensor", "aten.clamp.default", "aten.clamp.default", "aten.mul.Tensor", "aten.div.Tensor"]),
        ("mobile_se_block.py", [BN, "aten.add.Tensor"]),
    ],
)
def test_batchnorm_activation_residual_is_one_pointwise_kernel(tmp_path, name, ops):
    problem, graph, tree = built(name)
    leaves = fused_leaves(tree, ops)
    assert leaves, f"no fusable group {ops}; leaves: {[l.sub.ops for l in tree.leaves()]}"
    leaf = leaves[0]
    assert leaf.sub.kind == "pointwise"
    assert [op for op in leaf.sub.ops if "convolution" in op] == []  # the conv stays a library call
    source = generate(leaf.sub)
    assert calls_back_into_reference(source, leaf.sub.ops) is None
    assert unsafe_host_code(source) is None  # the kernel cache stores it (lego_core.judge.host_allowlist)
    assert source.count("@triton.jit") == 1
    check(tmp_path, problem, graph, leaf, source)


def test_batchnorm_does_not_join_a_row_reduction(tmp_path):
    """BN followed by a softmax over the last dim: BN is its own pointwise group."""
    from lego_core.tree.fusion.groups import partition

    src = tmp_path / "bn_softmax.py"
    src.write_text(
        "import torch\nimport torch.nn as nn\n\n"
        "class Model(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.bn = nn.BatchNorm2d(4)\n"
        "        self.eval()\n"
        "    def forward(self, x):\n"
        "        return torch.softmax(self.bn(x), dim=-1)\n\n"
        "def get_inputs():\n    return [torch.randn(2, 4, 3, 5)]\n\n"
        "def get_init_inputs():\n    return []\n"
    )
    graph = capture_graph(load_problem(ProblemSpec(str(src))))
    kinds = [(g.kind, [n.name for n in g.nodes]) for g in partition(graph.compute_nodes)]
    bn_group = next(k for k, names in kinds if any("batch_norm" in n for n in names))
    assert bn_group == "pointwise"
    assert any(k == "row_reduction" for k, _ in kinds)


# --------------------------------------------------------------------------
# conv + BatchNorm folded into one library conv
# --------------------------------------------------------------------------


def conv_bn_subproblems(graph, tree):
    """conv_bn sub-problems formed the way mutation forms them: a conv leaf and
    the leaf that reads it (the BN alone, or BN + its pointwise tail)."""
    from lego_core.tree.fusion.legality import fusion_verdict
    from lego_core.tree.subproblem import make_subproblem

    leaves = tree.leaves()
    found = {}
    for conv_leaf in leaves:
        if conv_leaf.sub.ops != ["aten.convolution.default"]:
            continue
        conv = conv_leaf.sub.nodes[0]
        if "batch_norm" not in str(next(iter(conv.users)).target):
            continue  # the SE block's 1x1 convs feed a relu / an add
        for leaf in leaves:
            if leaf.sub.nodes[0] is not next(iter(conv.users), None):
                continue
            verdict = fusion_verdict(conv_leaf.sub.nodes + leaf.sub.nodes, [conv_leaf.sub.nodes, leaf.sub.nodes])
            assert verdict.legal, verdict.reason
            sub = make_subproblem(f"fold_{len(found)}", verdict.group.nodes, graph.output_nodes, "conv_bn", group=verdict.group)
            found.setdefault(tuple(sub.ops), sub)
    return list(found.values())


class _Leaf:  # what leaf_input_sets needs of an OR node
    def __init__(self, sub):
        self.sub, self.id = sub, sub.id


@pytest.mark.parametrize("name", ["resnet_stage.py", "mobile_se_block.py"])
def test_folded_conv_bn_verifies(tmp_path, name):
    problem, graph, tree = built(name)
    subs = conv_bn_subproblems(graph, tree)
    tails = {len(sub.ops) for sub in subs}
    assert 2 in tails and max(tails) > 2, [sub.ops for sub in subs]  # BN alone, and BN + a tail
    for sub in subs:
        assert sub.group.kind == "conv_bn" and sub.group.library_ops == ("aten.convolution.default",)
        source = generate(sub)
        assert calls_back_into_reference(source, sub.ops, sub.group.library_ops) is None
        assert unsafe_host_code(source) is None  # the kernel cache stores it (lego_core.judge.host_allowlist)
        assert calls_back_into_reference(source, sub.ops) is not None  # the conv is allowed only as declared
        check(tmp_path, problem, graph, _Leaf(sub), source)


def test_fold_follows_load_state_dict_and_in_place_updates(tmp_path):
    """The kernel file folds from the tensors it is given on every call: new
    weights loaded into the same parameters (load_state_dict copies in place)
    and in-place updates reach the output, and so do writes through ``.data``
    (which bump no tensor version: a cache keyed on versions served stale
    folded weights, found by a fresh-user test)."""
    problem, graph, tree = built("resnet_stage.py")
    sub = next(s for s in conv_bn_subproblems(graph, tree) if len(s.ops) > 2)
    path = tmp_path / "fold.py"
    path.write_text(generate(sub))
    module = load_module(path, "lego_test_convbn_fold_state")
    model = problem.model

    def run_both():
        env = graph.run(model, problem.make_inputs(5))
        inputs = [env[n.name] for n in sub.inputs]  # parameters are the model's own objects
        got = module.launch(*inputs)
        want = sub.run_reference(inputs)
        for g, w in zip(got, want):
            torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-4)
        return got

    first = run_both()
    again = run_both()
    torch.testing.assert_close(first[0], again[0])
    state = {k: torch.rand_like(v) + 0.5 if v.is_floating_point() else v for k, v in model.state_dict().items()}
    model.load_state_dict(state)
    after_load = run_both()
    assert not torch.allclose(after_load[0], first[0])
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_var.mul_(3.0)
                m.weight.add_(0.25)
    after_update = run_both()
    assert not torch.allclose(after_update[0], after_load[0])
    for m in model.modules():
        if isinstance(m, torch.nn.Conv2d):
            m.weight.data.copy_(torch.randn_like(m.weight))  # no version bump
    after_data = run_both()
    assert not torch.allclose(after_data[0], after_update[0])


def test_mutation_proposes_the_fold():
    from lego_core.search.mutation import propose_fusions

    _problem, graph, tree = built("resnet_stage.py")
    items = tree.first_decomposition_leaves()
    proposals, _rejected = propose_fusions(items, graph.output_nodes, set())
    folds = [p for p in proposals if p.kind == "conv + BatchNorm fold"]
    assert folds and all(p.sub.group.kind == "conv_bn" for p in folds)
    assert all(p.bytes_saved > 0 for p in folds)


def test_fold_rejects_a_conv_read_twice(tmp_path):
    from lego_core.tree.fusion.conv_bn import conv_bn_group

    src = tmp_path / "conv_twice.py"
    src.write_text(
        "import torch\nimport torch.nn as nn\n\n"
        "class Model(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.conv = nn.Conv2d(3, 4, 3)\n"
        "        self.bn = nn.BatchNorm2d(4)\n"
        "        self.eval()\n"
        "    def forward(self, x):\n"
        "        y = self.conv(x)\n"
        "        return self.bn(y) + y\n\n"
        "def get_inputs():\n    return [torch.randn(2, 3, 6, 6)]\n\n"
        "def get_init_inputs():\n    return []\n"
    )
    graph = capture_graph(load_problem(ProblemSpec(str(src))))
    nodes = graph.compute_nodes
    group, reason = conv_bn_group(nodes[:3])
    assert group is None and "read by 2 nodes" in reason


# --------------------------------------------------------------------------
# LayerNorm / RMSNorm fused with the residual add (transformer stacks)
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, norm_ops",
    [
        ("gpt_stack.py", ["aten.native_layer_norm.default"]),
        ("llama_stack.py", ["aten.pow.Tensor_Scalar", "aten.mean.dim", "aten.add.Tensor", "aten.rsqrt.default", "aten.mul.Tensor", "aten.mul.Tensor"]),
    ],
)
def test_residual_add_and_norm_is_one_row_kernel_with_two_outputs(tmp_path, name, norm_ops):
    """The seam split gives (residual add + norm) as one row-reduction group
    whose kernel writes both the sum (the next residual) and the normalised rows."""
    problem, graph, tree = built(name)
    leaves = [leaf for leaf in tree.leaves() if leaf.sub.kind == "row_reduction" and leaf.sub.ops == ["aten.add.Tensor"] + norm_ops]
    assert leaves, [leaf.sub.ops for leaf in tree.leaves() if leaf.sub.kind == "row_reduction"]
    leaf = leaves[0]
    assert len(leaf.sub.outputs) == 2
    assert leaf.sub.outputs[0].name.startswith("add")  # the residual sum, read by the next residual add
    source = generate(leaf.sub)
    assert source.count("tl.store(") == 2
    check(tmp_path, problem, graph, leaf, source)


def test_channels_last_capture_gives_nhwc_strides_and_kernels_follow_them(tmp_path):
    """capture_graph(channels_last=True): conv outputs and the BN + add + relu
    values carry NHWC strides; the generated kernel reads and writes them."""
    from lego_core.load.capture import to_channels_last, value_info

    tiny = json.loads((MODELS / "tiny.json").read_text())["resnet_stage.py"]
    problem = load_problem(ProblemSpec(str(MODELS / "resnet_stage.py"), dict(tiny)))
    graph = capture_graph(problem, channels_last=True)
    conv = next(n for n in graph.compute_nodes if "convolution" in str(n.target))
    n, c, h, w = value_info(conv).shape
    assert value_info(conv).stride == (h * w * c, 1, w * c, c)
    tree = build_tree(graph)
    leaf = fused_leaves(tree, [BN, "aten.add.Tensor", "aten.relu.default"])[0]
    assert leaf.sub.output_specs[0].stride == (h * w * c, 1, w * c, c)
    path = tmp_path / "nhwc.py"
    path.write_text(generate(leaf.sub))
    module = load_module(path, "lego_test_convbn_nhwc")
    env = graph.run(problem.model, [to_channels_last(x) for x in problem.make_inputs(3)])
    inputs = [env[a.name] for a in leaf.sub.inputs]
    got = module.launch(*inputs)[0]
    assert got.stride() == leaf.sub.output_specs[0].stride
    torch.testing.assert_close(got, env[leaf.sub.outputs[0].name], rtol=1e-5, atol=1e-5)
