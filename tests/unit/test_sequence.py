"""Depthwise conv1d and scan (cumsum) fusion groups and their Triton templates.

fp32 on the CPU through Triton's interpreter, tiny sizes: each kernel is
verified (``verify``: seeded input sets, poisoned outputs) against the
region's eager reference, on small models written for the variant (odd T,
T longer than one tile with the tile forced small, causal slice / "same"
padding / offset slice, kernel sizes 3 and 4, with and without bias, a
cumsum over dims 0, 1 and 2 of strided inputs), and on gated_conv_mixer at
its tiny.json sizes (the groups it forms and their payload round trip).
"""
from __future__ import annotations

import json
import os
from pathlib import Path

os.environ.setdefault("TRITON_INTERPRET", "1")  # before triton is imported anywhere

import pytest
import torch

from lego_core.agents.payload import sub_from_payload, sub_to_payload
from lego_core.agents.template.agent import TemplateAgent
from lego_core.agents.template.codegen import generate
from lego_core.load.capture import capture_graph
from lego_core.tree.fusion.sequence import find_sequence_groups
from lego_core.load.problem import ProblemSpec, load_problem
from lego_core.judge.inputs import leaf_input_sets, load_module
from lego_core.tree.fusion_tree import build_tree
from lego_core.judge.verify import calls_back_into_reference, verify
from lego_core.judge.static_check import unsafe_host_code
from conftest import SHARED_MODELS  # ../shared/models, or $LEGO_MODELS_DIR where they were carried

MODELS = SHARED_MODELS
SEEDS = (11, 22, 33)


def _problem(path: Path, sizes: dict | None = None):
    problem = load_problem(ProblemSpec(str(path), dict(sizes or {})))
    graph = capture_graph(problem)
    return problem, graph, build_tree(graph)


def _leaves(tree, kind: str):
    seen, found = set(), []
    for node in tree.or_nodes():
        if node.sub.kind == kind and node.sub.signature not in seen:
            seen.add(node.sub.signature)
            found.append(node)
    return found


def _verify(tmp_path, problem, graph, leaf, block_t: int | None = None):
    source = generate(leaf.sub)
    assert calls_back_into_reference(source, leaf.sub.ops) is None
    assert unsafe_host_code(source) is None  # the kernel cache stores it (lego_core.judge.host_allowlist)
    path = tmp_path / f"k_{leaf.id}_{abs(hash(source)) % 10**8}.py"
    path.write_text(source)
    module = load_module(path, f"lego_test_seq_{path.stem}")
    if block_t is not None:
        module.BLOCK_T = block_t  # several tiles along time: the carry / halo across tiles is exercised
    activations = [graph.run(problem.model, problem.make_inputs(seed)) for seed in SEEDS]
    parameters = {name for name, src in graph.sources.items() if src.kind == "parameter"}
    sets = leaf_input_sets(leaf, activations, parameters, SEEDS)
    report = verify(lambda inputs, out: module.launch(*inputs, out=out), leaf.sub.run_reference, sets, torch.float32, list(SEEDS))
    assert report.passed, f"{leaf.sub.ops}: {report.reason}\n{source}"
    return source


CONV_MODEL = """
import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d({c}, {c}, {k}, groups={c}, padding={pad}, bias={bias})

    def forward(self, x):
        t = x.shape[1]
        y = self.conv(x.transpose(1, 2)){view}
        return F.silu(y) * 0.5 + x{x_view}

def get_inputs():
    return [torch.randn(2, {t}, {c})]

def get_init_inputs():
    return []
"""


