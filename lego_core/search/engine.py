"""The LEGO search: a parallel multi-agent search over the AND-OR FusionTree.

``Search.run()`` goes through these phases (``docs/SEARCH.md`` describes
them with the metrics they produce):

1. **library plan**: every leaf gets its library (ATen) candidate priced
   by the cost model: the first complete plan exists the moment the tree
   does, and no GPU time stands in front of agent work.  Library times are
   *measured* only where they decide something (``search.pricing``): a
   node whose agent candidate was verified and timed has the library
   leaves under it measured, in one batch (one GPU-lock hold), before its
   choice is made; a mutation round measures the items it would replace.
2. **top-down**: every OR node an agent can attempt (``Agent.can_attempt``)
   is an *open node*; distinct signatures go first, ranked by what they can
   win (``search.pricing.SignatureCoverage.rank``: regions x (library estimate
   minus the fused kernel's roofline estimate), ms), and every signature
   that carries at least 1% of the model's library time is attempted
   before any retry, finer split or smaller signature (patience does not
   stop the search before they are).
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
4. the final plan: ``plan.best_plan`` (measured times where they decided,
   cost model estimates elsewhere and without a GPU).

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
from lego_core.phases import PhaseClock, phase_or_nothing
from lego_core.search import pricing
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
    (default: ``config.max_tokens``'s); ``phases``: the run's
    ``phases.PhaseClock`` (the judge and the agents add their seconds);
    ``run_id``: names kernel modules in the judge as ``optimized_model.py`` will.
    """

    def __init__(self, tree: FusionTree, activations, parameters: set[str], agent: Agent, config: OptimizeConfig, dtype, device: str,
                 work_dir: Path, emit: Sink, cache: KernelCache | None = None, *, meter=None, call_timeout_s: float | None = None,
                 executor=None, cache_origin: str = "an earlier run", tokens: TokenBudget | None = None, phases: PhaseClock | None = None,
                 run_id: str | None = None):
        self.tree, self.agent, self.config, self.dtype = tree, agent, config, dtype
        self.emit = thread_safe(emit)  # agents and the judge report from several threads
        self.phases = phases
        self.judge = CandidateJudge(activations, parameters, config, dtype, device, work_dir, self.emit,
                                    meter=meter, call_timeout_s=call_timeout_s, executor=executor, phases=phases, run_id=run_id)
        self.budget = SearchBudget(config, tokens)
        self.dedupe = Dedupe(config.dedupe, self.emit)
        self.cached = CachedSolutions(cache, config, self.judge, agent.name, self.emit, cache_origin)
        self.agents = AgentsAtWork(agent, config, self.judge, self.budget, self.emit, self._progress)
        self.attempts: dict[str, int] = {}  # node id -> tries so far
        self.retrying: set[str] = set()  # node ids queued again with the verifier's reasons
        self.mutations: list[dict] = []
        self.best_cost = math.inf
        self.best_choice: list[Candidate] = []  # the best plan's chosen candidates (re-priced when times are measured)
        self.patience_restarted = False  # patience counts from when every signature worth 1% had its attempt
        self.cost_over_time: list[list[float]] = []  # [s since the start, plan ms] at each better plan
        self.first_plan_s: float | None = None  # when the first complete plan (the library plan) existed
        self.first_agent_call_s: float | None = None  # when the first node went to an agent (or the kernel cache)
        self.top_down_s: float | None = None  # when the top-down phase ended
        self.coverage = pricing.SignatureCoverage()  # distinct signatures, their shares, attempted
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
                self.add_library(leaf)  # the cost model's price: no GPU time before agent work
            baseline = best_plan(self.tree, self.config.force_triton)
            self.plan_changed(baseline)
            self.first_plan_s = self.cost_over_time[0][0]  # the library plan's point of the curve
            if working:
                self.solve_all(self._open_nodes())
                self.top_down_s = self.budget.elapsed()
                if self.config.mutation and self.config.strategy == "lego":
                    with phase_or_nothing(self.phases, "mutation"):
                        mutate(self)
            else:
                self.top_down_s = self.budget.elapsed()
        finally:
            self.agents.close()
            self.close()
        plan = best_plan(self.tree, self.config.force_triton)
        return SearchResult(plan, self.library_cost(), search_metrics(self, plan), self.mutations)

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
        """Nodes an agent can attempt, ranked by ``pricing.SignatureCoverage.rank``
        (distinct signatures first, most to win first); records their
        signatures' shares of the model's library time in ``coverage``."""
        if self.config.strategy == "monolithic":
            nodes = [self.tree.root]  # one agent handed the whole model
        else:
            nodes = [n for n in self.tree.or_nodes() if self.agent.can_attempt(n.sub)]
        return self.coverage.rank(nodes, self.dtype, self.config.target_gpu, self.library_cost())

    def add_library(self, leaf: OrNode) -> None:
        """The library candidate of a leaf, priced by the cost model, or by
        the measured time of its signature when one is known
        (``judge.library_by_signature``).  Measuring is ``pricing``'s, where
        a choice depends on it: a roofline estimate can be off by 30x (a
        bf16 ``cumsum`` over time: estimated 0.007 ms, 0.196 ms on an H200)."""
        if any(c.implementation == "library" for c in leaf.candidates):
            return
        library = Candidate(f"{leaf.id}-library", leaf.id, "library", "library")
        library.time_ms = costing.library_estimate_ms(leaf.sub, self.dtype, self.config.target_gpu)
        known = self.judge.library_by_signature.get(leaf.sub.signature)
        if known is not None:
            library.time_ms, library.time_kind = known, "measured"
        leaf.candidates.insert(0, library)
        leaf.chosen = leaf.chosen or library
        self.emit(Timing(node_id=leaf.id, candidate_id=library.id, ms=library.time_ms, measured=library.time_kind == "measured"))

    def measure_library(self, nodes: list[OrNode]) -> None:
        """Measure (one batch, ``CandidateJudge.library_times``) the library
        leaves under ``nodes`` still priced by the cost model; only on a GPU
        run.  Safe from a worker thread: prices are applied by :meth:`reprice`."""
        if not self.judge.measure or self.budget.spent() == "wall-time budget":
            return
        known = self.judge.library_by_signature
        leaves = [leaf for leaf in pricing.estimated_library_leaves(nodes) if leaf.sub.signature not in known]
        if leaves:
            self.judge.library_times(leaves)

    def reprice(self) -> None:
        """Give every leaf whose signature was measured its measured library
        time (in the scheduler's thread: the tree changes in one thread);
        emits ``Timing`` for each changed one."""
        known = self.judge.library_by_signature
        if not known:
            return
        for leaf in self.tree.leaves():
            library = next((c for c in leaf.candidates if c.implementation == "library"), None)
            if library is None or library.time_kind == "measured":
                continue
            ms = known.get(leaf.sub.signature)  # equal signatures time alike (with or without dedupe)
            if ms is not None:
                library.time_ms, library.time_kind = ms, "measured"
                self.emit(Timing(node_id=leaf.id, candidate_id=library.id, ms=ms, measured=True))

    def library_cost(self) -> float:
        """The cheapest all-library plan's cost (ms) at today's prices (``pricing.library_plan_cost``)."""
        return pricing.library_plan_cost(self.tree.root)

    # ------------------------------------------------------------ scheduling

    def solve_all(self, nodes: list[OrNode]) -> None:
        """Solve ``nodes`` with up to ``agents`` in flight; dedupe by signature;
        retries with feedback and finer splits join the queue after every
        first attempt a signature of at least 1% of the library time still
        waits for (``coverage.must_attempt``)."""
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
                    if reason == "patience (no better plan)" and self.coverage.must_attempt(node, self.retrying):
                        reason = ""  # patience waits until every signature worth 1% was tried once
                    if reason:
                        if inflight and reason == "agent-call budget":
                            queue.insert(0, node)  # a call in flight may turn out to be a cache hit
                            self.dedupe.release(node)
                            break
                        self.stop_reason = reason
                        self.coverage.stopped(queue + [node], reason)
                        queue.clear()
                        break
                    self.retrying.discard(node.id)
                    inflight[executor.submit(self._solve_node, node)] = node
                if not inflight:
                    continue
                finished, _ = concurrent.futures.wait(inflight, return_when=concurrent.futures.FIRST_COMPLETED)
                for future in finished:
                    node = inflight.pop(future)
                    again = self._finish(node, future.result())
                    first = next((k for k, n in enumerate(queue) if not self.coverage.must_attempt(n, self.retrying)), len(queue))
                    queue[first:first] = again
                    if not self.patience_restarted and self.coverage.all_must_tried():
                        self.patience_restarted = True
                        self.budget.improved()  # patience counts from here: every signature worth 1% had its attempt
        self.dedupe.forget_waiting()

    def _finish(self, node: OrNode, outcome: Outcome) -> list[OrNode]:
        """Record a solved node; returns nodes to queue again (a retry, a finer split)."""
        node.candidates.extend(outcome.candidates)
        self.reprice()  # what the node's worker measured, given to every leaf of those signatures
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
        """Record ``plan`` when it is the first or cheaper than the best so far (a ``PlanImproved`` event).

        Both at today's prices: the best plan's chosen candidates are
        re-summed (a measured library time re-prices them too), so a plan is
        neither "better" nor "worse" only because an estimate was replaced
        by a measurement.  The event's baseline is the cheapest all-library
        plan at today's prices."""
        first = math.isinf(self.best_cost)
        best_now = sum(c.time_ms for c in self.best_choice) if not first else math.inf
        if first or cheaper(plan.cost_ms, best_now):
            now = self.budget.elapsed()
            library = self.library_cost() or plan.cost_ms
            self.best_cost = plan.cost_ms
            self.best_choice = [item.chosen for item in plan.items]
            self.budget.improved()
            self.cost_over_time.append([round(now, 3), plan.cost_ms])
            speedup = library / plan.cost_ms if plan.cost_ms else 1.0
            self.emit(PlanImproved(cost_ms=plan.cost_ms, baseline_ms=library, speedup=speedup, measured=plan.cost_kind == "measured", items=len(plan.items), initial=first, chosen=plan.item_ids, elapsed_s=round(now, 3)))

    # ---------------------------------------------------------- one node

    def _solve_node(self, node: OrNode) -> Outcome:
        """Runs in a worker thread: the kernel cache, else the agents; their
        kernels judged in the lane; when one is verified and timed, the
        library leaves under the node are measured (the choice depends on them)."""
        outcome = self._ask(node)
        if any(c.usable and c.time_kind == "measured" for c in outcome.candidates):
            self.measure_library([node])
        return outcome

    def _ask(self, node: OrNode) -> Outcome:
        """The kernel cache's answer for ``node``, else its agents'."""
        attempt = self.attempts[node.id] = self.attempts.get(node.id, 0) + 1
        must = self.coverage.must_attempt(node, self.retrying if attempt == 1 else {node.id})
        self.emit(NodeStarted(node_id=node.id, agent=self.agent.name, attempt=attempt))
        key = self.cached.key(node)
        entry = self.cached.lookup(key)
        stale: list[Candidate] = []
        if entry is not None:
            cached = self.cached.answer(node, entry)
            if not cached.failed_verification:
                self.coverage.attempted(node)
                return cached
            # a cached kernel that fails here is not trusted: ask the agent and overwrite the entry
            stale = cached.candidates
            self.emit(TranscriptMessage(node_id=node.id, agent="cache", role="system", content=f"the cached kernel failed verification on this run's inputs ({cached.feedback[-1] if cached.feedback else 'no reason'}); asking the agent again and replacing the cache entry"))
        too_large = self.judge.over_memory_limit(node.sub)
        if too_large:
            self.coverage.skipped(node, too_large)
            self.emit(TranscriptMessage(node_id=node.id, agent="scheduler", role="system", content=too_large))
            return Outcome([])
        if self.first_agent_call_s is None:
            self.first_agent_call_s = self.budget.elapsed()
        # the scheduler asked the agent already; a team's members each decide (the monolithic root goes to all)
        self.coverage.attempted(node)
        outcome, proposals = self.agents.solve(node, attempt, node is self.tree.root, patience_exempt=must)
        final = not outcome.retry_agents or attempt >= self.config.max_attempts
        if key and final and proposals:
            self.cached.store(key, node, proposals[-1], outcome)
        outcome.candidates[:0] = stale
        return outcome
