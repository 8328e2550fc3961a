"""Celery tasks of the runs app.

Two queues.  ``runs.optimize`` goes to the run queue (``LEGO_CELERY_QUEUE``),
the GPU queue: one worker per GPU with concurrency 1, because verification
and timing happen in the run's own process and must never overlap.
``runs.propose`` goes to the agents queue (``LEGO_AGENT_QUEUE``): one agent
call of a run's search (``fanout.py``); agents mostly wait (on a language
model, on the network), so its workers use a thread pool with higher
concurrency (``--pool threads --concurrency N``) and need no GPU.
``runs.reap`` (Celery beat, every ``LEGO_REAP_EVERY_S``) goes to the agents
queue too, whose worker is never busy with a run: it fails the runs whose
worker stopped answering, and sends again the task of a run still queued
long after its message went out (a broker restarted without its data).

``runs.optimize`` is acknowledged late and rejected (requeued) when its pool
process dies, so its next delivery can fail the run with the reason
(``execution.claim``); its soft time limit raises in the task (the run fails
with a message), its hard limit kills the pool process.  Its task id is the
run's id, so a cancel can revoke it (``lifecycle.cancel_run``).
"""
import collections
import datetime
import logging
import threading

from celery import shared_task
from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from webapp.runs import execution, heartbeat, lifecycle
from webapp.runs.models import Run

log = logging.getLogger(__name__)

QUEUE_UNREACHABLE_TYPE = "QueueUnreachable"
QUEUE_UNREACHABLE_MESSAGE = (
    "The run queue could not be reached when this run was sent (the broker is down or restarting), "
    "so nothing ran. Upload the model again in a minute."
)


@shared_task(
    bind=True,
    name="runs.optimize",
    ignore_result=True,
    acks_late=True,
    reject_on_worker_lost=True,
    soft_time_limit=settings.LEGO_RUN_SOFT_LIMIT_S,
    time_limit=settings.LEGO_RUN_HARD_LIMIT_S,
)
def optimize_run(self, run_id: str) -> None:
    """A free run worker's turn: optimize the next run in the fair order
    (``queue.fair_order``; ``run_id``'s message need not start ``run_id``),
    nothing when no run may start (and the end of a run whose earlier
    delivery of this message died with its process).  When the run ends
    and its owner still has runs queued, one more message is sent: a turn
    spent while the owner was at ``LEGO_MAX_RUNNING_PER_USER`` is given back."""
    run = execution.claim(run_id, worker=self.request.hostname or "", task_id=self.request.id or run_id)
    if run is not None:
        try:
            execution.execute(run, on_stop=heartbeat.stop_pool_process)
        finally:
            send_turn_if_waiting(run.owner_id)


def send_turn_if_waiting(owner_id) -> None:
    """Send one more run-queue message (a fresh task id) when ``owner_id``
    still has runs queued; a spare message finds nothing to start and does
    nothing.  Never raises (the reaper's resend is the backstop)."""
    import uuid

    queued = Run.objects.filter(owner_id=owner_id, state=Run.State.QUEUED).values_list("pk", flat=True).first()
    if queued is None:
        return
    try:
        optimize_run.apply_async((str(queued),), task_id=str(uuid.uuid4()))
    except Exception:  # noqa: BLE001 - the broker is away: the reaper sends queued runs again
        log.warning("could not send another run-queue message for run %s", queued, exc_info=True)


def queue_run(run_id) -> None:
    """Send ``runs.optimize`` for a saved run, with the run's id as the task
    id, and record when (``Run.sent_at``)."""
    optimize_run.apply_async((str(run_id),), task_id=str(run_id))
    Run.objects.filter(pk=run_id).update(sent_at=timezone.now())


def resend_lost_runs(now: datetime.datetime | None = None) -> list:
    """Send again the task of every run still queued whose message went out
    more than ``LEGO_RESEND_QUEUED_S`` ago (or never, as far as the database
    knows): a broker restarted without its data (a Redis with no
    persistence) loses queued messages, and such a run would otherwise wait
    forever with the worker idle.  Harmless when the first message is still
    there: the task does nothing for a run that is no longer queued
    (``execution.claim``), so a long queue only gains one no-op message per
    waiting run per interval.  A send the broker refuses is logged and tried
    at the next reap.  Returns the ids sent."""
    cutoff = (now or timezone.now()) - datetime.timedelta(seconds=settings.LEGO_RESEND_QUEUED_S)
    waiting = Run.objects.filter(state=Run.State.QUEUED).filter(
        Q(sent_at__lt=cutoff) | Q(sent_at__isnull=True, created_at__lt=cutoff)
    )
    sent = []
    for run_id in waiting.values_list("pk", flat=True):
        try:
            queue_run(run_id)
        except Exception:  # noqa: BLE001 - the broker is still away: the next reap tries again
            log.warning("could not send run %s to the run queue again", run_id, exc_info=True)
            continue
        sent.append(run_id)
    if sent:
        log.warning("sent %d queued run(s) to the run queue again (no worker had taken them): %s", len(sent), ", ".join(map(str, sent)))
    return sent


