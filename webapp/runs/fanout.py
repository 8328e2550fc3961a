"""Agent fan-out: a run's agent calls become Celery tasks on the agents queue.

lego_core's search hands sub-problems to agent pools
(``lego_core.agents.pool``).  With ``LEGO_AGENT_FANOUT`` on, a run's
OptimizeConfig carries a ``CeleryAgents`` object as its ``agent_pool`` (a
``lego_core.agents.pool.AgentPoolFactory``): ``lego_core.optimize`` calls it
in this process (the run's worker) for the pool of each agent the run uses,
a ``CeleryAgentPool``, and serves those pools to the optimizer through its
agent relay (``lego_core.agents.relay``): the optimizer runs in a sandboxed
child process that has no network and sees nothing of the web app, so its
agent calls come through a Unix socket to ``optimize``'s relay thread here,
which hands each to the pool.  Each ``submit`` sends the task
``runs.propose`` (agent name, the sub-problem as JSON from
``lego_core.agents.payload``, feedback) to the agents queue
(``LEGO_AGENT_QUEUE``); an agents worker rebuilds the sub-problem, runs the
agent and stores the proposal in the result backend, and the pool's future
completes with it.  One thread does all the Celery work (``CeleryCalls``):
Celery's result backends are per thread and not thread-safe.

An LLM agent on an agents worker streams its reply: the task records each
``transcript_chunk`` and ``agent_usage`` event it makes in its Celery state
(``PROGRESS``, the list so far) and returns the whole list with the proposal.
``CeleryAgents``, which knows its run (``CeleryAgents(run_id, on_event)``),
sends the run id with each task (the worker keeps one agent per run, so a
repair turn sees the attempt before it) and passes the events it has not yet
seen to ``on_event``: the run's own EventRecorder, so they land in the run's
event log in order with the others.  Events hold no endpoint key.

Nothing hangs: a task that no worker takes within ``LEGO_AGENT_TIMEOUT_S``
fails its future with ``AgentWorkerMissing``, whose message names the queue
and how to start a worker on it; after that every call fails at once, and
``CeleryAgents.missing`` remembers it so that the run's task can end the run
with that message.  A task a worker took but did not finish in that time
fails with TimeoutError.  Tasks are sent with that same expiry, so a worker
that starts later drops them instead of working for a run that gave up.
"""
from __future__ import annotations

import concurrent.futures
import dataclasses
import logging
import queue
import threading
import time

from lego_core.agents.base import Proposal

log = logging.getLogger(__name__)

PROPOSE_TASK = "runs.propose"
POLL_S = 0.1  # how often pending results are looked up
STREAMED_EVENTS = ("transcript_chunk", "agent_usage")  # what an agents worker may add to a run's event log


class AgentWorkerMissing(RuntimeError):
    """No worker took an agent task from the agents queue in time."""


def missing_worker_message(queue_name: str, timeout_s: float) -> str:
    return (
        f"no agents worker took an agent task from the Celery queue {queue_name!r} within {timeout_s:g} s "
        f"(LEGO_AGENT_TIMEOUT_S). Start a worker on that queue, e.g. "
        f"`celery -A webapp.config worker -Q {queue_name} --pool threads --concurrency 8 -n agents@%h`, "
        "then upload the model again."
    )


def _settings():
    from django.conf import settings

    return settings


# ---------------------------------------------------------------------------
# the pool lego_core's search uses
# ---------------------------------------------------------------------------


class CeleryAgentPool:
    """An agent pool (``lego_core.agents.pool.AgentPool``) whose agent,
    ``agent_name``, runs on Celery workers of the agents queue.

    ``size`` is how many calls the search keeps in flight; how many run at
    once is the agents workers' concurrency.  ``calls``: the ``CeleryCalls``
    that send the tasks, shared with the run's other pools (``CeleryAgents``,
    which closes it); None makes one of its own from the settings, which
    ``close`` closes.  Thread-safe; needs the network and Django's settings,
    so it lives in the worker process, never in the sandboxed optimizer.
    """

    def __init__(self, agent_name: str, size: int = 1, calls: "CeleryCalls | None" = None):
        self.agent_name, self.size = agent_name, size
        self._owns_calls = calls is None
        if calls is None:
            settings = _settings()
            calls = CeleryCalls(settings.LEGO_AGENT_QUEUE, settings.LEGO_AGENT_TIMEOUT_S)
        self._calls = calls

    def submit(self, sub, feedback: list[str]) -> "concurrent.futures.Future[Proposal]":
        from lego_core.agents.payload import sub_to_payload

        raw = self._calls.call(self.agent_name, sub_to_payload(sub), list(feedback))
        return _as_proposal(raw)

    def close(self) -> None:
        if self._owns_calls:
            self._calls.close()


