"""Celery tasks of the runs app."""
from celery import shared_task

from webapp.runs import execution


@shared_task(bind=True, name="runs.optimize", ignore_result=True)
def optimize_run(self, run_id: str) -> None:
    """Optimize one uploaded model; a no-op when the run is not queued."""
    run = execution.claim(run_id, worker=self.request.hostname or "")
    if run is not None:
        execution.execute(run)
