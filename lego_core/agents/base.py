"""The agent interface: a sub-problem (plus feedback) in, a proposal out."""
from __future__ import annotations

import dataclasses
from typing import Protocol

from lego_core.subproblem import SubProblem


@dataclasses.dataclass
class Proposal:
    """What an agent returns: Triton ``source`` (an importable file with a
    ``launch(*inputs, out=None)`` function) or None when it declines, the
    kernel's name, the transcript as ``(role, content)`` messages and the
    tokens the agent spent (0 for agents that use no language model)."""

    source: str | None
    kernel_name: str = ""
    transcript: list = dataclasses.field(default_factory=list)
    tokens: int = 0

    def to_dict(self) -> dict:
        """Plain data (crosses process and Celery boundaries)."""
        return {"source": self.source, "kernel_name": self.kernel_name, "transcript": [list(m) for m in self.transcript], "tokens": self.tokens}

    @classmethod
    def from_dict(cls, data: dict) -> "Proposal":
        return cls(data.get("source"), data.get("kernel_name", ""), [tuple(m) for m in data.get("transcript", [])], int(data.get("tokens", 0)))


class Agent(Protocol):
    """Turns a context-isolated sub-problem into a candidate kernel.

    ``feedback`` lists reasons earlier candidates for the same sub-problem
    were rejected (verification failures), newest last.  ``can_attempt``
    says, without spending a call, whether the agent would try a sub-problem
    at all (the template agent only tries single fusion groups; an LLM agent
    may try whole regions); the search asks before scheduling a node.
    """

    name: str

    def can_attempt(self, sub: SubProblem) -> bool: ...

    def propose(self, sub: SubProblem, feedback: list[str]) -> Proposal: ...
