"""The run task's bookkeeping with a stand-in for lego_core.optimize: events
stored in order, every failure path ends the run, nothing stays running.
(The real optimizer and a real worker are in test_web_worker.py.)"""
import json
import os

import pytest

from lego_core import ChildCrashed, ProblemError
from lego_core.events import Progress, RunFailed, RunFinished, StageStarted
from webapp.runs import execution
from webapp.runs.fanout import AgentWorkerMissing, CeleryAgents
from webapp.runs.models import Run
from webapp.runs.signals import consumes
from webapp.runs.tasks import optimize_run, propose

pytestmark = pytest.mark.django_db


@pytest.fixture
def fake_optimize(monkeypatch):
    """Install ``behaviour(spec, out_dir, sink)`` as lego_core.optimize."""
    calls = []

    def install(behaviour):
        def fake(spec, out_dir, config=None, sink=None, run_id=None):
            calls.append((spec, out_dir, config))
            return behaviour(spec, out_dir, sink)

        monkeypatch.setattr(execution, "optimize", fake)
        return calls

    return install


def test_a_successful_run_records_events_in_order_and_its_report(make_run, fake_optimize, sample_report):
    def behaviour(spec, out_dir, sink):
        sink(StageStarted(stage="capture"))
        sink(Progress(stage="search", done=1, total=2))
        sink(RunFinished(out_dir=str(out_dir), summary={"speedup": float("inf")}))
        return {**sample_report, "plan": {**sample_report["plan"], "speedup": float("nan")}}

    run = make_run(overrides={"rows": 2}, dtype="fp16")
    calls = fake_optimize(behaviour)
    optimize_run(str(run.id))

    run.refresh_from_db()
    assert run.state == "finished" and run.started_at and run.finished_at
    assert run.report["plan"]["speedup"] == "nan"  # JSON-safe
    assert [(e.seq, e.type) for e in run.events.all()] == [(1, "stage_started"), (2, "progress"), (3, "run_finished")]
    assert run.events.get(seq=3).data["summary"] == {"speedup": "inf"}
    spec, out_dir, config = calls[0]
    assert (spec.path, spec.overrides, spec.dtype, spec.device) == (run.upload.path, {"rows": 2}, "fp16", "cpu")
    assert str(out_dir) == str(run.output_path) and run.output_dir == f"runs/{run.id}/output"
    assert config.timeout_s > 0


def test_a_problem_error_fails_the_run_with_message_and_line(make_run, fake_optimize):
    def behaviour(spec, out_dir, sink):
        exc = ProblemError("invalid syntax", spec.path, 6, hint="fix the line")
        sink(RunFailed(error_type="ProblemError", message=str(exc), path=exc.path, line=exc.line))
        raise exc

    run = make_run()
    fake_optimize(behaviour)
    optimize_run(str(run.id))
    run.refresh_from_db()
    assert run.state == "failed"
    assert run.error_line == 6
    assert run.error_message == "model.py:6: invalid syntax. Fix: fix the line"
    assert list(run.events.values_list("type", flat=True)) == ["run_failed"]  # not recorded twice


def test_a_bad_spec_fails_before_the_optimizer_and_is_still_logged(make_run, fake_optimize):
    calls = fake_optimize(lambda *args: pytest.fail("optimize must not be called"))
    run = make_run(dtype="fp8")  # bypassing the form
    optimize_run(str(run.id))
    run.refresh_from_db()
    assert run.state == "failed" and "fp8" in run.error_message
    assert run.events.get().data["error_type"] == "ProblemError"
    assert calls == []


@pytest.mark.parametrize(
    "exc, message",
    [
        (ChildCrashed("the optimizer process was killed by SIGKILL"), "the optimizer process was killed by SIGKILL"),
        (RuntimeError("search exploded"), "RuntimeError: search exploded"),
    ],
)
def test_crashes_and_other_errors_fail_the_run(make_run, fake_optimize, exc, message):
    def behaviour(spec, out_dir, sink):
        raise exc

    run = make_run()
    fake_optimize(behaviour)
    optimize_run(str(run.id))
    run.refresh_from_db()
    assert (run.state, run.error_message, run.error_line) == ("failed", message, None)
    assert run.events.get().type == "run_failed"


def test_an_interrupted_run_is_not_left_running(make_run, fake_optimize):
    def behaviour(spec, out_dir, sink):
        raise KeyboardInterrupt  # e.g. the worker is shut down mid-run

    run = make_run()
    fake_optimize(behaviour)
    with pytest.raises(KeyboardInterrupt):
        optimize_run(str(run.id))
    run.refresh_from_db()
    assert run.state == "failed" and run.error_message == execution.WORKER_LOST_MESSAGE


def test_only_queued_runs_are_claimed(make_run, fake_optimize):
    calls = fake_optimize(lambda *args: pytest.fail("optimize must not be called"))
    run = make_run(state="finished")
    optimize_run(str(run.id))
    optimize_run("00000000-0000-0000-0000-000000000000")
    assert calls == []
    assert Run.objects.get(pk=run.pk).state == "finished"


def test_a_restarted_worker_fails_the_runs_it_left_running(make_run):
    mine = make_run(state="running", worker="celery@a")
    other = make_run(state="running", worker="celery@b")
    assert execution.fail_abandoned_runs("celery@a") == 1
    mine.refresh_from_db()
    other.refresh_from_db()
    assert (mine.state, other.state) == ("failed", "running")
    assert mine.error_message == execution.WORKER_LOST_MESSAGE


