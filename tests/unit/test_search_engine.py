"""lego_core.search: plan selection, legality of fusions, the scheduler.

Small hand-written models captured for real; agents are test doubles where
the test is about the scheduler (slow agents for parallelism, broken
kernels for retries and finer splits), the real template agent otherwise.
"""
from __future__ import annotations

import math
import os
import textwrap
import threading
import time

os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest
import torch

from lego_core.agents.base import Proposal
from lego_core.agents.template.agent import TemplateAgent
from lego_core.load.capture import capture_graph, op_name
from lego_core.config import OptimizeConfig
from lego_core.events import Event
from lego_core.tree.fusion.legality import creates_cycle, fusion_verdict, library_only_ops, related
from lego_core.load.problem import ProblemSpec, load_problem
from lego_core.agents.budget import TokenBudget
from lego_core.search.engine import Search
from lego_core.search.plan import best_plan
from lego_core.search.plan import item_dependencies, schedule
from lego_core.tree.fusion_tree import Candidate, build_tree

pytestmark = pytest.mark.filterwarnings("ignore:.*LeafSpec.*:FutureWarning")

HEAD = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n"

# Two identical blocks: LayerNorm -> Linear -> GELU -> residual add.
BLOCKS = """\
class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.fc = nn.Linear(d, d)

    def forward(self, x):
        return x + F.gelu(self.fc(self.norm(x)))


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([Block(16) for _ in range(2)])

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return torch.softmax(x * 2.0, dim=-1)
"""


def build(tmp_path, body=BLOCKS, inputs="[torch.randn(6, 16)]"):
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "model.py"
    path.write_text(HEAD + textwrap.dedent(body) + f"\n\ndef get_inputs():\n    return {inputs}\n\n\ndef get_init_inputs():\n    return []\n")
    problem = load_problem(ProblemSpec(str(path)))
    graph = capture_graph(problem)
    return problem, graph, build_tree(graph)


def make_search(tmp_path, agent, tokens=None, **config):
    problem, graph, tree = build(tmp_path)
    activations = [graph.run(problem.model, problem.make_inputs(seed)) for seed in (101, 202, 303)]
    parameters = {name for name, src in graph.sources.items() if src.kind == "parameter"}
    events: list[Event] = []
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    search = Search(tree, activations, parameters, agent, OptimizeConfig(cache=False, **config), torch.float32, "cpu", work, events.append,
                    tokens=tokens)
    return search, events


# ------------------------------------------------------------- plan selection


def test_best_plan_takes_the_cheaper_alternative_and_orders_items(tmp_path):
    _, graph, tree = build(tmp_path)
    for leaf in tree.leaves():
        leaf.candidates.append(Candidate(f"{leaf.id}-lib", leaf.id, "library", "library", time_ms=1.0))
    plan = best_plan(tree)
    leaves = tree.leaves()
    # several decompositions cover the same ops; the plan covers every compute node exactly once
    covered = [n.name for item in plan.items for n in item.sub.nodes]
    assert sorted(covered) == sorted(n.name for n in graph.compute_nodes)
    assert plan.cost_ms == pytest.approx(len(plan.items))
    # a verified, cheaper Triton candidate on one leaf is chosen
    target = next(leaf for leaf in leaves if leaf.sub.kind == "row_reduction" and leaf.id in plan.item_ids)
    fast = Candidate(f"{target.id}-fast", target.id, "template", "triton", time_ms=0.25)
    fast.verified = type("Passed", (), {"passed": True})()
    target.candidates.append(fast)
    better = best_plan(tree)
    assert better.cost_ms == pytest.approx(plan.cost_ms - 0.75)
    assert target.chosen is fast
    # items come in a valid schedule: producers before consumers
    position = {item.id: k for k, item in enumerate(better.items)}
    deps = item_dependencies(better.items)
    assert all(position[a] < position[b] for a, b in deps.edges)


def test_best_plan_without_candidates_is_an_error(tmp_path):
    _, _, tree = build(tmp_path)
    with pytest.raises(ValueError, match="no complete plan"):
        best_plan(tree)


def test_schedule_rejects_a_cycle(tmp_path):
    _, _, tree = build(tmp_path)
    leaves = [leaf for leaf in tree.leaves() if leaf.sub.inputs]
    a, b = leaves[0], leaves[1]
    # fake a cycle: a reads what b produces and b reads what a produces
    a.sub.inputs = a.sub.inputs + list(b.sub.nodes[:1])
    b.sub.inputs = b.sub.inputs + list(a.sub.nodes[:1])
    with pytest.raises(ValueError, match="cycle"):
        schedule([a, b])


# -------------------------------------------------------------- legality


def _nodes(graph, *names):
    return [n for n in graph.compute_nodes if op_name(n).split(".")[1] in names]


