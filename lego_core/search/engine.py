"""The LEGO search: a parallel multi-agent search over the AND-OR FusionTree.

``Search.run()`` goes through these phases (``docs/SEARCH.md`` describes
them with the metrics they produce):

1. **library plan**: every leaf gets its library (ATen) candidate, timed on
   a GPU or estimated; this is the first complete plan and the baseline.
2. **top-down**: every OR node an agent can attempt (``Agent.can_attempt``)
   is an *open node*; the scheduler hands open nodes to the agent pool in
   order of expected gain (library estimate minus fused estimate, in ms).
   Structure-aware dedupe: one node per canonical signature is solved, the
   others wait and reuse its result; the persistent kernel cache answers
   signatures solved by earlier runs with no agent call.  A candidate that
   fails verification goes back to its agent with the verifier's reason;
   when every attempt failed, the leaf gets a *finer split*.
3. **bottom-up mutation**: the current best plan's neighbouring items are
   fused speculatively (``mutation.propose_fusions``, rules in
   ``tree.fusion.legality``), in rounds of non-overlapping proposals ranked by
   bytes saved; a fused candidate is kept only if it verifies and is cheaper
   than the items it replaces (plan selection does that by itself).
4. the final plan: ``plan.best_plan`` (measured times on a GPU, cost model
   estimates without one).

The search is policy only: what to try next and when to stop.  Whether a
try counts, and what it costs, is the judge's (``judge.candidate``:
verification, guarded timing, per-shape tuning, the memory bound, the
candidate executor), one candidate at a time in its lane, so GPU timings
never overlap.  Agents run in parallel (``OptimizeConfig.agents``;
``search.agents_at_work``).  Budgets stop the search (``search.budget``):
agent calls, tokens, wall time and patience (no better plan for a while).
Dedupe is ``search.dedupe``, the kernel cache's part ``search.cached``,
mutation ``search.mutation_rounds``, the metrics ``search.metrics``.

``strategy="monolithic"`` is the baseline the method is compared with: one
agent handed the whole model as one sub-problem, with the same budget.
"""
from __future__ import annotations

import concurrent.futures
import dataclasses
import math
from pathlib import Path

from lego_core.agents.base import Agent
from lego_core.agents.budget import TokenBudget
from lego_core.config import OptimizeConfig
from lego_core.cost import costing
from lego_core.events import NodeFinished, NodeStarted, PlanImproved, Progress, Sink, Timing, TranscriptMessage, thread_safe
from lego_core.judge.candidate import CandidateJudge
from lego_core.search.agents_at_work import AgentsAtWork
from lego_core.search.budget import SearchBudget
from lego_core.search.cache import KernelCache
from lego_core.search.cached import CachedSolutions
from lego_core.search.dedupe import Dedupe
from lego_core.search.metrics import search_metrics
from lego_core.search.mutation_rounds import mutate
from lego_core.search.outcome import Outcome, finished_outcome
from lego_core.search.plan import Plan, best_plan, cheaper
from lego_core.tree.fusion_tree import AndNode, Candidate, FusionTree, OrNode, node_created


@dataclasses.dataclass
class SearchResult:
    """The chosen plan and how the search got there.

    ``plan``: the final plan (items in schedule order, each with ``chosen``);
    ``baseline_ms``: the library plan's cost; ``metrics``: agent calls,
    tokens, times to first / final plan (s), reuse and mutation counts, the
    best cost over time (``search.metrics``); ``mutations``: one dict per
    tried fusion."""

    plan: Plan
    baseline_ms: float
    metrics: dict
    mutations: list[dict]

    @property
    def plan_cost_ms(self) -> float:
        return self.plan.cost_ms

    @property
    def cost_kind(self) -> str:
        return self.plan.cost_kind


