"""Celery worker signals: a restarted run worker fails the runs it left
running; an agents worker loads the agents before its first call."""
import logging

from celery.signals import worker_ready

log = logging.getLogger(__name__)


@worker_ready.connect
def fail_runs_left_running(sender=None, **kwargs) -> None:
    from django.conf import settings

    from webapp.runs.execution import fail_abandoned_runs

    hostname = getattr(sender, "hostname", "")
    if hostname and consumes(sender, settings.CELERY_TASK_DEFAULT_QUEUE) and (count := fail_abandoned_runs(hostname)):
        log.warning("marked %d run(s) left running by %s as failed", count, hostname)


@worker_ready.connect
def load_agents(sender=None, **kwargs) -> None:
    """Import torch and the agents now rather than in the first agent call."""
    from django.conf import settings

    if consumes(sender, settings.LEGO_AGENT_QUEUE):
        import lego_core.agents.payload  # noqa: F401
        import lego_core.agents.template.agent  # noqa: F401


def consumes(consumer, queue_name: str) -> bool:
    """Whether a worker's consumer takes tasks from ``queue_name`` (True when
    it cannot tell).  An agents worker holds no runs, so its restart must not
    fail the runs of a run worker that has the same name."""
    queues = getattr(getattr(consumer, "task_consumer", None), "queues", None)
    if queues is None:
        return True
    return queue_name in {q.name for q in queues}
