"""The search's first plan, ranking and measuring policy (issue 26).

The library plan is priced by the cost model at once (no GPU time before
agent work); agent work is ranked by distinct signature and what it can win;
signatures worth 1% of the library time are attempted before patience may
stop the search; library times are measured only under a node whose
candidate was verified and timed, and shared by signature; a mutation kind
that never wins stops being proposed; the phase clock adds up.
"""
from __future__ import annotations

import json

import pytest

from lego_core import api
from lego_core.agents.template.agent import TemplateAgent
from lego_core.phases import PHASES, PhaseClock
from lego_core.search import pricing
from lego_core.search.mutation_rounds import GIVE_UP_AFTER, unpromising
from lego_core.tree.fusion_tree import Candidate

from tests.unit.test_search_engine import make_search


def test_the_first_plan_is_the_cost_models_and_nothing_is_measured_before_agents(tmp_path):
    search, events = make_search(tmp_path, TemplateAgent())
    result = search.run()
    metrics = result.metrics
    assert metrics["time_to_first_plan_s"] < 1.0
    assert metrics["time_to_first_plan_s"] <= metrics["time_to_first_agent_call_s"]
    first = next(e for e in events if e.type == "plan_improved")
    assert first.initial and not first.measured  # the library plan, estimated
    # on the CPU nothing is measured at all, and no library time is
    assert metrics["library_timing"] == {"signatures_measured": 0, "gpu_lock_holds": 0}
    sig = metrics["signatures"]
    assert sig["distinct"] >= 3 and sig["attempted"] == sig["distinct"]
    assert 1 <= sig["won"] <= sig["attempted"]
    assert sig["above_1pct_attempted"] == sig["above_1pct"] and sig["not_attempted"] == []
    assert sum(1 for row in sig["top"] if row["won"]) == min(sig["won"], len(sig["top"])) or sig["won"] > len(sig["top"])


def test_open_nodes_come_one_per_signature_most_to_win_first(tmp_path):
    search, _ = make_search(tmp_path, TemplateAgent())
    for leaf in search.tree.leaves():
        search.add_library(leaf)
    search.library_items = search.tree.leaves()
    order = search._open_nodes()
    rows = search.coverage.rows
    signatures = [n.sub.signature for n in order]
    distinct = list(dict.fromkeys(signatures))
    assert signatures[: len(distinct)] == distinct  # every signature once before any twin
    firsts = [rows[s] for s in distinct]
    tiers = [r.share < pricing.MUST_ATTEMPT_SHARE for r in firsts]
    assert tiers == sorted(tiers)  # signatures worth 1% first
    for tier in (False, True):
        scores = [r.score for r, t in zip(firsts, tiers) if t == tier]
        assert scores == sorted(scores, reverse=True)
    twin = next(r for r in firsts if r.count >= 2)  # the two equal blocks' regions
    assert twin.score == pytest.approx(twin.count * max(0.0, twin.library_ms - twin.fused_ms))


def test_coverage_counts_and_says_why_a_signature_was_not_attempted(tmp_path):
    search, _ = make_search(tmp_path, TemplateAgent())
    for leaf in search.tree.leaves():
        search.add_library(leaf)
    order = search.coverage.rank([n for n in search.tree.or_nodes() if search.agent.can_attempt(n.sub)], search.dtype, "H200", 1e-9)
    coverage = search.coverage
    assert all(coverage.must_attempt(n, set()) for n in order)  # a tiny total: every signature is worth 1%
    coverage.attempted(order[0])
    assert not coverage.must_attempt(order[0], set())
    assert not coverage.must_attempt(order[1], {order[1].id})  # a retry is not a first attempt
    coverage.skipped(order[1], "too large to check")
    coverage.stopped(order[1:], "wall-time budget")
    data = coverage.as_dict([])
    assert data["attempted"] == 1 and data["won"] == 0 and data["above_1pct"] == data["distinct"]
    why = {row["why"] for row in data["not_attempted"]}
    assert "too large to check" in why
    assert any("wall-time budget" in w for w in why)


