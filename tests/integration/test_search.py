"""The LEGO search measured against itself (issue 3's done-when list).

Every run is the real optimizer on a reference model at its tiny.json sizes
on the CPU (plans ranked by the cost model), in-process so that the tests can
read the report and the events.  Runs are shared between tests through
module-scoped fixtures (each takes tens of seconds under Triton's
interpreter):

- dedupe: gpt_stack (identical blocks) needs at most a third of the agent
  calls of ``dedupe=False`` and reaches a plan of equal cost;
- mutation: on gpt_stack, llama_stack and gated_conv_mixer, the default
  search reaches a cheaper plan than ``mutation=False``, through a fusion
  this file names for each model (GEMM epilogues: top-down construction
  already fuses residual adds into the next norm through its heavy-op seam
  decomposition, so what is left for mutation is what no top-down split
  can make);
- cache: a second run of gpt_stack with the same cache folder makes no agent
  call and says so (events and report);
- monolithic: one agent call on the whole model, the same budget;
- budgets stop the search and still give a verified plan.
"""
from __future__ import annotations

import functools
import json
import os
from pathlib import Path

os.environ.setdefault("TRITON_INTERPRET", "1")  # before triton is imported anywhere

import pytest

from lego_core import optimize
from lego_core.search.cache import source_hash
from lego_core.config import OptimizeConfig
from lego_core.load.spec import ProblemSpec
from conftest import SHARED_MODELS  # ../shared/models, or $LEGO_MODELS_DIR where they were carried

MODELS_DIR = SHARED_MODELS

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore:.*LeafSpec.*:FutureWarning")]


def tiny_spec(name: str) -> ProblemSpec:
    if not MODELS_DIR.is_dir():
        pytest.skip(f"reference models not found at {MODELS_DIR}")
    table = json.loads((MODELS_DIR / "tiny.json").read_text())
    return ProblemSpec(str(MODELS_DIR / name), dict(table[name]))


class Run:
    """One optimizer run: its report and every event it sent."""

    def __init__(self, report: dict, events: list):
        self.report, self.events = report, events
        self.metrics, self.plan = report["metrics"], report["plan"]

    def of_type(self, kind: str) -> list:
        return [e for e in self.events if e.type == kind]


def optimize_tiny(name: str, out: Path, **config) -> Run:
    events: list = []
    config.setdefault("cache", False)
    report = optimize(tiny_spec(name), out, OptimizeConfig(**config), sink=events.append, isolate=False)
    assert report["end_to_end"]["passed"], report["end_to_end"]
    return Run(report, events)


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("search")


@pytest.fixture(scope="module")
def runs(work):
    """``runs(model, variant)``: a cached run per (model, variant)."""

    @functools.lru_cache(maxsize=None)
    def get(name: str, variant: str) -> Run:
        options = {
            "default": {},
            "no-dedupe": {"dedupe": False},
            "no-mutation": {"mutation": False},
        }[variant]
        return optimize_tiny(name, work / f"{name}-{variant}", **options)

    return get


# ---------------------------------------------------------------- dedupe


def test_dedupe_needs_a_third_of_the_agent_calls_on_identical_blocks(runs):
    deduped, alone = runs("gpt_stack.py", "default"), runs("gpt_stack.py", "no-dedupe")
    calls, calls_alone = deduped.metrics["agent_calls"], alone.metrics["agent_calls"]
    print(f"\ngpt_stack tiny: agent calls {calls} with dedupe, {calls_alone} without; plan cost {deduped.plan['cost_ms']:.6f} vs {alone.plan['cost_ms']:.6f} ms")
    assert calls > 0
    assert 3 * calls <= calls_alone, (calls, calls_alone)
    assert deduped.plan["cost_ms"] == pytest.approx(alone.plan["cost_ms"], rel=1e-9)
    assert deduped.metrics["reused_nodes"] > 0 and alone.metrics["reused_nodes"] == 0
    # every reuse is announced, and the report says which items were reused
    reused_events = [e for e in deduped.of_type("node_reused") if e.via == "dedupe"]
    assert len(reused_events) == deduped.metrics["reused_nodes"]
    reused_items = [sp for sp in deduped.report["subproblems"] if sp["reused_from"]]
    assert reused_items and all(sp["reused_from"].startswith("or") for sp in reused_items)


