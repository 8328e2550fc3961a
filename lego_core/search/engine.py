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
   ``fusion.legality``), in rounds of non-overlapping proposals ranked by
   bytes saved; a fused candidate is kept only if it verifies and is cheaper
   than the items it replaces (plan selection does that by itself).
4. the final plan: ``plan.best_plan`` (measured times on a GPU, cost model
   estimates without one).

Agents run in parallel (``OptimizeConfig.agents``), but loading, verifying
and timing candidates take one *lane* at a time, so GPU timings never
overlap (and Triton's interpreter, which patches ``triton.language`` while
it runs, is never entered twice).  Budgets stop the search: agent calls,
tokens, wall time and patience (no better plan for a while).

The judge stands apart (``lego_core.judge``): this process computes the
reference outputs and runs the verifier's comparisons; candidate kernel
files are imported, launched, tuned and timed in one candidate executor
process per search, restarted after every candidate that fails.

``strategy="monolithic"`` is the baseline the method is compared with: one
agent handed the whole model as one sub-problem, with the same budget.
"""
from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import math
import os
import threading
import time
from pathlib import Path

import torch

from lego_core.cost import costing
from lego_core.judge import timing_guard
from lego_core.agents.base import Agent, Proposal, members, with_time_to_beat
from lego_core.judge.process import CandidateRaised, Executor, ExecutorTampered, JudgeError, RemoteModule
from lego_core.agents.pool import make_pool
from lego_core.config import OptimizeConfig
from lego_core.events import (
    CandidateProposed,
    NodeReused,
    NodeStarted,
    PlanImproved,
    Progress,
    Sink,
    Timing,
    TranscriptMessage,
    VerificationResult,
)
from lego_core.search import tuning
from lego_core.judge.boundary import working_bytes
from lego_core.judge.inputs import leaf_edge_sets, leaf_input_sets
from lego_core.search.mutation import FusionProposal, propose_fusions
from lego_core.search.plan import Plan, best_plan, direct_options
from lego_core.tree.fusion_tree import AndNode, Candidate, FusionTree, OrNode, node_created
from lego_core.judge.verify import VerifyReport, calls_back_into_reference, verify

IMPROVEMENT = 1e-6  # relative: a plan must be this much cheaper to count as better (summing
# the same costs in another order differs by ~1e-8 ms, which is no improvement)


# False: candidates are verified on the seeded sets only, without the NaN/inf edge sets (an ablation)
EDGE_SETS = True


def _timing_sets(input_sets) -> list:
    """The input sets a timer rotates through, all alive at once: every one
    of a list; as many as fit in memory of a store-backed ``InputSets``."""
    return input_sets.timing_sets() if hasattr(input_sets, "timing_sets") else list(input_sets)


def _only_config_changed(tuned: str, original: str) -> bool:
    """Whether ``tuned`` is ``original`` with another ``CONFIG = ...`` line (what tuning may change)."""
    return tuning.CONFIG_LINE.sub("", tuned) == tuning.CONFIG_LINE.sub("", original)


def cheaper(a: float, b: float) -> bool:
    """Whether cost ``a`` is really below cost ``b`` (not by rounding)."""
    return a < b * (1 - IMPROVEMENT)


@dataclasses.dataclass
class SearchResult:
    """The chosen plan and how the search got there.

    ``plan``: the final plan (items in schedule order, each with ``chosen``);
    ``baseline_ms``: the library plan's cost; ``metrics``: agent calls,
    tokens, times to first / final plan (s), reuse and mutation counts, the
    best cost over time; ``mutations``: one dict per tried fusion."""

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


@dataclasses.dataclass
class Outcome:
    """What solving one node gave: its agent candidates (any state), whether
    they came from the cache, and the verifier's reasons."""

    candidates: list[Candidate]
    from_cache: bool = False
    feedback: list[str] = dataclasses.field(default_factory=list)
    failed_verification: bool = False
    retry_agents: list[str] = dataclasses.field(default_factory=list)  # members whose candidate failed: asked again


