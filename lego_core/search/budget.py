"""The search's budgets: what stops it handing out more work.

Agent calls, language-model tokens (``agents.budget.TokenBudget``), wall
time and patience (no better plan for a while), from ``OptimizeConfig``'s
``max_agent_calls``, ``max_tokens``, ``max_search_s`` and ``patience_s``; and
every agent retired (unavailable).  ``SearchBudget.spent`` names the first
one that is spent.
"""
from __future__ import annotations

import threading
import time

from lego_core.agents.base import Proposal
from lego_core.agents.budget import TokenBudget
from lego_core.config import OptimizeConfig


class SearchBudget:
    """The budgets of one search and what it spent on them.

    ``tokens``: the run's token budget (default: ``config.max_tokens``);
    ``agent_calls``, ``prompt_tokens``, ``completion_tokens``, ``cost_usd``
    (USD) and ``node_tokens`` (node id -> tokens its agent calls spent)
    count every proposal (:meth:`count`).  Thread-safe counting."""

    def __init__(self, config: OptimizeConfig, tokens: TokenBudget | None = None):
        self.config = config
        self.tokens = tokens if tokens is not None else TokenBudget(config.max_tokens)
        self.started = time.monotonic()
        self.last_improvement = self.started
        self.agent_calls = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.cost_usd = 0.0
        self.node_tokens: dict[str, int] = {}
        self._lock = threading.Lock()

    def elapsed(self) -> float:
        """Seconds since the search started."""
        return time.monotonic() - self.started

    def improved(self) -> None:
        """A better plan was found now: patience starts again."""
        self.last_improvement = time.monotonic()

    def count(self, node_id: str, proposal: Proposal) -> None:
        """One agent call for ``node_id`` and the tokens (and USD) its proposal reports."""
        with self._lock:
            self.agent_calls += 1
            if proposal.counted_in is not self.tokens:  # an agent sharing this budget spent them already
                self.tokens.spend(proposal.tokens)
            self.prompt_tokens += proposal.prompt_tokens
            self.completion_tokens += proposal.completion_tokens
            self.cost_usd += proposal.cost_usd
            if proposal.tokens:
                self.node_tokens[node_id] = self.node_tokens.get(node_id, 0) + proposal.tokens

    def spent(self, pending: int = 0, every_agent_retired: bool = False) -> str:
        """The name of the budget that is spent, or "" while there is budget
        left; ``pending`` agent calls in flight count against the call budget."""
        c = self.config
        if c.max_agent_calls is not None and self.agent_calls + pending >= c.max_agent_calls:
            return "agent-call budget"
        if not self.tokens.allows_call():
            return "token budget"
        if every_agent_retired:
            return "every agent unavailable"
        if c.max_search_s is not None and self.elapsed() >= c.max_search_s:
            return "wall-time budget"
        if c.patience_s is not None and time.monotonic() - self.last_improvement >= c.patience_s:
            return "patience (no better plan)"
        return ""

    def wall_spent(self) -> bool:
        """Whether the wall-time budget is spent (whatever else is)."""
        return self.config.max_search_s is not None and self.elapsed() >= self.config.max_search_s

    def as_dict(self) -> dict:
        """The limits, for the report's metrics."""
        c = self.config
        return {"max_agent_calls": c.max_agent_calls, "max_tokens": c.max_tokens, "max_search_s": c.max_search_s, "patience_s": c.patience_s}
