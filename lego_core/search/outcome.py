"""What solving one OR node gave the search (``Outcome``).

Shared by the agents' work on a node (``search.agents_at_work``), the
kernel cache's answers (``search.cached``) and the scheduler that records
them (``search.engine``).
"""
from __future__ import annotations

import dataclasses

from lego_core.tree.fusion_tree import Candidate


@dataclasses.dataclass
class Outcome:
    """What solving one node gave: its agent candidates (any state), whether
    they came from the kernel cache, the verifier's reasons (``feedback``,
    oldest first), whether every candidate failed verification, and the
    members whose candidate failed (``retry_agents``: asked again)."""

    candidates: list[Candidate]
    from_cache: bool = False
    feedback: list[str] = dataclasses.field(default_factory=list)
    failed_verification: bool = False
    retry_agents: list[str] = dataclasses.field(default_factory=list)


def finished_outcome(candidates: list[Candidate]) -> str:
    """What a node whose work is over ended with (``events.NodeFinished.outcome``),
    from its candidates (library and kernel ones, any state): ``verified``
    when a kernel candidate passed verification, ``failed`` when it has
    kernel candidates and none passed, else ``library``."""
    kernels = [c for c in candidates if c.implementation != "library"]
    if any(c.verified is not None and c.verified.passed for c in kernels):
        return "verified"
    return "failed" if kernels else "library"
