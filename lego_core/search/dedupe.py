"""Structure-aware dedupe: one node per canonical signature is solved.

Sub-problems with the same signature (op structure, shapes, dtypes, strides;
not parameter identity) are solved once: the first node of a signature is
solved, the others wait for it and then take over its agent candidates
(:func:`reuse`), with no agent call.  Repeated transformer layers cost one
search, not N.
"""
from __future__ import annotations

import dataclasses

from lego_core.events import NodeReused, Sink, TranscriptMessage
from lego_core.tree.fusion_tree import OrNode


def reuse(node: OrNode, earlier: OrNode, via: str, emit: Sink) -> None:
    """Give ``node`` copies of the agent candidates of ``earlier`` (an
    equal-signature node solved before); ``via``: ``"dedupe"`` or ``"cache"``."""
    node.reused_from = earlier.id
    for cand in earlier.candidates:
        if cand.implementation == "library":
            continue
        node.candidates.append(dataclasses.replace(cand, id=f"{node.id}-{cand.agent}-reused", node_id=node.id))
    chosen = next((c for c in node.candidates if c.implementation != "library" and c.usable), None)
    emit(NodeReused(node_id=node.id, reused_from=earlier.id, via=via, usable=chosen is not None))
    emit(TranscriptMessage(node_id=node.id, agent="dedupe", role="system", content=f"same signature as {earlier.id}: reusing its result, no agent call"))


class Dedupe:
    """Which signatures are solved, and which nodes wait on one being solved.

    ``enabled`` False (the ablation ``OptimizeConfig.dedupe=False``): every
    node is solved on its own.  ``reused`` counts the nodes that reused a
    result."""

    def __init__(self, enabled: bool, emit: Sink):
        self.enabled, self.emit = enabled, emit
        self.solved: dict[str, OrNode] = {}  # signature -> the node solved for it
        self.waiting: dict[str, list[OrNode]] = {}  # signature -> nodes waiting on it
        self.reused = 0

    def reuse(self, node: OrNode, earlier: OrNode) -> None:
        """``node`` takes over ``earlier``'s result (:func:`reuse`), counted."""
        self.reused += 1
        reuse(node, earlier, "dedupe", self.emit)

    def claim(self, node: OrNode) -> bool:
        """False when ``node`` must be solved (its signature is now claimed by
        it); True when it needs no work of its own: its signature is solved
        (reused now) or being solved (it waits)."""
        if not self.enabled:
            return False
        sig = node.sub.signature
        if sig in self.solved:
            self.reuse(node, self.solved[sig])
            return True
        if sig in self.waiting:
            self.waiting[sig].append(node)
            return True
        self.waiting[sig] = []
        return False

    def release(self, node: OrNode) -> None:
        """``node`` goes back to the queue unsolved: its signature is free again."""
        if self.enabled:
            self.waiting.pop(node.sub.signature, None)

    def solve(self, node: OrNode) -> None:
        """``node`` is solved: its signature's waiting nodes reuse its result."""
        if not self.enabled:
            return
        sig = node.sub.signature
        self.solved[sig] = node
        for twin in self.waiting.pop(sig, []):
            self.reuse(twin, node)

    def forget_waiting(self) -> None:
        """Nodes still waiting when the budget ran out before their twin was solved: left unsolved."""
        self.waiting.clear()
