"""The template agent's code generator, one template kind at a time.

Each case is a tiny KernelBench-style problem file.  It is loaded the way the
pipeline loads it (``load_problem`` -> ``capture_graph`` -> ``build_tree``);
the test finds the fusion-group leaf of the expected kind, generates its
kernel file (``codegen.generate``), imports it (``judge.inputs.load_module``) and
checks it with ``verify.verify`` on three seeded input sets whose boundary
values come from ``graph.run(model, problem.make_inputs(seed))``, exactly the
values the search checks candidates on.  Every generated file must also parse
as plain Python, start with a header naming its region, and mask every
vector ``tl.load`` / ``tl.store``.

Further down: broken kernels that ``verify`` must reject with a readable
reason, and ops the templates do not handle, which must stay library calls.
"""
from __future__ import annotations

import ast
import dataclasses
import itertools
import os
import re
import textwrap
from pathlib import Path

os.environ.setdefault("TRITON_INTERPRET", "1")  # before triton is imported anywhere

import pytest
import torch

from lego_core.agents.template.agent import TemplateAgent
from lego_core.agents.template.codegen import generate
from lego_core.agents.template.expressions import Unsupported
from lego_core.load.capture import Graph, capture_graph
from lego_core.load.problem import Problem, ProblemSpec, load_problem
from lego_core.judge.inputs import leaf_input_sets, load_module
from lego_core.tree.fusion_tree import FusionTree, OrNode, build_tree
from lego_core.judge.verify import VerifyReport, calls_back_into_reference, verify
from lego_core.judge.static_check import unsafe_host_code

SEEDS = (101, 202, 303)
_unique = itertools.count()


# --------------------------------------------------------------------------
# Helpers: problem file -> graph -> leaf -> kernel -> verification
# --------------------------------------------------------------------------


def problem_source(forward: str, inputs: str, args: str = "x", init: str = "") -> str:
    """A KernelBench-style problem file with ``forward(self, <args>)``."""
    init_lines = textwrap.indent(textwrap.dedent(init).strip(), " " * 8) if init.strip() else ""
    body = textwrap.indent(textwrap.dedent(forward).strip(), " " * 8)
    return (
        "import torch\n"
        "import torch.nn as nn\n"
        "import torch.nn.functional as F\n\n\n"
        "class Model(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        f"{init_lines}\n\n"
        f"    def forward(self, {args}):\n"
        f"{body}\n\n\n"
        "def get_inputs():\n"
        f"    return [{inputs}]\n\n\n"
        "def get_init_inputs():\n"
        "    return []\n"
    )


@dataclasses.dataclass
class Built:
    problem: Problem
    graph: Graph
    tree: FusionTree
    work: Path

    def input_sets(self, leaf: OrNode, seeds=SEEDS) -> list[list[torch.Tensor]]:
        """Boundary inputs of ``leaf`` for each seed, as the search builds them
        (``judge.inputs.leaf_input_sets``: parameters perturbed in all sets but the first)."""
        activations = [self.graph.run(self.problem.model, self.problem.make_inputs(seed)) for seed in seeds]
        parameters = {name for name, src in self.graph.sources.items() if src.kind == "parameter"}
        return leaf_input_sets(leaf, activations, parameters, tuple(seeds))

    def boundary_values(self, leaf: OrNode, seed: int) -> tuple[list, list]:
        """(inputs, eager outputs) of ``leaf`` at ``seed``."""
        env = self.graph.run(self.problem.model, self.problem.make_inputs(seed))
        return [env[n.name] for n in leaf.sub.inputs], [env[n.name] for n in leaf.sub.outputs]


def build(tmp_path: Path, source: str, dtype: str = "fp32") -> Built:
    path = tmp_path / f"problem_{next(_unique)}.py"
    path.write_text(source)
    problem = load_problem(ProblemSpec(str(path), dtype=dtype))
    graph = capture_graph(problem)
    return Built(problem, graph, build_tree(graph), tmp_path)


