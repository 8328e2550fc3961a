"""The agent interface: a sub-problem (plus feedback) in, a proposal out."""
from __future__ import annotations

import dataclasses
from typing import Protocol

from lego_core.tree.subproblem import SubProblem


@dataclasses.dataclass
class Proposal:
    """What an agent returns: Triton ``source`` (an importable file with a
    ``launch(*inputs, out=None)`` function) or None when it declines, the
    kernel's name, the transcript as ``(role, content)`` messages and the
    tokens the agent spent (0 for agents that use no language model), split
    into ``prompt_tokens`` and ``completion_tokens`` as the server reported
    them, with their ``cost_usd``.  ``unavailable``: set (to why, one line)
    when the agent cannot work any more in this run (its endpoint keeps
    failing); the search then stops asking it.  ``counted_in``: the
    ``budget.TokenBudget`` the agent already spent ``tokens`` from (an agent
    in this process sharing the run's budget), so the search does not count
    them twice; None when nothing counted them yet (an agent in another
    process, answering through the relay or a Celery pool).  Never
    serialised."""

    source: str | None
    kernel_name: str = ""
    transcript: list = dataclasses.field(default_factory=list)
    tokens: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    unavailable: str = ""
    counted_in: object = dataclasses.field(default=None, compare=False, repr=False)

    def to_dict(self) -> dict:
        """Plain data (crosses process and Celery boundaries); ``counted_in`` stays behind."""
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "counted_in"}
        data["transcript"] = [list(m) for m in self.transcript]
        return data

    @classmethod
    def from_dict(cls, data: dict) -> "Proposal":
        return cls(
            data.get("source"), data.get("kernel_name", ""), [tuple(m) for m in data.get("transcript", [])], int(data.get("tokens", 0)),
            int(data.get("prompt_tokens", 0)), int(data.get("completion_tokens", 0)), float(data.get("cost_usd", 0.0)), str(data.get("unavailable", "")),
        )


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


class Team:
    """Several agents on one tree (``--agent both``): every member that can
    attempt a sub-problem gets it, and the best verified candidate wins,
    whoever wrote it.  ``name`` joins the members' names (the kernel cache
    key's agent part)."""

    def __init__(self, members: list):
        if not members:
            raise ValueError("a team needs at least one agent")
        self.members = list(members)
        self.name = "+".join(m.name for m in self.members)

    def can_attempt(self, sub: SubProblem) -> bool:
        return any(m.can_attempt(sub) for m in self.members)


def members(agent) -> list:
    """The agents behind ``agent``: a Team's members, or the agent itself."""
    return list(agent.members) if isinstance(agent, Team) else [agent]


# A retry's feedback is the verifier's reasons, one string per failed attempt.
# On a GPU the last one also carries the time to beat, on a line of its own
# that an agent may read (``split_time_to_beat``) and a template ignores.
TIME_TO_BEAT = "time to beat on the GPU:"


def with_time_to_beat(reason: str, library_ms: float | None, best_ms: float | None) -> str:
    """``reason`` with a last line giving the library's measured time and the
    best verified candidate's so far (ms, CUDA-graph replays, the search's
    own measurements; None: not measured).  Unchanged when neither is known."""
    if library_ms is None and best_ms is None:
        return reason
    parts = [f"library {library_ms:.6g} ms" if library_ms is not None else "library ? ms"]
    if best_ms is not None:
        parts.append(f"best verified so far {best_ms:.6g} ms")
    return f"{reason}\n{TIME_TO_BEAT} {'; '.join(parts)}"


def split_time_to_beat(reason: str) -> tuple[str, float | None, float | None]:
    """The inverse of ``with_time_to_beat``: ``(reason, library_ms, best_ms)``;
    the times are None when the reason carries no such line."""
    head, sep, tail = reason.rpartition(f"\n{TIME_TO_BEAT} ")
    if not sep:
        return reason, None, None
    times: dict[str, float] = {}
    for part in tail.split("; "):
        words = part.split()
        try:
            times["best" if part.startswith("best") else "library"] = float(words[-2])
        except (IndexError, ValueError):
            continue
    return head, times.get("library"), times.get("best")
