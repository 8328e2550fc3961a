"""The run queue as people see it: each waiting run's place, and the
per-user limit on runs in flight that keeps one user from filling it.

Runs wait in one first-in, first-out queue (the run queue of the broker,
sent in upload order), so a queued run's place is one more than the
number of queued runs uploaded before it, whoever owns them.
"""
from __future__ import annotations

from django.conf import settings
from django.contrib.auth import get_user_model

from webapp.runs.models import Run


class RunLimitReached(Exception):
    """The user already has ``LEGO_MAX_RUNS_IN_FLIGHT`` runs queued or
    running; the message says so and what to do."""


def queue_position(run: Run) -> int | None:
    """The run's place in the queue (1: next to start), or None when it is
    not queued."""
    if run.state != Run.State.QUEUED:
        return None
    return 1 + Run.objects.filter(state=Run.State.QUEUED, created_at__lt=run.created_at).count()


def queue_positions() -> dict:
    """``{run id: place}`` for every queued run (one query, for lists)."""
    ids = Run.objects.filter(state=Run.State.QUEUED).order_by("created_at").values_list("pk", flat=True)
    return {run_id: place for place, run_id in enumerate(ids, start=1)}


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
    """What a user over the limit is told."""
    runs = "run" if limit == 1 else "runs"
    return (
        f"You already have {limit} {runs} queued or running, the most one user may have at once. "
        "Wait until one ends, or cancel one on its page, then upload again."
    )


def check_in_flight_limit(owner) -> None:
    """Raise RunLimitReached when ``owner`` has ``LEGO_MAX_RUNS_IN_FLIGHT``
    runs queued or running.  Call it inside the transaction that saves the
    new run: it locks the owner's row, so two uploads at once are counted
    one after the other."""
    limit = settings.LEGO_MAX_RUNS_IN_FLIGHT
    get_user_model().objects.select_for_update().filter(pk=owner.pk).first()
    if Run.objects.filter(owner=owner, state__in=Run.ACTIVE_STATES).count() >= limit:
        raise RunLimitReached(limit_message(limit))
