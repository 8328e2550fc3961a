"""Celery tasks of the runs app.

Two queues.  ``runs.optimize`` goes to the run queue (``LEGO_CELERY_QUEUE``),
the GPU queue: one worker per GPU with concurrency 1, because verification
and timing happen in the run's own process and must never overlap.
``runs.propose`` goes to the agents queue (``LEGO_AGENT_QUEUE``): one agent
call of a run's search (``fanout.py``); agents mostly wait (on a language
model, on the network), so its workers use a thread pool with higher
concurrency (``--pool threads --concurrency N``) and need no GPU.
"""
from celery import shared_task

from webapp.runs import execution


@shared_task(bind=True, name="runs.optimize", ignore_result=True)
def optimize_run(self, run_id: str) -> None:
    """Optimize one uploaded model; a no-op when the run is not queued."""
    run = execution.claim(run_id, worker=self.request.hostname or "")
    if run is not None:
        execution.execute(run)


@shared_task(bind=True, name="runs.propose", ignore_result=False, track_started=True)
def propose(self, agent_name: str, payload: dict, feedback: list) -> dict:
    """One agent call: rebuild the sub-problem from its JSON payload, ask the
    agent, return the proposal as plain data.  The transcript starts with the
    worker that answered."""
    from lego_core.agents import make_agent
    from lego_core.agents.payload import sub_from_payload

    sub = sub_from_payload(payload)
    proposal = make_agent(agent_name).propose(sub, list(feedback))
    proposal.transcript.insert(0, ("system", f"agents worker {self.request.hostname or '?'} took sub-problem {sub.id}"))
    return proposal.to_dict()