def test_library_times_are_measured_only_under_a_decided_node_and_shared_by_signature(tmp_path):
    search, _ = make_search(tmp_path, TemplateAgent())
    for leaf in search.tree.leaves():
        search.add_library(leaf)
    measured: list[list[str]] = []

    def fake_library_times(leaves):  # what the GPU would do: one batch, by signature
        measured.append([leaf.id for leaf in leaves])
        for leaf in leaves:
            search.judge.library_by_signature[leaf.sub.signature] = 0.5
        return {leaf.sub.signature: 0.5 for leaf in leaves}

    search.judge.library_times = fake_library_times
    search.measure_library(search.tree.leaves()[:1])
    assert measured == []  # without a GPU nothing is measured
    search.judge.measure = True
    twins = {}
    for leaf in search.tree.leaves():
        twins.setdefault(leaf.sub.signature, []).append(leaf)
    pair = next(group for group in twins.values() if len(group) >= 2)
    search.measure_library([pair[0]])
    assert measured == [[pair[0].id]]  # one leaf, one batch
    search.reprice()
    for leaf in pair:  # the twin takes the measured time of its signature
        library = leaf.candidates[0]
        assert library.implementation == "library" and library.time_kind == "measured" and library.time_ms == 0.5
    others = [leaf for leaf in search.tree.leaves() if leaf.sub.signature != pair[0].sub.signature]
    assert all(leaf.candidates[0].time_kind != "measured" for leaf in others)  # nothing else was measured
    search.measure_library([pair[1]])
    assert len(measured) == 1  # already measured: no second batch
    # an interior node: every estimated leaf under it in one batch
    search.measure_library([search.tree.root])
    expected = {leaf.id for leaf in pricing.leaves_under(search.tree.root) if leaf.sub.signature != pair[0].sub.signature}
    assert len(measured) == 2 and set(measured[1]) == expected  # every leaf of another signature; none of the measured one


def test_plans_are_compared_at_todays_prices(tmp_path):
    from lego_core.search.plan import best_plan

    search, events = make_search(tmp_path, TemplateAgent())
    for leaf in search.tree.leaves():
        search.add_library(leaf)
        leaf.candidates[0].time_ms = 1.0
    baseline = best_plan(search.tree)
    search.plan_changed(baseline)
    leaf = baseline.items[0]

    def faster(ms: float, tag: str) -> None:
        cand = Candidate(f"{leaf.id}-{tag}", leaf.id, "template", "triton", time_ms=ms, time_kind="measured")
        cand.verified = type("Passed", (), {"passed": True})()
        leaf.candidates.append(cand)

    faster(0.5, "a")
    search.plan_changed(best_plan(search.tree))
    for other in search.tree.leaves():  # measurements: every library time three times the estimate
        other.candidates[0].time_ms = 3.0
    search.plan_changed(best_plan(search.tree))  # the same plan, re-priced: neither better nor worse
    faster(0.4, "b")
    search.plan_changed(best_plan(search.tree))  # cheaper than the best at today's prices
    improved = [e for e in events if e.type == "plan_improved"]
    assert [e.initial for e in improved] == [True, False, False]
    assert improved[1].speedup == pytest.approx(len(baseline.items) / (len(baseline.items) - 0.5))
    # the baseline is the cheapest all-library plan at today's prices
    assert improved[2].baseline_ms == pytest.approx(3.0 * len(baseline.items))
    assert improved[2].speedup == pytest.approx(3.0 * len(baseline.items) / (3.0 * (len(baseline.items) - 1) + 0.4))
    assert pricing.library_plan_cost(search.tree.root) == pytest.approx(3.0 * len(baseline.items))


def test_patience_lets_every_big_signature_be_judged_then_counts_from_there(tmp_path):
    search, events = make_search(tmp_path, TemplateAgent(), agents=1, patience_s=1e-6)
    result = search.run()
    sig = result.metrics["signatures"]
    assert sig["above_1pct"] >= 1 and sig["above_1pct_attempted"] == sig["above_1pct"]
    proposed = [e for e in events if e.type == "candidate_proposed"]
    judged = [e for e in events if e.type == "verification"]
    assert len(proposed) >= sig["above_1pct"] and len(judged) == len(proposed)  # judged, not thrown away
    assert not any("ran out while the agent worked" in e.content for e in events if e.type == "transcript")
    assert result.metrics["stop_reason"] == "patience (no better plan)"
    assert search.patience_restarted