class Search:
    """One search over ``tree``; see the module docstring for the phases.

    What it judges with (``self.judge``, a ``judge.candidate.CandidateJudge``)
    is built from: ``activations`` (one dict per verification seed mapping
    graph value names to reference values, or a ``judge.boundary.BoundaryStore``),
    ``parameters`` (placeholder names holding model parameters), ``dtype``
    (a ``torch.dtype``), ``device`` (``"cpu"`` or ``"cuda"``), ``work_dir``
    (where candidate files are written), ``meter`` (a
    ``runtime.memory.MemoryMeter`` when the run's memory is measured),
    ``call_timeout_s`` (the executor's per-call limit, s) and ``executor``
    (a ``judge.process.Executor`` to use instead of a fresh one).
    ``cache``: a ``search.cache.KernelCache`` or None; ``cache_origin``: who
    solved what this run writes there; ``tokens``: the run's token budget
    (default: ``config.max_tokens``'s).
    """

    def __init__(self, tree: FusionTree, activations, parameters: set[str], agent: Agent, config: OptimizeConfig, dtype, device: str,
                 work_dir: Path, emit: Sink, cache: KernelCache | None = None, *, meter=None, call_timeout_s: float | None = None,
                 executor=None, cache_origin: str = "an earlier run", tokens: TokenBudget | None = None):
        self.tree, self.agent, self.config, self.dtype = tree, agent, config, dtype
        self.emit = thread_safe(emit)  # agents and the judge report from several threads
        self.judge = CandidateJudge(activations, parameters, config, dtype, device, work_dir, self.emit,
                                    meter=meter, call_timeout_s=call_timeout_s, executor=executor)
        self.budget = SearchBudget(config, tokens)
        self.dedupe = Dedupe(config.dedupe, self.emit)
        self.cached = CachedSolutions(cache, config, self.judge, agent.name, self.emit, cache_origin)
        self.agents = AgentsAtWork(agent, config, self.judge, self.budget, self.emit, self._progress)
        self.attempts: dict[str, int] = {}  # node id -> tries so far
        self.retrying: set[str] = set()  # node ids queued again with the verifier's reasons
        self.library_times: dict[str, float] = {}  # signature -> measured ms (equal regions time alike)
        self.mutations: list[dict] = []
        self.best_cost = math.inf
        self.cost_over_time: list[list[float]] = []  # [s since the start, plan ms] at each better plan
        self.first_plan_s: float | None = None  # when the top-down phase ended
        self.stop_reason = ""
        self.done = 0
        self.total = 0

    # ------------------------------------------------------------------ driver

    def run(self) -> SearchResult:
        """Search until done or out of budget; return the best plan."""
        try:
            working = self.agents.open()
            if working:
                self.judge.start()  # imports torch in the background while the search begins
            for leaf in self.tree.leaves():
                self.add_library(leaf)
            baseline = best_plan(self.tree, self.config.force_triton)
            self.plan_changed(baseline)
            if working:
                self.solve_all([self.tree.root] if self.config.strategy == "monolithic" else self._open_nodes())
                self.first_plan_s = self.budget.elapsed()
                if self.config.mutation and self.config.strategy == "lego":
                    mutate(self)
            else:
                self.first_plan_s = self.budget.elapsed()
        finally:
            self.agents.close()
            self.close()
        plan = best_plan(self.tree, self.config.force_triton)
        return SearchResult(plan, baseline.cost_ms, search_metrics(self), self.mutations)

    def close(self) -> None:
        """Stop the candidate executor (``run`` does at its end)."""
        self.judge.close()

    def out_of_budget(self, pending: int = 0) -> str:
        """The name of the budget that is spent, or "" while there is budget
        left; ``pending`` agent calls in flight count against the call budget."""
        return self.agents.out_of_budget(pending)

    def announce(self, node: OrNode | AndNode) -> None:
        """A NodeCreated event for a node made while searching (an OR node with its library estimate)."""
        estimate = costing.library_estimate_ms(node.sub, self.dtype, self.config.target_gpu) if isinstance(node, OrNode) else None
        self.emit(node_created(node, estimate))

    def _progress(self, message: str = "") -> None:
        self.emit(Progress(stage="search", done=self.done, total=max(self.total, self.done), message=message))

    def _open_nodes(self) -> list[OrNode]:
        """Nodes an agent can attempt, most expected gain first (library estimate minus fused estimate, ms)."""
        nodes = [n for n in self.tree.or_nodes() if self.agent.can_attempt(n.sub)]
        gpu = self.config.target_gpu

        def expected_gain_ms(node: OrNode) -> float:
            return costing.library_estimate_ms(node.sub, self.dtype, gpu) - costing.fused_estimate_ms(node.sub, self.dtype, gpu)

        return sorted(nodes, key=expected_gain_ms, reverse=True)  # stable: equal gains keep the tree's order

    def add_library(self, leaf: OrNode) -> None:
        """The library candidate of a leaf: measured on a GPU, else estimated.

        Every leaf is measured on a GPU, the ones no agent contests too: their
        cost decides between a node's decompositions and prices the items a
        mutation replaces, and a roofline estimate can be off by 30x (a bf16
        ``cumsum`` over time: estimated 0.007 ms, 0.196 ms on an H200), which
        kept the fused scan out of the plan."""
        if any(c.implementation == "library" for c in leaf.candidates):
            return
        library = Candidate(f"{leaf.id}-library", leaf.id, "library", "library")
        if self.judge.measure and (leaf.sub.kind != "layout" or costing.library_estimate_ms(leaf.sub, self.dtype, self.config.target_gpu) > 0):
            known = self.library_times.get(leaf.sub.signature) if self.config.dedupe else None
            if known is None:
                known = self.library_times[leaf.sub.signature] = self.judge.library_ms(leaf)
            library.time_ms, library.time_kind = known, "measured"
        else:
            library.time_ms = costing.library_estimate_ms(leaf.sub, self.dtype, self.config.target_gpu)
        leaf.candidates.insert(0, library)
        leaf.chosen = leaf.chosen or library
        self.emit(Timing(node_id=leaf.id, candidate_id=library.id, ms=library.time_ms, measured=library.time_kind == "measured"))

    # ------------------------------------------------------------ scheduling

    def solve_all(self, nodes: list[OrNode]) -> None:
        """Solve ``nodes`` with up to ``agents`` in flight; dedupe by signature;
        retries with feedback and finer splits join the queue."""
        queue = list(nodes)
        self.total += len(queue)
        if queue:  # the work just queued: progress counts against it
            self._progress()
        inflight: dict[concurrent.futures.Future, OrNode] = {}
        with concurrent.futures.ThreadPoolExecutor(self.config.agents, thread_name_prefix="lego-node") as executor:
            while queue or inflight:
                while queue and len(inflight) < self.config.agents:
                    node = queue.pop(0)
                    if node.id not in self.retrying and self.dedupe.claim(node):
                        continue
                    reason = self.out_of_budget(pending=len(inflight))
                    if reason:
                        if inflight and reason == "agent-call budget":
                            queue.insert(0, node)  # a call in flight may turn out to be a cache hit
                            self.dedupe.release(node)
                            break
                        self.stop_reason = reason
                        queue.clear()
                        break
                    self.retrying.discard(node.id)
                    inflight[executor.submit(self._solve_node, node)] = node
                if not inflight:
                    continue
                finished, _ = concurrent.futures.wait(inflight, return_when=concurrent.futures.FIRST_COMPLETED)
                for future in finished:
                    node = inflight.pop(future)
                    queue[:0] = self._finish(node, future.result())
        self.dedupe.forget_waiting()

    def _finish(self, node: OrNode, outcome: Outcome) -> list[OrNode]:
        """Record a solved node; returns nodes to put at the front of the queue."""
        node.candidates.extend(outcome.candidates)
        again: list[OrNode] = []
        retry = [name for name in outcome.retry_agents if name not in self.agents.retired]
        if retry and not outcome.from_cache and self.attempts.get(node.id, 0) < self.config.max_attempts:
            node.feedback = outcome.feedback
            node.retry_agents = retry
            self.retrying.add(node.id)
            return [node]  # back to its agent(s) with the verifier's reason
        self.emit(NodeFinished(node_id=node.id, outcome=finished_outcome(node.candidates)))  # the node's state, said: verified, failed or library
        self.dedupe.solve(node)
        if outcome.failed_verification and node.is_leaf and node.sub.group is not None and node.fused_from is None:
            split = self.tree.add_finer_split(node)
            if split is not None:
                self.announce(split)
                for child in split.children:
                    self.announce(child)
                    self.add_library(child)
                    if self.agent.can_attempt(child.sub):
                        again.append(child)
                self.total += len(again)
                self.emit(TranscriptMessage(node_id=node.id, agent="scheduler", role="system", content=f"every candidate failed verification; split into {len(split.children)} smaller sub-problems ({split.id})"))
        self.done += 1
        self._progress()
        self.plan_changed(best_plan(self.tree, self.config.force_triton))
        return again

    def plan_changed(self, plan: Plan) -> None:
        """Record ``plan`` when it is the first or cheaper than the best so far (a ``PlanImproved`` event)."""
        if math.isinf(self.best_cost) or cheaper(plan.cost_ms, self.best_cost):
            now = self.budget.elapsed()
            first = math.isinf(self.best_cost)
            self.best_cost = plan.cost_ms
            self.budget.improved()
            self.cost_over_time.append([round(now, 3), plan.cost_ms])
            baseline = self.cost_over_time[0][1]
            self.emit(PlanImproved(cost_ms=plan.cost_ms, baseline_ms=baseline, speedup=baseline / plan.cost_ms if plan.cost_ms else 1.0, measured=plan.cost_kind == "measured", items=len(plan.items), initial=first, chosen=plan.item_ids, elapsed_s=round(now, 3)))

    # ---------------------------------------------------------- one node

    def _solve_node(self, node: OrNode) -> Outcome:
        """Runs in a worker thread: the kernel cache, else the agents; their kernels judged in the lane."""
        attempt = self.attempts[node.id] = self.attempts.get(node.id, 0) + 1
        self.emit(NodeStarted(node_id=node.id, agent=self.agent.name, attempt=attempt))
        key = self.cached.key(node)
        entry = self.cached.lookup(key)
        stale: list[Candidate] = []
        if entry is not None:
            cached = self.cached.answer(node, entry)
            if not cached.failed_verification:
                return cached
            # a cached kernel that fails here is not trusted: ask the agent and overwrite the entry
            stale = cached.candidates
            self.emit(TranscriptMessage(node_id=node.id, agent="cache", role="system", content=f"the cached kernel failed verification on this run's inputs ({cached.feedback[-1] if cached.feedback else 'no reason'}); asking the agent again and replacing the cache entry"))
        too_large = self.judge.over_memory_limit(node.sub)
        if too_large:
            self.emit(TranscriptMessage(node_id=node.id, agent="scheduler", role="system", content=too_large))
            return Outcome([])
        # the scheduler asked the agent already; a team's members each decide (the monolithic root goes to all)
        outcome, proposals = self.agents.solve(node, attempt, node is self.tree.root)
        final = not outcome.retry_agents or attempt >= self.config.max_attempts
        if key and final and proposals:
            self.cached.store(key, node, proposals[-1], outcome)
        outcome.candidates[:0] = stale
        return outcome
