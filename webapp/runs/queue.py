"""The run queue as people see it and as workers take it: the fair order,
each waiting run's place and expected wait, and the per-user limits.

Fair order (issue 28): a free run worker does not take the oldest queued
run but the oldest queued run of the user who has the fewest runs running,
and among those the user whose last run started longest ago (a user whose
run never started first), so users take turns: one user's five uploads
hold another user's run up by at most one of them per free worker.
``fair_order`` is that order for every queued run (workers claim from it,
``execution.claim``; places and expected waits are read from it); a user
at ``LEGO_MAX_RUNNING_PER_USER`` running runs is skipped by the workers
until one of their runs ends.

Limits at submit: at most ``LEGO_MAX_QUEUED_PER_USER`` queued runs and
``LEGO_MAX_RUNS_IN_FLIGHT`` queued or running runs per user; a further
upload is refused with a message (``RunLimitReached``), nothing queued.
"""
from __future__ import annotations

import datetime
import heapq
import statistics

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db.models import Count, Max
from django.utils import timezone

from webapp.runs.models import Run

RECENT_RUNS = 20  # ended runs whose durations make the typical run time
RECENT_WORKERS_H = 24  # run workers that started a run this many hours back count as there


class RunLimitReached(Exception):
    """The user already has ``LEGO_MAX_QUEUED_PER_USER`` runs queued or
    ``LEGO_MAX_RUNS_IN_FLIGHT`` queued or running; the message says so and
    what to do."""


def fair_order() -> list[tuple]:
    """Every queued run as ``(id, owner id)``, in the order run workers will
    start them: repeatedly the oldest queued run of the user with the fewest
    runs running (each run put ahead counts as running), then whose last run
    started longest ago (never: first; a run put ahead counts as started
    now), then whose oldest queued run is oldest.  Ignores the per-user
    running limit (a user at it waits for one of their runs to end)."""
    queued = list(Run.objects.filter(state=Run.State.QUEUED).order_by("created_at", "pk")
                  .values_list("pk", "owner_id", "created_at"))
    if not queued:
        return []
    owners = {owner for _, owner, _ in queued}
    running = dict(Run.objects.filter(state=Run.State.RUNNING, owner_id__in=owners).order_by()
                   .values("owner_id").annotate(n=Count("pk")).values_list("owner_id", "n"))
    last_start = dict(Run.objects.filter(owner_id__in=owners, started_at__isnull=False).order_by()
                      .values("owner_id").annotate(last=Max("started_at")).values_list("owner_id", "last"))
    waiting: dict = {}
    for pk, owner, created in queued:
        waiting.setdefault(owner, []).append((pk, created))
    # key: (running, started: 0 never / 1 at a time / 2 put ahead here, when, oldest queued, owner)
    heap = []
    for owner, runs in waiting.items():
        when = last_start.get(owner)
        heap.append((running.get(owner, 0), 0 if when is None else 1, when.timestamp() if when else 0.0,
                     runs[0][1].timestamp(), str(owner), owner))
    heapq.heapify(heap)
    order, turn = [], 0
    while heap:
        n, _, _, _, _, owner = heapq.heappop(heap)
        runs = waiting[owner]
        order.append((runs.pop(0)[0], owner))
        if runs:
            turn += 1
            heapq.heappush(heap, (n + 1, 2, float(turn), runs[0][1].timestamp(), str(owner), owner))
    return order


def queue_position(run: Run) -> int | None:
    """The run's place in the fair order (1: next to start), or None when it
    is not queued."""
    if run.state != Run.State.QUEUED:
        return None
    return queue_positions().get(run.pk)


def queue_positions() -> dict:
    """``{run id: place}`` for every queued run (a few queries, for lists)."""
    return {run_id: place for place, (run_id, _) in enumerate(fair_order(), start=1)}


def typical_run_s() -> float | None:
    """The median of the last ``RECENT_RUNS`` ended runs' durations (start
    to end), or None when no run has ended yet."""
    rows = (Run.objects.filter(state__in=Run.ENDED_STATES, started_at__isnull=False, finished_at__isnull=False)
            .order_by("-finished_at").values_list("started_at", "finished_at")[:RECENT_RUNS])
    durations = [max(0.0, (end - start).total_seconds()) for start, end in rows]
    return statistics.median(durations) if durations else None


def run_workers(now: datetime.datetime | None = None) -> int:
    """How many run workers there are, as far as the database shows: the
    distinct workers that started a run in the last ``RECENT_WORKERS_H``
    hours or are running one now; at least 1."""
    since = (now or timezone.now()) - datetime.timedelta(hours=RECENT_WORKERS_H)
    recent = set(Run.objects.filter(started_at__gte=since).exclude(worker="").values_list("worker", flat=True).distinct())
    recent |= set(Run.objects.filter(state=Run.State.RUNNING).values_list("worker", flat=True))
    return max(1, len(recent))


