"""Attention groups and the flash-attention template (CPU, TRITON_INTERPRET=1, fp32, tiny).

The matcher must find exactly one ``attention`` group per attention layer in
the reference models and in models written here (an explicit additive float
mask, a non-causal SDPA, head dim 128, a sequence length that is not a
multiple of the tile, GQA); every generated kernel must pass ``verify``
against the region's reference on the model's own activations.
"""
from __future__ import annotations

import json
import os
import textwrap
import tempfile
from pathlib import Path

import pytest
import torch

os.environ.setdefault("TRITON_INTERPRET", "1")

from lego_core.load.capture import Graph, capture_graph  # noqa: E402
from lego_core.tree.fusion.attention import attention_group, find_attention  # noqa: E402
from lego_core.load.problem import ProblemSpec, load_problem  # noqa: E402
from lego_core.judge.inputs import load_module  # noqa: E402
from lego_core.tree.subproblem import make_subproblem  # noqa: E402
from lego_core.tree.fusion_tree import build_tree  # noqa: E402
from lego_core.judge.verify import calls_back_into_reference, verify  # noqa: E402
from lego_core.judge.static_check import unsafe_host_code  # noqa: E402
from conftest import SHARED_MODELS  # ../shared/models, or $LEGO_MODELS_DIR where they were carried

MODELS = SHARED_MODELS
TINY = json.loads((MODELS / "tiny.json").read_text())
SEEDS = (11, 12, 13)

CUSTOM = textwrap.dedent(
    '''
    import math
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    batch_size = 2
    seq_len = 19
    n_heads = 2
    n_kv_heads = 2
    head_dim = 16
    mode = 0  # 0 additive float mask, 1 SDPA non-causal, 2 SDPA causal GQA


    class Model(nn.Module):
        def __init__(self, n_heads, n_kv_heads, head_dim, seq_len, mode):
            super().__init__()
            d = n_heads * head_dim
            self.h, self.hk, self.dh, self.mode = n_heads, n_kv_heads, head_dim, mode
            self.q = nn.Linear(d, d)
            self.kv = nn.Linear(d, 2 * n_kv_heads * head_dim)
            bias = torch.randn(seq_len, seq_len)
            self.register_buffer("bias", bias)

        def forward(self, x):
            b, t, _ = x.shape
            q = self.q(x).view(b, t, self.h, self.dh).transpose(1, 2)
            k, v = self.kv(x).view(b, t, 2 * self.hk, self.dh).transpose(1, 2).chunk(2, dim=1)
            if self.mode == 0:
                att = q @ k.transpose(-2, -1) * (1.0 / math.sqrt(self.dh)) + self.bias
                y = att.softmax(dim=-1) @ v
            elif self.mode == 1:
                y = F.scaled_dot_product_attention(q, k, v)
            else:
                rep = self.h // self.hk
                y = F.scaled_dot_product_attention(q, k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1), is_causal=True)
            return y.transpose(1, 2).reshape(b, t, -1)


    def get_inputs():
        return [torch.randn(batch_size, seq_len, n_heads * head_dim)]


    def get_init_inputs():
        return [n_heads, n_kv_heads, head_dim, seq_len, mode]
    '''
)


def _problem(path: Path, overrides: dict):
    return load_problem(ProblemSpec(str(path), dict(overrides)))


def _reference(name: str):
    return _problem(MODELS / name, TINY[name])


def _custom(tmp_path: Path, **overrides):
    path = tmp_path / "attn_model.py"
    path.write_text(CUSTOM)
    return _problem(path, overrides)


