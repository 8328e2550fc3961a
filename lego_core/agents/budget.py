"""A run's token budget, in one object: the limit and what was spent.

Language-model tokens (prompt + completion, as the server reports them) are
the one budget an agent itself must respect: the LLM agent caps each call's
completion at what is left and starts no call once it is spent
(``agents.llm.agent``), and the search stops handing out work when the
tokens its proposals report reach the limit (``search.budget``).  Both ask
this class; neither counts on its own.
"""
from __future__ import annotations

import threading


class TokenBudget:
    """A hard budget of language-model tokens; ``limit`` None: no limit.
    Thread-safe (agents report from several threads)."""

    def __init__(self, limit: int | None):
        self.limit, self.spent = limit, 0
        self._lock = threading.Lock()

    def remaining(self) -> int | None:
        """Tokens left (0 when spent), or None without a limit."""
        with self._lock:
            return None if self.limit is None else max(0, self.limit - self.spent)

    def spend(self, tokens: int) -> int:
        """Count ``tokens``; returns the total spent."""
        with self._lock:
            self.spent += tokens
            return self.spent

    def allows_call(self) -> bool:
        """Whether an agent call may still be made: no limit, or tokens left."""
        remaining = self.remaining()
        return remaining is None or remaining > 0
