"""GEMM + epilogue: the legality rules (``fusion.gemm``) and the kernel template.

Each kernel case is a tiny KernelBench-style problem.  It is loaded and
captured as the pipeline does; the test picks the GEMM node, grows its
epilogue (``grow_epilogue``) or takes an explicit node list, builds the group
(``gemm_epilogue_group``) and the sub-problem the search would build
(``make_subproblem``), generates the kernel, and checks it with
``verify.verify`` on three seeded input sets (the model's own activations at
the boundary; parameters perturbed in two of the three), plus the maximum
error of ``launch(*inputs)`` against the region's reference.  Sizes are tiny:
the Triton interpreter is slow.  fp32 only (bf16 arithmetic is wrong in the
interpreter).
"""
from __future__ import annotations

import ast
import itertools
import os
import re
import textwrap
from pathlib import Path

os.environ.setdefault("TRITON_INTERPRET", "1")  # before triton is imported anywhere

import pytest
import torch

from lego_core.cost import costing, costmodel
from lego_core.agents.template.agent import TemplateAgent
from lego_core.agents.template.codegen import generate, launch_config
from lego_core.load.capture import Graph, capture_graph, op_name
from lego_core.tree.fusion.gemm import gemm_epilogue_group, grow_epilogue
from lego_core.load.problem import Problem, ProblemSpec, load_problem
from lego_core.judge.inputs import leaf_input_sets, load_module
from lego_core.tree.subproblem import SubProblem, make_subproblem
from lego_core.tree.fusion_tree import OrNode
from lego_core.judge.verify import calls_back_into_reference, verify
from lego_core.judge.static_check import unsafe_host_code

pytestmark = pytest.mark.filterwarnings("ignore:.*LeafSpec.*:FutureWarning")

SEEDS = (101, 202, 303)
MAX_ABS_ERROR = 1e-4  # fp32 GEMMs of K <= 100 with an IEEE fp32 tl.dot
_unique = itertools.count()


# --------------------------------------------------------------------------
# Helpers: problem source -> graph -> GEMM group -> sub-problem -> kernel
# --------------------------------------------------------------------------


def problem_source(forward: str, inputs: str, init: str, args: str = "x") -> str:
    body = textwrap.indent(textwrap.dedent(forward).strip(), " " * 8)
    init_lines = textwrap.indent(textwrap.dedent(init).strip(), " " * 8)
    return (
        "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\n"
        "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        f"{init_lines}\n\n    def forward(self, {args}):\n{body}\n\n\n"
        f"def get_inputs():\n    return [{inputs}]\n\n\ndef get_init_inputs():\n    return []\n"
    )


_CAPTURED: dict[tuple[str, str], tuple[Problem, Graph]] = {}


def capture(tmp_path: Path, source: str, dtype: str = "fp32") -> tuple[Problem, Graph]:
    """(problem, graph) of a problem source, captured once per source and dtype."""
    if (source, dtype) not in _CAPTURED:
        path = tmp_path / f"problem_{next(_unique)}.py"
        path.write_text(source)
        problem = load_problem(ProblemSpec(str(path), dtype=dtype))
        _CAPTURED[(source, dtype)] = problem, capture_graph(problem)
    return _CAPTURED[(source, dtype)]


def gemms(graph: Graph) -> list:
    return [n for n in graph.compute_nodes if op_name(n) in ("aten.mm.default", "aten.addmm.default")]


def nodes_named(graph: Graph, names: list[str]) -> list:
    by_name = {n.name: n for n in graph.compute_nodes}
    return [by_name[name] for name in names]


def subproblem(graph: Graph, nodes: list) -> SubProblem:
    group, reason = gemm_epilogue_group(nodes)
    assert group is not None, reason
    assert group.kind == "gemm_epilogue" and group.fusable and reason == ""
    return make_subproblem(f"sp{next(_unique):03d}", nodes, graph.output_nodes, "gemm_epilogue", group=group)


