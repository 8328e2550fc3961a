"""A Run is one upload and its optimization; RunEvent is its event log.

The event log is the source of truth for what a run did: every event that
``lego_core`` sends to its sink is stored with a per-run sequence number, so a
viewer that connects late replays it with ``?after=<seq>`` reads.
"""
from __future__ import annotations

import secrets
import uuid
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import models
from django.utils import timezone

from lego_core.load import spec as lego_spec


def upload_path(run: "Run", filename: str) -> str:
    return f"runs/{run.id}/upload/{Path(filename).name}"


class RunQuerySet(models.QuerySet):
    def without_reports(self) -> "RunQuerySet":
        """For lists of runs: the report JSON is not loaded; ``speedup`` and
        ``speedup_kind`` (text, or None before the run finished) are read
        from it by the database (works on SQLite and PostgreSQL)."""
        from django.db.models.fields.json import KT

        return self.defer("report").annotate(
            speedup=KT("report__plan__speedup"), speedup_kind=KT("report__plan__cost_kind")
        )


class Run(models.Model):
    class State(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        FINISHED = "finished"
        FAILED = "failed"
        CANCELLED = "cancelled"

    DTYPES = [(name, name) for name in lego_spec.DTYPE_NAMES]
    DEVICES = [(name, name) for name in lego_spec.DEVICES]
    ACTIVE_STATES = (State.QUEUED, State.RUNNING)
    ENDED_STATES = (State.FINISHED, State.FAILED, State.CANCELLED)

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="runs")
    original_filename = models.CharField(max_length=255)
    upload = models.FileField(upload_to=upload_path, max_length=500)
    overrides = models.JSONField(default=dict, blank=True)
    # the overrides' names in the order they were typed: PostgreSQL's jsonb
    # stores an object's keys in its own order (SQLite keeps them), so
    # pages and the API show ``override_items``, never ``overrides.items()``
    override_order = models.JSONField(default=list, blank=True)
    dtype = models.CharField(max_length=8, choices=DTYPES, default="fp32")
    device = models.CharField(max_length=8, choices=DEVICES, default="cpu")
    # who writes kernels (lego_core.config.AGENT_CHOICES); an LLM's endpoint comes from the server's LEGO_LLM_* settings
    agent = models.CharField(max_length=16, choices=[("template", "template (offline)"), ("llm", "LLM"), ("both", "both")], default="template")
    state = models.CharField(max_length=16, choices=State.choices, default=State.QUEUED, db_index=True)
    error_message = models.TextField(blank=True)
    error_line = models.PositiveIntegerField(null=True, blank=True)
    report = models.JSONField(null=True, blank=True)
    # relative to MEDIA_ROOT; set when the run starts
    output_dir = models.CharField(max_length=500, blank=True)
    # the Celery worker that took the run, so a restarted worker can fail the
    # runs it left behind instead of leaving them "running" forever
    worker = models.CharField(max_length=255, blank=True)
    # the id of the run-queue message whose delivery claimed the run: any
    # message claims the next run in the fair order (``queue.fair_order``),
    # not necessarily its own, so a cancel terminates this task and a
    # redelivery of it finds the run it had started (``execution.claim``)
    task_id = models.CharField(max_length=255, blank=True, default="")
    # written every few seconds by the task while the run is going
    # (``heartbeat.py``); a running run whose heartbeat stopped is failed by
    # the reaper (``lifecycle.reap_stuck_runs``)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    # the read-only share link's secret (secrets.token_urlsafe(32), 256 bits);
    # empty when the run is not shared; revoking clears it for good
    share_token = models.CharField(max_length=64, blank=True, default="", db_index=True)
    # when the run's task message was last sent to the run queue: a queued
    # run whose message a broker restart lost is sent again by the reaper
    # (``tasks.resend_lost_runs``) once this is LEGO_RESEND_QUEUED_S old
    sent_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    objects = RunQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.original_filename} ({self.state})"

    @property
    def override_items(self) -> list[tuple[str, Any]]:
        """``[(name, value)]`` in the order typed (``override_order``); a
        run saved without that order (before it was kept) lists its
        overrides sorted by name, the same on every database."""
        overrides = self.overrides or {}
        names = [name for name in dict.fromkeys(self.override_order or []) if name in overrides]
        names += sorted(name for name in overrides if name not in names)
        return [(name, overrides[name]) for name in names]

    @property
    def ordered_overrides(self) -> dict[str, Any]:
        """``overrides`` as a dict in the order of ``override_items``."""
        return dict(self.override_items)

    @property
    def failure_reason(self) -> str:
        """The error message's first non-empty line (the runs list's one line)."""
        return next((line.strip() for line in (self.error_message or "").splitlines() if line.strip()), "")

    @property
    def is_active(self) -> bool:
        return self.state in self.ACTIVE_STATES

    # the optimizer's last event (``lifecycle.end_run`` writes run_failed too)
    END_EVENT_TYPES = ("run_finished", "run_failed")

    def log_has_ended(self) -> bool:
        """Whether the run's event log already ends with ``run_finished`` or
        ``run_failed``.  The log runs ahead of ``state``: lego_core's end
        event is stored, then the worker writes report.html and saves the
        result (seconds), and only then is the run saved as ended;
        meanwhile the run is over but ``state`` still says ``running``."""
        last = RunEvent.objects.filter(run_id=self.pk).order_by("-seq").values_list("type", flat=True).first()
        return last in self.END_EVENT_TYPES

    @property
    def how_ended(self) -> str:
        """What a refused cancel says: the ended state, or, for a run whose
        log ended while it is still being saved, that."""
        return self.state if not self.is_active else "the optimizer is done and its result is being saved"

    def create_share_token(self) -> str:
        """Give the run a new unguessable share token (replacing any old one)."""
        self.share_token = secrets.token_urlsafe(32)
        self.save(update_fields=["share_token"])
        return self.share_token

    def revoke_share_token(self) -> None:
        """Stop sharing: the old link and its websocket stop working."""
        self.share_token = ""
        self.save(update_fields=["share_token"])

    @property
    def output_path(self) -> Path | None:
        return Path(settings.MEDIA_ROOT) / self.output_dir if self.output_dir else None

    @property
    def elapsed_s(self) -> float:
        """Seconds from start (or upload, while queued) to the end or now."""
        start = self.started_at or self.created_at
        end = self.finished_at or timezone.now()
        return max(0.0, (end - start).total_seconds())


class RunEvent(models.Model):
    """One ``lego_core.events.Event`` as JSON (``data`` is ``event.to_dict()``)."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="events")
    seq = models.PositiveIntegerField()
    type = models.CharField(max_length=64)
    data = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run", "seq"]
        constraints = [models.UniqueConstraint(fields=["run", "seq"], name="unique_event_seq_per_run")]

    def __str__(self) -> str:
        return f"{self.run_id}#{self.seq} {self.type}"