def find_leaf(built: Built, kind: str, ops: tuple[str, ...] = ()) -> OrNode:
    """The one fusable leaf of ``kind`` whose ops include every name in ``ops``."""
    leaves = built.tree.leaves()
    found = [
        leaf
        for leaf in leaves
        if leaf.sub.kind == kind
        and leaf.sub.group is not None
        and leaf.sub.group.fusable
        and all(op in leaf.sub.ops for op in ops)
    ]
    listing = "\n".join(f"  {leaf.id} {leaf.sub.kind} {leaf.sub.ops}" for leaf in leaves)
    assert len(found) == 1, f"expected one fusable {kind} leaf with {ops}, leaves are:\n{listing}"
    return found[0]


def load_kernel(built: Built, source: str):
    path = built.work / f"kernel_{next(_unique)}.py"
    path.write_text(source)
    return load_module(path, f"lego_test_kernel_{path.stem}")


def run_verify(built: Built, leaf: OrNode, source: str, seeds=SEEDS) -> VerifyReport:
    module = load_kernel(built, source)
    return verify(
        lambda inputs, out: module.launch(*inputs, out=out),
        leaf.sub.run_reference,
        built.input_sets(leaf, seeds),
        built.problem.spec.torch_dtype,
        list(seeds),
    )


_VECTOR_OFFSETS = re.compile(r"\boffs(_n)?\b")


def check_kernel_file(source: str, leaf: OrNode) -> None:
    """Plain Python, a header naming the region, masked vector accesses."""
    sub = leaf.sub
    tree = ast.parse(source)  # plain Python: parses ...
    compile(source, f"<{sub.id}>", "exec")  # ... and compiles
    doc = ast.get_docstring(tree)
    assert doc, "the kernel file starts with no docstring"
    assert doc.splitlines()[0] == f"Triton kernel for sub-problem {sub.id}: {sub.label}"
    assert f"Region:  {sub.label}" in doc
    for op in sub.ops:
        assert op in doc, f"the header does not list {op}"
    assert calls_back_into_reference(source, sub.ops) is None
    assert unsafe_host_code(source) is None  # the kernel cache stores it (lego_core.judge.host_allowlist)

    accesses = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and ast.unparse(node.func) in ("tl.load", "tl.store")
    ]
    assert accesses, "the kernel reads and writes nothing"
    for call in accesses:
        text = ast.unparse(call)
        if any(k.arg == "mask" for k in call.keywords):
            continue
        # The only unmasked access allowed is a per-row scalar of a row
        # program (``ptr + row``): one element per program, always in bounds
        # since the grid has exactly one program per row.
        address = ast.unparse(call.args[0])
        assert sub.kind == "row_reduction" and not _VECTOR_OFFSETS.search(address), f"unmasked vector access: {text}"


def check_generated(built: Built, leaf: OrNode) -> tuple[str, VerifyReport]:
    source = generate(leaf.sub)
    check_kernel_file(source, leaf)
    report = run_verify(built, leaf, source)
    assert report.passed, f"{leaf.sub.ops}: {report.reason}\n{source}"
    assert report.seeds == list(SEEDS) and report.runs >= 3
    return source, report


def check_output_layout(built: Built, leaf: OrNode, source: str) -> None:
    """launch() without ``out`` allocates outputs with eager's strides."""
    module = load_kernel(built, source)
    inputs, eager = built.boundary_values(leaf, SEEDS[0])
    produced = module.launch(*inputs)
    for k, (got, want) in enumerate(zip(produced, eager)):
        assert tuple(got.shape) == tuple(want.shape), f"output {k}"
        assert got.stride() == want.stride(), f"output {k}: strides {got.stride()} != eager {want.stride()}"
        assert got.stride() == leaf.sub.output_specs[k].stride, f"output {k}: not the captured layout"
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5, equal_nan=True)


# --------------------------------------------------------------------------
# Cases
# --------------------------------------------------------------------------


@dataclasses.dataclass
class Case:
    id: str
    kind: str  # pointwise | row_reduction
    source: str
    ops: tuple[str, ...] = ()  # ops the leaf must contain
    layout: bool = False  # also check launch()'s own output strides against eager
    n_outputs: int | None = None


CAUSAL_MASK = 'self.register_buffer("mask", torch.tril(torch.ones(9, 9, dtype=torch.bool)).view(1, 1, 9, 9), persistent=False)'