def input_sets(problem: Problem, graph: Graph, sub: SubProblem) -> list[list[torch.Tensor]]:
    """Boundary inputs per seed, as the search builds them (``judge.inputs.leaf_input_sets``)."""
    activations = [graph.run(problem.model, problem.make_inputs(seed)) for seed in SEEDS]
    parameters = {name for name, src in graph.sources.items() if src.kind == "parameter"}
    return leaf_input_sets(OrNode("or_test", sub, None), activations, parameters, SEEDS)


def check_kernel(tmp_path: Path, problem: Problem, graph: Graph, sub: SubProblem) -> tuple[str, float]:
    """Generate, check the file, verify on three seeds; returns (source, max abs error).
    fp32 problems must also match within MAX_ABS_ERROR; others within verify's tolerances."""
    source = generate(sub)
    tree = ast.parse(source)
    assert ast.get_docstring(tree).splitlines()[0] == f"Triton kernel for sub-problem {sub.id}: {sub.label}"
    assert calls_back_into_reference(source, sub.ops) is None
    assert unsafe_host_code(source) is None  # the kernel cache stores it (lego_core.judge.host_allowlist)
    for call in ast.walk(tree):
        if isinstance(call, ast.Call) and ast.unparse(call.func) in ("tl.load", "tl.store"):
            one_element = re.fullmatch(r"\w+_ptr", ast.unparse(call.args[0]))  # a 0-d tensor
            assert one_element or any(k.arg == "mask" for k in call.keywords), f"unmasked access: {ast.unparse(call)}"
    path = tmp_path / f"kernel_{next(_unique)}.py"
    path.write_text(source)
    module = load_module(path, f"lego_test_gemm_{path.stem}")
    sets = input_sets(problem, graph, sub)
    dtype = problem.spec.torch_dtype
    report = verify(lambda inputs, out: module.launch(*inputs, out=out), sub.run_reference, sets, dtype, list(SEEDS))
    assert report.passed, f"{sub.ops}: {report.reason}\n{source}"
    assert report.runs >= 3
    worst = report.max_abs_error  # over every run verify compared
    got, want = module.launch(*sets[0]), sub.run_reference(sets[0])  # launch's own outputs: eager's layout
    assert len(got) == len(want) == len(sub.outputs)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype and g.stride() == w.stride()
        worst = max(worst, (g.float() - w.float()).abs().max().item())
    assert worst < MAX_ABS_ERROR or dtype != torch.float32, worst
    return source, worst


def linear(d_in: int, d_out: int, bias: bool = True, name: str = "fc") -> str:
    return f"self.{name} = nn.Linear({d_in}, {d_out}, bias={bias})"


# --------------------------------------------------------------------------
# Kernels that verify
# --------------------------------------------------------------------------


def test_linear_gelu_2d(tmp_path):
    problem, graph = capture(tmp_path, problem_source("return F.gelu(self.fc(x))", "torch.randn(12, 40)", linear(40, 24)))
    nodes = grow_epilogue(gemms(graph)[0])
    assert [op_name(n) for n in nodes] == ["aten.addmm.default", "aten.gelu.default"]
    sub = subproblem(graph, nodes)
    source, worst = check_kernel(tmp_path, problem, graph, sub)
    assert 'tl.dot(a, b, acc, input_precision="ieee")' in source  # fp32: no TF32 on a GPU
    assert "acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)" in source


def test_linear_3d_bias_residual(tmp_path):
    """addmm sits between two views; the residual is read with the flat offset."""
    source = problem_source("return self.fc(x) + r", "torch.randn(2, 5, 40), torch.randn(2, 5, 24)", linear(40, 24), args="x, r")
    problem, graph = capture(tmp_path, source)
    nodes = grow_epilogue(gemms(graph)[0])
    assert [op_name(n) for n in nodes] == ["aten.addmm.default", "aten.view.default", "aten.add.Tensor"]
    sub = subproblem(graph, nodes)
    assert sub.group.shape == (2, 5, 24)
    check_kernel(tmp_path, problem, graph, sub)