def _as_proposal(raw: concurrent.futures.Future) -> concurrent.futures.Future:
    """A future of the Proposal that ``raw`` (a future of its dict) completes with."""
    out: concurrent.futures.Future = concurrent.futures.Future()
    out.set_running_or_notify_cancel()

    def done(f: concurrent.futures.Future) -> None:
        exc = f.exception()
        if exc is not None:
            out.set_exception(exc)
        else:
            out.set_result(Proposal.from_dict(f.result()))

    raw.add_done_callback(done)
    return out


def _failed(exc: BaseException) -> concurrent.futures.Future:
    future: concurrent.futures.Future = concurrent.futures.Future()
    future.set_exception(exc)
    return future


# ---------------------------------------------------------------------------
# Celery: send runs.propose, collect results (one thread)
# ---------------------------------------------------------------------------


@dataclasses.dataclass
class _Call:
    task_id: str
    future: concurrent.futures.Future
    deadline: float
    seen: int = 0  # streamed events already passed on


class CeleryCalls:
    """Sends ``runs.propose`` tasks to ``queue_name`` and completes each
    call's future from the result backend, from one thread of its own
    (started by the first call; nothing connects before that).

    ``run_id`` goes with each task; ``on_event(data)`` gets the streamed
    events (dicts, types ``STREAMED_EVENTS``) of the calls in order, from
    that thread, as the workers report them."""

    def __init__(self, queue_name: str, timeout_s: float, run_id: str | None = None, on_event=None,
                 max_tokens: int | None = None):
        self.queue_name, self.timeout_s = queue_name, float(timeout_s)
        self.run_id, self.on_event = (str(run_id) if run_id is not None else None), on_event
        self.max_tokens = max_tokens  # the run's hard token budget, sent with each task by the trusted relay
        self.missing: AgentWorkerMissing | None = None
        self._requests: queue.Queue = queue.Queue()
        self._pending: dict[str, _Call] = {}
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._stopped: Exception | None = None  # why the thread ended; later calls fail with it
        self._thread: threading.Thread | None = None

    def call(self, agent_name: str, payload: dict, feedback: list[str]) -> concurrent.futures.Future:
        """A future of the proposal dict that an agents worker returns."""
        future: concurrent.futures.Future = concurrent.futures.Future()
        future.set_running_or_notify_cancel()  # not cancellable: a sent task runs anyway
        with self._lock:
            if self._stopped is not None:
                return _failed(self._stopped)
            if self.missing is not None:
                return _failed(AgentWorkerMissing(str(self.missing)))
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="lego-agent-fanout", daemon=True)
                self._thread.start()
            self._requests.put((agent_name, payload, feedback, future))
        return future

    def close(self) -> None:
        """Fail what is still pending, close the broker and backend connections."""
        with self._lock:
            self._closed.set()
            thread = self._thread
            if thread is None:
                self._stopped = RuntimeError("the agent pool is closed")
        if thread is not None:
            thread.join(timeout=30)

    def _loop(self) -> None:
        from webapp.config.celery import app

        connection = app.connection_for_write()
        stopped = RuntimeError("the agent pool is closed")
        try:
            while not self._closed.is_set():
                self._send_requests(app, connection)
                self._collect(app)
                self._closed.wait(POLL_S)
        except Exception as exc:  # noqa: BLE001 - a bug here must fail the calls, not strand them
            log.exception("agent fan-out stopped")
            stopped = RuntimeError(f"the agent fan-out stopped: {type(exc).__name__}: {exc}")
        finally:
            with self._lock:
                self._stopped = stopped  # no call is queued after this
            self._send_requests(app, connection)  # queued ones fail with `stopped`
            for call in self._pending.values():
                call.future.set_exception(RuntimeError(f"{stopped} before the agent answered"))
            self._pending.clear()
            _close_backend(app.backend)  # this thread's backend instance
            connection.release()

    def _send_requests(self, app, connection) -> None:
        while True:
            try:
                agent_name, payload, feedback, future = self._requests.get_nowait()
            except queue.Empty:
                return
            if self._stopped is not None:
                future.set_exception(self._stopped)
                continue
            if self.missing is not None:
                future.set_exception(AgentWorkerMissing(str(self.missing)))
                continue
            try:
                result = app.send_task(
                    PROPOSE_TASK,
                    args=[agent_name, payload, feedback],
                    kwargs={**({"run_id": self.run_id} if self.run_id else {}),
                            **({"max_tokens": self.max_tokens} if self.max_tokens is not None else {})},
                    queue=self.queue_name,
                    ignore_result=False,
                    expires=self.timeout_s,
                    connection=connection,
                )
            except Exception as exc:  # noqa: BLE001 - the broker is down or refuses the message
                future.set_exception(RuntimeError(f"could not send the agent task to queue {self.queue_name!r}: {exc}"))
                continue
            self._pending[result.id] = _Call(result.id, future, time.monotonic() + self.timeout_s)

    def _collect(self, app) -> None:
        now = time.monotonic()
        for call in list(self._pending.values()):
            try:
                meta = app.backend.get_task_meta(call.task_id)
            except Exception:  # noqa: BLE001 - a result file half written, a dropped connection: look again
                meta = {"status": "PENDING"}
            state = meta.get("status")
            if state == "PROGRESS":
                self._pass_on(call, meta.get("result"))
                continue
            if state == "SUCCESS":
                result = meta.get("result")
                self._pass_on(call, result)
                if isinstance(result, dict):
                    result = {k: v for k, v in result.items() if k != "events"}
                call.future.set_result(result)
            elif state in ("FAILURE", "REVOKED"):
                exc = meta.get("result")
                call.future.set_exception(RuntimeError(f"the agent task failed on its worker: {type(exc).__name__}: {exc}"))
            elif now > call.deadline and state == "PENDING":
                self._no_worker(app)
                return
            elif now > call.deadline:
                call.future.set_exception(
                    TimeoutError(f"the agent took longer than {self.timeout_s:g} s (LEGO_AGENT_TIMEOUT_S) on queue {self.queue_name!r}")
                )
            else:
                continue
            del self._pending[call.task_id]
            _forget(app, call.task_id)

    def _pass_on(self, call: _Call, data) -> None:
        """Give ``on_event`` the streamed events of ``data`` (a task's progress
        meta or result: ``{"events": [...]}``) that ``call`` has not passed on yet."""
        events = data.get("events") if isinstance(data, dict) else None
        if not isinstance(events, list):
            return
        new, call.seen = events[call.seen:], max(call.seen, len(events))
        if self.on_event is None:
            return
        for event in new:
            if not (isinstance(event, dict) and event.get("type") in STREAMED_EVENTS):
                continue
            try:
                self.on_event(event)
            except Exception:  # noqa: BLE001 - the run ended meanwhile (RunStopped), a database hiccup: the proposal still counts
                log.debug("a streamed agent event was not recorded", exc_info=True)

    def _no_worker(self, app) -> None:
        """No worker took a task in time: fail every call not yet taken, and all later ones."""
        with self._lock:
            self.missing = AgentWorkerMissing(missing_worker_message(self.queue_name, self.timeout_s))
        for call in list(self._pending.values()):
            try:
                taken = app.backend.get_task_meta(call.task_id).get("status") != "PENDING"
            except Exception:  # noqa: BLE001
                taken = False
            if not taken:
                call.future.set_exception(AgentWorkerMissing(str(self.missing)))
                del self._pending[call.task_id]