def queue_run_or_fail(run_id) -> bool:
    """``queue_run``; when the broker does not take the message (kombu gives
    up after its publish retries, about a second), the run is failed at once
    with ``QUEUE_UNREACHABLE_MESSAGE`` instead of staying queued with no
    message anywhere.  Returns whether it was sent; never raises."""
    try:
        queue_run(run_id)
    except Exception:  # noqa: BLE001 - any failure to publish leaves the run unsent
        log.exception("could not send run %s to the run queue", run_id)
        lifecycle.end_run(run_id, Run.State.FAILED, QUEUE_UNREACHABLE_MESSAGE, QUEUE_UNREACHABLE_TYPE,
                          only_from=(Run.State.QUEUED,))
        return False
    return True


@shared_task(name="runs.reap", ignore_result=True)
def reap() -> int:
    """Fail the running runs whose heartbeat stopped and send again the
    queued runs whose message may be lost; returns how many runs it touched."""
    return len(lifecycle.reap_stuck_runs()) + len(resend_lost_runs())


AGENTS_KEPT = 16  # runs whose agents an agents worker process keeps (a repair turn needs the agent's last file)
_agents: "collections.OrderedDict[tuple, object]" = collections.OrderedDict()
_agents_lock = threading.Lock()
_streaming = threading.local()  # .events: the streamed events of the call this thread is making


def _stream_sink(event) -> None:
    """The agents' event sink: the event goes to the call its thread is making."""
    events = getattr(_streaming, "events", None)
    if events is not None:
        events.append(event.to_dict())
        _streaming.report(events)


def agent_for(agent_name: str, run_id: str | None, max_tokens: int | None = None):
    """The agent for one call of run ``run_id``: the same instance for every
    call of that run in this process (the last ``AGENTS_KEPT`` runs), so an
    LLM agent keeps its previous attempts and spends one token budget
    (``max_tokens``, the run's, set when the run's first call arrives); a new
    one without a run id.  Its stream goes to ``_stream_sink``."""
    from types import SimpleNamespace

    from lego_core.agents import make_agent

    config = SimpleNamespace(max_tokens=max_tokens)
    if run_id is None:
        return make_agent(agent_name, config=config, emit=_stream_sink)
    key = (run_id, agent_name)
    with _agents_lock:
        agent = _agents.get(key)
        if agent is None:
            agent = _agents[key] = make_agent(agent_name, config=config, emit=_stream_sink)
            while len(_agents) > AGENTS_KEPT:
                _agents.popitem(last=False)
        _agents.move_to_end(key)
        return agent


@shared_task(bind=True, name="runs.propose", ignore_result=False, track_started=True)
def propose(self, agent_name: str, payload: dict, feedback: list, run_id: str | None = None,
            max_tokens: int | None = None) -> dict:
    """One agent call of run ``run_id``: rebuild the sub-problem from its
    JSON payload, ask the agent, return the proposal as plain data plus
    ``events``, the ``transcript_chunk`` / ``agent_usage`` events the call
    made (an LLM agent's streamed reply and usage).  While it streams, the
    task's state is ``PROGRESS`` with the events so far, which the run's
    ``fanout.CeleryCalls`` passes on to the run's event log.  The
    transcript starts with the worker that answered.  ``max_tokens``: the
    run's hard token budget, which this process's agent for the run spends
    (each completion capped at what is left, no call once it is spent)."""
    from lego_core.agents.payload import sub_from_payload

    sub = sub_from_payload(payload)
    events: list = []
    task_id = self.request.id

    def report(so_far: list) -> None:
        if task_id:
            try:
                self.update_state(task_id=task_id, state="PROGRESS", meta={"events": so_far})
            except Exception:  # noqa: BLE001 - a backend hiccup loses a live update, not the call
                log.debug("could not store the progress of %s", task_id, exc_info=True)

    _streaming.events, _streaming.report = events, report
    try:
        proposal = agent_for(agent_name, run_id, max_tokens).propose(sub, list(feedback))
    finally:
        _streaming.events = None
    where = f"agents worker {self.request.hostname or '?'} took sub-problem {sub.id}"
    proposal.transcript.insert(0, ("system", where))
    return {**proposal.to_dict(), "events": events}