def _verify_all(problem, graph: Graph, expect: int) -> list:
    """Generate and verify a kernel for every attention group of ``graph``."""
    from lego_core.agents.template.agent import TemplateAgent

    groups = find_attention(graph.compute_nodes)
    assert len(groups) == expect
    envs = [graph.run(problem.model, problem.make_inputs(seed=s)) for s in SEEDS]
    reports = []
    for k, group in enumerate(groups):
        sub = make_subproblem(f"sp_att{k}", group.nodes, graph.output_nodes, "attention", group=group)
        agent = TemplateAgent()
        assert agent.can_attempt(sub)
        proposal = agent.propose(sub, [])
        assert proposal.source, proposal.transcript
        assert calls_back_into_reference(proposal.source, sub.ops) is None
        assert unsafe_host_code(proposal.source) is None  # the kernel cache stores it (lego_core.judge.host_allowlist)
        path = Path(tempfile.mkdtemp(prefix="lego-attention-test-")) / f"kernel_{id(sub)}_{k}.py"
        path.write_text(proposal.source)
        module = load_module(path, f"lego_attention_test_{id(sub)}_{k}")
        sets = [[env[n.name] for n in sub.inputs] for env in envs]
        report = verify(lambda xs, out: module.launch(*xs, out=out), sub.run_reference, sets, torch.float32, SEEDS)
        assert report.passed, report
        reports.append((sub, report))
    return reports