def test_mm_silu_times_other_tensor(tmp_path):
    source = problem_source("return F.silu(self.fc(x)) * y", "torch.randn(2, 6, 32), torch.randn(2, 6, 20)", linear(32, 20, bias=False), args="x, y")
    problem, graph = capture(tmp_path, source)
    nodes = grow_epilogue(gemms(graph)[0])
    assert op_name(nodes[0]) == "aten.mm.default"
    assert "aten.sigmoid.default" in [op_name(n) for n in nodes] and op_name(nodes[-1]) == "aten.mul.Tensor"
    check_kernel(tmp_path, problem, graph, subproblem(graph, nodes))


def test_sizes_not_multiples_of_the_tiles(tmp_path):
    """M=10, K=37, N=19: partial tiles in M and N, a masked K tail."""
    problem, graph = capture(tmp_path, problem_source("return torch.relu(self.fc(x))", "torch.randn(10, 37)", linear(37, 19)))
    sub = subproblem(graph, grow_epilogue(gemms(graph)[0]))
    source, _ = check_kernel(tmp_path, problem, graph, sub)
    assert "\nCONFIG = {'BLOCK_M': 16, 'BLOCK_N': 32, 'BLOCK_K': 32," in source
    assert "k_mask = offs_k < K - k" in source and "mask = mask_m[:, None] & mask_n[None, :]" in source
    assert "2 K steps of BLOCK_K=32" in launch_config(sub.group)


def test_several_tiles_in_m_and_n(tmp_path):
    """M=N=129: a 2 x 2 grid of 128 x 128 tiles, three of them partial; K=33: 2 steps."""
    problem, graph = capture(tmp_path, problem_source("return torch.tanh(self.fc(x))", "torch.randn(129, 33)", linear(33, 129)))
    sub = subproblem(graph, grow_epilogue(gemms(graph)[0]))
    check_kernel(tmp_path, problem, graph, sub)
    assert "(4 programs, GROUP_M=8), 2 K steps" in launch_config(sub.group)


def test_two_outputs(tmp_path):
    """The GEMM+bias value (read by cumsum) and the activation both leave the kernel."""
    source = problem_source("h = self.fc(x)\nreturn torch.cumsum(h, -1) + F.relu(h) * 2", "torch.randn(9, 30)", linear(30, 21))
    problem, graph = capture(tmp_path, source)
    nodes = grow_epilogue(gemms(graph)[0])
    assert [op_name(n) for n in nodes] == ["aten.addmm.default", "aten.relu.default", "aten.mul.Tensor"]  # not the add after cumsum
    sub = subproblem(graph, nodes)
    assert [op_name(n) for n in sub.outputs] == ["aten.addmm.default", "aten.mul.Tensor"]
    source, _ = check_kernel(tmp_path, problem, graph, sub)
    assert source.count("tl.store(") == 2


def test_broadcast_and_strided_outside_tensors(tmp_path):
    """A per-row scale [B, T, 1], a bias [N], a transposed residual and a 0-d tensor."""
    source = problem_source(
        "r = r.transpose(0, 1)\nreturn (self.fc(x) * s + self.b2) * self.c - r",
        "torch.randn(2, 3, 16), torch.rand(2, 3, 1) + 0.5, torch.randn(3, 2, 20)",
        linear(16, 20) + "\nself.b2 = nn.Parameter(torch.randn(20))\nself.c = nn.Parameter(torch.tensor(0.5))",
        args="x, s, r",
    )
    problem, graph = capture(tmp_path, source)
    nodes = grow_epilogue(gemms(graph)[0])
    sub = subproblem(graph, nodes)
    assert sub.group.roles[next(n.name for n in sub.inputs if tuple(n.meta["val"].shape) == (2, 3, 1))].kind == "scal"
    assert [op_name(n) for n in nodes][-3:] == ["aten.add.Tensor", "aten.mul.Tensor", "aten.sub.Tensor"]
    source, _ = check_kernel(tmp_path, problem, graph, sub)
    assert "% 3)" in source  # the per-row scale is indexed through the [2, 3] rows
    assert re.search(r"= tl\.load\(c_in_ptr\)\.to", source)  # the 0-d tensor self.c: one element