POINTWISE_CASES = [
    Case(
        "bias_gelu_erf",  # bias [N] + x [B,T,N]; 3*11*37 = 1221 elements: two blocks, the last partial
        "pointwise",
        problem_source("return F.gelu(x + self.bias)", "torch.randn(3, 11, 37)", init="self.bias = nn.Parameter(torch.randn(37))"),
        ("aten.gelu.default", "aten.add.Tensor"),
    ),
    Case(
        "gelu_tanh_residual",
        "pointwise",
        problem_source('return F.gelu(x, approximate="tanh") * 0.5 + x', "torch.randn(5, 301) * 3"),
        ("aten.gelu.default",),
    ),
    Case(
        "causal_mask_1x1xTxT_in_BxHxTxT",  # the mask is a slice of a bigger buffer: strided and broadcast
        "pointwise",
        problem_source(
            'return (x * 0.25).masked_fill(~self.mask[:, :, :7, :7], float("-inf"))',
            "torch.randn(2, 3, 7, 7)",
            init=CAUSAL_MASK,
        ),
        ("aten.where.self", "aten.bitwise_not.default"),
    ),
    Case(
        "bool_input_masked_fill_where",
        "pointwise",
        problem_source(
            "s = (x / 0.7 + self.bias).masked_fill(~keep, -1e4)\nreturn torch.where(torch.logical_and(keep, x > 0), s, y.exp())",
            "torch.randn(4, 33), torch.rand(4, 33) > 0.3, torch.randn(4, 33)",
            args="x, keep, y",
            init="self.bias = nn.Parameter(torch.randn(33))",
        ),
        ("aten.where.self", "aten.logical_and.default"),
    ),
    Case(
        "bool_to_float",
        "pointwise",
        problem_source(
            "return x * keep.to(x.dtype) + (x > 0.5).float()",
            "torch.randn(6, 45), torch.rand(6, 45) > 0.5",
            args="x, keep",
        ),
        ("aten._to_copy.default", "aten.mul.Tensor"),
    ),
    Case(
        "bool_output",  # a mask computed in Triton and read by a library op (two poison fills)
        "pointwise",
        problem_source(
            "m = torch.logical_or(x > 0.5, y < -0.5)\nreturn torch.cumsum(m, dim=-1).float()",
            "torch.randn(3, 29), torch.randn(3, 29)",
            args="x, y",
        ),
        ("aten.logical_or.default",),
        n_outputs=1,
    ),
    Case(
        "permuted_and_transposed_inputs",
        "pointwise",
        problem_source(
            "return x.permute(0, 2, 1) * torch.sigmoid(y) + torch.sin(z.transpose(0, 2))",
            "torch.randn(2, 37, 5), torch.randn(2, 5, 37), torch.randn(37, 5, 2)",
            args="x, y, z",
        ),
        ("aten.sigmoid.default", "aten.sin.default"),
        layout=True,
    ),
    Case(
        "transposed_output_layout",  # relu of a transposed input keeps the transposed strides in eager
        "pointwise",
        problem_source("return torch.relu(x.transpose(1, 2)) * 2", "torch.randn(3, 5, 37)"),
        ("aten.relu.default",),
        layout=True,
    ),
    Case(
        "transposed_output_then_view",  # the permuted output is viewed back downstream
        "pointwise",
        problem_source("return (torch.tanh(x.transpose(1, 2)) + 1).transpose(1, 2).reshape(3, -1)", "torch.randn(3, 5, 37)"),
        ("aten.tanh.default",),
        layout=True,
    ),
    Case(
        "transposed_input_made_contiguous",  # clone(memory_format=contiguous) of a transposed input
        "pointwise",
        problem_source("return (torch.relu(x.transpose(1, 2)) + self.bias).contiguous()", "torch.randn(3, 5, 37)", init="self.bias = nn.Parameter(torch.randn(5))"),
        ("aten.relu.default",),
        layout=True,
    ),
    Case(
        "permuted_4d_output_layout",
        "pointwise",
        problem_source("return torch.exp(x.permute(0, 2, 3, 1) * 0.5)", "torch.randn(2, 3, 5, 7)"),
        ("aten.exp.default",),
        layout=True,
    ),
    Case(
        "hardswish_hardsigmoid",
        "pointwise",
        problem_source("return F.hardswish(x) + F.hardsigmoid(x * 2)", "torch.randn(3, 8, 7, 7) * 4"),
        ("aten.clamp.default",),
    ),
    Case(
        "silu_gate",
        "pointwise",
        problem_source("return F.silu(x) * y", "torch.randn(5, 96), torch.randn(5, 96)", args="x, y"),
        ("aten.sigmoid.default",),
    ),
    Case(
        "scalar_math",
        "pointwise",
        problem_source(
            "h = torch.clamp(x, min=-1.5, max=2.0).pow(2) + torch.rsqrt(x.abs() + 1) - 1 / (y.abs() + 0.5)\n"
            "return (1 - h) / 3 + torch.sqrt(y * y) + torch.minimum(x, y) * torch.maximum(x, y.neg())",
            "torch.randn(7, 13, 11), torch.randn(7, 13, 11)",
            args="x, y",
        ),
        ("aten.clamp.default", "aten.rsqrt.default", "aten.pow.Tensor_Scalar"),
    ),
    Case(
        "broadcast_row_and_column",  # [N], [B,T,1] and [T,N] operands in a [B,T,N] space
        "pointwise",
        problem_source(
            "return x + self.bias + col * pos",
            "torch.randn(3, 11, 37), torch.randn(3, 11, 1), torch.randn(11, 37)",
            args="x, col, pos",
            init="self.bias = nn.Parameter(torch.randn(37))",
        ),
        ("aten.add.Tensor", "aten.mul.Tensor"),
    ),
    Case(
        "two_outputs",  # h is read by a library op and by the rest of the chain
        "pointwise",
        problem_source("h = x * 2 + 1\ne = h.exp()\nreturn torch.cumsum(h, -1) + e", "torch.randn(4, 50)"),
        ("aten.mul.Tensor", "aten.exp.default"),
        n_outputs=2,
    ),
]