def test_event_numbers_continue_after_existing_events(make_run):
    run = make_run(state="running")
    first = execution.EventRecorder(run)
    first(StageStarted(stage="load"))
    second = execution.EventRecorder(run)
    second(StageStarted(stage="capture"))
    assert list(run.events.values_list("seq", flat=True)) == [1, 2]


# --- agent fan-out: the run's config, a missing agents worker, the propose task


def test_runs_fan_agents_out_to_celery_unless_turned_off(make_run, fake_optimize, settings):
    calls = fake_optimize(lambda spec, out_dir, sink: {})
    fanned_run = make_run()
    optimize_run(str(fanned_run.id))
    settings.LEGO_AGENT_FANOUT = False
    settings.LEGO_AGENTS = 2
    optimize_run(str(make_run().id))
    (_, _, fanned), (_, _, local) = calls
    assert isinstance(fanned.agent_pool, CeleryAgents) and fanned.agents == 4  # an object, not a name the child imports
    assert fanned.agent_pool.calls.run_id == str(fanned_run.id)
    assert (local.agent_pool, local.agents) == (None, 2)


def test_the_runs_agents_are_open_only_while_the_run_lasts(make_run, fake_optimize):
    calls = fake_optimize(lambda spec, out_dir, sink: {})
    optimize_run(str(make_run().id))
    (_, _, config), = calls
    late = config.agent_pool.calls.call("template", {}, [])  # after the run: fails at once, nothing is sent
    with pytest.raises(RuntimeError, match="the agent pool is closed"):
        late.result(timeout=1)


def test_a_missing_agents_worker_stops_the_run_with_its_message(make_run, fake_optimize, monkeypatch):
    message = "no agents worker took an agent task from the Celery queue 'q' within 1 s"

    class Agents:  # a CeleryAgents whose CeleryCalls found no agents worker
        missing = AgentWorkerMissing(message)

        def __init__(self, **run):  # run_id, on_event, max_tokens: the run's, as execution passes them
            assert {"run_id", "on_event", "max_tokens"} <= set(run), run

        def __call__(self, agent_name, size):  # an AgentPoolFactory
            raise AssertionError("the fake optimize makes no pool")

        def __enter__(self):
            return self

        def __exit__(self, *exc_info):
            return None

    monkeypatch.setattr(execution, "CeleryAgents", Agents)

    def behaviour(spec, out_dir, sink):
        try:
            sink(StageStarted(stage="search"))  # the first event after the agents were found missing
        except Exception as exc:  # what lego_core.optimize does with an exception
            sink(RunFailed(error_type=type(exc).__name__, message=str(exc)))
            raise
        pytest.fail("the event went through")

    run = make_run()
    fake_optimize(behaviour)
    optimize_run(str(run.id))
    run.refresh_from_db()
    assert (run.state, run.error_message) == ("failed", message)
    assert [(e.type, e.data["error_type"]) for e in run.events.all()] == [("run_failed", "AgentWorkerMissing")]


def test_a_restarted_agents_worker_leaves_the_runs_alone(settings):
    class Queue:
        def __init__(self, name):
            self.name = name

    class Consumer:
        def __init__(self, *queues):
            self.task_consumer = type("TaskConsumer", (), {"queues": [Queue(q) for q in queues]})()

    runs = settings.CELERY_TASK_DEFAULT_QUEUE
    assert consumes(Consumer(runs), runs)
    assert not consumes(Consumer(settings.LEGO_AGENT_QUEUE), runs)
    assert consumes(object(), runs)  # cannot tell: as before


def test_the_propose_task_rebuilds_the_sub_problem_and_asks_the_agent(shared_models, tiny_overrides):
    from lego_core.agents.payload import sub_to_payload
    from lego_core.agents.template.agent import TemplateAgent
    from lego_core.load.capture import capture_graph
    from lego_core.load.problem import ProblemSpec, load_problem
    from lego_core.tree.fusion_tree import build_tree

    spec = ProblemSpec(str(shared_models / "scores_chain.py"), tiny_overrides("scores_chain.py"))
    agent = TemplateAgent()
    sub = next(leaf.sub for leaf in build_tree(capture_graph(load_problem(spec))).leaves() if agent.can_attempt(leaf.sub))
    answer = propose("template", json.loads(json.dumps(sub_to_payload(sub))), [])  # called in this process
    local = agent.propose(sub, [])
    assert answer["source"] == local.source and answer["source"]
    assert answer["transcript"][0][1].startswith("agents worker") and [tuple(m) for m in answer["transcript"][1:]] == local.transcript
    with pytest.raises(ValueError, match="sub-problem payload"):
        propose("template", {"id": "sp1"}, [])


def test_each_owner_runs_on_a_kernel_cache_of_their_own(make_run, fake_optimize, sample_report, other_user, settings, tmp_path):
    """A jailed run chooses the cache entries its child forwards, so one
    user's upload must not place a kernel, or a "no kernel" answer, in
    another user's runs and downloads: each owner gets their own folder
    under LEGO_CACHE_DIR."""
    settings.LEGO_CACHE_DIR = str(tmp_path / "kernel-cache")
    calls = fake_optimize(lambda spec, out_dir, sink: sample_report)
    mine, theirs, mine_again = make_run(), make_run(owner=other_user), make_run()
    for run in (mine, theirs, mine_again):
        Run.objects.filter(pk=run.pk).update(state=Run.State.RUNNING)
        run.refresh_from_db()
        execution.execute(run)
    folders = [call[2].cache_dir for call in calls]
    assert folders[0] == folders[2] != folders[1]
    for folder in folders:
        assert os.path.dirname(folder) == settings.LEGO_CACHE_DIR
