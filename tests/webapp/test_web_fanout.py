"""Agent fan-out (``webapp.runs.fanout``) against the real services: a real
agents worker (``celery worker -Q <agents queue> --pool threads``) on Redis.

First the pool on its own: from this process, and from inside lego_core's
sandboxed child, which has no network and sees nothing of the web app: its
calls go through lego_core's agent relay (a Unix socket) to the run's
``CeleryAgents`` in this process.  Then whole runs: with an agents worker beside the run worker the
agent calls are really made there (its log and the transcript say so);
without one the run fails within a bounded time with a message that names
the queue and how to start a worker.
"""
import os
import re
import time

import pytest

from lego_core.agents.template.agent import TemplateAgent
from lego_core.load.capture import capture_graph
from lego_core.load.problem import ProblemSpec, load_problem
from lego_core.runtime.sandbox import run_in_child
from lego_core.tree.fusion_tree import build_tree
from lego_core.agents.relay import AgentServer
from webapp.runs.fanout import AgentWorkerMissing, CeleryAgentPool, CeleryAgents

import fanout_targets
from test_web_worker import upload, wait_until_done

pytestmark = pytest.mark.slow

MODEL = "scores_chain.py"


@pytest.fixture
def attempted_subs(shared_models, tiny_overrides):
    """The leaves of the tiny scores_chain that the template agent attempts."""
    spec = ProblemSpec(str(shared_models / MODEL), tiny_overrides(MODEL))
    agent = TemplateAgent()
    subs = [leaf.sub for leaf in build_tree(capture_graph(load_problem(spec))).leaves() if agent.can_attempt(leaf.sub)]
    assert subs
    return subs


def propose_tasks_done(log) -> list[str]:
    """Ids of the runs.propose tasks the worker writing ``log`` finished."""
    return re.findall(r"Task runs\.propose\[([0-9a-f-]+)\] succeeded", log.read_text(errors="replace"))


# --- the pool on its own -------------------------------------------------------


def test_the_pool_gets_proposals_from_a_real_agents_worker(agents_worker, attempted_subs, wait_for):
    proc, log = agents_worker
    pool = CeleryAgentPool("template", size=2)
    try:
        futures = [pool.submit(sub, []) for sub in attempted_subs]
        unknown = CeleryAgentPool("no-such-agent", size=1)
        failing = unknown.submit(attempted_subs[0], [])
        proposals = [f.result(timeout=60) for f in futures]
        with pytest.raises(RuntimeError, match="unknown agent 'no-such-agent'"):
            failing.result(timeout=60)
        unknown.close()
    finally:
        pool.close()
    for sub, proposal in zip(attempted_subs, proposals):
        local = TemplateAgent().propose(sub, [])
        assert proposal.source == local.source and proposal.kernel_name == local.kernel_name
        role, marker = proposal.transcript[0]
        assert role == "system" and marker.startswith("agents worker agents-") and sub.id in marker
        assert proposal.transcript[1:] == local.transcript
    wait_for(lambda: len(propose_tasks_done(log)) >= len(attempted_subs), 10, "the worker's log", log)


def test_the_sandboxed_optimizer_reaches_the_agents_worker_through_the_relay(
    agents_worker, shared_models, tiny_overrides, wait_for
):
    proc, log = agents_worker
    with CeleryAgents() as agents:
        pools = {"template": agents("template", 2)}
        with AgentServer(pools, agents.timeout_s) as relay:  # what lego_core.optimize serves for the run
            assert os.environ["LEGO_AGENT_RELAY"] == relay.path
            assert float(os.environ["LEGO_AGENT_RELAY_TIMEOUT_S"]) == agents.timeout_s
            args = (str(shared_models / MODEL), tiny_overrides(MODEL))
            child = run_in_child(fanout_targets.propose_through_the_relay, args, timeout_s=120)
        pools["template"].close()
    assert "LEGO_AGENT_RELAY" not in os.environ and not os.path.exists(relay.path)
    assert child["pool"] == "RelayPool" and child["webapp_modules"] == []  # the child never imports the web app
    results = child["results"]
    assert results
    for local, remote in results:
        assert "error" not in remote, remote
        assert remote["source"] == local["source"] and remote["source"]
        assert remote["transcript"][0][1].startswith("agents worker agents-")
    wait_for(lambda: len(propose_tasks_done(log)) >= len(results), 10, "the worker's log", log)