ROW_CASES = [
    Case(
        "softmax_prologue_epilogue_n30",
        "row_reduction",
        problem_source(
            "return torch.softmax(x * 0.5 + self.bias, dim=-1) * 3.0",
            "torch.randn(4, 6, 30) * 3",
            init="self.bias = nn.Parameter(torch.randn(30))",
        ),
        ("aten._softmax.default",),
    ),
    Case(
        "log_softmax_n1000",
        "row_reduction",
        problem_source("return F.log_softmax(x, dim=-1)", "torch.randn(3, 1000) * 4"),
        ("aten._log_softmax.default",),
    ),
    Case(
        "causal_softmax_4d",  # the attention pattern: scale, causal mask (-inf), softmax
        "row_reduction",
        problem_source(
            'a = (x / 4.0).masked_fill(~self.mask[:, :, :7, :7], float("-inf"))\nreturn F.softmax(a, dim=-1)',
            "torch.randn(2, 3, 7, 7)",
            init=CAUSAL_MASK,
        ),
        ("aten._softmax.default", "aten.where.self"),
    ),
    Case(
        "softmax_4d_broadcast_bias",
        "row_reduction",
        problem_source(
            "return torch.softmax(x + self.pos, -1)",
            "torch.randn(2, 3, 5, 30)",
            init="self.pos = nn.Parameter(torch.randn(1, 1, 5, 30))",
        ),
        ("aten._softmax.default",),
    ),
    Case(
        "softmax_of_transposed_input",
        "row_reduction",
        problem_source("return torch.softmax(x.transpose(1, 2), dim=-1)", "torch.randn(2, 30, 6)"),
        ("aten._softmax.default",),
        layout=True,
    ),
    Case(
        "layer_norm_affine_residual",
        "row_reduction",
        problem_source(
            "return F.layer_norm(x + y, (37,), self.weight, self.bias, eps=1e-5)",
            "torch.randn(3, 5, 37), torch.randn(3, 5, 37)",
            args="x, y",
            init="self.weight = nn.Parameter(torch.rand(37) + 0.5)\nself.bias = nn.Parameter(torch.rand(37) - 0.5)",
        ),
        ("aten.native_layer_norm.default", "aten.add.Tensor"),
    ),
    Case(
        "layer_norm_no_affine",
        "row_reduction",
        problem_source("return self.ln(x) * 2", "torch.randn(4, 7, 45) * 2 + 1", init="self.ln = nn.LayerNorm(45, elementwise_affine=False)"),
        ("aten.native_layer_norm.default",),
    ),
    Case(
        "rmsnorm_as_in_the_models",
        "row_reduction",
        problem_source(
            "return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight",
            "torch.randn(2, 9, 48)",
            init="self.weight = nn.Parameter(torch.rand(48) + 0.5)",
        ),
        ("aten.mean.dim", "aten.rsqrt.default", "aten.pow.Tensor_Scalar"),
    ),
    Case(
        "logsumexp",
        "row_reduction",
        problem_source("return torch.logsumexp(x, dim=-1)", "torch.randn(6, 30) * 5"),
        ("aten.amax.default", "aten.sum.dim_IntList", "aten.log.default"),
    ),
    Case(
        "scores_chain_tail",  # masked_fill, softmax, weighted row sum, logsumexp of the difference
        "row_reduction",
        problem_source(
            "s = x / 0.7 + self.bias\n"
            "s = s.masked_fill(~keep, -1e4)\n"
            "p = torch.softmax(s, dim=-1)\n"
            "pooled = (p * s).sum(dim=-1, keepdim=True)\n"
            "return torch.logsumexp(s - pooled, dim=-1)",
            "torch.randn(5, 30), torch.rand(5, 30) > 0.1",
            args="x, keep",
            init="self.bias = nn.Parameter(torch.randn(30) * 0.1)",
        ),
        ("aten._softmax.default", "aten.sum.dim_IntList", "aten.amax.default"),
    ),
    Case(
        "sum_keepdim_false",
        "row_reduction",
        problem_source("return x.sum(-1) * 2", "torch.randn(4, 5, 37)"),
        ("aten.sum.dim_IntList",),
    ),
    Case(
        "sum_keepdim_true",
        "row_reduction",
        problem_source("a = x.abs() + 1\nreturn a / a.sum(-1, keepdim=True)", "torch.randn(4, 5, 37)"),
        ("aten.sum.dim_IntList", "aten.div.Tensor"),
    ),
    Case(
        "mean_keepdim_true",
        "row_reduction",
        problem_source("return x - x.mean(-1, keepdim=True)", "torch.randn(8, 30) + 2"),
        ("aten.mean.dim",),
    ),
    Case(
        "mean_keepdim_false",
        "row_reduction",
        problem_source("return x.mean(dim=-1) + 1", "torch.randn(2, 3, 1000)"),
        ("aten.mean.dim",),
    ),
    Case(
        "amax_keepdim_true",
        "row_reduction",
        problem_source("return torch.exp(x - x.amax(-1, keepdim=True))", "torch.randn(5, 33) * 4"),
        ("aten.amax.default", "aten.exp.default"),
    ),
    Case(
        "amax_keepdim_false",
        "row_reduction",
        problem_source("return x.amax(dim=-1)", "torch.randn(3, 4, 30)"),
        ("aten.amax.default",),
    ),
    Case(
        "amax_of_permuted_input_strided_rows_output",  # eager's [5, 3] result has strides (1, 5)
        "row_reduction",
        problem_source("return x.permute(1, 0, 2).amax(-1) * 2", "torch.randn(3, 5, 30)"),
        ("aten.amax.default",),
        layout=True,
    ),
    Case(
        "permuted_input_two_strided_outputs",  # per-row max [5,3,1] and exp(y - max) [5,3,30], both permuted
        "row_reduction",
        problem_source(
            "y = x.permute(1, 0, 2)\nm = y.amax(-1, keepdim=True)\ne = torch.exp(y - m)\nreturn torch.cumsum(e, -1) + m",
            "torch.randn(3, 5, 30)",
        ),
        ("aten.amax.default", "aten.exp.default"),
        layout=True,
        n_outputs=2,
    ),
    Case(
        "row_of_a_1d_tensor",
        "row_reduction",
        problem_source("return torch.softmax(x, -1) + x.sum(-1)", "torch.randn(30)"),
        ("aten._softmax.default", "aten.sum.dim_IntList"),
    ),
    Case(
        "two_outputs_scalar_and_row",  # the row max (per-row scalar) and exp(x - max) both leave the group
        "row_reduction",
        problem_source(
            "m = x.amax(-1, keepdim=True)\ny = torch.exp(x - m)\nreturn torch.cumsum(y, -1) + m",
            "torch.randn(4, 6, 30)",
        ),
        ("aten.amax.default", "aten.exp.default"),
        n_outputs=2,
    ),
]


