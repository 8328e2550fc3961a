"""The kernel cache inside a search: signatures solved by earlier runs.

A node whose signature has an entry (``search.cache.KernelCache``) is
answered with no agent call: a negative entry (the agent had no kernel)
as it is, a cached kernel only after the judge verified it again on this
run's inputs.  A node the agents solved is written back (the child's cache
forwards it to the trusted parent, which keys and writes it).  The key is
``search.cache.run_key``'s, the same function the parent keys with.
"""
from __future__ import annotations

import threading
import time

from lego_core.agents.base import Proposal
from lego_core.config import OptimizeConfig
from lego_core.events import CandidateProposed, NodeReused, Sink, TranscriptMessage
from lego_core.judge.candidate import CandidateJudge
from lego_core.search.cache import CacheEntry, KernelCache, run_key
from lego_core.search.outcome import Outcome
from lego_core.tree.fusion_tree import Candidate, OrNode


class CachedSolutions:
    """The search's use of ``cache`` (None: no cache).

    ``origin``: who solved what this run writes (``"run <id> of <model>"``);
    ``agent``: the agent's name (part of the key).  ``hits`` counts nodes
    answered from the cache, ``stale`` cached kernels that failed here."""

    def __init__(self, cache: KernelCache | None, config: OptimizeConfig, judge: CandidateJudge, agent: str, emit: Sink, origin: str = "an earlier run"):
        self.cache, self.config, self.judge, self.agent, self.emit, self.origin = cache, config, judge, agent, emit, origin
        self.hits = 0
        self.stale = 0
        self._lock = threading.Lock()
        self._key_for = None

    @property
    def used(self) -> bool:
        """Whether this search reads and writes the cache (it needs dedupe: one answer per signature)."""
        return self.cache is not None and self.config.cache and self.config.dedupe

    def key(self, node: OrNode) -> str:
        """``node``'s cache key; "" when the cache is not used."""
        if not self.used:
            return ""
        if self._key_for is None:
            self._key_for = run_key(self.judge.device, self.judge.gpu_name(), self.judge.dtype, self.agent, self.config)
        return self._key_for(node.sub.signature)

    def lookup(self, key: str) -> CacheEntry | None:
        """The entry under ``key`` (None: none, or no key)."""
        return self.cache.get(key) if key else None

    def answer(self, node: OrNode, entry: CacheEntry) -> Outcome:
        """A signature solved by an earlier run: no agent call; a cached kernel is verified again here."""
        node.reused_from = "cache"
        note = f"signature solved before ({entry.origin}); taking the result from the kernel cache, no agent call"
        if entry.source is None:
            with self._lock:
                self.hits += 1
            self.emit(TranscriptMessage(node_id=node.id, agent="cache", role="system", content=f"{note}: the agent had no kernel for it ({entry.reason or 'declined'})"))
            self.emit(NodeReused(node_id=node.id, reused_from="cache", via="cache", usable=False))
            return Outcome([], from_cache=True)
        self.emit(TranscriptMessage(node_id=node.id, agent="cache", role="system", content=f"{note}; verifying it again on this run's inputs"))
        kernel_name = f"{node.sub.id}_{entry.kernel_name.split('_', 1)[-1]}" if entry.kernel_name else f"{node.sub.id}_kernel"
        cand = Candidate(f"{node.id}-{entry.agent}-cached", node.id, entry.agent, "triton", entry.source, kernel_name)
        self.emit(CandidateProposed(node_id=node.id, candidate_id=cand.id, agent=entry.agent, implementation="triton", source=cand.source))
        accepted = self.judge.judge(node, cand).accepted
        with self._lock:
            if accepted:
                self.hits += 1
            else:
                self.stale += 1
                node.reused_from = None
        if accepted:
            self.emit(NodeReused(node_id=node.id, reused_from="cache", via="cache", usable=True))
        return Outcome([cand], from_cache=True, failed_verification=not cand.usable, feedback=[cand.rejected_reason] if not cand.usable else [])

    def store(self, key: str, node: OrNode, proposal: Proposal, outcome: Outcome) -> None:
        """Write what the agents gave for ``node`` under ``key``: its fastest
        usable kernel, or a negative entry with the last refusal's reason."""
        usable_ones = [c for c in outcome.candidates if c.usable]
        cand = min(usable_ones, key=lambda c: c.time_ms) if usable_ones else (outcome.candidates[-1] if outcome.candidates else None)
        usable = cand is not None and cand.usable
        report = cand.verified if cand is not None else None
        self.cache.put(
            key,
            CacheEntry(
                signature=node.sub.signature,
                agent=self.agent,
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
                origin=self.origin,
            ),
        )
