"""Celery worker signals: a restarted run worker fails the runs it left
running; a prefork pool process may start lego_core's child; an agents
worker loads the agents before its first call."""
import logging
import multiprocessing

from celery.signals import worker_process_init, worker_ready

log = logging.getLogger(__name__)


@worker_ready.connect
def fail_runs_left_running(sender=None, **kwargs) -> None:
    from django.conf import settings

    from webapp.runs.execution import fail_abandoned_runs

    hostname = getattr(sender, "hostname", "")
    if hostname and consumes(sender, settings.CELERY_TASK_DEFAULT_QUEUE) and (count := fail_abandoned_runs(hostname)):
        log.warning("marked %d run(s) left running by %s as failed", count, hostname)


@worker_process_init.connect
def mark_pool_process(**kwargs) -> None:
    """In a prefork pool process (where a run's task runs): let it start
    lego_core's child and let the heartbeat end it on a cancel.

    Pool processes are marked daemonic, and multiprocessing refuses to
    start a child from a daemonic process ("daemonic processes are not
    allowed to have children"); the mark only exists so that such children
    are not left behind, and lego_core's child is killed by the kernel when
    its parent dies (PR_SET_PDEATHSIG), so it is cleared here.  Billiard
    also leaves its own ``AuthenticationString`` as the process's authkey,
    which the ``spawn`` start method cannot pickle ("Pickling an
    AuthenticationString object is disallowed"; billiard's current process
    object sets it back in its own type): it is stored as multiprocessing's
    own."""
    from webapp.runs import heartbeat

    heartbeat.IN_POOL_PROCESS = True
    process = multiprocessing.current_process()
    process._config["daemon"] = False
    process._config["authkey"] = multiprocessing.process.AuthenticationString(bytes(process.authkey))


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