@pytest.mark.parametrize("case", POINTWISE_CASES + ROW_CASES, ids=lambda c: f"{c.kind}-{c.id}")
def test_template_kernel_verifies(case: Case, tmp_path):
    built = build(tmp_path, case.source)
    leaf = find_leaf(built, case.kind, case.ops)
    if case.n_outputs is not None:
        assert len(leaf.sub.outputs) == case.n_outputs, [n.name for n in leaf.sub.outputs]
    source, report = check_generated(built, leaf)
    if case.layout:
        check_output_layout(built, leaf, source)


def test_pointwise_sizes_are_not_block_multiples(tmp_path):
    """The bias_gelu case is 1221 elements: not a power of two nor a multiple of the block."""
    from lego_core.agents.template.pointwise_codegen import POINTWISE_BLOCK

    case = next(c for c in POINTWISE_CASES if c.id == "bias_gelu_erf")
    built = build(tmp_path, case.source)
    leaf = find_leaf(built, "pointwise", case.ops)
    numel = leaf.sub.output_specs[0].numel
    assert numel > POINTWISE_BLOCK and numel % POINTWISE_BLOCK and numel & (numel - 1)
    assert "mask = offs < n_elements" in generate(leaf.sub)


def test_row_block_is_the_next_power_of_two(tmp_path):
    built = build(tmp_path, problem_source("return F.log_softmax(x, dim=-1)", "torch.randn(3, 1000)"))
    source = generate(find_leaf(built, "row_reduction").sub)
    assert "BLOCK_N=triton.next_power_of_2(1000)" in source
    assert "mask = offs_n < n_cols" in source