class Search:
    """One search over ``tree``; see the module docstring for the phases.

    ``activations``: one dict per verification seed mapping graph value
    names to reference values, or a ``search.boundary.BoundaryStore`` that
    computes them on demand within a memory limit; ``parameters``: placeholder names holding
    model parameters (perturbed in all but the first input set); ``cache``:
    a ``lego_core.search.cache.KernelCache`` or None.
    """

    def __init__(
        self,
        tree: FusionTree,
        activations: list[dict],
        parameters: set[str],
        agent: Agent,
        config: OptimizeConfig,
        dtype: torch.dtype,
        device: str,
        work_dir: Path,
        emit: Sink,
        cache=None,
    ):
        self.tree, self.activations, self.parameters = tree, activations, parameters
        self.agent, self.config, self.dtype, self.device = agent, config, dtype, device
        self.work_dir, self.cache = work_dir, cache
        self._emit_lock = threading.Lock()
        self._raw_emit = emit
        self.lane = threading.Lock()
        self.measure = device == "cuda" and config.timing == "auto"
        # per-shape tuning of kernel files that offer TUNE_CONFIGS: only when measuring compiled kernels
        self.tune = self.measure and os.environ.get("TRITON_INTERPRET") != "1"
        self.solved: dict[str, OrNode] = {}  # signature -> the node solved for it
        self.waiting: dict[str, list[OrNode]] = {}  # signature -> nodes waiting on it
        self.attempts: dict[str, int] = {}
        self.retrying: set[str] = set()
        self.library_times: dict[str, float] = {}  # signature -> measured ms (equal regions time alike)
        self.agent_calls = 0
        self.tokens = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.cost_usd = 0.0
        self.node_tokens: dict[str, int] = {}  # node id -> tokens its agent calls spent
        self.retired: dict[str, str] = {}  # agent name -> why the search stopped asking it
        self.agent_feedback: dict[tuple[str, str], list[str]] = {}  # (node id, agent) -> verifier's reasons
        self.members = members(agent)
        self.reused = 0
        self.cache_hits = 0
        self.cache_stale = 0
        self.mutations: list[dict] = []
        self.started = time.monotonic()
        self.best_cost = math.inf
        self.last_improvement = self.started
        self.cost_over_time: list[list[float]] = []
        self.first_plan_s: float | None = None  # when the top-down phase ended
        self.stop_reason = ""
        self.done = 0
        self.total = 0
        self.judge: Executor | None = None  # the candidate executor, started on first need

    # ------------------------------------------------------------------ events

    def emit(self, event) -> None:
        with self._emit_lock:
            self._raw_emit(event)

    def announce(self, node: OrNode | AndNode) -> None:
        """A NodeCreated event for a node made while searching (an OR node with its library estimate)."""
        estimate = costing.library_estimate_ms(node.sub, self.dtype, self.config.target_gpu) if isinstance(node, OrNode) else None
        self.emit(node_created(node, estimate))

    # ------------------------------------------------------------------ driver

    def run(self) -> SearchResult:
        """Search until done or out of budget; return the best plan."""
        pools = {m.name: make_pool(m, self.config.agents, self.config.agent_pool) for m in self.members} if self.config.use_triton else {}
        self.pools = pools
        pool = pools or None
        try:
            if pool is not None:
                self._judge().start()  # imports torch in the background while the search begins
            for leaf in self.tree.leaves():
                self._add_library(leaf)
            baseline = best_plan(self.tree, self.config.force_triton)
            self._plan_changed(baseline)
            if pool is not None:
                if self.config.strategy == "monolithic":
                    self._solve_all([self.tree.root])
                else:
                    self._solve_all(self._open_nodes())
                self.first_plan_s = self._elapsed()
                if self.config.mutation and self.config.strategy == "lego":
                    self._mutate()
            else:
                self.first_plan_s = self._elapsed()
        finally:
            for each in pools.values():
                each.close()
            self.close()
        plan = best_plan(self.tree, self.config.force_triton)
        return SearchResult(plan, baseline.cost_ms, self._metrics(), self.mutations)

    def _metrics(self) -> dict:
        # first plan: the first one built from agent work (the first improvement on
        # the library plan); with none, when the top-down phase had tried everything
        improved = self.cost_over_time[1:]
        first = improved[0][0] if improved else (self.first_plan_s or 0.0)
        final = improved[-1][0] if improved else first
        return {
            "agent_calls": self.agent_calls,
            "tokens": self.tokens,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cost_usd": round(self.cost_usd, 6),
            "tokens_by_node": dict(self.node_tokens),
            "agent": self.agent.name,
            "agents_retired": dict(self.retired),
            "time_to_first_plan_s": round(first, 3),
            "time_to_final_plan_s": round(final, 3),
            "reused_nodes": self.reused,
            "cache_hits": self.cache_hits,
            "mutations_tried": len(self.mutations),
            "mutations_accepted": sum(1 for m in self.mutations if m["accepted"]),
            "best_cost_over_time": self.cost_over_time,
            "search_time_s": round(self._elapsed(), 3),
            "stop_reason": self.stop_reason or "search space exhausted",
            "cache_stale": self.cache_stale,
            "strategy": self.config.strategy,
            "agents": self.config.agents,
            "dedupe": self.config.dedupe,
            "mutation": self.config.mutation and self.config.strategy == "lego",
            "cache": self.cache is not None and self.config.cache and self.config.dedupe,
            "budgets": {
                "max_agent_calls": self.config.max_agent_calls,
                "max_tokens": self.config.max_tokens,
                "max_search_s": self.config.max_search_s,
                "patience_s": self.config.patience_s,
            },
        }

    def _elapsed(self) -> float:
        return time.monotonic() - self.started

    def _open_nodes(self) -> list[OrNode]:
        """Nodes an agent can attempt, most expected gain first."""
        nodes = [n for n in self.tree.or_nodes() if self.agent.can_attempt(n.sub)]
        return sorted(nodes, key=lambda n: -self._expected_gain(n))

    def _expected_gain(self, node: OrNode) -> float:
        sub = node.sub
        return costing.library_estimate_ms(sub, self.dtype, self.config.target_gpu) - costing.fused_estimate_ms(sub, self.dtype, self.config.target_gpu)

    def out_of_budget(self, pending: int = 0) -> str:
        """The name of the budget that is spent, or "" while there is budget
        left; ``pending`` agent calls in flight count against the call budget."""
        c = self.config
        if c.max_agent_calls is not None and self.agent_calls + pending >= c.max_agent_calls:
            return "agent-call budget"
        if c.max_tokens is not None and self.tokens >= c.max_tokens:
            return "token budget"
        if self.retired and len(self.retired) == len(self.members):
            return "every agent unavailable"
        if c.max_search_s is not None and self._elapsed() >= c.max_search_s:
            return "wall-time budget"
        if c.patience_s is not None and time.monotonic() - self.last_improvement >= c.patience_s:
            return "patience (no better plan)"
        return ""

    # ------------------------------------------------------------ scheduling

    def _solve_all(self, nodes: list[OrNode]) -> None:
        """Solve ``nodes`` with up to ``agents`` in flight; dedupe by signature;
        retries with feedback and finer splits join the queue."""
        queue = list(nodes)
        self.total += len(queue)
        if queue:  # the work just queued: progress counts against it
            self.emit(Progress(stage="search", done=self.done, total=max(self.total, self.done)))
        inflight: dict[concurrent.futures.Future, OrNode] = {}
        with concurrent.futures.ThreadPoolExecutor(self.config.agents, thread_name_prefix="lego-node") as executor:
            while queue or inflight:
                while queue and len(inflight) < self.config.agents:
                    node = queue.pop(0)
                    retry = node.id in self.retrying
                    if not retry and self._dedupe(node):
                        continue
                    reason = self.out_of_budget(pending=len(inflight))
                    if reason:
                        if inflight and reason == "agent-call budget":
                            queue.insert(0, node)  # a call in flight may turn out to be a cache hit
                            if self.config.dedupe:
                                self.waiting.pop(node.sub.signature, None)
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
        self.waiting.clear()  # nodes still waiting: the budget ran out before their twin was solved

    def _dedupe(self, node: OrNode) -> bool:
        """True when ``node`` needs no work of its own: its signature is solved or being solved."""
        if not self.config.dedupe:
            return False
        sig = node.sub.signature
        if sig in self.solved:
            self._reuse(node, self.solved[sig], via="dedupe")
            return True
        if sig in self.waiting:
            self.waiting[sig].append(node)
            return True
        self.waiting[sig] = []
        return False

    def _finish(self, node: OrNode, outcome: Outcome) -> list[OrNode]:
        """Record a solved node; returns nodes to put at the front of the queue."""
        node.candidates.extend(outcome.candidates)
        again: list[OrNode] = []
        tries = self.attempts.get(node.id, 0)
        retry = [name for name in outcome.retry_agents if name not in self.retired]
        if retry and not outcome.from_cache and tries < self.config.max_attempts:
            node.feedback = outcome.feedback
            node.retry_agents = retry
            self.retrying.add(node.id)
            return [node]  # back to its agent(s) with the verifier's reason
        if self.config.dedupe:
            sig = node.sub.signature
            self.solved[sig] = node
            for twin in self.waiting.pop(sig, []):
                self._reuse(twin, node, via="dedupe")
        if outcome.failed_verification and node.is_leaf and node.sub.group is not None and node.fused_from is None:
            split = self.tree.add_finer_split(node)
            if split is not None:
                self.announce(split)
                for child in split.children:
                    self.announce(child)
                    self._add_library(child)
                    if self.agent.can_attempt(child.sub):
                        again.append(child)
                self.total += len(again)
                self.emit(TranscriptMessage(node_id=node.id, agent="scheduler", role="system", content=f"every candidate failed verification; split into {len(split.children)} smaller sub-problems ({split.id})"))
        self.done += 1
        self.emit(Progress(stage="search", done=self.done, total=max(self.total, self.done)))
        self._plan_changed(best_plan(self.tree, self.config.force_triton))
        return again

    def _plan_changed(self, plan: Plan) -> None:
        if math.isinf(self.best_cost) or cheaper(plan.cost_ms, self.best_cost):
            now = self._elapsed()
            first = math.isinf(self.best_cost)
            self.best_cost = plan.cost_ms
            self.last_improvement = time.monotonic()
            self.cost_over_time.append([round(now, 3), plan.cost_ms])
            baseline = self.cost_over_time[0][1]
            self.emit(PlanImproved(cost_ms=plan.cost_ms, baseline_ms=baseline, speedup=baseline / plan.cost_ms if plan.cost_ms else 1.0, measured=plan.cost_kind == "measured", items=len(plan.items), initial=first, chosen=plan.item_ids, elapsed_s=round(now, 3)))

    # ---------------------------------------------------------- one node

    def _solve_node(self, node: OrNode) -> Outcome:
        """Runs in a worker thread: cache or agent, then verify and time in the lane."""
        self.attempts[node.id] = self.attempts.get(node.id, 0) + 1
        self.emit(NodeStarted(node_id=node.id, agent=self.agent.name, attempt=self.attempts[node.id]))
        key = self._cache_key(node)
        entry = self.cache.get(key) if key else None
        stale: list[Candidate] = []
        if entry is not None:
            cached = self._from_cache(node, entry)
            if not cached.failed_verification:
                return cached
            # a cached kernel that fails here is not trusted: ask the agent and overwrite the entry
            stale = cached.candidates
            self.emit(TranscriptMessage(node_id=node.id, agent="cache", role="system", content=f"the cached kernel failed verification on this run's inputs ({cached.feedback[-1] if cached.feedback else 'no reason'}); asking the agent again and replacing the cache entry"))
        too_large = self._over_memory_limit(node.sub)
        if too_large:
            self.emit(TranscriptMessage(node_id=node.id, agent="scheduler", role="system", content=too_large))
            return Outcome([])
        # the scheduler asked the agent already; a team's members each decide (the monolithic root goes to all)
        solo = len(self.members) == 1 or node is self.tree.root
        asked = [m for m in self.members if m.name not in self.retired and (solo or m.can_attempt(node.sub))]
        if self.attempts[node.id] > 1:  # a retry: only the agents whose candidate failed
            asked = [m for m in asked if m.name in getattr(node, "retry_agents", ())]
        futures = {}
        for member in asked:
            feedback = list(self.agent_feedback.get((node.id, member.name), []))
            futures[self._submit(member, node, feedback)] = (member, feedback)
        outcome = Outcome([])
        proposals: list[Proposal] = []
        for future in concurrent.futures.as_completed(futures):  # a fast agent's kernel is checked while others write
            member, feedback = futures[future]
            try:
                proposal = future.result()
            except Exception as exc:  # noqa: BLE001 - an agent failure is that node's failure, not the run's
                proposal = Proposal(None, transcript=[("system", f"the agent failed: {type(exc).__name__}: {exc}")])
            proposals.append(proposal)
            self._take(node, member, feedback, proposal, outcome)
        outcome.failed_verification = bool(outcome.candidates) and not any(c.usable for c in outcome.candidates)
        final = not outcome.retry_agents or self.attempts[node.id] >= self.config.max_attempts
        if key and final and proposals:
            self._store(key, node, proposals[-1], outcome)
        outcome.candidates[:0] = stale
        return outcome

    def _submit(self, member: Agent, node: OrNode, feedback: list[str]) -> concurrent.futures.Future:
        try:
            return self.pools[member.name].submit(node.sub, feedback)
        except Exception as exc:  # noqa: BLE001 - a pool that refuses the call: that agent's failure
            failed: concurrent.futures.Future = concurrent.futures.Future()
            failed.set_exception(exc)
            return failed

    def _take(self, node: OrNode, member: Agent, feedback: list[str], proposal: Proposal, outcome: Outcome) -> None:
        """Count one member's proposal, log its transcript, verify its kernel; adds to ``outcome``."""
        name = member.name
        with self._emit_lock:
            self.agent_calls += 1
            self.tokens += proposal.tokens
            self.prompt_tokens += proposal.prompt_tokens
            self.completion_tokens += proposal.completion_tokens
            self.cost_usd += proposal.cost_usd
            if proposal.tokens:
                self.node_tokens[node.id] = self.node_tokens.get(node.id, 0) + proposal.tokens
        for role, content in proposal.transcript:
            self.emit(TranscriptMessage(node_id=node.id, agent=name, role=role, content=content, tokens=0))
        if proposal.unavailable and name not in self.retired:
            self.retired[name] = proposal.unavailable
            self.emit(Progress(stage="search", done=self.done, total=max(self.total, self.done), message=f"agent {name} stopped: {proposal.unavailable}"))
        spent = self.out_of_budget()
        if proposal.source is not None and spent in ("wall-time budget", "patience (no better plan)"):
            self.emit(TranscriptMessage(node_id=node.id, agent="scheduler", role="system", content=f"the {spent} ran out while the agent worked: its kernel is not verified or used"))
            return
        if proposal.source is None:
            return
        number = self.attempts[node.id]
        tag = name if len(self.members) == 1 else name.replace("+", "_")
        cand = Candidate(f"{node.id}-{tag}-{number}", node.id, name, "triton", proposal.source, proposal.kernel_name or f"{node.sub.id}_kernel")
        if len(self.members) > 1 and not cand.kernel_name.endswith(f"_{name}"):
            cand.kernel_name = f"{cand.kernel_name}_{name}"
        if number > 1:
            cand.kernel_name = f"{cand.kernel_name}_v{number}"
        self.emit(CandidateProposed(node_id=node.id, candidate_id=cand.id, agent=name, implementation="triton", source=cand.source))
        self._check(node, cand)
        outcome.candidates.append(cand)
        if not cand.usable:
            reason = with_time_to_beat(cand.rejected_reason, *self._time_to_beat(node)) if self.measure else cand.rejected_reason
            self.agent_feedback[(node.id, name)] = feedback + [reason]
            outcome.feedback = feedback + [reason]
            outcome.retry_agents.append(name)

    @staticmethod
    def _time_to_beat(node: OrNode) -> tuple[float | None, float | None]:
        """The measured ms of ``node``'s library candidate and of its fastest
        verified agent candidate so far (None where not measured): what a
        retry on a GPU is told to beat."""
        measured = [c for c in node.candidates if c.time_kind == "measured" and c.time_ms is not None]
        library = next((c.time_ms for c in measured if c.implementation == "library"), None)
        best = min((c.time_ms for c in measured if c.implementation != "library" and c.usable), default=None)
        return library, best

    def _check(self, node: OrNode, cand: Candidate) -> None:
        """Load, verify and time a candidate in the lane (one at a time).

        The candidate runs in the executor (``lego_core.judge``); the reference
        and the comparisons run here.  A candidate that fails for any reason
        (a mismatch, an exception, a crash, a timeout, a change to the
        executor's shared functions) restarts the executor, so nothing it did
        there reaches the next candidate."""
        sub = node.sub
        module: RemoteModule | None = None
        ran = False  # whether candidate code ran in the executor
        with self.lane, self._gpu_shared(), self._tracking():
            input_sets = leaf_input_sets(node, self.activations, self.parameters, self.config.verify_seeds)
            callback = calls_back_into_reference(cand.source, sub.ops, getattr(sub.group, "library_ops", ()))
            try:
                if callback:
                    cand.verified = VerifyReport(False, math.inf, math.inf, callback, list(self.config.verify_seeds))
                else:
                    ran = True
                    default_source = self._tune(node, cand, input_sets)
                    module = self._verify(sub, cand, input_sets)
                    if default_source is not None and not cand.verified.passed:
                        self.emit(TranscriptMessage(node_id=node.id, agent="tuner", role="system", content=f"the tuned configuration failed verification ({cand.verified.reason}); verifying the default configuration instead"))
                        cand.source = default_source
                        self._restart_judge()
                        module = self._verify(sub, cand, input_sets)
                if cand.verified.passed and self.measure:
                    try:
                        with self._gpu_alone():  # its executor times it; no other process's kernels beside it
                            guarded = self._guarded_time(sub, module, input_sets)
                        if guarded is None:  # too large to time beside what the search holds
                            cand.time_ms, cand.time_kind = costing.fused_estimate_ms(sub, self.dtype, self.config.target_gpu), "estimated"
                        elif guarded.believed:
                            cand.time_ms, cand.time_kind = guarded.ms, "measured"
                        else:
                            cand.verified = dataclasses.replace(cand.verified, passed=False, reason=f"timing the candidate: {guarded.reason}")
                    except (JudgeError, CandidateRaised) as exc:
                        cand.verified = dataclasses.replace(cand.verified, passed=False, reason=f"timing the candidate failed: {type(exc).__name__}: {exc}")
                elif cand.verified.passed:
                    cand.time_ms, cand.time_kind = costing.fused_estimate_ms(sub, self.dtype, self.config.target_gpu), "estimated"
            finally:
                if ran and (cand.verified is None or not cand.verified.passed):
                    self._restart_judge()
                elif module is not None:
                    module.forget()
            report = cand.verified
            if not report.passed:
                cand.rejected_reason = report.reason
            self.emit(VerificationResult(node_id=node.id, candidate_id=cand.id, passed=report.passed, max_abs_error=report.to_dict()["max_abs_error"], reason=report.reason))
            if not report.passed:
                return
        library = next((c for c in node.candidates if c.implementation == "library"), None)
        self.emit(Timing(node_id=node.id, candidate_id=cand.id, ms=cand.time_ms, measured=cand.time_kind == "measured", baseline_ms=library.time_ms if library else None))

    def _verify(self, sub, cand: Candidate, input_sets) -> RemoteModule | None:
        """Import the candidate's file in the executor and verify it here; sets
        ``cand.verified``; the module (None if it does not import)."""
        seeds = list(self.config.verify_seeds)
        try:
            module = self._load(cand)
        except ExecutorTampered as exc:
            cand.verified = VerifyReport(False, math.inf, math.inf, f"importing the kernel file: {exc}", seeds)
            return None
        except (CandidateRaised, JudgeError) as exc:  # a kernel file that does not import fails verification
            cand.verified = VerifyReport(False, math.inf, math.inf, f"the kernel file does not import: {type(exc).__name__}: {exc}", seeds)
            return None
        edge = leaf_edge_sets(sub, input_sets, self.parameters, seeds[0]) if EDGE_SETS else []
        cand.verified = verify(module.candidate, sub.run_reference, input_sets, self.dtype, seeds, edge_sets=edge,
                               precise_limit_bytes=self._precise_limit())
        return module

    def _guarded_time(self, sub, module: RemoteModule, input_sets) -> "timing_guard.GuardedTiming | None":
        """The verified candidate's time, guarded (``timing_guard.guarded_remote_time``):
        timed in its executor on fresh inputs into preallocated outputs, then
        called there twice per set under the call trace on the same tensors,
        the outputs compared here, and a time below the roofline floor not
        believed.

        Within the memory bound: each timed set costs a fresh copy of its
        inputs, the expected outputs, the output buffers and a poisoned copy
        (here) and the candidate's own allocations (``executor_bytes``,
        there).  As many sets as fit (at least one); when not even one fresh
        copy fits, the verification set itself is timed (the calls after
        timing still catch a memo); when not even the outputs fit, None: the
        caller keeps the cost model's estimate (a region too large to time
        beside what the search holds)."""
        from lego_core.judge.boundary import _nbytes, executor_bytes

        sets = _timing_sets(input_sets)
        room = self._precise_limit()
        fresh = True
        if room is not None:
            outputs = sum(_nbytes(n) for n in sub.outputs)
            inputs = sum(_nbytes(n) for n in sub.inputs)
            room -= executor_bytes(sub)
            per_set = inputs + 3 * outputs
            if room >= per_set:
                sets = sets[: max(1, min(len(sets), room // max(1, per_set)))]
            elif room >= 3 * outputs:
                sets, fresh = sets[:1], False
            else:
                return None
        return timing_guard.guarded_remote_time(module, sets, sub.run_reference, dtype=self.dtype, target=self.config.target_gpu, fresh=fresh,
                                                precise_limit_bytes=self._precise_limit())

    def _tune(self, node: OrNode, cand: Candidate, input_sets) -> str | None:
        """Per-shape tuning (``search.tuning``) of a kernel file that offers
        ``TUNE_CONFIGS``, only when candidates are measured on a GPU: the
        fastest configuration is baked into ``cand.source`` and the times go
        to the transcript.  Returns the source as proposed when it changed it,
        else None.  Any failure keeps the proposed configuration (noted in the
        transcript); it never fails the run.

        The tuner's logic and its output comparison run here; the kernel is
        imported, launched and timed in the executor (``RemoteModule``)."""
        if not self.tune or not tuning.tunable(cand.source):
            return None
        original = cand.source
        loaded: list[RemoteModule] = []

        def load(source: str) -> RemoteModule:
            loaded.append(self._load(cand, source, "_tuning"))
            return loaded[-1]

        def timer(fn, sets) -> float:
            with self._gpu_alone():
                return loaded[-1].time(sets, warmup_ms=tuning.WARMUP_MS, rep=tuning.REP)

        try:
            result = tuning.tune_source(original, [input_sets[0]], load=load, timer=timer, device_name=self.device_name.removeprefix("cuda:"))
            if not _only_config_changed(result.source, original):
                raise ValueError("the tuned source differs from the proposed one beyond its CONFIG line")
        except Exception as exc:  # noqa: BLE001 - tuning is an optimisation: keep the default configuration
            self._restart_judge()  # whatever the tuning runs left in the executor goes
            self.emit(TranscriptMessage(node_id=node.id, agent="tuner", role="system", content=f"tuning failed ({type(exc).__name__}: {str(exc)[:300]}); keeping the default configuration"))
            return None
        finally:
            for module in loaded:
                module.forget()
        self.emit(TranscriptMessage(node_id=node.id, agent="tuner", role="system", content=result.summary()))
        cand.source = result.source
        return original if cand.source != original else None

    def _over_memory_limit(self, sub) -> str:
        """Why no candidate for ``sub`` is asked for: its check would not fit
        under the memory bound (``BoundaryStore.over_limit``); "" otherwise
        (and when the activations are a plain list, as in tests)."""
        over_limit = getattr(self.activations, "over_limit", None)
        return over_limit(sub) if over_limit is not None else ""

    def _precise_limit(self) -> int | None:
        """Bytes a float64 reference run may take (``verify``'s
        ``precise_limit_bytes``): what the boundary store leaves free under
        the memory bound; None without a bound."""
        room = getattr(self.activations, "room", None)
        if room is None:
            return None
        free = room()
        return None if free == float("inf") else max(0, int(free))

    def _tracking(self):
        """The memory meter's per-thread context (counts CPU allocations of checks)."""
        return self.meter.tracking() if self.meter is not None else contextlib.nullcontext()

    def _judge(self) -> Executor:
        """The candidate executor of this search (created on first need)."""
        if self.judge is None:
            self.judge = Executor(call_timeout_s=self.call_timeout_s)
        self.judge.meter = self.meter
        return self.judge

    def _restart_judge(self) -> None:
        if self.judge is not None:
            self.judge.restart()

    def _gpu_shared(self):
        """The GPU held beside other processes' verifications (``lego_core.runtime.gpu_lock``); nothing without a GPU."""
        from lego_core.runtime import gpu_lock

        return gpu_lock.shared() if self.device == "cuda" else contextlib.nullcontext()

    def _gpu_alone(self):
        """The GPU held alone while the executor times for this process (``lego_core.runtime.gpu_lock``)."""
        from lego_core.runtime import gpu_lock

        return gpu_lock.exclusive() if self.device == "cuda" else contextlib.nullcontext()

    def close(self) -> None:
        """Stop the candidate executor (``run`` does at its end)."""
        if self.judge is not None:
            self.judge.close()
            self.judge = None

    def _load(self, cand: Candidate, source: str | None = None, suffix: str = "") -> RemoteModule:
        """Write ``source`` (default: the candidate's) to the work folder and
        import it in the executor.  Bytecode is never written (the executor
        sets ``sys.dont_write_bytecode``), so a file rewritten within the same
        second at the same size (a tuned CONFIG line) cannot load old code."""
        path = self.work_dir / f"{cand.kernel_name}{suffix}.py"
        path.write_text(cand.source if source is None else source)
        return self._judge().load(path, f"lego_candidate_{self.work_dir.name}_{cand.kernel_name}{suffix}")

    def _add_library(self, leaf: OrNode) -> None:
        """The library candidate of a leaf: measured on a GPU, else estimated.

        Every leaf is measured on a GPU, the ones no agent contests too: their
        cost decides between a node's decompositions and prices the items a
        mutation replaces, and a roofline estimate can be off by 30x (a bf16
        ``cumsum`` over time: estimated 0.007 ms, 0.196 ms on an H200), which
        kept the fused scan out of the plan."""
        if any(c.implementation == "library" for c in leaf.candidates):
            return
        library = Candidate(f"{leaf.id}-library", leaf.id, "library", "library")
        if self.measure and (leaf.sub.kind != "layout" or costing.library_estimate_ms(leaf.sub, self.dtype, self.config.target_gpu) > 0):
            known = self.library_times.get(leaf.sub.signature) if self.config.dedupe else None
            if known is None:
                with self.lane, self._tracking():
                    input_sets = _timing_sets(leaf_input_sets(leaf, self.activations, self.parameters, self.config.verify_seeds))
                    known = self.library_times[leaf.sub.signature] = costing.measure_ms(leaf.sub.run_reference, input_sets)
                    del input_sets
            library.time_ms, library.time_kind = known, "measured"
        else:
            library.time_ms = costing.library_estimate_ms(leaf.sub, self.dtype, self.config.target_gpu)
        leaf.candidates.insert(0, library)
        leaf.chosen = leaf.chosen or library
        self.emit(Timing(node_id=leaf.id, candidate_id=library.id, ms=library.time_ms, measured=library.time_kind == "measured"))

    # ------------------------------------------------------------- reuse

    def _reuse(self, node: OrNode, earlier: OrNode, via: str) -> None:
        """Take over the agent candidates of an equal-signature node solved before."""
        self.reused += 1
        node.reused_from = earlier.id
        for cand in earlier.candidates:
            if cand.implementation == "library":
                continue
            node.candidates.append(dataclasses.replace(cand, id=f"{node.id}-{cand.agent}-reused", node_id=node.id))
        chosen = next((c for c in node.candidates if c.implementation != "library" and c.usable), None)
        self.emit(NodeReused(node_id=node.id, reused_from=earlier.id, via=via, usable=chosen is not None))
        self.emit(TranscriptMessage(node_id=node.id, agent="dedupe", role="system", content=f"same signature as {earlier.id}: reusing its result, no agent call"))

    def _cache_key(self, node: OrNode) -> str:
        if self.cache is None or not self.config.cache or not self.config.dedupe:
            return ""
        from lego_core.search.cache import cache_key

        dtype = str(self.dtype).removeprefix("torch.")
        return cache_key(node.sub.signature, self.device_name, dtype, self.agent.name, self.config.key())

    @property
    def device_name(self) -> str:
        """The device for the cache key: measured times belong to one GPU model."""
        if self.device == "cuda":
            return f"cuda:{torch.cuda.get_device_name()}"
        return self.device

    def _from_cache(self, node: OrNode, entry) -> Outcome:
        """A signature solved by an earlier run: no agent call; a cached kernel is verified again here."""
        node.reused_from = "cache"
        note = f"signature solved before ({entry.origin}); taking the result from the kernel cache, no agent call"
        if entry.source is None:
            with self._emit_lock:
                self.cache_hits += 1
            self.emit(TranscriptMessage(node_id=node.id, agent="cache", role="system", content=f"{note}: the agent had no kernel for it ({entry.reason or 'declined'})"))
            self.emit(NodeReused(node_id=node.id, reused_from="cache", via="cache", usable=False))
            return Outcome([], from_cache=True)
        self.emit(TranscriptMessage(node_id=node.id, agent="cache", role="system", content=f"{note}; verifying it again on this run's inputs"))
        cand = Candidate(f"{node.id}-{entry.agent}-cached", node.id, entry.agent, "triton", entry.source, f"{node.sub.id}_{entry.kernel_name.split('_', 1)[-1]}" if entry.kernel_name else f"{node.sub.id}_kernel")
        self.emit(CandidateProposed(node_id=node.id, candidate_id=cand.id, agent=entry.agent, implementation="triton", source=cand.source))
        self._check(node, cand)
        with self._emit_lock:
            if cand.usable:
                self.cache_hits += 1
            else:
                self.cache_stale += 1
                node.reused_from = None
        if cand.usable:
            self.emit(NodeReused(node_id=node.id, reused_from="cache", via="cache", usable=True))
        return Outcome([cand], from_cache=True, failed_verification=not cand.usable, feedback=[cand.rejected_reason] if not cand.usable else [])

    def _store(self, key: str, node: OrNode, proposal: Proposal, outcome: Outcome) -> None:
        from lego_core.search.cache import CacheEntry

        usable_ones = [c for c in outcome.candidates if c.usable]
        cand = min(usable_ones, key=lambda c: c.time_ms) if usable_ones else (outcome.candidates[-1] if outcome.candidates else None)
        usable = cand is not None and cand.usable
        report = cand.verified if cand is not None else None
        self.cache.put(
            key,
            CacheEntry(
                signature=node.sub.signature,
                agent=self.agent.name,
                source=cand.source if usable else None,
                kernel_name=cand.kernel_name if cand else "",
                transcript=[list(m) for m in proposal.transcript],
                tokens=proposal.tokens,
                passed=usable,
                reason="" if usable else (cand.rejected_reason if cand else "the agent declined"),
                max_abs_error=report.to_dict()["max_abs_error"] if usable and report else None,
                time_ms=cand.time_ms if usable else None,
                time_kind=cand.time_kind if usable else "",
                created=time.time(),
                origin=self.cache_origin,
            ),
        )

    cache_origin = "an earlier run"
    meter = None  # a lego_core.runtime.memory.MemoryMeter when the run's memory is measured
    call_timeout_s: float | None = None  # the executor's per-call limit (None: judge.CALL_TIMEOUT_S)

    # ---------------------------------------------------------- mutation

    def _mutate(self) -> None:
        """Rounds of speculative fusion of the best plan's neighbouring items."""
        tried: set[frozenset] = set()
        while True:
            reason = self.out_of_budget()
            if reason:
                self.stop_reason = reason
                return
            plan = best_plan(self.tree, self.config.force_triton)
            proposals, _rejected = propose_fusions(plan.items, self.tree.graph_outputs, tried)
            if not proposals:
                return
            batch: list[FusionProposal] = []
            taken: set[str] = set()
            for proposal in proposals:
                ids = {item.id for item in proposal.items}
                if ids & taken:
                    continue  # overlaps a better proposal of this round; proposed again next round
                tried.add(proposal.key)
                taken |= ids
                batch.append(proposal)
            fused = [self._attach(proposal, plan) for proposal in batch]
            self._solve_all([node for node in fused if self.agent.can_attempt(node.sub)])
            for proposal, node in zip(batch, fused):
                if self._record_mutation(proposal, node):
                    self._combine(proposal, node)

    def _attach(self, proposal: FusionProposal, plan: Plan) -> OrNode:
        """Add the fusion as a new decomposition of the nearest ancestor whose best plan holds every fused item."""
        host, kept = self._host({item.id for item in proposal.items}, plan)
        split, node = self.tree.add_mutation(host, proposal.sub, proposal.items, kept, proposal.label())
        parts = " + ".join(item.sub.label.removeprefix("fused ") for item in proposal.items)
        node.sub.label = f"fused {parts}"[:200]  # a fusion of fusions is not "fused fused ..."
        self.announce(split)
        self.announce(node)
        self._add_library(node)  # the fused region op by op: its baseline
        self.emit(TranscriptMessage(node_id=node.id, agent="mutation", role="system", content=f"{proposal.kind}: fusing {', '.join(i.id for i in proposal.items)} saves {proposal.bytes_saved} bytes of traffic; decomposition {split.id} of {host.id}"))
        return node

    def _combine(self, proposal: FusionProposal, node: OrNode) -> None:
        """Make an accepted fusion usable together with the others of its round.

        Every fusion of a round was attached against the plan of the round's
        start, so two accepted ones are sibling alternatives that exclude each
        other.  When the current best plan still holds this fusion's items
        unfused, add one more decomposition that shares the fused node with the
        current plan's other items (both fusions then count)."""
        plan = best_plan(self.tree, self.config.force_triton)
        ids = {item.id for item in proposal.items}
        if node.id in plan.item_ids or not ids <= set(plan.item_ids):
            return
        host, kept = self._host(ids, plan)
        split = self.tree.new_and(host, f"combined: {proposal.label()} with the current plan")
        split.shared = kept + [node]
        self.announce(split)
        self._plan_changed(best_plan(self.tree, self.config.force_triton))

    def _host(self, ids: set[str], plan: Plan) -> tuple[OrNode, list[OrNode]]:
        """The nearest OR ancestor whose best plan holds every item in ``ids``, and that plan's other items."""
        first = next(item for item in plan.items if item.id in ids)
        for ancestor in self.tree.ancestors(first)[1:]:
            sub_plan = plan if ancestor is self.tree.root else best_plan(self.tree, self.config.force_triton, root=ancestor)
            if ids <= set(sub_plan.item_ids):
                return ancestor, [item for item in sub_plan.items if item.id not in ids]
        return self.tree.root, [item for item in plan.items if item.id not in ids]

    def _record_mutation(self, proposal: FusionProposal, node: OrNode) -> bool:
        options = [c for c in direct_options(node) if c.implementation != "library"]
        replaced_ms = sum(item.chosen.time_ms for item in proposal.items)
        fused_ms = options[0].time_ms if options else None
        accepted = fused_ms is not None and cheaper(fused_ms, replaced_ms)
        if options and not accepted:
            reason = f"verified but not cheaper ({fused_ms:.4g} ms vs {replaced_ms:.4g} ms)"
        elif not options:
            failed = [c.rejected_reason for c in node.candidates if c.rejected_reason]
            reason = failed[-1] if failed else "no kernel was written for it"
        else:
            reason = ""
        self.mutations.append(
            {
                "node_id": node.id,
                "kind": proposal.kind,
                "fused": [item.id for item in proposal.items],
                "ops": node.sub.ops,
                "bytes_saved": proposal.bytes_saved,
                "replaced_ms": replaced_ms,
                "fused_ms": fused_ms,
                "accepted": accepted,
                "reused_from": node.reused_from,
                "reason": reason,
            }
        )
        return accepted