def expected_waits(now: datetime.datetime | None = None) -> dict:
    """``{run id: seconds until it starts}`` for every queued run (empty when
    no run has ended yet: nothing to estimate from).  List scheduling over
    the fair order: ``run_workers()`` workers, each running run taking the
    typical run time (``typical_run_s``) from its start (at least a few
    seconds more), each queued run that time once a worker is free."""
    order = fair_order()
    typical = typical_run_s() if order else None
    if not order or typical is None:
        return {}
    now = now or timezone.now()
    starts = Run.objects.filter(state=Run.State.RUNNING).values_list("started_at", flat=True)
    free = sorted(max(5.0, typical - (now - (start or now)).total_seconds()) for start in starts)
    workers = max(run_workers(now), len(free))
    free = free + [0.0] * (workers - len(free))
    heapq.heapify(free)
    waits = {}
    for run_id, _ in order:
        start = heapq.heappop(free)
        waits[run_id] = start
        heapq.heappush(free, start + typical)
    return waits


def expected_wait_s(run: Run) -> float | None:
    """A queued run's expected wait in seconds (``expected_waits``), else None."""
    if run.state != Run.State.QUEUED:
        return None
    return expected_waits().get(run.pk)


def describe_wait(seconds: float | None) -> str:
    """``"about 2 min"``, ``"under a minute"``, or ``""``."""
    if seconds is None:
        return ""
    if seconds < 60:
        return "under a minute"
    minutes = round(seconds / 60)
    if minutes < 90:
        return f"about {minutes} min"
    return f"about {seconds / 3600:.1f} h"


def describe_position(place: int | None) -> str:
    """``"next in the queue"``, ``"3rd in the queue (2 runs ahead)"``, or ``""``."""
    if not isinstance(place, int) or place < 1:
        return ""
    if place == 1:
        return "next in the queue"
    suffix = "th" if 10 <= place % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(place % 10, "th")
    ahead = place - 1
    return f"{place}{suffix} in the queue ({ahead} run{'s' if ahead != 1 else ''} ahead)"


def limit_message(limit: int) -> str:
    """What a user over the limit of runs in flight is told."""
    runs = "run" if limit == 1 else "runs"
    return (
        f"You already have {limit} {runs} queued or running, the most one user may have at once. "
        "Wait until one ends, or cancel one on its page, then upload again."
    )


def queued_limit_message(limit: int) -> str:
    """What a user with ``LEGO_MAX_QUEUED_PER_USER`` runs waiting is told."""
    runs = "run" if limit == 1 else "runs"
    return (
        f"You already have {limit} {runs} waiting in the queue, the most one user may have queued at once "
        "(LEGO_MAX_QUEUED_PER_USER). Wait until one starts, or cancel one on its page, then upload again."
    )


def check_in_flight_limit(owner) -> None:
    """Raise RunLimitReached when ``owner`` has ``LEGO_MAX_QUEUED_PER_USER``
    runs queued or ``LEGO_MAX_RUNS_IN_FLIGHT`` runs queued or running.  Call
    it inside the transaction that saves the new run: it locks the owner's
    row, so two uploads at once are counted one after the other (and a
    worker's claim, which locks it too, ``claim_next``)."""
    get_user_model().objects.select_for_update().filter(pk=owner.pk).first()
    counts = dict(Run.objects.filter(owner=owner, state__in=Run.ACTIVE_STATES).order_by()
                  .values("state").annotate(n=Count("pk")).values_list("state", "n"))
    queued_limit = settings.LEGO_MAX_QUEUED_PER_USER
    if counts.get(Run.State.QUEUED, 0) >= queued_limit:
        raise RunLimitReached(queued_limit_message(queued_limit))
    limit = settings.LEGO_MAX_RUNS_IN_FLIGHT
    if sum(counts.values()) >= limit:
        raise RunLimitReached(limit_message(limit))


def claim_next(worker: str, task_id: str) -> Run | None:
    """Move the first queued run in the fair order whose owner has fewer
    than ``LEGO_MAX_RUNNING_PER_USER`` runs running to ``running`` for
    ``worker`` (and the message ``task_id``); None when there is none.

    Safe with several run workers at once: each candidate is tried in its
    own transaction that locks its owner's row (so two workers cannot both
    start a run of a user at the limit) and then the run's row with ``SKIP
    LOCKED`` (a row another worker is claiming is skipped, not waited for);
    the move itself is a conditional update from ``queued``, so a run is
    claimed once even where there are no row locks (SQLite, one worker)."""
    from django.db import transaction

    limit = settings.LEGO_MAX_RUNNING_PER_USER
    full = set()
    for run_id, owner in fair_order():
        if owner in full:
            continue
        with transaction.atomic():
            get_user_model().objects.select_for_update().filter(pk=owner).first()
            if Run.objects.filter(owner_id=owner, state=Run.State.RUNNING).count() >= limit:
                full.add(owner)
                continue
            if Run.objects.select_for_update(skip_locked=True).filter(pk=run_id, state=Run.State.QUEUED).first() is None:
                continue
            now = timezone.now()
            taken = Run.objects.filter(pk=run_id, state=Run.State.QUEUED).update(
                state=Run.State.RUNNING, worker=worker, task_id=task_id, started_at=now, heartbeat_at=now,
                output_dir=f"runs/{run_id}/output")
            if taken:
                return Run.objects.get(pk=run_id)
    return None
