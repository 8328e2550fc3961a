"""Agent pools: N agents working on different open nodes at once.

``LocalAgentPool`` runs ``agent.propose`` in N threads (agents mostly wait:
on a language model, on the network).  A remote pool (the web app's Celery
fan-out) is named in ``OptimizeConfig.agent_pool`` as ``"module:factory"``;
``make_pool`` imports it in the optimizer's process and calls
``factory(agent_name=..., size=...)``.  Every pool has the same interface:
``submit(sub, feedback) -> Future[Proposal]`` and ``close()``.
"""
from __future__ import annotations

import concurrent.futures
import importlib
from typing import Protocol

from lego_core.agents.base import Agent, Proposal
from lego_core.tree.subproblem import SubProblem


class AgentPool(Protocol):
    """Where agent calls run.  ``size`` is how many run at once."""

    size: int

    def submit(self, sub: SubProblem, feedback: list[str]) -> "concurrent.futures.Future[Proposal]": ...

    def close(self) -> None: ...


class LocalAgentPool:
    """``size`` threads in this process, each calling ``agent.propose``."""

    def __init__(self, agent: Agent, size: int = 1):
        self.agent, self.size = agent, size
        self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=size, thread_name_prefix="lego-agent")

    def submit(self, sub: SubProblem, feedback: list[str]) -> "concurrent.futures.Future[Proposal]":
        return self._executor.submit(self.agent.propose, sub, list(feedback))

    def close(self) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)


def make_pool(agent: Agent, size: int, remote: str | None = None) -> AgentPool:
    """A local thread pool, or the remote pool named ``"module:factory"``.

    Raises ValueError when ``remote`` is not of that form or names nothing importable.
    """
    if not remote:
        return LocalAgentPool(agent, size)
    module_name, _, factory_name = remote.partition(":")
    if not module_name or not factory_name:
        raise ValueError(f"agent_pool must look like 'package.module:factory', got {remote!r}")
    try:
        factory = getattr(importlib.import_module(module_name), factory_name)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"agent_pool {remote!r} cannot be loaded: {exc}") from exc
    return factory(agent_name=agent.name, size=size)