def _forget(app, task_id: str) -> None:
    """Drop a read result from the backend (Redis key or file)."""
    try:
        app.backend.forget(task_id)
    except Exception:  # noqa: BLE001 - already gone
        pass


def _close_backend(backend) -> None:
    """Close a Redis backend's pub/sub and pooled connections (no-op for files)."""
    try:
        consumer = getattr(backend, "result_consumer", None)
        if consumer is not None and hasattr(consumer, "stop"):
            consumer.stop()
        client = getattr(backend, "client", None)
        if client is not None and hasattr(client, "connection_pool"):
            client.connection_pool.disconnect()
    except Exception:  # noqa: BLE001 - closing is best effort
        log.debug("closing the result backend failed", exc_info=True)


# ---------------------------------------------------------------------------
# the run's agents: the pool factory lego_core.optimize calls in this process
# ---------------------------------------------------------------------------


class CeleryAgents:
    """The agent pools of one run on the agents queue: an
    ``lego_core.agents.pool.AgentPoolFactory`` for ``OptimizeConfig.agent_pool``.

    ``agents(agent_name, size)`` -> a ``CeleryAgentPool`` for that agent; all
    of the run's pools share one ``CeleryCalls`` (one thread, one broker
    connection).  ``timeout_s``: ``LEGO_AGENT_TIMEOUT_S`` (seconds), how long
    a call may wait for an agents worker; lego_core's relay tells the
    sandboxed optimizer to wait that long plus a grace.  ``missing``: the
    AgentWorkerMissing error once no worker took a task in time, else None.
    ``run_id`` and ``on_event``: see CeleryCalls (the run's id, and where the
    agents' streamed events go).  ``max_tokens``: the run's hard token budget
    (the run's config, never the optimizer's word); the agents worker's LLM
    agent for the run spends it.  A context manager: leaving (or ``close``)
    fails the calls still pending and closes the connections.
    """

    def __init__(self, queue_name: str | None = None, timeout_s: float | None = None, run_id=None, on_event=None,
                 max_tokens: int | None = None):
        settings = _settings()
        self.calls = CeleryCalls(queue_name or settings.LEGO_AGENT_QUEUE, timeout_s or settings.LEGO_AGENT_TIMEOUT_S,
                                 run_id=run_id, on_event=on_event, max_tokens=max_tokens)

    @property
    def timeout_s(self) -> float:
        return self.calls.timeout_s

    @property
    def missing(self) -> AgentWorkerMissing | None:
        return self.calls.missing

    def __call__(self, agent_name: str, size: int) -> CeleryAgentPool:
        return CeleryAgentPool(agent_name, size, calls=self.calls)

    def __enter__(self) -> "CeleryAgents":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def close(self) -> None:
        self.calls.close()