def test_a_whole_pointwise_leaf_as_mutation_proposes_it(tmp_path):
    """The top-down pointwise leaf after the GEMM is [scale * 2 ([N]), mul, r * 0.5, add]:
    a smaller value used only inside and an op on outside values only both fuse."""
    source = problem_source(
        "return self.fc(x) * (self.scale * 2) + r * 0.5",
        "torch.randn(2, 3, 16), torch.randn(2, 3, 20)",
        linear(16, 20) + "\nself.scale = nn.Parameter(torch.randn(20))",
        args="x, r",
    )
    problem, graph = capture(tmp_path, source)
    nodes = nodes_named(graph, ["addmm", "view_1", "mul", "mul_1", "mul_2", "add"])
    assert op_name(nodes[2]) == "aten.mul.Tensor" and tuple(nodes[2].meta["val"].shape) == (20,)
    sub = subproblem(graph, nodes)
    assert sub.group.roles["mul"].kind == "vec" and [n.name for n in sub.outputs] == ["add"]
    source, _ = check_kernel(tmp_path, problem, graph, sub)
    assert "v_mul = (scale * 2.0)" in source  # computed on the [1, BLOCK_N] tile of the scale


def test_one_input_read_in_two_views(tmp_path):
    """The bias feeds the addmm ([M, N]) and, again, the add after the view ([B, T, N])."""
    source = problem_source("return torch.sigmoid(self.fc(x) + self.fc.bias)", "torch.randn(2, 3, 16)", linear(16, 20))
    problem, graph = capture(tmp_path, source)
    sub = subproblem(graph, grow_epilogue(gemms(graph)[0]))
    assert len(sub.inputs) == 3  # bias, x viewed as [M, K], the weight's permute
    source, _ = check_kernel(tmp_path, problem, graph, sub)
    assert "fc_bias_view0_strides = _strides(fc_bias, (6, 20))" in source
    assert "fc_bias_view1_strides = _strides(fc_bias, (2, 3, 20))" in source


def test_transposed_output_layout(tmp_path):
    """``r.t() + fc(x)`` takes the transposed residual's layout in eager: stored through strides (1, M)."""
    source = problem_source("return r.transpose(0, 1) + self.fc(x)", "torch.randn(10, 16), torch.randn(20, 10)", linear(16, 20), args="x, r")
    problem, graph = capture(tmp_path, source)
    sub = subproblem(graph, grow_epilogue(gemms(graph)[0]))
    assert sub.output_specs[0].stride == (1, 10)
    source, _ = check_kernel(tmp_path, problem, graph, sub)
    assert "out_strides = out[0].stride()" in source


def test_mlp_residual_reference_model(shared_models, tiny_overrides, tmp_path):
    """Both GEMMs of the shared model: up + GELU, and down + the residual add (LayerNorm stays outside)."""
    problem = load_problem(ProblemSpec(str(shared_models / "mlp_residual.py"), tiny_overrides("mlp_residual.py")))
    graph = capture_graph(problem)
    up, down = gemms(graph)
    up_nodes, down_nodes = grow_epilogue(up), grow_epilogue(down)
    assert [op_name(n) for n in up_nodes] == ["aten.addmm.default", "aten.gelu.default"]
    assert [op_name(n) for n in down_nodes] == ["aten.addmm.default", "aten.add.Tensor"]
    for nodes in (up_nodes, down_nodes):
        sub = subproblem(graph, nodes)
        _, worst = check_kernel(tmp_path, problem, graph, sub)
        assert worst < MAX_ABS_ERROR