# -------------------------------------------------------------- mutation

# The fusion mutation must make on each model: (kind, ops of the fused sub-problem).
MUTATIONS = {
    # the MLP's first GEMM with its GELU as epilogue
    "gpt_stack.py": ("GEMM epilogue", ["aten.addmm.default", "aten.view.default", "aten.gelu.default"]),
    # the gate projection with SiLU (x * sigmoid(x)) as epilogue
    "llama_stack.py": ("GEMM epilogue", ["aten.mm.default", "aten.view.default", "aten.sigmoid.default", "aten.mul.Tensor"]),
    # the token-mixing GEMM with its residual add as epilogue
    "gated_conv_mixer.py": ("GEMM epilogue", ["aten.mm.default", "aten.view.default", "aten.add.Tensor"]),
}


def rejected(run: Run) -> list[tuple[str, str]]:
    """(node, reason) of every candidate the verifier rejected in ``run``: what a plan costlier than expected lost."""
    return [(e.node_id, str(e.reason)[:300]) for e in run.of_type("verification") if not e.passed]


def contains(ops: list[str], part: list[str]) -> bool:
    """Whether ``part`` occurs in ``ops`` as a contiguous run."""
    return any(ops[k : k + len(part)] == part for k in range(len(ops) - len(part) + 1))


@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_mutation_finds_a_cheaper_plan(runs, name):
    mutated, plain = runs(name, "default"), runs(name, "no-mutation")
    print(f"\n{name}: plan {mutated.plan['cost_ms']:.6f} ms with mutation, {plain.plan['cost_ms']:.6f} ms without")
    assert mutated.plan["cost_ms"] < plain.plan["cost_ms"], {"rejected with mutation": rejected(mutated), "rejected without": rejected(plain),
                                                              "dropped": [mutated.report["end_to_end"].get("dropped"), plain.report["end_to_end"].get("dropped")]}
    assert plain.metrics["mutations_tried"] == 0
    kind, ops = MUTATIONS[name]
    accepted = [m for m in mutated.report["mutations"] if m["accepted"]]
    assert any(m["kind"] == kind and m["ops"] == ops for m in accepted), [(m["kind"], m["ops"]) for m in accepted]
    assert mutated.metrics["mutations_accepted"] == len(accepted) > 0
    # the fused kernel is in the final plan and in the composed model
    fused = [sp for sp in mutated.report["subproblems"] if sp["fused_from"]]
    # every accepted fusion is used: accepted ones of one round combine (in it, or fused further)
    for m in accepted:
        assert any(contains(sp["ops"], m["ops"]) for sp in fused), (m["node_id"], m["ops"])
    # (later rounds may have fused it further: the plan holds a fused kernel containing it)
    assert any(contains(sp["ops"], ops) and sp["implementation"] == "triton" for sp in fused), [sp["ops"] for sp in fused]
    for sp in fused:
        assert sp["max_abs_error"] is not None and sp["max_abs_error"] < 1e-3
    # the fused node hangs under a new decomposition of an ancestor, announced as an event
    and_labels = [e.label for e in mutated.of_type("node_created") if e.kind == "and"]
    assert any(label.startswith(f"mutation: {kind}") for label in and_labels)
    assert mutated.report["tree"]["decompositions"].get("mutation", 0) == mutated.metrics["mutations_tried"]


# ------------------------------------------------------------------ cache


