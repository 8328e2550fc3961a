"""Memory of the search: boundary values within max(2x eager peak, eager peak + headroom).

The long-sequence attention model (tests/unit/longseq_attention_model.py,
fp32 on the CPU) holds a 2 x 512 x 512 score matrix: keeping every
intermediate of the captured graph for the three verification seeds (what the
search did before ``BoundaryStore``) holds over 4x the eager forward's peak.
Checking every distinct sub-problem through the store, counted by
``memory.LiveBytes``, stays within 2x eager (headroom 0, so the 4 GiB slack
of the real bound cannot hide anything).
"""
from pathlib import Path

import pytest
import torch
from torch.utils._python_dispatch import _disable_current_modes

import lego_core.judge.verify as verify_module
from lego_core.load.capture import capture_graph
from lego_core.runtime.memory import LiveBytes, MemoryMeter, bound_bytes, storage_bytes
from lego_core.load.problem import ProblemSpec, load_problem
from lego_core.judge.boundary import BoundaryStore
from lego_core.judge.inputs import leaf_edge_sets, leaf_input_sets
from lego_core.tree.fusion_tree import build_tree
from lego_core.judge.verify import compare, verify

MODEL = str(Path(__file__).with_name("longseq_attention_model.py"))
SEEDS = (101, 202, 303)


def test_live_bytes_counts_a_storage_once_and_releases_it():
    counter = LiveBytes(base=100)
    with counter:
        a = torch.zeros(256, 256)  # 256 KiB
        view = a.view(-1)
        b = a + 1
        assert counter.current == 100 + 2 * a.untyped_storage().nbytes()
        del a, view, b
    assert counter.current == 100
    assert counter.peak == 100 + 2 * 256 * 256 * 4


def test_bound():
    gib = 1 << 30
    assert bound_bytes(1 * gib) == 5 * gib
    assert bound_bytes(9 * gib) == 18 * gib


@pytest.mark.parametrize("shape", [(7, 33, 5), (3, 1000), (5000,)])
def test_compare_in_pieces_matches_whole(monkeypatch, shape):
    gen = torch.Generator().manual_seed(0)
    expected = torch.randn(shape, generator=gen)
    close = expected + 1e-7 * torch.randn(shape, generator=gen)
    wrong = expected.clone()
    wrong.view(-1)[777] += 1.0
    nan = expected.clone()
    nan.view(-1)[901] = float("nan")
    whole = [compare([x], [expected], "fp32") for x in (close, wrong, nan)]
    monkeypatch.setattr(verify_module, "COMPARE_CHUNK_ELEMENTS", 64)
    pieces = [compare([x], [expected], "fp32") for x in (close, wrong, nan)]
    for w, p in zip(whole, pieces):
        assert (w.passed, w.reason) == (p.passed, p.reason)
        assert p.max_abs_error == pytest.approx(w.max_abs_error)
        assert p.norm_rel_error == pytest.approx(w.norm_rel_error, rel=1e-9, abs=1e-15)
    assert not pieces[1].passed and not pieces[2].passed


def _fused_kernel_like(sub):
    """A candidate that writes the right values into ``out`` and, like a fused
    kernel, allocates nothing the counter sees (its intermediates are not counted).
    It is PyTorch, not a kernel: checked with ``trace=False``."""

    def run(inputs, out):
        with _disable_current_modes():
            result = sub.run_reference(inputs)
        if out is None:
            return [r.clone() for r in result]
        for o, r in zip(out, result):
            o.copy_(r)
        return out

    return run


def test_checks_through_the_store_stay_within_twice_eager(monkeypatch):
    monkeypatch.setattr(verify_module, "COMPARE_CHUNK_ELEMENTS", 1 << 14)  # float64 pieces small next to this model
    problem = load_problem(ProblemSpec(MODEL, {}))
    meter = MemoryMeter("cpu", headroom=0)
    meter.add_base([*problem.model.parameters()])

    def forward():
        inputs = problem.make_inputs(0)
        with torch.no_grad():
            problem.model(*inputs)

    eager = meter.measure_eager(forward)
    assert meter.bound == 2 * eager
    graph = capture_graph(problem)
    tree = build_tree(graph)

    held = [graph.run(problem.model, problem.make_inputs(seed)) for seed in SEEDS]
    every_intermediate = storage_bytes(v for env in held for v in env.values())
    del held
    assert every_intermediate > meter.bound  # what the search kept before

    needed = {n.name for node in tree.or_nodes() for n in node.sub.inputs}
    parameters = {name for name, src in graph.sources.items() if src.kind == "parameter"}
    seen, checked = set(), 0
    with meter.tracking():
        store = BoundaryStore(graph, problem.model, problem.make_inputs, SEEDS, needed, meter.bound, meter, meter.activation_bytes)
        for node in tree.or_nodes():
            if node.sub.kind == "layout" or node.sub.signature in seen:
                continue
            seen.add(node.sub.signature)
            sets = leaf_input_sets(node, store, parameters, SEEDS)
            edge = leaf_edge_sets(node.sub, sets, parameters, SEEDS[0])  # as the search checks: NaN/inf and extreme sets too
            room = max(0, int(store.room()))  # what the search passes (Search._precise_limit)
            report = verify(_fused_kernel_like(node.sub), node.sub.run_reference, sets, torch.float32, list(SEEDS), edge_sets=edge, trace=False,
                            precise_limit_bytes=room)
            assert report.passed, (node.id, report.reason)
            checked += 1
        store.drop()
    assert checked >= 8
    assert store.recomputes > 0  # not everything fit: values were recomputed
    assert meter.peak() <= meter.bound, (meter.peak(), meter.bound)


