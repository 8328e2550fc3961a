"""Carrying out one run: claim it, record its events, set its final state.

Used by the Celery task (``webapp.runs.tasks``); nothing here imports or runs
the uploaded file: ``lego_core.optimize`` does that in a child process.  With
agent fan-out on, that child's agent calls reach the agents queue through
the run's ``fanout.CeleryAgents``, which ``optimize`` calls in this process
(lego_core's agent relay carries the calls out of the child).  While the run goes, a
``heartbeat.Heartbeat`` thread proves the worker alive and notices a cancel;
every way a run ends goes through ``lifecycle.end_run`` (or, for a finished
run, a conditional update), so a run that was cancelled or reaped meanwhile
stays as it is.
"""
from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import os
import threading
from pathlib import Path
from typing import Any, Callable

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from lego_core import ChildCrashed, OptimizeConfig, ProblemError, ProblemSpec, optimize
from lego_core.config import SandboxLimits, StageLimits
from lego_core.events import Event, RunFailed
from lego_core.runtime.sandbox import StageTimeLimit
from lego_core.load.spec import overrides_from_json
from webapp.runs import downloads, heartbeat, lifecycle, live, server_paths, text_bounds
from webapp.runs.fanout import AgentWorkerMissing, CeleryAgents
from webapp.runs.models import Run, RunEvent

log = logging.getLogger(__name__)

WORKER_LOST_MESSAGE = "The worker stopped while this run was going; upload the model again to retry."
PROCESS_LOST_MESSAGE = (
    "The worker process running this run died (killed from outside, out of memory, or taken down by the "
    "uploaded code); a run cannot resume. Upload the model again to retry."
)


class RunStopped(Exception):
    """The run was ended from outside (cancelled by its owner, or failed by
    the reaper) while its task was still going: its next event could not
    be stored, and the task stops."""


