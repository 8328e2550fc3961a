"""How a run ends when its own task cannot say so: the one place that moves
a run to an ended state with its reason stored as a ``run_failed`` event.

- ``end_run``: the run's row is locked, the closing event is stored (the
  next seq), then the state changes, then viewers are woken up.  Only a run
  still in one of ``only_from`` is touched, so a cancel, the reaper and the
  run's own task never both end a run, and a run that ended stays ended.
- ``cancel_run``: the owner stops a queued or running run (page and API).
- ``reap_stuck_runs``: Celery beat's ``runs.reap``; fails the running runs
  whose heartbeat (``heartbeat.py``) stopped.

The closing event is ``lego_core.events.RunFailed`` (``error_type``
``RunCancelled`` for a cancel, ``WorkerLost`` for a dead worker), so the run
page, the websocket and the events API show the reason like any failure.
"""
from __future__ import annotations

import datetime
import logging

from django.conf import settings
from django.db import transaction
from django.db.models import Max, Q
from django.utils import timezone

from lego_core.events import RunFailed
from webapp.runs import live, text_bounds
from webapp.runs.models import Run, RunEvent

log = logging.getLogger(__name__)

CANCELLED_MESSAGE = "Cancelled by its owner."
CANCELLED_TYPE = "RunCancelled"
WORKER_LOST_TYPE = "WorkerLost"


def stopped_answering_message(timeout_s: float) -> str:
    """The reaper's reason: what happened and what to do."""
    return (
        f"The worker running this run stopped answering (no heartbeat for more than {timeout_s:g} s): "
        "it was killed, ran out of memory or hung. Upload the model again to retry."
    )


def end_run(
    run_id,
    state: str,
    message: str,
    error_type: str,
    *,
    line: int | None = None,
    only_from: tuple[str, ...] = Run.ACTIVE_STATES,
    event: bool = True,
    stale_before: datetime.datetime | None = None,
) -> bool:
    """End run ``run_id`` as ``state`` (failed or cancelled) with ``message``.

    ``message`` is cut to ``text_bounds.MAX_MESSAGE_CHARS`` (an upload
    chooses its own error's text).  Stores a ``RunFailed(error_type, message, line)`` event first (unless
    ``event`` is False: the optimizer already sent its own), then sets the
    state, ``error_message``, ``error_line`` and ``finished_at``, then wakes
    the run's viewers.  Nothing happens (returns False) when the run is gone
    or not in ``only_from``, or, with ``stale_before``, when its heartbeat
    is newer than that (it came back to life since the reaper looked).
    """
    message = text_bounds.bound_text(message, text_bounds.MAX_MESSAGE_CHARS)
    with transaction.atomic():
        run = Run.objects.select_for_update().filter(pk=run_id).first()
        if run is None or run.state not in only_from:
            return False
        if stale_before is not None and (run.heartbeat_at or run.started_at or run.created_at) >= stale_before:
            return False
        seq = RunEvent.objects.filter(run_id=run_id).aggregate(last=Max("seq"))["last"] or 0
        if event:
            seq += 1
            data = RunFailed(error_type=error_type, message=message, line=line).to_dict()
            RunEvent.objects.create(run_id=run_id, seq=seq, type=data["type"], data=data)
        Run.objects.filter(pk=run_id).update(
            state=state, error_message=message, error_line=line, finished_at=timezone.now()
        )
    live.notify_run_changed(run_id, seq)
    return True


def revoke_task(run_id, terminate: bool) -> None:
    """Ask the workers to drop the run's task and, with ``terminate``, to
    stop the pool process running it (SIGTERM; the optimizer's child dies
    with it).  A queued run's message has the run's id; a running run runs
    in the message that claimed it (``Run.task_id``, fair order: maybe
    another run's), terminated only on the run's own worker.  Best effort:
    a broker that cannot broadcast is logged, and the run's heartbeat
    notices the cancel anyway."""
    from webapp.config.celery import app

    task_id, worker = Run.objects.filter(pk=run_id).values_list("task_id", "worker").first() or ("", "")
    target = {"destination": [worker]} if terminate and worker else {}
    try:
        app.control.revoke(str(task_id or run_id) if terminate else str(run_id), terminate=terminate, signal="SIGTERM", **target)
    except Exception:  # noqa: BLE001 - the heartbeat is the backstop
        log.warning("could not broadcast the revoke of run %s; its heartbeat will stop it", run_id, exc_info=True)


def cancel_run(run: Run) -> bool:
    """Cancel ``run`` for its owner: a queued run never starts (its task is
    revoked and, should a worker still get it, finds the run cancelled); a
    running run's pool process is terminated, which frees its worker within
    seconds (Celery's revoke, and the run's heartbeat within
    ``LEGO_HEARTBEAT_S`` as a backstop).  Returns False when the run had
    already ended, in its state or in its event log (the optimizer sent
    ``run_finished``/``run_failed`` and the worker is saving the result: a
    cancel now would replace a finished run's result, or a failed run's
    error, with "cancelled")."""
    if run.log_has_ended():
        return False
    was = Run.objects.filter(pk=run.pk).values_list("state", flat=True).first()
    if not end_run(run.pk, Run.State.CANCELLED, CANCELLED_MESSAGE, CANCELLED_TYPE):
        return False
    revoke_task(run.pk, terminate=was == Run.State.RUNNING)
    return True


def stale_runs(now: datetime.datetime | None = None):
    """Running runs whose last heartbeat (or start, before the first beat)
    is older than ``LEGO_HEARTBEAT_TIMEOUT_S``."""
    cutoff = (now or timezone.now()) - datetime.timedelta(seconds=settings.LEGO_HEARTBEAT_TIMEOUT_S)
    return Run.objects.filter(state=Run.State.RUNNING).filter(
        Q(heartbeat_at__lt=cutoff) | Q(heartbeat_at__isnull=True, started_at__lt=cutoff)
    ), cutoff


def reap_stuck_runs(now: datetime.datetime | None = None) -> list:
    """Fail every running run whose heartbeat stopped, with the reason as a
    ``WorkerLost`` event; returns their ids."""
    runs, cutoff = stale_runs(now)
    timeout_s = settings.LEGO_HEARTBEAT_TIMEOUT_S
    reaped = [
        run_id
        for run_id in runs.values_list("pk", flat=True)
        if end_run(
            run_id, Run.State.FAILED, stopped_answering_message(timeout_s), WORKER_LOST_TYPE,
            only_from=(Run.State.RUNNING,), stale_before=cutoff,
        )
    ]
    if reaped:
        log.warning("failed %d run(s) whose worker stopped answering: %s", len(reaped), ", ".join(map(str, reaped)))
    return reaped