def test_store_without_limit_runs_each_seed_once():
    problem = load_problem(ProblemSpec(MODEL, {"seq_len": 32}))
    graph = capture_graph(problem)
    tree = build_tree(graph)
    needed = {n.name for node in tree.or_nodes() for n in node.sub.inputs}
    store = BoundaryStore(graph, problem.model, problem.make_inputs, SEEDS, needed)
    full = [graph.run(problem.model, problem.make_inputs(seed)) for seed in SEEDS]
    for node in tree.or_nodes():
        for k in range(len(SEEDS)):
            got = store.fetch(k, [n.name for n in node.sub.inputs])
            for n in node.sub.inputs:
                assert torch.equal(got[n.name], full[k][n.name])
    assert store.recomputes == 0


def test_each_stage_gets_its_own_peak_and_the_run_peak_covers_them():
    from lego_core.runtime.memory import MemoryMeter

    meter = MemoryMeter("cpu")
    meter.enter_stage("load")
    with meter.tracking():
        meter.measure_eager(lambda: torch.ones(1 << 16).sum())  # 256 KiB alive while it runs
        meter.enter_stage("search")
        big = torch.ones(1 << 20)  # 4 MiB
        del big
        meter.enter_stage("compose")
        small = torch.ones(1 << 10)
        report = meter.report()
    del small
    peaks = report["stage_peaks_mb"]
    assert list(peaks) == ["load", "search", "compose"]
    assert peaks["search"] >= 4.0 and peaks["compose"] < 1.0 and 0.2 < peaks["load"] < 1.0
    assert report["search_peak_mb"] >= max(peaks.values())


def test_a_sub_problem_whose_check_cannot_fit_under_the_bound_is_not_attempted():
    """On the H200 the bf16 16384-token layer peaked at 23,957 MB against its
    18,647 MB bound while the softmax over its score matrix was checked: the
    input, the reference's outputs and the candidate's outputs are each a
    score matrix.  ``BoundaryStore.over_limit`` says so before any agent is
    asked (``Search._solve_node``), while the fused attention region, whose
    boundary holds only Q, K, V and the output, still fits."""
    problem = load_problem(ProblemSpec(MODEL, {}))
    meter = MemoryMeter("cpu", headroom=0)
    meter.add_base([*problem.model.parameters()])

    def forward():
        with torch.no_grad():
            problem.model(*problem.make_inputs(0))

    meter.measure_eager(forward)
    graph = capture_graph(problem)
    tree = build_tree(graph)
    needed = {n.name for node in tree.or_nodes() for n in node.sub.inputs}
    store = BoundaryStore(graph, problem.model, problem.make_inputs, SEEDS, needed, meter.bound, meter, meter.activation_bytes)
    by_ops = {}
    for node in tree.or_nodes():
        by_ops.setdefault(tuple(str(n.target) for n in node.sub.nodes if n.op == "call_function"), node)
    softmax = next(node for ops, node in by_ops.items() if ops == ("aten.mul.Tensor", "aten._softmax.default"))
    attention = next(node for node in tree.or_nodes() if node.sub.group is not None and node.sub.group.kind == "attention")
    reason = store.over_limit(softmax.sub)
    assert reason.startswith("not attempted") and "MiB" in reason and store.check_bytes(softmax.sub) > meter.bound
    assert store.over_limit(attention.sub) == ""
    assert store.check_bytes(attention.sub) <= meter.bound
    unlimited = BoundaryStore(graph, problem.model, problem.make_inputs, SEEDS, needed)
    assert unlimited.over_limit(softmax.sub) == ""