def jsonable(value: Any) -> Any:
    """JSON-safe copy: NaN and infinities become the strings "nan", "inf",
    "-inf" (PostgreSQL's jsonb rejects them as numbers)."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    return value


class EventRecorder:
    """A ``lego_core`` sink that stores each event as the run's next RunEvent
    and then wakes the run's live viewers up (``live.notify_new_events``:
    throttled, never raises).  One recorder per run writes its events, in
    order, so viewers see seq 1, 2, 3, ... with no gaps."""

    def __init__(self, run: Run):
        self.run = run
        self._lock = threading.Lock()  # the run's task and its agents' fan-out thread (streamed LLM events) both record
        last = run.events.order_by("-seq").values_list("seq", flat=True).first()
        self.seq = last or 0
        self.saw_failure = False

    def __call__(self, event: Event) -> None:
        self.record(event.to_dict())

    def record(self, data: dict) -> RunEvent:
        """Store ``data`` (an event's dict) as the next RunEvent, then notify.
        Thread-safe."""
        with self._lock:
            self.seq += 1
            seq = self.seq
            self.saw_failure |= data.get("type") == RunFailed.type
            try:
                with transaction.atomic():
                    event = RunEvent.objects.create(run=self.run, seq=seq, type=data["type"], data=server_paths.scrub(text_bounds.bound_strings(jsonable(data)), self.run.pk))  # no server paths reach viewers
            except IntegrityError:
                # only ``lifecycle.end_run`` writes events beside this recorder,
                # and only when it ends the run: this one is over
                raise RunStopped(f"run {self.run.pk} was ended from outside; its task stops") from None
        # stored first: a viewer woken up now reads it from the database
        live.notify_new_events(self.run.pk, seq)
        return event


def claim(run_id: str, worker: str, task_id: str | None = None) -> Run | None:
    """Start the next run in the fair order for the run-queue message
    ``task_id`` (default ``run_id``: the message of run ``run_id``, sent at
    its upload); None when no run may start now (``queue.claim_next``).
    A message is a turn of a free worker, not a ticket for its own run:
    every queued run has one, and each takes the fairest run there is.

    A run that is already ``running`` under this same worker name and this
    message was taken by an earlier delivery of this message whose pool
    process died (the message came back through ``reject_on_worker_lost``;
    a run worker runs one run at a time): it is failed at once with that
    reason, and this delivery starts nothing."""
    from django.db.models import Q

    from webapp.runs import queue

    task_id = str(task_id or run_id)
    if worker:
        mine = Q(task_id=task_id) | Q(pk=run_id, task_id="")  # "": claimed before runs kept their message's id
        lost = list(Run.objects.filter(mine, state=Run.State.RUNNING, worker=worker).values_list("pk", flat=True))
        for pk in lost:
            lifecycle.end_run(pk, Run.State.FAILED, PROCESS_LOST_MESSAGE, lifecycle.WORKER_LOST_TYPE,
                              only_from=(Run.State.RUNNING,))
        if lost:
            return None
    run = queue.claim_next(worker, task_id)
    if run is not None:
        live.notify_run_changed(run.pk, wait_s=0)
    return run


def run_config(owner_id: int | None = None, agent: str = "template") -> OptimizeConfig:
    """The optimizer's knobs for a web run: its time limits (the run's, and
    each stage's: ``LEGO_STAGE_LIMITS``), the jailed child's resource limits
    (``LEGO_RUN_LIMITS``) and how many agents work at once (with fan-out
    on, ``execute`` adds the run's ``fanout.CeleryAgents``); ``agent``: the run's choice
    (``template``, ``llm``, ``both``).  Without fan-out an LLM agent runs in
    this worker process (``lego_core.api``'s agent server), with it on the
    agents workers; either way its endpoint and key come from the server's
    ``LEGO_LLM_*`` environment, never from the run, and its hard token
    budget is ``LEGO_RUN_MAX_TOKENS``.

    The kernel cache is the owner's own (``LEGO_CACHE_DIR/user-<id>``):
    an entry comes from a run of uploaded code, which chooses what its
    jailed child forwards, so one user's upload must not be able to place a
    kernel (or a "no kernel" answer) in another user's runs and downloads
    (an attacker's review of 2026-12-01 planted a kernel file that ran
    code on import through the shared cache)."""
    cache_dir = Path(settings.LEGO_CACHE_DIR)
    limits = {name: value for name, value in settings.LEGO_RUN_LIMITS.items() if value is not None}
    return OptimizeConfig(
        limits=dataclasses.replace(SandboxLimits(), **limits),
        timeout_s=settings.LEGO_RUN_TIMEOUT_S,
        stage_limits=StageLimits().with_limits(**settings.LEGO_STAGE_LIMITS),  # each stage's, LEGO_STAGE_LIMIT_<STAGE>_S
        agents=settings.LEGO_AGENTS,
        agent=agent,
        max_tokens=settings.LEGO_RUN_MAX_TOKENS,
        max_search_s=settings.LEGO_RUN_MAX_SEARCH_S,
        patience_s=settings.LEGO_RUN_PATIENCE_S,
        cache_dir=str(cache_dir / f"user-{owner_id}" if owner_id is not None else cache_dir / "shared"),
    )


def private_upload_folder(run: Run) -> bool:
    """Whether the upload's folder, which the run's jail shows read-only as
    the model file's folder (``lego_core.load.local_modules``), is this run's own
    ``MEDIA_ROOT/runs/<id>/upload/`` (no link on the way) and holds nothing
    but the upload: no other user's file can become visible to the run."""
    upload = Path(run.upload.path)
    own = Path(os.path.realpath(settings.MEDIA_ROOT)) / "runs" / str(run.id) / "upload"
    try:
        if os.path.realpath(upload.parent) != str(own):  # elsewhere, or a link on the way below MEDIA_ROOT
            return False
        return sorted(entry.name for entry in os.scandir(own)) == [upload.name]
    except OSError:
        return False


def stop_when_agents_missing(sink, agents: CeleryAgents | None):
    """``sink``, except that once no agents worker took a task in time the
    next event raises AgentWorkerMissing (once), which stops the optimizer:
    without agents the run would only rebuild the original model."""
    tripped = False

    def guarded(event: Event) -> None:
        nonlocal tripped
        if agents is not None and agents.missing is not None and not tripped:
            tripped = True
            raise AgentWorkerMissing(str(agents.missing))
        sink(event)

    return guarded


def execute(run: Run, on_stop: Callable[[], None] | None = None) -> None:
    """Optimize a claimed run; it always ends finished, failed or (by its
    owner, from outside) cancelled.  ``on_stop`` is called from the
    heartbeat thread when the run stops being ``running`` while this goes
    on (cancelled, or reaped); the Celery task passes
    ``heartbeat.stop_pool_process``."""
    recorder = EventRecorder(run)
    try:
        with heartbeat.Heartbeat(run.pk, settings.LEGO_HEARTBEAT_S, on_stop):
            spec = ProblemSpec(run.upload.path, overrides_from_json(run.overrides), run.dtype, run.device)  # "(3, 3)": a tuple
            config = run_config(run.owner_id, run.agent)
            if not private_upload_folder(run):  # never show a folder that may hold another run's files
                log.warning("run %s: its upload's folder is not its own; the jail shows the upload alone", run.pk)
                config = dataclasses.replace(config, model_folder=False)
            agents = CeleryAgents(run_id=run.pk, on_event=recorder.record, max_tokens=config.max_tokens) if settings.LEGO_AGENT_FANOUT else None
            with agents if agents is not None else contextlib.nullcontext():
                if agents is not None:  # every agent call of the run goes to the agents queue
                    config = dataclasses.replace(config, agent_pool=agents)
                sink = stop_when_agents_missing(recorder, agents)
                # the run's id as lego_core's (.lego_output.json, report.json): the zip's name ends with it too
                report = optimize(spec, run.output_path, config=config, sink=sink, run_id=downloads.short_run_id(run))
    except RunStopped as exc:
        log.info("%s", exc)
    except SoftTimeLimitExceeded:
        fail(run, recorder, f"The run passed the worker's time limit of {settings.LEGO_RUN_SOFT_LIMIT_S:g} s and was "
             "stopped. Lower the sizes with overrides, or ask for a longer LEGO_RUN_TIMEOUT_S.",
             error_type="SoftTimeLimitExceeded")
    except AgentWorkerMissing as exc:
        fail(run, recorder, str(exc), error_type="AgentWorkerMissing")
    except ProblemError as exc:
        fail(run, recorder, str(exc), exc.line, error_type="ProblemError")
    except StageTimeLimit as exc:  # a stage past its limit: its process group was killed, this worker is free
        fail(run, recorder, str(exc), error_type="StageTimeLimit")
    except ChildCrashed as exc:
        fail(run, recorder, str(exc), error_type="ChildCrashed")
    except Exception as exc:  # noqa: BLE001 - whatever happens, the run must end
        log.exception("run %s failed", run.id)
        fail(run, recorder, f"{type(exc).__name__}: {exc}", error_type=type(exc).__name__)
    else:
        finish(run, report)
    finally:
        # a BaseException (worker shutdown) skips the handlers above
        lifecycle.end_run(run.pk, Run.State.FAILED, WORKER_LOST_MESSAGE, lifecycle.WORKER_LOST_TYPE,
                          only_from=(Run.State.RUNNING,))


def finish(run: Run, report: dict) -> None:
    """Save the run as finished with its report; report.html is written into
    the output folder first, so the zip of a finished run always holds it.
    A run that was cancelled or reaped meanwhile stays as it is."""
    from webapp.runs import report_html

    run.state = Run.State.FINISHED
    run.report = server_paths.scrub(jsonable(report), run.pk)
    run.finished_at = timezone.now()
    report_html.write_report_html(run)  # into the output folder (so the zip has it) before the run shows finished
    if Run.objects.filter(pk=run.pk, state=Run.State.RUNNING).update(
        state=run.state, report=run.report, finished_at=run.finished_at
    ):
        live.notify_run_changed(run.pk)  # viewers get "end" now, not at their next poll
    else:
        run.refresh_from_db()


def fail(run: Run, recorder: EventRecorder, message: str, line: int | None = None, error_type: str = "") -> None:
    """End the running run as failed with ``message`` (and a ``RunFailed``
    event unless lego_core already sent one); a run that was cancelled or
    reaped meanwhile stays as it is.  ``message`` is bounded
    (``text_bounds``) and its server paths are made relative."""
    message = server_paths.scrub(text_bounds.bound_text(message, text_bounds.MAX_MESSAGE_CHARS), run.pk)
    lifecycle.end_run(run.pk, Run.State.FAILED, message, error_type, line=line,
                      only_from=(Run.State.RUNNING,), event=not recorder.saw_failure)
    run.refresh_from_db()


def fail_abandoned_runs(worker: str) -> int:
    """Fail the runs a worker of this name left running (it was restarted)."""
    left = list(Run.objects.filter(state=Run.State.RUNNING, worker=worker).values_list("pk", flat=True))
    return sum(
        lifecycle.end_run(run_id, Run.State.FAILED, WORKER_LOST_MESSAGE, lifecycle.WORKER_LOST_TYPE,
                          only_from=(Run.State.RUNNING,))
        for run_id in left
    )