def test_the_monolithic_root_is_the_one_signature(tmp_path):
    search, _ = make_search(tmp_path, TemplateAgent(), strategy="monolithic")
    result = search.run()
    sig = result.metrics["signatures"]
    assert sig["distinct"] == 1 and sig["attempted"] == 1 and sig["above_1pct"] == 1


def test_a_kernel_that_waits_past_the_wall_time_budget_is_not_judged(tmp_path):
    search, events = make_search(tmp_path, TemplateAgent())
    leaf = next(n for n in search.tree.leaves() if search.agent.can_attempt(n.sub))
    cand = Candidate(f"{leaf.id}-late", leaf.id, "template", "triton", source="raise SystemExit('must not run')", kernel_name="late")
    verdict = search.judge.judge(leaf, cand, skip=lambda: "the wall-time budget ran out before it was judged")
    assert not verdict.accepted and verdict.reason == "the wall-time budget ran out before it was judged"
    assert cand.rejected_reason == verdict.reason
    assert search.judge.executor is None  # nothing was loaded or run


def test_shares_count_regions_not_decompositions(tmp_path):
    search, _ = make_search(tmp_path, TemplateAgent())
    for leaf in search.tree.leaves():
        search.add_library(leaf)
    nodes = [n for n in search.tree.or_nodes() if search.agent.can_attempt(n.sub)]
    search.coverage.rank(nodes, search.dtype, "H200", search.library_cost())
    rows = search.coverage.rows.values()
    for row in rows:
        regions = {pricing.region(n) for n in nodes if n.sub.signature == row.signature}
        assert row.count == len(regions)
    # one signature's regions never add up to more than the model (alternative groupings of
    # other signatures overlap them, so shares of different signatures may sum past 1)
    assert all(0.0 < r.share <= 1.0 + 1e-6 for r in rows)


def test_a_fusion_kind_that_never_wins_is_given_up():
    tried = [{"kind": "conv + BatchNorm fold", "accepted": False}] * (GIVE_UP_AFTER - 1)
    assert not unpromising(tried, "conv + BatchNorm fold")
    tried = tried + [{"kind": "conv + BatchNorm fold", "accepted": False}]
    assert unpromising(tried, "conv + BatchNorm fold")
    assert not unpromising(tried, "producer into consumer")
    assert not unpromising(tried + [{"kind": "conv + BatchNorm fold", "accepted": True}], "conv + BatchNorm fold")


def test_phase_clock_adds_stages_and_busy_seconds(monkeypatch):
    now = [100.0]
    monkeypatch.setattr("lego_core.phases.time.monotonic", lambda: now[0])
    clock = PhaseClock()
    clock.begin("load")
    now[0] += 2.0
    clock.begin("search")
    with clock.phase("verification"):
        now[0] += 1.5
    clock.add("verification", 0.5)
    now[0] += 1.0
    clock.end()
    data = clock.as_dict()
    assert data == {"load": 2.0, "search": 2.5, "verification": 2.0, "_wall": 4.5}
    assert list(data)[:-1] == [name for name in PHASES if name in data]  # the report's order
    with pytest.raises(ValueError, match="unknown phase"):
        clock.add("serach", 1.0)


def test_the_calling_process_adds_its_own_seconds(tmp_path):
    report = {"phases_s": {"load": 1.0, "search": 5.0, "_wall": 8.0}, "metrics": {"wall_time_s": 7.9}}
    path = tmp_path / "report.json"
    api.process_wall_s(report, 11.25, path)
    assert report["phases_s"]["process"] == 3.25 and report["phases_s"]["_wall"] == 11.25
    assert report["metrics"]["optimizer_wall_s"] == 11.25
    assert json.loads(path.read_text()) == report