def test_legality_rules(tmp_path):
    _, graph, tree = build(tmp_path)
    nodes = graph.compute_nodes
    first_norm = next(n for n in nodes if op_name(n) == "aten.native_layer_norm.default")
    addmm = next(n for n in nodes if op_name(n) == "aten.addmm.default")
    gelu = next(n for n in nodes if op_name(n) == "aten.gelu.default")
    # a GEMM may not be fused *into* (no prologue): the norm before it is a library-only op position
    assert library_only_ops([first_norm, addmm]) == ["aten.addmm.default"]
    chain = nodes[nodes.index(first_norm) : nodes.index(addmm) + 1]  # norm, getitem(s), views, t, addmm
    verdict = fusion_verdict(chain, [chain[:-1], [addmm]])
    assert not verdict.legal and "aten.addmm.default must stay a library call" in verdict.reason
    # unrelated items save nothing
    softmax = next(n for n in nodes if op_name(n) == "aten._softmax.default")
    assert not related([[first_norm], [softmax]])
    assert "share no data" in fusion_verdict([first_norm, softmax], [[first_norm], [softmax]]).reason
    # a GEMM with its GELU is a legal epilogue (2-D input: no view between them)
    assert gelu.args[0] is addmm
    verdict = fusion_verdict([addmm, gelu], [[addmm], [gelu]])
    assert verdict.legal and verdict.group.kind == "gemm_epilogue"


def test_no_cycle_rule():
    import networkx as nx

    deps = nx.DiGraph([("a", "x"), ("x", "b"), ("a", "b")])
    assert creates_cycle(deps, ["a", "b"])  # a -> x -> b: x would both feed and read the fusion
    assert not creates_cycle(deps, ["a", "x"])
    assert not creates_cycle(deps, ["x", "b"])


# ------------------------------------------------------------- scheduler


class SlowAgent:
    """Wraps the template agent and sleeps first (an LLM agent mostly waits)."""

    name = "slow"

    def __init__(self, delay_s: float):
        self.inner, self.delay_s = TemplateAgent(), delay_s
        self.active = 0
        self.most_active = 0
        self.lock = threading.Lock()

    def can_attempt(self, sub):
        return self.inner.can_attempt(sub)

    def propose(self, sub, feedback):
        with self.lock:
            self.active += 1
            self.most_active = max(self.most_active, self.active)
        time.sleep(self.delay_s)
        with self.lock:
            self.active -= 1
        return self.inner.propose(sub, feedback)


def test_agents_work_on_different_nodes_at_once(tmp_path):
    times = {}
    for agents in (1, 4):
        agent = SlowAgent(0.8)
        search, _ = make_search(tmp_path / f"a{agents}", agent, agents=agents, mutation=False, dedupe=False)
        start = time.monotonic()
        result = search.run()
        times[agents] = time.monotonic() - start
        calls = result.metrics["agent_calls"]
        assert calls >= 4
        assert agent.most_active == min(agents, calls)
    print(f"\n{calls} slow agent calls: {times[1]:.2f} s with 1 agent, {times[4]:.2f} s with 4")
    assert times[4] < times[1] * 0.7  # verification stays one at a time (the lane)


class BrokenAgent:
    """Writes a kernel that computes the wrong thing for groups of more than one op."""

    name = "broken"

    def __init__(self):
        self.inner = TemplateAgent()
        self.calls = []

    def can_attempt(self, sub):
        return self.inner.can_attempt(sub)

    def propose(self, sub, feedback):
        self.calls.append((sub.id, list(feedback)))
        proposal = self.inner.propose(sub, [])
        if proposal.source and len(sub.ops) > 1:
            proposal.source = proposal.source.replace("def launch(", "def _right_launch(").replace(
                "\ndef _right_launch(", "\ndef launch(*args, out=None):\n    outs = _right_launch(*args, out=out)\n    for o in (outs if isinstance(outs, (list, tuple)) else [outs]):\n        o.add_(1.0)\n    return outs\n\n\ndef _right_launch(", 1
            )
        return proposal


def assert_complete_plan(plan, tree) -> None:
    """``plan`` computes the whole model: its items' ops, in schedule order,
    are the root's ops exactly once each; every chosen candidate is usable
    (the library call or a verified kernel) with a finite time; and its cost
    is the sum of those times."""
    covered = sorted(n.name for item in plan.items for n in item.sub.nodes)
    assert covered == sorted(n.name for n in tree.root.sub.nodes), "the plan does not cover every op exactly once"
    for item in plan.items:
        chosen = item.chosen
        assert chosen is not None and chosen.usable, f"{item.id}: no usable candidate chosen"
        assert chosen.implementation == "library" or chosen.verified.passed, f"{item.id}: an unverified kernel in the plan"
        assert math.isfinite(chosen.time_ms), item.id
    assert plan.cost_ms == pytest.approx(sum(item.chosen.time_ms for item in plan.items))


