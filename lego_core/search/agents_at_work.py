"""The agents at work on one OR node: who is asked, what they proposed, what the judge said.

Every member of the agent (a ``Team``'s members, or the agent itself) that
can attempt the node is asked through its pool (``agents.pool``), the
monolithic root by all; a retry asks only the members whose candidate
failed, each with the verifier's reasons for its own earlier candidates (on
a GPU with the time to beat: ``agents.base.with_time_to_beat``).  Each
proposal is counted against the budgets as it arrives and its kernel judged
(``judge.candidate.CandidateJudge``) while the others still write.  An agent
that reports itself unavailable is retired: not asked again.
"""
from __future__ import annotations

import concurrent.futures
import time
from typing import Callable

from lego_core.agents.base import Agent, Proposal, members, with_time_to_beat
from lego_core.agents.pool import AgentPool, make_pool
from lego_core.config import OptimizeConfig
from lego_core.events import CandidateProposed, Sink, TranscriptMessage
from lego_core.judge.candidate import CandidateJudge
from lego_core.search.budget import SearchBudget
from lego_core.search.outcome import Outcome
from lego_core.tree.fusion_tree import Candidate, OrNode


def time_to_beat(node: OrNode) -> tuple[float | None, float | None]:
    """The measured ms of ``node``'s library candidate and of its fastest
    verified agent candidate so far (None where not measured): what a
    retry on a GPU is told to beat."""
    measured = [c for c in node.candidates if c.time_kind == "measured" and c.time_ms is not None]
    library = next((c.time_ms for c in measured if c.implementation == "library"), None)
    best = min((c.time_ms for c in measured if c.implementation != "library" and c.usable), default=None)
    return library, best


