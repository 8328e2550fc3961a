"""Channels-last (NHWC) capture and the pointwise template's dense-in-memory-order path.

fp32 on the CPU through Triton's interpreter, tiny sizes:

- a pointwise kernel whose full-size operands and outputs share one dense
  layout (NHWC from a channels-last capture, or NCHW) runs its flat index
  over that storage: broadcast operands (BatchNorm [C] statistics, an
  [N, C, 1, 1] squeeze-excite gate) are addressed by the dimensions they vary
  along only; the kernel verifies and writes the captured layout;
- operands of different layouts keep the general strided path;
- ``optimize`` of the reference CNNs with ``channels_last=True`` verifies end
  to end, its plan converts inputs at entry, and ModelNew's output has
  eager's strides; capture never modifies the user's model.
"""
from __future__ import annotations

import json
import os
from types import SimpleNamespace

os.environ.setdefault("TRITON_INTERPRET", "1")  # before triton is imported anywhere

import pytest
import torch

from lego_core import ProblemSpec, optimize
from lego_core.agents.template.codegen import generate
from lego_core.load.capture import capture_graph, layout_inputs, use_channels_last
from lego_core.config import OptimizeConfig
from lego_core.judge.end_to_end.shipped import load_composed
from lego_core.load.problem import load_problem
from lego_core.judge.inputs import leaf_input_sets, load_module
from lego_core.tree.fusion.groups import partition
from lego_core.tree.subproblem import make_subproblem
from lego_core.judge.verify import verify
from conftest import SHARED_MODELS  # ../shared/models, or $LEGO_MODELS_DIR where they were carried

MODELS = SHARED_MODELS
TINY = json.loads((MODELS / "tiny.json").read_text())
SEEDS = (11, 22, 33)
BN = "_native_batch_norm_legit_no_training"

GATED_BN = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    """BatchNorm, ReLU, times a per-(sample, channel) gate, plus the input."""

    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm2d(6)
        with torch.no_grad():
            self.bn.running_mean.uniform_(-0.5, 0.5)
            self.bn.running_var.uniform_(0.5, 1.5)
            self.bn.weight.uniform_(0.5, 1.5)
            self.bn.bias.uniform_(-0.5, 0.5)
        self.eval()

    def forward(self, x, gate):
        return torch.relu(self.bn(x)) * torch.sigmoid(gate) + x


def get_inputs():
    return [torch.randn(2, 6, 5, 7), torch.randn(2, 6, 1, 1)]


def get_init_inputs():
    return []
'''

MIXED_LAYOUTS = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    """relu of a transposed input (transposed strides) plus a contiguous one."""

    def forward(self, x, y):
        return torch.relu(x.transpose(2, 3)) * 2.0 + y


def get_inputs():
    return [torch.randn(2, 3, 5, 4), torch.randn(2, 3, 4, 5)]


def get_init_inputs():
    return []
'''


def _leaf_and_source(tmp_path, source: str, channels_last: bool, ops_contain: str):
    path = tmp_path / "model.py"
    path.write_text(source)
    problem = load_problem(ProblemSpec(str(path)))
    graph = capture_graph(problem, channels_last=channels_last)
    group = next(g for g in partition(graph.compute_nodes) if g.fusable and any(ops_contain in str(n.target) for n in g.nodes))
    leaf = SimpleNamespace(sub=make_subproblem("g0", group.nodes, graph.output_nodes, group.kind, group=group))
    return problem, graph, leaf, generate(leaf.sub)


def _verify(tmp_path, problem, graph, leaf, source, channels_last: bool):
    path = tmp_path / f"k_{abs(hash(source)) % 10**8}.py"
    path.write_text(source)
    module = load_module(path, f"lego_test_cl_{path.stem}")
    make = layout_inputs(problem.make_inputs, channels_last)
    activations = [graph.run(problem.model, make(seed)) for seed in SEEDS]
    parameters = {name for name, src in graph.sources.items() if src.kind == "parameter"}
    sets = leaf_input_sets(leaf, activations, parameters, SEEDS)
    report = verify(lambda inputs, out: module.launch(*inputs, out=out), leaf.sub.run_reference, sets, torch.float32, list(SEEDS))
    assert report.passed, f"{report.reason}\n{source}"
    got = module.launch(*sets[0])[0]
    assert got.stride() == leaf.sub.output_specs[0].stride  # the captured layout
    return sets