def test_offsets_past_int32_use_64_bit_program_indices():
    """A long sequence's score matrix (1 x 9 x 16384 x 16384 = 2.4e9 elements)
    overflows int32 offsets: the H200 reported an illegal memory access."""
    from lego_core.agents.template.pointwise_codegen import needs_int64_offsets
    from lego_core.load.capture import ValueInfo

    big = ValueInfo((1, 9, 16384, 16384), torch.bfloat16, (9 * 16384 * 16384, 16384 * 16384, 16384, 1))
    assert needs_int64_offsets(big.shape, [big])
    small = ValueInfo((8, 1024), torch.float32, (1024, 1))
    assert not needs_int64_offsets(small.shape, [small])
    # a small iteration space over a slice of a huge tensor: the span counts
    sliced = ValueInfo((2, 4), torch.float32, (2**30, 2**29))
    assert needs_int64_offsets((2, 4), [sliced])


@pytest.mark.parametrize("case_id", ["bias_gelu_erf", "permuted_and_transposed_inputs", "softmax_of_transposed_input", "layer_norm_affine_residual"])
def test_64_bit_offsets_compute_the_same_values(case_id, tmp_path, monkeypatch):
    """With the int32 limit lowered so the tiny case counts as huge, the
    generated kernel takes the int64 path and still verifies."""
    from lego_core.agents.template import pointwise_codegen

    case = next(c for c in POINTWISE_CASES + ROW_CASES if c.id == case_id)
    built = build(tmp_path, case.source)
    leaf = find_leaf(built, case.kind, case.ops)
    monkeypatch.setattr(pointwise_codegen, "INT32_LIMIT", 16)
    assert "tl.program_id(0).to(tl.int64)" in generate(leaf.sub)
    check_generated(built, leaf)


def test_template_agent_proposes_the_generated_source(tmp_path):
    case = ROW_CASES[0]
    built = build(tmp_path, case.source)
    leaf = find_leaf(built, case.kind, case.ops)
    proposal = TemplateAgent().propose(leaf.sub, feedback=[])
    assert proposal.source == generate(leaf.sub)
    assert proposal.kernel_name and proposal.kernel_name + "_kernel" in proposal.source
    assert "row reduction template" in proposal.transcript[-1][1]


# --------------------------------------------------------------------------
# Broken kernels: verify must reject them, with a readable reason
# --------------------------------------------------------------------------


def _section(source: str, start: str, end: str) -> tuple[int, int]:
    a = source.index(f"    # {start}\n")
    return a, source.index(f"    # {end}\n", a)


def break_first_add_in_compute(source: str) -> str:
    a, b = _section(source, "compute", "store")
    compute = source[a:b]
    assert " + " in compute
    return source[:a] + compute.replace(" + ", " - ", 1) + source[b:]