def test_bf16_kernel_uses_the_tensor_core_dot(tmp_path):
    """bf16 inputs: the default tl.dot (no IEEE fp32 products), BLOCK_K=64.  The
    interpreter's bf16 arithmetic is wrong, so numerics are checked on a GPU only (below)."""
    problem, graph = capture(tmp_path, problem_source("return F.gelu(self.fc(x))", "torch.randn(12, 80)", linear(80, 24)), dtype="bf16")
    sub = subproblem(graph, grow_epilogue(gemms(graph)[0]))
    source = generate(sub)
    assert "acc = tl.dot(a, b, acc)\n" in source and "ieee" not in source
    assert "\nCONFIG = {'BLOCK_M': 16, 'BLOCK_N': 32, 'BLOCK_K': 64," in source
    assert "bfloat16" in source.split("OUTPUTS = ")[1].splitlines()[0]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available() or os.environ.get("TRITON_INTERPRET") == "1", reason="needs a CUDA GPU and compiled Triton (TRITON_INTERPRET=0)")
@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_mlp_residual_compiled_on_the_gpu(dtype, shared_models, tmp_path):
    """Both GEMM epilogues of mlp_residual at sizes with several tiles, compiled, in fp32 and bf16."""
    sizes = {"batch_size": 200, "d_model": 320, "d_hidden": 1100}
    problem = load_problem(ProblemSpec(str(shared_models / "mlp_residual.py"), sizes, dtype=dtype, device="cuda"))
    graph = capture_graph(problem)
    for gemm in gemms(graph):
        check_kernel(tmp_path, problem, graph, subproblem(graph, grow_epilogue(gemm)))


def test_template_agent_matches_the_gemm_template(tmp_path):
    problem, graph = capture(tmp_path, problem_source("return F.gelu(self.fc(x))", "torch.randn(4, 16)", linear(16, 16)))
    sub = subproblem(graph, grow_epilogue(gemms(graph)[0]))
    agent = TemplateAgent()
    assert agent.can_attempt(sub)
    proposal = agent.propose(sub, feedback=[])
    assert proposal.source == generate(sub)
    assert proposal.kernel_name + "_kernel" in proposal.source
    last = proposal.transcript[-1][1]
    assert last.startswith("matched the GEMM + epilogue template") and "BLOCK_M=16 x BLOCK_N=16" in last, last


def test_fused_estimate_prices_the_matmul_on_tensor_cores(tmp_path):
    problem, graph = capture(tmp_path, problem_source("return F.gelu(self.fc(x))", "torch.randn(256, 512)", linear(512, 512)))
    sub = subproblem(graph, grow_epilogue(gemms(graph)[0]))
    for dtype in (torch.float32, torch.bfloat16):
        fused = costing.fused_estimate_ms(sub, dtype, "H200")
        library = costing.library_estimate_ms(sub, dtype, "H200")
        assert fused < library
        matmul_flops = 2 * 256 * 512 * 512 + 256 * 512  # the product and the bias add
        as_vector = costmodel.estimate_ms(0, matmul_flops, False, dtype, 1, "H200")
        as_matmul = costmodel.estimate_ms(0, matmul_flops, True, dtype, 1, "H200")
        assert fused >= as_matmul
        if dtype == torch.bfloat16:  # tensor cores: well under the vector-rate time of the product alone
            assert fused < as_vector


BREAKAGES = [
    ("skips_the_k_tail", "for k in range(0, K, BLOCK_K):", "for k in range(0, K - BLOCK_K + 1, BLOCK_K):"),
    ("forgets_the_bias", "v_addmm = acc + fc_bias", "v_addmm = acc"),
    ("stores_too_few_rows", "mask = mask_m[:, None] & mask_n[None, :]", "mask = (offs_m < M - 1)[:, None] & mask_n[None, :]"),
]


@pytest.mark.parametrize("name, good, bad", BREAKAGES, ids=[b[0] for b in BREAKAGES])
def test_verify_rejects_a_broken_gemm_kernel(name, good, bad, tmp_path):
    """The checks above have teeth: M=10, K=37, N=19 kernels with one line broken fail verification."""
    problem, graph = capture(tmp_path, problem_source("return torch.relu(self.fc(x))", "torch.randn(10, 37)", linear(37, 19)))
    sub = subproblem(graph, grow_epilogue(gemms(graph)[0]))
    source = generate(sub)
    assert good in source
    path = tmp_path / "broken.py"
    path.write_text(source.replace(good, bad))
    module = load_module(path, f"lego_test_gemm_broken_{next(_unique)}")
    report = verify(lambda inputs, out: module.launch(*inputs, out=out), sub.run_reference, input_sets(problem, graph, sub), torch.float32, list(SEEDS))
    assert not report.passed and "output 0" in report.reason, report.reason