def test_without_an_agents_worker_the_pool_fails_fast_and_says_what_to_start(settings, attempted_subs):
    settings.LEGO_AGENT_QUEUE = f"{settings.LEGO_AGENT_QUEUE}-nobody"
    settings.LEGO_AGENT_TIMEOUT_S = 1.5
    pool = CeleryAgentPool("template", size=2)
    try:
        started = time.monotonic()
        first = pool.submit(attempted_subs[0], [])
        with pytest.raises(AgentWorkerMissing) as info:
            first.result(timeout=30)
        assert 1.5 <= time.monotonic() - started < 10
        message = str(info.value)
        assert repr(settings.LEGO_AGENT_QUEUE) in message
        assert f"celery -A webapp.config worker -Q {settings.LEGO_AGENT_QUEUE} --pool threads" in message
        started = time.monotonic()
        with pytest.raises(AgentWorkerMissing):  # later calls do not wait again
            pool.submit(attempted_subs[0], []).result(timeout=30)
        assert time.monotonic() - started < 1
    finally:
        pool.close()


# --- whole runs: a run worker, with and without an agents worker ---------------


@pytest.mark.django_db(transaction=True)
def test_a_run_fans_its_agent_calls_out_to_the_agents_worker(
    client, user, start_worker, agents_worker, wait_for, shared_models, tiny_overrides
):
    _, agents_log = agents_worker
    proc, log = start_worker("worker")
    client.force_login(user)
    run = upload(client, MODEL, (shared_models / MODEL).read_bytes(), tiny_overrides(MODEL))
    status = wait_until_done(wait_for, client, run, log, 120)
    run.refresh_from_db()
    assert status["state"] == "finished", (status, run.error_message, log.read_text()[-4000:])

    transcript = [e.data["content"] for e in run.events.filter(type="transcript")]
    answered = [t for t in transcript if t.startswith("agents worker agents-")]
    assert answered, transcript  # every agent call came back from the agents worker ...
    assert not any(t.startswith("the agent failed") for t in transcript), transcript
    assert run.report["metrics"]["agent_calls"] == len(answered)
    wait_for(lambda: len(propose_tasks_done(agents_log)) >= len(answered), 10, "the agents worker's log", agents_log)
    assert "Task runs.propose[" not in log.read_text()  # ... and none ran in the run worker
    assert any(item["implementation"] == "triton" for item in run.report["subproblems"])


@pytest.mark.django_db(transaction=True)
def test_without_an_agents_worker_a_run_fails_soon_and_says_what_to_start(
    client, user, start_worker, wait_for, shared_models, tiny_overrides, settings
):
    proc, log = start_worker("worker", LEGO_AGENT_TIMEOUT_S="3")
    client.force_login(user)
    run = upload(client, MODEL, (shared_models / MODEL).read_bytes(), tiny_overrides(MODEL))
    status = wait_until_done(wait_for, client, run, log, 90)
    run.refresh_from_db()
    assert status["state"] == "failed", (status, log.read_text()[-4000:])
    queue = settings.LEGO_AGENT_QUEUE
    assert f"no agents worker took an agent task from the Celery queue {queue!r} within 3 s" in run.error_message
    assert f"celery -A webapp.config worker -Q {queue} --pool threads" in run.error_message
    failed = run.events.get(type="run_failed")
    assert failed.data["error_type"] == "AgentWorkerMissing" and failed.seq == run.events.count()
    assert not run.events.filter(type="run_finished").exists()
    assert (run.finished_at - run.started_at).total_seconds() < 60
    assert proc.poll() is None  # the worker goes on