def store_skips_last_elements(source: str) -> str:
    store = re.search(r"tl\.store\((.*), mask=mask\)", source)
    assert store, source
    broken = store.group(0).replace("mask=mask)", "mask=mask & (offs < n_elements - 3))")
    return source.replace(store.group(0), broken, 1)


def grid_skips_last_row(source: str) -> str:
    grid = re.search(r"grid = \((\d+),\)", source)
    assert grid, source
    return source.replace(grid.group(0), f"grid = ({int(grid.group(1)) - 1},)", 1)


def exp_sums_masked_lanes(source: str) -> str:
    """softmax: drop the neutral element on the exp, so the padding lanes
    (BLOCK_N - N of them) add exp(0 - max) to the row sum."""
    line = re.search(r"(\w+_exp) = tl\.where\(mask, (tl\.exp\(.*\)), 0\.0\)", source)
    assert line, source
    return source.replace(line.group(0), f"{line.group(1)} = {line.group(2)}", 1)


def layer_norm_forgets_bias(source: str) -> str:
    line = re.search(r"\n\s+(\w+_0) = \1 \+ \w+\n", source)
    assert line, source
    return source.replace(line.group(0), "\n", 1)


BREAKAGES = [
    ("pointwise", "bias_gelu_erf", break_first_add_in_compute, "elements outside tolerance"),
    ("pointwise", "bias_gelu_erf", store_skips_last_elements, "NaN at 3 elements"),
    ("pointwise", "causal_mask_1x1xTxT_in_BxHxTxT", store_skips_last_elements, "NaN at 3 elements"),
    ("row_reduction", "softmax_prologue_epilogue_n30", exp_sums_masked_lanes, "elements outside tolerance"),
    ("row_reduction", "softmax_prologue_epilogue_n30", grid_skips_last_row, "NaN at 30 elements"),
    ("row_reduction", "sum_keepdim_false", grid_skips_last_row, "NaN at 1 elements"),
    ("row_reduction", "layer_norm_affine_residual", layer_norm_forgets_bias, "elements outside tolerance"),
]


@pytest.mark.parametrize("kind, case_id, breakage, expected", BREAKAGES, ids=lambda v: getattr(v, "__name__", str(v)))
def test_verify_rejects_a_broken_kernel(kind, case_id, breakage, expected, tmp_path):
    case = next(c for c in POINTWISE_CASES + ROW_CASES if c.id == case_id)
    built = build(tmp_path, case.source)
    leaf = find_leaf(built, kind, case.ops)
    good = generate(leaf.sub)
    broken = breakage(good)
    assert broken != good
    compile(broken, "<broken>", "exec")
    report = run_verify(built, leaf, broken)
    assert not report.passed
    reason = report.reason
    assert "\n" not in reason and len(reason) < 400, reason
    assert re.match(r"input set \d \(seed label [0-9a-f]{8}\), call 1, poison variant 0: output 0: ", reason), reason
    assert expected in reason, reason


def test_verify_reports_a_kernel_that_raises(tmp_path):
    case = POINTWISE_CASES[0]
    built = build(tmp_path, case.source)
    leaf = find_leaf(built, "pointwise", case.ops)
    broken = generate(leaf.sub).replace("BLOCK_SIZE=1024", "BLOCK_SIZE=1000")  # tl.arange needs a power of two
    report = run_verify(built, leaf, broken)
    assert not report.passed
    assert "candidate raised" in report.reason and "\n" not in report.reason, report.reason


# --------------------------------------------------------------------------
# What the templates do not handle stays a library call
# --------------------------------------------------------------------------

UNSUPPORTED = [
    ("cumsum", problem_source("return torch.cumsum(x, dim=1)", "torch.randn(3, 5, 37)"), "aten.cumsum.default"),
    ("sum_over_dim0", problem_source("return x.sum(0)", "torch.randn(3, 5, 37)"), "aten.sum.dim_IntList"),
    ("softmax_over_dim1", problem_source("return torch.softmax(x, dim=1)", "torch.randn(3, 5, 37)"), "aten._softmax.default"),
    ("topk", problem_source("return torch.topk(x, 3, dim=-1)[0]", "torch.randn(3, 5, 37)"), "aten.topk.default"),
    ("pow_2_5", problem_source("return x.abs().pow(2.5)", "torch.randn(4, 9)"), "aten.pow.Tensor_Scalar"),
    ("floor_divide", problem_source("return torch.div(x, 0.3, rounding_mode='floor')", "torch.randn(4, 9)"), "aten.div.Tensor_mode"),
    ("integer_math", problem_source("return (x * 3 + 1).float()", "torch.randint(0, 9, (4, 9))"), "aten.mul.Tensor"),
]