# --------------------------------------------------------------------------
# What may not fuse into a GEMM: one test per rule
# --------------------------------------------------------------------------

# Four small models hold the cases (a capture takes about a second).
TWO_GEMMS = problem_source(  # relu, permute, addmm, relu_1, permute_1, addmm_1
    "return self.fc2(torch.relu(self.fc(torch.relu(x))))", "torch.randn(6, 16)", linear(16, 8) + "\n" + linear(8, 4, name="fc2")
)
AFTER_THE_GEMM = problem_source(  # permute, addmm, cumsum, add, sum_1, mul, view, mul_1, view_1, add_1
    "h = self.fc(x)\nreturn (h + torch.cumsum(h, -1)) * h.sum(-1, keepdim=True) + (h.view(6, 2, 4) * 2).view(6, 8)",
    "torch.randn(6, 16)",
    linear(16, 8),
)
SMALLER_VALUE = problem_source(  # mul (scale * 2, [8]), permute, addmm, mul_1, sum_1, add
    "s = self.scale * 2\nreturn self.fc(x) * s + s.sum()", "torch.randn(6, 16)", linear(16, 8) + "\nself.scale = nn.Parameter(torch.randn(8))"
)
BETA = problem_source(
    "return torch.addmm(self.b, x, self.w, beta=0.5)", "torch.randn(6, 16)", "self.w = nn.Parameter(torch.randn(16, 8))\nself.b = nn.Parameter(torch.randn(8))"
)

REJECTIONS = [
    ("prologue_op", TWO_GEMMS, ["relu", "addmm"], "no prologue fusion"),
    ("weight_permute_stays_outside", TWO_GEMMS, ["permute", "addmm"], "no prologue fusion"),
    ("second_gemm", TWO_GEMMS, ["addmm", "relu_1", "addmm_1"], "is a second GEMM"),
    ("reduction_after_the_gemm", AFTER_THE_GEMM, ["addmm", "sum_1"], "is a reduction"),
    ("cycle_through_an_outside_op", AFTER_THE_GEMM, ["addmm", "add"], "a cycle"),
    ("view_that_changes_the_last_dimension", AFTER_THE_GEMM, ["addmm", "view", "mul_1"], "must keep M*N elements and the last dimension N"),
    ("smaller_value_read_outside", SMALLER_VALUE, ["addmm", "mul", "mul_1"], "smaller than the [6, 8] output, and is read outside the group"),
    ("addmm_with_beta", BETA, ["addmm"], "only beta = alpha = 1 fuses"),
]


@pytest.mark.parametrize("name, source, names, expected", REJECTIONS, ids=[r[0] for r in REJECTIONS])
def test_illegal_epilogues_are_rejected(name, source, names, expected, tmp_path):
    _, graph = capture(tmp_path, source)
    listing = [(n.name, op_name(n)) for n in graph.compute_nodes]
    assert {n.name for n in graph.compute_nodes} >= set(names), listing
    group, reason = gemm_epilogue_group(nodes_named(graph, names))
    assert group is None
    assert expected in reason and "\n" not in reason, reason


def test_grow_epilogue_stops_at_what_may_not_fuse(tmp_path):
    """The LayerNorm after bias + residual stays out; so does everything after a reduction."""
    source = problem_source(
        "h = self.fc(x) + x\nreturn self.ln(h) + h.amax(-1, keepdim=True)",
        "torch.randn(6, 16)",
        linear(16, 16) + "\nself.ln = nn.LayerNorm(16)",
    )
    _, graph = capture(tmp_path, source)
    nodes = grow_epilogue(gemms(graph)[0])
    assert [op_name(n) for n in nodes] == ["aten.addmm.default", "aten.add.Tensor"]
    assert gemm_epilogue_group(nodes)[0] is not None