def test_failed_verification_gets_feedback_then_a_finer_split(tmp_path):
    agent = BrokenAgent()
    body = BLOCKS.replace("nn.LayerNorm(d)", "nn.Identity()").replace("return torch.softmax(x * 2.0, dim=-1)", "return torch.tanh(x * 2.0 + 1.0).exp()")
    path_model = tmp_path / "m"
    path_model.mkdir()
    problem, graph, tree = build(path_model, body=body)
    activations = [graph.run(problem.model, problem.make_inputs(seed)) for seed in (101, 202, 303)]
    events: list = []
    work = tmp_path / "work"
    work.mkdir()
    search = Search(tree, activations, set(), agent, OptimizeConfig(cache=False, mutation=False, max_attempts=2), torch.float32, "cpu", work, events.append)
    result = search.run()
    multi = [leaf for leaf in tree.leaves() if len(leaf.sub.ops) > 1 and leaf.fused_from is None and leaf.sub.kind == "pointwise"]
    # the second attempt on a failing node carried the verifier's reason
    retried = [fb for _, fb in agent.calls if fb]
    assert retried and all("input set" in fb[-1] or "mismatch" in fb[-1] or "error" in fb[-1] for fb in retried)
    # and a node whose every attempt failed was split into smaller sub-problems, solved in turn
    splits = [e for e in events if e.type == "node_created" and e.kind == "and" and e.label == "finer split"]
    assert splits, "no finer split"
    split_children = [e.node_id for e in events if e.type == "node_created" and e.parent in {s.node_id for s in splits}]
    assert split_children
    single_op = [c for c in split_children if len(tree.nodes[c].sub.ops) == 1]
    assert any(tree.nodes[c].chosen is not None for c in single_op)
    # the plan covers the whole model once, and uses no kernel that failed verification
    assert_complete_plan(result.plan, tree)
    assert not any(item.chosen.implementation == "triton" and len(item.sub.ops) > 1 for item in result.plan.items)
    del multi


def test_dedupe_solves_each_signature_once(tmp_path):
    agent = SlowAgent(0.0)
    search, events = make_search(tmp_path, agent, mutation=False)
    result = search.run()
    attempted = [e.node_id for e in events if e.type == "transcript" and e.agent == "slow" and e.role == "user"]
    signatures = [search.tree.nodes[n].sub.signature for n in attempted]
    assert len(signatures) == len(set(signatures)), "a signature was solved twice"
    reused = [e for e in events if e.type == "node_reused"]
    assert len(reused) == result.metrics["reused_nodes"] > 0
    for e in reused:
        assert search.tree.nodes[e.node_id].sub.signature == search.tree.nodes[e.reused_from].sub.signature


def test_monolithic_asks_once_about_the_whole_model(tmp_path):
    agent = SlowAgent(0.0)
    search, events = make_search(tmp_path, agent, strategy="monolithic")
    result = search.run()
    asked = {e.node_id for e in events if e.type == "transcript" and e.agent == "slow"}
    assert asked == {search.tree.root.id}
    assert result.metrics["agent_calls"] == 1
    assert result.plan.cost_ms == pytest.approx(result.baseline_ms)
    assert math.isfinite(result.metrics["time_to_first_plan_s"])


class TokenAgent(SlowAgent):
    """Reports 100 language-model tokens per call."""

    name = "tokens"

    def propose(self, sub, feedback):
        proposal = super().propose(sub, feedback)
        proposal.tokens = 100
        return proposal


@pytest.mark.parametrize(
    "budget, reason",
    [
        ({"max_tokens": 250}, "token budget"),
        ({"max_agent_calls": 2}, "agent-call budget"),
        ({"max_search_s": 1e-6}, "wall-time budget"),
        ({"patience_s": 1e-6}, "patience (no better plan)"),
    ],
)
def test_budgets_stop_the_search(tmp_path, budget, reason):
    search, _ = make_search(tmp_path, TokenAgent(0.0), agents=1, **budget)
    result = search.run()
    metrics = result.metrics
    assert metrics["stop_reason"] == reason
    if "max_tokens" in budget:
        assert metrics["agent_calls"] == 3 and metrics["tokens"] == 300  # the call that crossed the budget finishes
    if "max_agent_calls" in budget:
        assert metrics["agent_calls"] == 2 and metrics["tokens"] == 200
    if "max_search_s" in budget:
        assert metrics["agent_calls"] == 0
    if "patience_s" in budget:
        # patience waits until every signature worth 1% of the library time had its attempt, then stops
        signatures = metrics["signatures"]
        assert signatures["above_1pct"] >= 1
        assert signatures["above_1pct_attempted"] == signatures["above_1pct"] and signatures["not_attempted"] == []
        assert metrics["agent_calls"] == signatures["above_1pct_attempted"]
    assert_complete_plan(result.plan, search.tree)  # a complete plan all the same