@pytest.mark.parametrize("name, source, op", UNSUPPORTED, ids=[u[0] for u in UNSUPPORTED])
def test_unsupported_ops_stay_library_calls(name, source, op, tmp_path):
    built = build(tmp_path, source)
    leaves = [leaf for leaf in built.tree.leaves() if op in leaf.sub.ops]
    assert leaves, [leaf.sub.ops for leaf in built.tree.leaves()]
    for leaf in leaves:
        group = leaf.sub.group
        assert leaf.sub.kind not in ("pointwise", "row_reduction") or not group.fusable, (leaf.sub.kind, leaf.sub.ops)
        with pytest.raises(Unsupported):
            generate(leaf.sub)
        proposal = TemplateAgent().propose(leaf.sub, feedback=[])
        assert proposal.source is None
        assert "leaving it to the library" in proposal.transcript[-1][1]


# --------------------------------------------------------------------------
# Regressions: a row vector input when the rows equal the row length
# --------------------------------------------------------------------------

SQUARE_ROW_CASES = [
    Case(
        "softmax_bias_30x30",
        "row_reduction",
        problem_source("return torch.softmax(x + self.bias, -1)", "torch.randn(30, 30)", init="self.bias = nn.Parameter(torch.randn(30))"),
        ("aten._softmax.default",),
    ),
    Case(
        "layer_norm_affine_30x30",
        "row_reduction",
        problem_source(
            "return F.layer_norm(x, (30,), self.weight, self.bias)",
            "torch.randn(30, 30)",
            init="self.weight = nn.Parameter(torch.rand(30) + 0.5)\nself.bias = nn.Parameter(torch.randn(30))",
        ),
        ("aten.native_layer_norm.default",),
    ),
    Case(
        "rmsnorm_30x30",
        "row_reduction",
        problem_source(
            "return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight",
            "torch.randn(30, 30)",
            init="self.weight = nn.Parameter(torch.rand(30) + 0.5)",
        ),
        ("aten.mean.dim",),
    ),
]

SQUARE_BUG = (  # fixed: kept as the description of what these tests guard
    "pointwise_codegen._external_role: in a row group whose iteration shape is [N, N], an input of shape [N] "
    "(a bias or norm weight, broadcast along the row) has spec.shape == shape[:-1] and is taken for a "
    "per-row scalar ('rowscalar' access): the kernel emits `x_in1 = tl.load(in1_ptr + row)` instead of "
    "`tl.load(in1_ptr + offs_n, mask=mask, other=0.0)`; groups._GroupShape.role_of gives it the right role (vec)"
)


@pytest.mark.parametrize("case", SQUARE_ROW_CASES, ids=lambda c: c.id)
def test_row_vector_input_when_rows_equal_row_length(case: Case, tmp_path):
    built = build(tmp_path, case.source)
    leaf = find_leaf(built, case.kind, case.ops)
    check_generated(built, leaf)


def test_square_layer_norm_kernel_does_not_depend_on_initial_weights(tmp_path):
    built = build(tmp_path, problem_source("return self.ln(x)", "torch.randn(30, 30)", init="self.ln = nn.LayerNorm(30)"))
    leaf = find_leaf(built, "row_reduction", ("aten.native_layer_norm.default",))
    source = generate(leaf.sub)
    assert run_verify(built, leaf, source).passed  # the pipeline's own check accepts it
    # the same kernel with the weights a trained model would have
    module = load_kernel(built, source)
    sets = built.input_sets(leaf)
    trained = []
    for k, inputs in enumerate(sets):
        g = torch.Generator().manual_seed(k)
        trained.append([x if i == 0 else torch.randn(x.shape, generator=g) for i, x in enumerate(inputs)])
    report = verify(lambda inputs, out: module.launch(*inputs, out=out), leaf.sub.run_reference, trained, torch.float32, list(SEEDS))
    assert report.passed, report.reason