@pytest.mark.parametrize("channels_last", [True, False], ids=["nhwc", "nchw"])
def test_dense_path_reads_bn_vectors_and_gate_by_their_dims_only(tmp_path, channels_last):
    problem, graph, leaf, source = _leaf_and_source(tmp_path, GATED_BN, channels_last, BN)
    assert {"aten.mul.Tensor", "aten.sigmoid.default", "aten.add.Tensor"} <= set(leaf.sub.ops)  # BN, gate and residual: one kernel
    assert "offs runs over storage dense in dimension order" in source
    assert "rest = offs" not in source  # no per-dimension index split
    # channel: innermost in NHWC, between n and h*w in NCHW; n: the outermost
    assert ("idx_1 = offs % 6" if channels_last else "idx_1 = (offs // 35) % 6") in source
    assert "idx_0 = (offs // 210)\n" in source
    assert "idx_2" not in source and "idx_3" not in source
    sets = _verify(tmp_path, problem, graph, leaf, source, channels_last)
    full = [x for x in sets[0] if isinstance(x, torch.Tensor) and x.shape == (2, 6, 5, 7)]
    assert full and all(x.is_contiguous(memory_format=torch.channels_last) == channels_last for x in full)


def test_a_full_size_input_in_another_layout_keeps_the_general_path(tmp_path):
    problem, graph, leaf, source = _leaf_and_source(tmp_path, MIXED_LAYOUTS, False, "relu")
    assert "offs runs over storage dense" not in source
    assert "rest = offs" in source  # every dimension's index, every operand's strides
    _verify(tmp_path, problem, graph, leaf, source, False)


def test_dense_path_copies_an_input_that_arrives_in_another_layout(tmp_path):
    problem, graph, leaf, source = _leaf_and_source(tmp_path, GATED_BN, True, BN)
    path = tmp_path / "k_copy.py"
    path.write_text(source)
    module = load_module(path, "lego_test_cl_copy")
    env = graph.run(problem.model, problem.make_inputs(5))  # NCHW values into an NHWC-captured kernel
    got = module.launch(*[env[a.name] for a in leaf.sub.inputs])[0]
    want = leaf.sub.run_reference([env[a.name] for a in leaf.sub.inputs])[0]
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="captured layout"):
        module.launch(*[env[a.name] for a in leaf.sub.inputs], out=[torch.empty(2, 6, 5, 7)])


def test_capture_leaves_the_model_alone_and_auto_means_cuda_with_conv2d():
    problem = load_problem(ProblemSpec(str(MODELS / "resnet_stage.py"), dict(TINY["resnet_stage.py"])))
    strides = {name: p.stride() for name, p in problem.model.named_parameters()}
    graph = capture_graph(problem, channels_last=True)
    assert {name: p.stride() for name, p in problem.model.named_parameters()} == strides
    conv = next(n for n in graph.compute_nodes if "convolution" in str(n.target))
    assert conv.meta["val"].is_contiguous(memory_format=torch.channels_last) and not conv.meta["val"].is_contiguous()
    assert use_channels_last("auto", problem) is False  # a CPU problem
    assert use_channels_last(True, problem) is True
    with pytest.raises(ValueError):
        OptimizeConfig(channels_last="yes")


@pytest.mark.parametrize("name", ["resnet_stage.py", "mobile_se_block.py"])
def test_optimize_in_channels_last_matches_eager_values_and_strides(tmp_path, name):
    spec = ProblemSpec(str(MODELS / name), dict(TINY[name]))
    report = optimize(spec, str(tmp_path / "out"), OptimizeConfig(cache=False, channels_last=True, force_triton=True))
    assert report["layout"]["channels_last"] is True
    assert report["end_to_end"]["passed"] and "output_strides" not in report["end_to_end"]
    source = (tmp_path / "out" / "optimized_model.py").read_text()
    assert "lego_runtime.to_channels_last(" in source
    kernels = list((tmp_path / "out" / "kernels").glob("*.py"))
    assert kernels and any("offs runs over storage dense" in k.read_text() for k in kernels)
    problem = load_problem(spec)
    new = load_composed(tmp_path / "out", problem)
    assert all(p.is_contiguous() for p in new.parameters())  # the user's layout, not converted
    for seed in (1, 2):
        x = problem.make_inputs(seed)
        with torch.no_grad():
            want, got = problem.model(*x), new(*x)
        assert got.stride() == want.stride()
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


VIEW_AFTER_CONV = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x):
        return self.conv(x).view(2, -1)  # only NCHW strides allow this view


def get_inputs():
    return [torch.randn(2, 3, 5, 5)]


def get_init_inputs():
    return []
'''


def test_a_model_only_nchw_can_trace_falls_back_to_its_own_layout(tmp_path):
    from lego_core.pipeline import capture

    path = tmp_path / "model.py"
    path.write_text(VIEW_AFTER_CONV)
    problem = load_problem(ProblemSpec(str(path)))
    layout = {"channels_last": True}
    graph, channels_last = capture(problem, True, layout)
    assert channels_last is False and layout["channels_last"] is False and "channels-last capture failed" in layout["fallback"]
    conv = next(n for n in graph.compute_nodes if "convolution" in str(n.target))
    assert conv.meta["val"].is_contiguous()