@pytest.mark.parametrize("name", ["gpt_stack.py", "llama_stack.py", "vit_encoder.py"])
def test_one_attention_group_per_layer_in_the_reference_models(name):
    graph = capture_graph(_reference(name))
    groups = find_attention(graph.compute_nodes)
    assert len(groups) == TINY[name]["n_layers"]
    spec = groups[0].spec
    assert spec.h == TINY[name]["n_heads"]
    if name == "llama_stack.py":
        assert spec.k_map.rep == spec.v_map.rep == TINY[name]["n_heads"] // TINY[name]["n_kv_heads"]
        assert spec.mask_kind == "add" and spec.zero_empty_rows  # SDPA's causal bias, decomposed
    if name == "gpt_stack.py":
        assert spec.mask_kind == "keep" and spec.scale == pytest.approx((TINY[name]["d_model"] // spec.h) ** -0.5)
    if name == "vit_encoder.py":
        assert spec.mask is None and spec.q is spec.k is spec.v  # read in place from the packed QKV
    for group in groups:  # the payload's rebuild finds the same group from its nodes alone
        again, reason = attention_group(group.nodes)
        assert again is not None and again.names == group.names, reason


@pytest.mark.parametrize("name", ["gpt_stack.py", "llama_stack.py"])
def test_attention_leaves_are_alternatives_in_the_tree(name):
    tree = build_tree(capture_graph(_reference(name)))
    leaves = [n for n in tree.or_nodes() if n.sub.kind == "attention"]
    assert len(leaves) == TINY[name]["n_layers"]
    assert len({leaf.sub.signature for leaf in leaves}) == 1  # identical layers: one search
    for leaf in leaves:
        host = tree.parent_or(leaf)
        assert [c.label for c in host.children][-1] == "attention" and len(host.children) >= 2
    covered = {n.name for leaf in tree.first_decomposition_leaves() for n in leaf.sub.nodes}
    assert all(n.name in covered for leaf in leaves for n in leaf.sub.nodes)  # the library path stays first


@pytest.mark.parametrize("name", ["gpt_stack.py", "llama_stack.py", "vit_encoder.py"])
def test_kernels_verify_on_the_reference_models(name):
    problem = _reference(name)
    _verify_all(problem, capture_graph(problem), TINY[name]["n_layers"])


@pytest.mark.parametrize(
    "overrides,kind",
    [
        ({"mode": 0}, "add"),  # explicit additive float mask, T = 19 (not a tile multiple)
        ({"mode": 1, "head_dim": 128, "seq_len": 9}, "none"),  # non-causal SDPA, head dim 128
        ({"mode": 2, "n_heads": 4, "n_kv_heads": 2, "seq_len": 21, "head_dim": 24}, "add"),  # causal GQA, D = 24 padded
    ],
)
def test_custom_attention_models(tmp_path, overrides, kind):
    problem = _custom(tmp_path, **overrides)
    (sub, _), = _verify_all(problem, capture_graph(problem), 1)
    spec = sub.group.spec
    assert spec.mask_kind == kind
    if overrides["mode"] == 2:
        assert spec.k_map.rep == 2


def test_fused_sdpa_op_form(tmp_path):
    """The undecomposed ``aten.scaled_dot_product_attention`` (the form a GPU capture keeps) with GQA."""
    problem = _custom(tmp_path, mode=2, n_heads=4, n_kv_heads=2, seq_len=17)
    ep = torch.export.export(problem.model, tuple(problem.make_inputs(seed=0)))
    graph = Graph(ep)
    (sub, _), = _verify_all(problem, graph, 1)
    spec = sub.group.spec
    assert spec.form == "fused" and spec.causal and spec.k_map.rep == 2
    assert spec.k.meta["val"].shape[1] == 2  # the repeat_interleave is absorbed: K is read un-repeated


def test_costing_prices_attention_as_one_kernel():
    from lego_core.cost import costing

    tree = build_tree(capture_graph(_reference("gpt_stack.py")))
    leaf = next(n for n in tree.or_nodes() if n.sub.kind == "attention")
    matmul, other = costing.attention_flops(leaf.sub.group.spec)
    s = leaf.sub.group.spec
    assert 0 < matmul < 4 * s.b * s.h * s.m * s.n * s.d  # the causal mask keeps about half
    assert costing.fused_estimate_ms(leaf.sub, torch.float32, "H200") < costing.library_estimate_ms(leaf.sub, torch.float32, "H200")


def test_a_row_with_no_score_is_zeros_at_v_as_eager_gives_it(tmp_path):
    """A query row whose every score is -inf (its mask row all -inf, or its only
    visible key at -inf) is, in eager's SDPA, ``_safe_softmax``'s zeros @ v: 0,
    but NaN in each column where some value row is NaN/inf (0 x NaN).  Before:
    the template wrote 0 for the whole row, so an edge set with a NaN value row
    past the causal horizon rejected the kernel now and then (a CI run's
    llama_stack lost its attention kernel and the mutation test's cheaper plan
    with it)."""
    from lego_core.agents.template.agent import TemplateAgent

    problem = _custom(tmp_path, mode=2, n_heads=4, n_kv_heads=2, seq_len=21, head_dim=24)
    graph = capture_graph(problem)
    group, = find_attention(graph.compute_nodes)
    sub = make_subproblem("sp_empty", group.nodes, graph.output_nodes, "attention", group=group)
    assert sub.group.spec.zero_empty_rows
    proposal = TemplateAgent().propose(sub, [])
    path = tmp_path / "kernel_empty.py"
    path.write_text(proposal.source)
    module = load_module(path, "lego_attention_test_empty_rows")
    env = graph.run(problem.model, problem.make_inputs(seed=3))
    q, k, v, mask = (env[n.name].clone() for n in sub.inputs)
    assert [tuple(t.shape) for t in (q, k, v, mask)] == [(42, 96), (2, 2, 21, 24), (2, 2, 21, 24), (21, 21)]
    mask[4, :] = float("-inf")  # row 4 of every head: no score at all
    q[0, 5] = 1.0  # batch 0, query 0, head 0's dim 5 ...
    k[0, 0, 0, 5] = float("-inf")  # ... meets key 0 (its only visible key) at -inf: row 0 of heads 0-1 has no score
    v[0, 0, 15, 2] = float("nan")  # past the horizon of rows 0-14
    v[0, 1, 20, 7] = float("inf")
    inputs = [q, k, v, mask]
    with torch.no_grad():
        expected = sub.run_reference(inputs)[0]
        got = module.launch(*inputs)[0]
    # eager: the empty rows are 0 but NaN in the columns holding the non-finite values
    assert torch.isnan(expected[0, 0, 4, 2]) and expected[0, 0, 4, 3] == 0 and torch.isnan(expected[0, 0, 0, 2])
    torch.testing.assert_close(got, expected, equal_nan=True)