def test_second_run_reuses_the_kernel_cache(work):
    cache_dir = work / "kernel-cache"
    first = optimize_tiny("gpt_stack.py", work / "cache-1", cache=True, cache_dir=str(cache_dir))
    second = optimize_tiny("gpt_stack.py", work / "cache-2", cache=True, cache_dir=str(cache_dir))
    print(f"\ngpt_stack: first run {first.metrics['agent_calls']} agent calls, second {second.metrics['agent_calls']} ({second.metrics['cache_hits']} cache hits)")
    assert first.metrics["agent_calls"] > 0 and first.metrics["cache_hits"] == 0
    assert second.metrics["agent_calls"] == 0
    assert second.metrics["cache_hits"] > 0
    assert second.plan["cost_ms"] == pytest.approx(first.plan["cost_ms"], rel=1e-9)
    # it says so: one node_reused event per hit and a transcript line from the cache
    hits = [e for e in second.of_type("node_reused") if e.via == "cache"]
    assert len(hits) == second.metrics["cache_hits"]
    notes = [e.content for e in second.of_type("transcript") if e.agent == "cache"]
    assert notes and all("no agent call" in note for note in notes)
    assert any(sp["reused_from"] == "cache" for sp in second.report["subproblems"])
    # cached kernels were verified again on this run's inputs
    assert {e.node_id for e in second.of_type("verification")} >= {e.node_id for e in hits if e.usable}


def test_a_stale_cached_kernel_is_replaced_not_trusted(work):
    cache_dir = work / "stale-cache"
    first = optimize_tiny("scores_chain.py", work / "stale-1", cache=True, cache_dir=str(cache_dir))
    assert first.metrics["agent_calls"] == 1
    entries = [p for p in cache_dir.rglob("*.json") if json.loads(p.read_text())["entry"]["source"]]
    assert len(entries) == 1
    data = json.loads(entries[0].read_text())
    source = data["entry"]["source"]
    # the kernel file computes something else now: every output off by one
    data["entry"]["source"] = source.replace("def launch(", "def _launch(") + "\n\ndef launch(*args, out=None):\n    outs = _launch(*args, out=out)\n    for o in outs:\n        o.add_(1.0)\n    return outs\n"
    # edited behind the writer's back, the entry no longer matches its recorded hash: ignored, a plain miss
    entries[0].write_text(json.dumps(data))
    edited = optimize_tiny("scores_chain.py", work / "stale-edited", cache=True, cache_dir=str(cache_dir))
    assert edited.metrics["cache_hits"] == 0 and edited.metrics["cache_stale"] == 0 and edited.metrics["agent_calls"] == 1
    # with a matching hash (a kernel that no longer passes, e.g. after the verifier changed) it is verified again and replaced
    data["source_sha256"] = source_hash(data["entry"]["source"])
    entries[0].write_text(json.dumps(data))
    second = optimize_tiny("scores_chain.py", work / "stale-2", cache=True, cache_dir=str(cache_dir))
    assert second.metrics["cache_stale"] == 1 and second.metrics["cache_hits"] == 0
    assert second.metrics["agent_calls"] == 1  # the agent was asked again
    assert second.plan["cost_ms"] == pytest.approx(first.plan["cost_ms"], rel=1e-9)
    assert any("failed verification" in e.content for e in second.of_type("transcript") if e.agent == "cache")
    third = optimize_tiny("scores_chain.py", work / "stale-3", cache=True, cache_dir=str(cache_dir))
    assert third.metrics["agent_calls"] == 0 and third.metrics["cache_hits"] == 1 and third.metrics["cache_stale"] == 0


def test_no_cache_run_neither_reads_nor_writes(work):
    cache_dir = work / "never-written"
    run = optimize_tiny("scores_chain.py", work / "no-cache", cache=False, cache_dir=str(cache_dir))
    assert run.metrics["agent_calls"] > 0 and run.metrics["cache_hits"] == 0
    assert not cache_dir.exists() or not any(cache_dir.rglob("*.json"))


# ---------------------------------------------------- baselines, budgets


def test_monolithic_is_one_agent_call_on_the_whole_model(work):
    run = optimize_tiny("gpt_stack.py", work / "monolithic", strategy="monolithic")
    assert run.metrics["agent_calls"] == 1
    assert run.metrics["mutations_tried"] == 0
    transcript = [e for e in run.of_type("transcript") if e.agent == "template"]
    assert transcript
    root = next(e for e in run.of_type("node_created") if e.parent is None)
    assert {e.node_id for e in transcript} == {root.node_id}
    # the template agent cannot write one kernel for a whole transformer: the plan stays the library's
    assert run.plan["cost_ms"] == pytest.approx(run.plan["baseline_ms"])


