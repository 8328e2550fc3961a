"""The agent interface: a sub-problem (plus feedback) in, a proposal out."""
from __future__ import annotations

import dataclasses
from typing import Protocol

from lego_core.subproblem import SubProblem


@dataclasses.dataclass
class Proposal:
    """What an agent returns: Triton ``source`` (an importable file with a
    ``launch(*inputs, out=None)`` function) or None when it declines, the
    kernel's name, and the transcript as ``(role, content)`` messages."""

    source: str | None
    kernel_name: str = ""
    transcript: list = dataclasses.field(default_factory=list)
    tokens: int = 0


class Agent(Protocol):
    """Turns a context-isolated sub-problem into a candidate kernel.

    ``feedback`` lists reasons earlier candidates for the same sub-problem
    were rejected (verification failures), newest last.
    """

    name: str

    def propose(self, sub: SubProblem, feedback: list[str]) -> Proposal: ...
