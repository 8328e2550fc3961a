"""Celery worker signals: a restarted worker fails the runs it left running."""
import logging

from celery.signals import worker_ready

log = logging.getLogger(__name__)


@worker_ready.connect
def fail_runs_left_running(sender=None, **kwargs) -> None:
    from webapp.runs.execution import fail_abandoned_runs

    hostname = getattr(sender, "hostname", "")
    if hostname and (count := fail_abandoned_runs(hostname)):
        log.warning("marked %d run(s) left running by %s as failed", count, hostname)