def test_agent_call_budget_stops_the_search_with_a_verified_plan(work):
    run = optimize_tiny("gpt_stack.py", work / "budget", max_agent_calls=2)
    assert run.metrics["agent_calls"] == 2
    assert run.metrics["stop_reason"] == "agent-call budget"
    # the two calls' verified kernels are in the plan (the scheduler gave them the nodes of most gain),
    # and no other node's kernel is
    asked = {e.node_id for e in run.of_type("transcript") if e.agent == "template"}
    triton = [e for e in run.report["subproblems"] if e["implementation"] == "triton"]
    assert triton and {e["reused_from"] or e["node_id"] for e in triton} <= asked
    assert run.plan["cost_ms"] < run.plan["baseline_ms"]


def test_best_cost_over_time_is_recorded(runs):
    run = runs("gpt_stack.py", "default")
    curve = run.metrics["best_cost_over_time"]
    assert curve[0][1] == pytest.approx(run.plan["baseline_ms"])  # the library plan first
    assert curve[-1][1] == pytest.approx(run.plan["cost_ms"])
    assert all(a[0] <= b[0] and a[1] > b[1] for a, b in zip(curve, curve[1:]))
    assert curve[0][0] == pytest.approx(run.metrics["time_to_first_plan_s"], abs=1e-3)  # the library plan, at once
    assert run.metrics["time_to_first_plan_s"] < 1.0  # priced by the cost model: nothing is measured before agent work
    assert curve[1][0] == pytest.approx(run.metrics["time_to_first_improved_plan_s"], abs=1e-3)
    assert curve[-1][0] == pytest.approx(run.metrics["time_to_final_plan_s"], abs=1e-3)
    assert run.metrics["time_to_first_agent_call_s"] <= run.metrics["time_to_first_improved_plan_s"] <= run.metrics["time_to_final_plan_s"]
    improved = run.of_type("plan_improved")
    assert [e.cost_ms for e in improved] == [c for _, c in curve]


# ------------------------------------------------- events for the live view


def test_events_carry_what_the_live_view_draws(runs):
    """The run page builds its tree, node states and charts from events
    alone: OR nodes carry their reference source and shapes, work on a node
    is announced before its transcript, and every plan names its items."""
    run = runs("gpt_stack.py", "default")
    created = {e.node_id: e for e in run.of_type("node_created")}
    ors = [e for e in created.values() if e.kind == "or"]
    assert ors and all(e.reference.startswith("def reference(") for e in ors)
    assert all(len(e.input_shapes) >= 1 and e.shapes for e in ors)
    assert all(e.reference == "" for e in created.values() if e.kind == "and")

    started = run.of_type("node_started")
    assert len(started) >= run.metrics["agent_calls"] > 0
    position = {id(e): k for k, e in enumerate(run.events)}
    first_start = {}
    for e in started:
        first_start.setdefault(e.node_id, position[id(e)])
    for message in run.of_type("transcript"):
        if message.agent == "template":
            assert first_start[message.node_id] < position[id(message)], message.node_id

    plans = run.of_type("plan_improved")
    assert plans[0].initial and not any(p.initial for p in plans[1:])
    for plan in plans:
        assert len(plan.chosen) == plan.items and set(plan.chosen) <= set(created)
        assert all(created[node_id].kind == "or" for node_id in plan.chosen)
    assert plans[-1].chosen == [sp["node_id"] for sp in run.report["subproblems"]]

    # progress counts against the work the search queued: totals never shrink
    progress = [e for e in run.of_type("progress") if e.stage == "search"]
    assert progress and progress[0].done == 0 and progress[0].total > 0
    assert all(a.total <= b.total and a.done <= b.done for a, b in zip(progress, progress[1:]))
    assert all(e.done <= e.total for e in progress)
    assert "fused fused" not in " ".join(e.label for e in created.values())