@pytest.mark.parametrize(
    "k, pad, bias, view, x_view, t",
    [
        (4, 3, True, "[..., :t].transpose(1, 2)", "", 19),  # causal, as gated_conv_mixer
        (3, 2, False, "[..., :t].transpose(1, 2)", "", 37),  # causal, no bias, T over two tiles
        (3, 1, True, ".transpose(1, 2)", "", 21),  # "same" padding, no slice
        (4, 3, True, "[..., 1:t + 1].transpose(1, 2)", "", 19),  # an offset slice
        (4, 3, False, "[..., :t]", ".transpose(1, 2)", 19),  # no transpose back: S = [B, C, T]
    ],
)
def test_depthwise_conv1d_kernel_matches_eager(tmp_path, k, pad, bias, view, x_view, t):
    src = tmp_path / "dwconv.py"
    src.write_text(CONV_MODEL.format(c=6, k=k, pad=pad, bias=bias, view=view, x_view=x_view, t=t))
    problem, graph, tree = _problem(src)
    leaves = _leaves(tree, "depthwise_conv1d")
    assert leaves, [g.kind for g in find_sequence_groups(graph.compute_nodes)]
    leaf = leaves[0]
    ops = leaf.sub.ops
    assert ops[0] == "aten.convolution.default" and "aten.sigmoid.default" in ops and "aten.add.Tensor" in ops
    assert leaf.sub.inputs[0].target == torch.ops.aten.permute.default  # the input transpose stays a view, read through strides
    source = _verify(tmp_path, problem, graph, leaf, block_t=16)
    assert "torch.convolution" not in source and "contiguous()" not in source


SCAN_MODEL = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.linspace(0.5, 1.5, {c}))

    def forward(self, x, g):
        v = x.transpose(1, 2) * torch.exp(-self.w)
        return torch.cumsum(v, dim={dim}) * torch.sigmoid(g) / 3

def get_inputs():
    return [torch.randn(3, {c}, {t}), torch.randn(3, {t}, {c})]

def get_init_inputs():
    return []
"""


@pytest.mark.parametrize("dim, t", [(1, 37), (1, 19), (2, 21), (0, 19)])
def test_scan_kernel_matches_eager(tmp_path, dim, t):
    src = tmp_path / "scan.py"
    src.write_text(SCAN_MODEL.format(c=5, t=t, dim=dim))
    problem, graph, tree = _problem(src)
    leaves = _leaves(tree, "scan")
    assert leaves, [g.kind for g in find_sequence_groups(graph.compute_nodes)]
    leaf = max(leaves, key=lambda n: len(n.sub.nodes))
    ops = leaf.sub.ops
    assert "aten.cumsum.default" in ops and ops.index("aten.cumsum.default") > 0  # a prologue (exp, mul) is fused
    assert "aten.sigmoid.default" in ops  # and the epilogue
    _verify(tmp_path, problem, graph, leaf, block_t=16)


def test_gated_conv_mixer_groups_verify_and_round_trip(tmp_path):
    sizes = json.loads((MODELS / "tiny.json").read_text())["gated_conv_mixer.py"]
    problem, graph, tree = _problem(MODELS / "gated_conv_mixer.py", sizes)
    groups = find_sequence_groups(graph.compute_nodes)
    kinds = [g.kind for g in groups]
    assert kinds == ["depthwise_conv1d", "scan"] * sizes["n_layers"]
    assert [n.name for n in groups[0].nodes] == ["convolution", "slice_1", "permute_2", "sigmoid", "mul_2"]  # conv, causal slice, transpose, SiLU
    scan = groups[1]
    assert {"cumsum", "exp_1", "mul_4", "mul_7", "sigmoid_1"} <= scan.names  # prologue factor, gate and epilogue fused
    agent = TemplateAgent()
    for kind in ("depthwise_conv1d", "scan"):
        leaves = _leaves(tree, kind)
        assert leaves, kind
        for leaf in leaves:
            assert agent.can_attempt(leaf.sub)
            proposal = agent.propose(leaf.sub, [])
            assert proposal.source, proposal.transcript
            rebuilt = sub_from_payload(json.loads(json.dumps(sub_to_payload(leaf.sub))))
            assert rebuilt.signature == leaf.sub.signature and rebuilt.group.kind == kind
        _verify(tmp_path, problem, graph, leaves[0], block_t=16)
    labels = {and_node.label for and_node in tree.walk() if hasattr(and_node, "label")}
    assert "sequence mixer" in labels