class AgentsAtWork:
    """The members of ``agent``, their pools and what the search remembers of them.

    ``retired``: agent name -> why the search stopped asking it;
    ``feedback``: (node id, agent name) -> the verifier's reasons for that
    agent's candidates of that node; ``announce(message)``: a progress
    message (an agent stopped)."""

    def __init__(self, agent: Agent, config: OptimizeConfig, judge: CandidateJudge, budget: SearchBudget, emit: Sink, announce: Callable[[str], None]):
        self.agent, self.config, self.judge, self.budget, self.emit, self.announce = agent, config, judge, budget, emit, announce
        self.members = members(agent)
        self.pools: dict[str, AgentPool] = {}
        self.retired: dict[str, str] = {}
        self.feedback: dict[tuple[str, str], list[str]] = {}

    def open(self) -> bool:
        """Start one pool per member (``config.agents`` calls at once each); False when agents are off (``use_triton``)."""
        if self.config.use_triton:
            self.pools = {m.name: make_pool(m, self.config.agents, self.config.agent_relay) for m in self.members}
        return bool(self.pools)

    def close(self) -> None:
        for pool in self.pools.values():
            pool.close()

    def all_retired(self) -> bool:
        """Whether every member is retired."""
        return bool(self.retired) and len(self.retired) == len(self.members)

    def out_of_budget(self, pending: int = 0) -> str:
        """``SearchBudget.spent`` with these agents' retirements."""
        return self.budget.spent(pending, self.all_retired())

    def solve(self, node: OrNode, attempt: int, root: bool, patience_exempt: bool = False) -> tuple[Outcome, list[Proposal]]:
        """Ask the members for ``node`` (its ``attempt``-th try; ``root``: the
        monolithic root, asked of all) and judge what they propose.  Returns
        the outcome and the proposals in the order they came.
        ``patience_exempt``: the node is a first attempt the search makes
        whatever patience says (``search.pricing``): its kernels are judged
        even once patience ran out (the wall-time budget still stops them)."""
        solo = len(self.members) == 1 or root
        asked = [m for m in self.members if m.name not in self.retired and (solo or m.can_attempt(node.sub))]
        if attempt > 1:  # a retry: only the agents whose candidate failed
            asked = [m for m in asked if m.name in getattr(node, "retry_agents", ())]
        futures = {}
        for member in asked:
            feedback = list(self.feedback.get((node.id, member.name), []))
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
            self._take(node, attempt, member, feedback, proposal, outcome, patience_exempt)
        outcome.failed_verification = bool(outcome.candidates) and not any(c.usable for c in outcome.candidates)
        return outcome, proposals

    def _submit(self, member: Agent, node: OrNode, feedback: list[str]) -> concurrent.futures.Future:
        """The member's call in its pool; its seconds, from submission to
        answer, go to the ``agent_calls`` phase (``judge.phases``)."""
        started = time.monotonic()
        try:
            future = self.pools[member.name].submit(node.sub, feedback)
            phases = self.judge.phases
            if phases is not None:
                future.add_done_callback(lambda _f: phases.add("agent_calls", time.monotonic() - started))
            return future
        except Exception as exc:  # noqa: BLE001 - a pool that refuses the call: that agent's failure
            failed: concurrent.futures.Future = concurrent.futures.Future()
            failed.set_exception(exc)
            return failed

    def _take(self, node: OrNode, attempt: int, member: Agent, feedback: list[str], proposal: Proposal, outcome: Outcome,
              patience_exempt: bool = False) -> None:
        """Count one member's proposal, log its transcript, judge its kernel
        (unless the wall-time budget, or patience for a node not exempt from
        it, ran out meanwhile, also while it waited for the judge's lane);
        adds to ``outcome``."""
        name = member.name
        self.budget.count(node.id, proposal)
        for role, content in proposal.transcript:
            self.emit(TranscriptMessage(node_id=node.id, agent=name, role=role, content=content, tokens=0))
        if proposal.unavailable and name not in self.retired:
            self.retired[name] = proposal.unavailable
            self.announce(f"agent {name} stopped: {proposal.unavailable}")
        spent = "wall-time budget" if self.budget.wall_spent() else self.out_of_budget()
        if proposal.source is not None and (spent == "wall-time budget" or (spent == "patience (no better plan)" and not patience_exempt)):
            self.emit(TranscriptMessage(node_id=node.id, agent="scheduler", role="system", content=f"the {spent} ran out while the agent worked: its kernel is not verified or used"))
            return
        if proposal.source is None:
            return
        cand = self._candidate(node, attempt, name, proposal)
        self.emit(CandidateProposed(node_id=node.id, candidate_id=cand.id, agent=name, implementation="triton", source=cand.source))
        verdict = self.judge.judge(node, cand, skip=self._too_late)
        outcome.candidates.append(cand)
        if not verdict.accepted:
            reason = with_time_to_beat(verdict.reason, *time_to_beat(node)) if self.judge.measure else verdict.reason
            self.feedback[(node.id, name)] = feedback + [reason]
            outcome.feedback = feedback + [reason]
            outcome.retry_agents.append(name)

    def _too_late(self) -> str:
        """Why a kernel that waited for the judge's lane is no longer judged ("" while it is)."""
        return "the wall-time budget ran out before it was judged" if self.budget.wall_spent() else ""

    def _candidate(self, node: OrNode, attempt: int, name: str, proposal: Proposal) -> Candidate:
        """The candidate of a proposal: named by node, agent and attempt (a team's members' kernels apart)."""
        tag = name if len(self.members) == 1 else name.replace("+", "_")
        cand = Candidate(f"{node.id}-{tag}-{attempt}", node.id, name, "triton", proposal.source, proposal.kernel_name or f"{node.sub.id}_kernel")
        if len(self.members) > 1 and not cand.kernel_name.endswith(f"_{name}"):
            cand.kernel_name = f"{cand.kernel_name}_{name}"
        if attempt > 1:
            cand.kernel_name = f"{cand.kernel_name}_v{attempt}"
        return cand
