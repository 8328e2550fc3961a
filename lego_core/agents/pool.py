"""Agent pools: N agents working on different open nodes at once.

The search (``lego_core.search.engine``) hands each agent call to a pool;
every pool has the same interface, ``AgentPool``: ``submit(sub, feedback)
-> Future[Proposal]`` and ``close()``.  ``LocalAgentPool`` runs
``agent.propose`` in N threads of this process (agents mostly wait: on a
language model, on the network).

Agents that run outside the optimizer's jailed child (the LLM agent, which
needs the network and its key; every agent of a caller that brings its own
pools, such as the web app's Celery fan-out) are reached through the agent
relay (``lego_core.agents.relay``): the child's pool for such an agent is a
``relay.RelayPool`` (``make_pool`` with the agent named in ``relayed``),
and the process that called ``lego_core.api.optimize`` answers each call
with a pool of its own.  A caller hands those pools in as an
``AgentPoolFactory`` object (``OptimizeConfig.agent_pool``): lego_core
calls it in the caller's process and never imports the caller's code by
name, so nothing of the caller enters the child.
"""
from __future__ import annotations

import concurrent.futures
from typing import Collection, Protocol

from lego_core.agents.base import Agent, Proposal
from lego_core.tree.subproblem import SubProblem


class AgentPool(Protocol):
    """Where one agent's calls run.  ``size`` is how many run at once.

    ``submit`` returns at once with a future of the agent's Proposal (the
    future fails with the agent's error); ``close`` fails or waits out
    what is still pending and frees the pool's threads and connections."""

    size: int

    def submit(self, sub: SubProblem, feedback: list[str]) -> "concurrent.futures.Future[Proposal]": ...

    def close(self) -> None: ...


class AgentPoolFactory(Protocol):
    """Makes the pool of one agent, in the process that called
    ``lego_core.api.optimize`` (``OptimizeConfig.agent_pool``).

    ``factory(agent_name, size)`` -> an ``AgentPool`` that answers the calls
    for the agent called ``agent_name`` (``template`` or ``llm``; both for
    ``--agent both``) with up to ``size`` at once; ``optimize`` closes each
    pool when the run ends.  It may have a ``timeout_s`` attribute: the
    longest an answer takes in seconds, after which its future fails (the
    child then waits that long plus ``relay.GRACE_S``; without it, the
    relay's default ``relay.DEFAULT_TIMEOUT_S``).  The web app's
    implementation is ``webapp.runs.fanout.CeleryAgents``."""

    def __call__(self, agent_name: str, size: int) -> AgentPool: ...


class LocalAgentPool:
    """``size`` threads in this process, each calling ``agent.propose``."""

    def __init__(self, agent: Agent, size: int = 1):
        self.agent, self.size = agent, size
        self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=size, thread_name_prefix="lego-agent")

    def submit(self, sub: SubProblem, feedback: list[str]) -> "concurrent.futures.Future[Proposal]":
        return self._executor.submit(self.agent.propose, sub, list(feedback))

    def close(self) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)


class InlineAgentPool:
    """Calls ``agent.propose`` in the thread that submits: the future is done
    when ``submit`` returns.  For a caller that already gives each call a
    thread of its own (the relay's call threads, ``relay.AgentServer``)."""

    def __init__(self, agent: Agent, size: int = 1):
        self.agent, self.size = agent, size

    def submit(self, sub: SubProblem, feedback: list[str]) -> "concurrent.futures.Future[Proposal]":
        future: concurrent.futures.Future = concurrent.futures.Future()
        future.set_running_or_notify_cancel()
        try:
            future.set_result(self.agent.propose(sub, list(feedback)))
        except Exception as exc:  # noqa: BLE001 - the agent's failure is the call's answer
            future.set_exception(exc)
        return future

    def close(self) -> None:
        pass


def make_pool(agent: Agent, size: int, relayed: Collection[str] = ()) -> AgentPool:
    """The pool of ``agent`` with ``size`` calls at once: a local thread pool,
    or, when ``agent.name`` is in ``relayed`` (``OptimizeConfig.agent_relay``),
    a ``relay.RelayPool`` to the process that called ``optimize``.

    Raises RuntimeError when a relayed agent is asked for and
    ``$LEGO_AGENT_RELAY`` names no socket."""
    if agent.name not in relayed:
        return LocalAgentPool(agent, size)
    from lego_core.agents.relay import relay_pool

    return relay_pool(agent.name, size)
