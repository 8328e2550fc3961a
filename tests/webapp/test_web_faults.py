"""No run ever stuck (issue 11): the reaper, the heartbeat, a lost pool
process, cancelling, queue positions and the per-user limit on runs in
flight.  Fast: the real database, a stand-in for lego_core.optimize, no
worker processes (those are in test_web_faults_worker.py)."""
import datetime
import time

import pytest
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from lego_core.events import RunFailed, RunFinished, StageStarted
from webapp.runs import consumers, execution, heartbeat, lifecycle, queue
from webapp.runs.models import Run
from webapp.runs.tasks import optimize_run, reap

pytestmark = [pytest.mark.faults, pytest.mark.django_db]


def ago(seconds: float) -> datetime.datetime:
    return timezone.now() - datetime.timedelta(seconds=seconds)


@pytest.fixture
def revokes(monkeypatch):
    """Record ``lifecycle.revoke_task`` calls instead of broadcasting them."""
    calls = []
    monkeypatch.setattr(lifecycle, "revoke_task", lambda run_id, terminate: calls.append((str(run_id), terminate)))
    return calls


@pytest.fixture
def fake_optimize(monkeypatch):
    def install(behaviour):
        calls = []

        def fake(spec, out_dir, config=None, sink=None, run_id=None):
            calls.append(spec)
            return behaviour(sink)

        monkeypatch.setattr(execution, "optimize", fake)
        return calls

    return install


# --- the reaper ---------------------------------------------------------------


def test_the_reaper_fails_a_run_whose_heartbeat_stopped_with_the_reason_as_an_event(make_run, settings):
    settings.LEGO_HEARTBEAT_TIMEOUT_S = 45
    stuck = make_run(state="running", worker="w@h", started_at=ago(600), heartbeat_at=ago(46))
    execution.EventRecorder(stuck)(StageStarted(stage="search"))  # seq 1, from the run before it stopped
    never_beat = make_run(state="running", started_at=ago(50))  # died before its first heartbeat
    alive = make_run(state="running", started_at=ago(600), heartbeat_at=ago(5))
    young = make_run(state="running", started_at=ago(3))
    waiting = make_run(state="queued")

    assert reap() == 2  # the Celery beat task

    for run in (stuck, never_beat, alive, young, waiting):
        run.refresh_from_db()
    assert (stuck.state, never_beat.state) == ("failed", "failed")
    assert (alive.state, young.state, waiting.state) == ("running", "running", "queued")
    assert "stopped answering (no heartbeat for more than 45 s)" in stuck.error_message
    assert stuck.finished_at is not None
    events = list(stuck.events.values_list("seq", "type"))
    assert events == [(1, "stage_started"), (2, "run_failed")]
    last = stuck.events.get(seq=2).data
    assert last["error_type"] == "WorkerLost" and last["message"] == stuck.error_message
    # the websocket ends the stream (the page stops saying "live") and the API shows why
    batch = consumers.read_batch(stuck.pk, 2)
    assert batch.state == "failed" and batch.state in consumers.ENDED_STATES
    assert reap() == 0  # nothing twice


def test_the_reaper_spares_a_run_whose_heartbeat_came_back_since_it_looked(make_run, settings):
    settings.LEGO_HEARTBEAT_TIMEOUT_S = 45
    run = make_run(state="running", started_at=ago(600), heartbeat_at=ago(60))
    runs, cutoff = lifecycle.stale_runs()
    assert list(runs) == [run]
    Run.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now())  # a beat between the query and the lock
    assert not lifecycle.end_run(run.pk, "failed", "x", "WorkerLost", only_from=("running",), stale_before=cutoff)
    run.refresh_from_db()
    assert run.state == "running" and not run.events.exists()


def test_a_reaped_run_shows_its_reason_on_the_page_and_in_the_api(user_client, api, make_run):
    run = make_run(state="running", started_at=ago(600), heartbeat_at=ago(600))
    lifecycle.reap_stuck_runs()
    page = user_client.get(reverse("runs:detail", args=[run.id])).content.decode()
    assert 'id="run-error"' in page and "stopped answering" in page
    assert '"active": false' in page  # the live JSON: the page does not follow it as live
    body = api.get(reverse("api:run", args=[run.id])).json()
    assert (body["state"], body["active"]) == ("failed", False)
    assert "stopped answering" in body["error_message"] and body["activity"].startswith("failed: The worker")


# --- the heartbeat --------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_the_heartbeat_beats_while_running_and_stops_the_task_once_cancelled(make_run, revokes):
    run = make_run(state="running", started_at=ago(100), heartbeat_at=ago(100))
    stopped = []
    with heartbeat.Heartbeat(run.pk, 0.05, on_stop=lambda: stopped.append(time.monotonic())) as beat:
        deadline = time.monotonic() + 10
        while beat.beats < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        run.refresh_from_db()
        assert beat.beats >= 2 and (timezone.now() - run.heartbeat_at).total_seconds() < 5
        cancelled_at = time.monotonic()
        assert lifecycle.cancel_run(run)
        while not stopped and time.monotonic() < deadline:
            time.sleep(0.02)
    assert stopped and stopped[0] - cancelled_at < 2
    assert beat.stopped == "cancelled"
    assert revokes == [(str(run.pk), True)]


def test_stopping_a_pool_process_never_kills_a_process_that_is_not_one(monkeypatch):
    killed = []
    monkeypatch.setattr(heartbeat.os, "kill", lambda pid, sig: killed.append((pid, sig)))
    monkeypatch.setattr(heartbeat, "IN_POOL_PROCESS", False)
    heartbeat.stop_pool_process()
    assert killed == []
    monkeypatch.setattr(heartbeat, "IN_POOL_PROCESS", True)
    heartbeat.stop_pool_process()
    assert killed == [(heartbeat.os.getpid(), heartbeat.signal.SIGTERM)]


# --- a pool process that died: the message comes back -----------------------------


def test_the_redelivered_task_of_a_run_whose_pool_process_died_fails_it_at_once(make_run):
    run = make_run(state="running", worker="gpu0@h", started_at=ago(20), heartbeat_at=ago(2))
    assert execution.claim(str(run.id), worker="gpu0@h") is None
    run.refresh_from_db()
    assert run.state == "failed" and run.error_message == execution.PROCESS_LOST_MESSAGE
    assert run.events.get().data["error_type"] == "WorkerLost"


def test_a_run_still_running_on_another_worker_is_left_to_its_heartbeat(make_run):
    run = make_run(state="running", worker="gpu1@h", started_at=ago(20), heartbeat_at=ago(2))
    assert execution.claim(str(run.id), worker="gpu0@h") is None
    run.refresh_from_db()
    assert run.state == "running" and not run.events.exists()


def test_the_run_task_acknowledges_late_and_is_requeued_when_its_process_dies(settings):
    assert optimize_run.acks_late and optimize_run.reject_on_worker_lost
    assert optimize_run.soft_time_limit == settings.LEGO_RUN_SOFT_LIMIT_S > settings.LEGO_RUN_TIMEOUT_S
    assert optimize_run.time_limit > optimize_run.soft_time_limit
    assert settings.CELERY_WORKER_POOL == "prefork" and settings.CELERY_WORKER_CONCURRENCY == 1
    assert settings.CELERY_TASK_ROUTES["runs.reap"]["queue"] == settings.LEGO_AGENT_QUEUE
    assert settings.CELERY_BEAT_SCHEDULE["reap-stuck-runs"]["task"] == "runs.reap"
    assert settings.CELERY_BROKER_TRANSPORT_OPTIONS["visibility_timeout"] > settings.LEGO_RUN_HARD_LIMIT_S


def test_the_soft_time_limit_fails_the_run_with_a_message(make_run, fake_optimize):
    from celery.exceptions import SoftTimeLimitExceeded

    def behaviour(sink):
        raise SoftTimeLimitExceeded()

    fake_optimize(behaviour)
    run = make_run()
    optimize_run(str(run.id))
    run.refresh_from_db()
    assert run.state == "failed" and "time limit" in run.error_message
    assert run.events.get().data["error_type"] == "SoftTimeLimitExceeded"


# --- cancel ---------------------------------------------------------------------


def test_cancelling_a_queued_run_through_the_api_means_it_never_starts(api, make_run, revokes, fake_optimize):
    calls = fake_optimize(lambda sink: pytest.fail("a cancelled run must not start"))
    run = make_run(state="queued")
    response = api.post(reverse("api:cancel", args=[run.id]))
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["state"], body["active"], body["error_message"]) == ("cancelled", False, lifecycle.CANCELLED_MESSAGE)
    assert body["activity"] == "cancelled" and body["queue_position"] is None
    assert revokes == [(str(run.id), False)]
    optimize_run(str(run.id))  # a worker that got the message anyway
    run.refresh_from_db()
    assert run.state == "cancelled" and calls == []
    assert [(e.type, e.data["error_type"]) for e in run.events.all()] == [("run_failed", "RunCancelled")]


def test_cancelling_a_running_run_terminates_its_task_and_the_task_cannot_finish_it(
    api, make_run, revokes, fake_optimize, sample_report
):
    run = make_run()

    def behaviour(sink):
        sink(StageStarted(stage="search"))
        assert api.post(reverse("api:cancel", args=[run.id])).status_code == 200  # the owner, mid-run
        sink(RunFinished(out_dir="x", summary={}))  # the optimizer had not noticed yet
        pytest.fail("the event after the cancel was stored")

    fake_optimize(behaviour)
    optimize_run(str(run.id))
    run.refresh_from_db()
    assert run.state == "cancelled" and run.report is None
    assert revokes == [(str(run.id), True)]
    assert list(run.events.values_list("seq", "type")) == [(1, "stage_started"), (2, "run_failed")]
    # a finished run cannot be cancelled; another user's run is not there
    again = api.post(reverse("api:cancel", args=[run.id]))
    assert again.status_code == 409 and "already ended (cancelled)" in again.json()["detail"]


def test_a_run_that_finishes_after_a_cancel_stays_cancelled(make_run, revokes, sample_report):
    run = make_run(state="running", started_at=timezone.now())
    assert lifecycle.cancel_run(run)
    run.refresh_from_db()
    execution.finish(run, sample_report)
    run.refresh_from_db()
    assert run.state == "cancelled" and run.report is None


def test_cancel_refuses_other_users_and_get(api, make_run, other_user, revokes):
    theirs = make_run(owner=other_user)
    assert api.post(reverse("api:cancel", args=[theirs.id])).status_code == 404
    assert api.get(reverse("api:cancel", args=[theirs.id])).status_code == 405
    theirs.refresh_from_db()
    assert theirs.state == "queued" and revokes == []


def test_cancelling_from_the_run_page(user_client, make_run, revokes, other_user):
    run = make_run(state="running", started_at=timezone.now())
    page = user_client.get(reverse("runs:detail", args=[run.id])).content.decode()
    assert 'id="run-cancel"' in page and reverse("runs:cancel", args=[run.id]) in page
    assert user_client.get(reverse("runs:cancel", args=[run.id])).status_code == 405
    response = user_client.post(reverse("runs:cancel", args=[run.id]), follow=True)
    page = response.content.decode()
    assert response.redirect_chain[-1][0] == reverse("runs:detail", args=[run.id])
    assert "The run was cancelled." in page and "The run was cancelled</h2>" in page
    assert 'id="run-state">cancelled<' in page and 'id="run-cancel"' not in page
    assert revokes == [(str(run.id), True)]
    again = user_client.post(reverse("runs:cancel", args=[run.id]), follow=True).content.decode()
    assert "already ended (cancelled)" in again
    theirs = make_run(owner=other_user)
    assert user_client.post(reverse("runs:cancel", args=[theirs.id])).status_code == 404
    shared = user_client.get(reverse("runs:shared", args=[theirs.create_share_token()])).content.decode()
    assert 'id="run-cancel"' not in shared  # no controls on a shared page


@pytest.mark.parametrize("end", [RunFinished(out_dir="out", summary={}),
                                 RunFailed(error_type="ProblemError", message="model.py:6: syntax error.", line=6)],
                         ids=["finished", "failed"])
def test_a_run_whose_log_ended_offers_no_cancel_while_the_worker_saves_it(user_client, api, make_run, revokes,
                                                                          sample_report, end):
    """lego_core's end event is stored seconds before the run is saved as
    ended (report.html is written first): a page rendered meanwhile shows no
    Cancel button, and a cancel sent meanwhile (a page rendered earlier, the
    API) is refused rather than turning the run's result or error into
    "cancelled"."""
    run = make_run(state="running", started_at=timezone.now())
    recorder = execution.EventRecorder(run)
    recorder(StageStarted(stage="search"))
    page = user_client.get(reverse("runs:detail", args=[run.id])).content.decode()
    assert 'id="run-cancel"' in page  # still going
    recorder(end)  # the optimizer is done; the state is still "running"
    assert Run.objects.get(pk=run.pk).state == "running"
    page = user_client.get(reverse("runs:detail", args=[run.id])).content.decode()
    assert 'id="run-state">running<' in page and 'id="run-cancel"' not in page and "run-cancel-form" not in page
    said = user_client.post(reverse("runs:cancel", args=[run.id]), follow=True).content.decode()
    assert "already ended" in said
    assert api.post(reverse("api:cancel", args=[run.id])).status_code == 409
    assert revokes == [] and Run.objects.get(pk=run.pk).state == "running"
    if isinstance(end, RunFinished):
        execution.finish(run, sample_report)  # the worker's save still lands
        assert Run.objects.get(pk=run.pk).state == "finished"


def test_cancelling_a_queued_run_from_its_page(user_client, make_run, revokes, fake_optimize):
    calls = fake_optimize(lambda sink: pytest.fail("a cancelled run must not start"))
    run = make_run(state="queued")
    page = user_client.post(reverse("runs:cancel", args=[run.id]), follow=True).content.decode()
    assert "The run was cancelled." in page and 'id="run-state">cancelled<' in page
    assert "Cancelled by its owner." in page and 'id="run-queue-position"' in page and "in the queue" not in page
    assert revokes == [(str(run.id), False)]
    optimize_run(str(run.id))
    assert calls == [] and Run.objects.get(pk=run.pk).state == "cancelled"
    listing = user_client.get(reverse("runs:list"), {"state": "cancelled"}).content.decode()
    assert 'class="state state-cancelled">cancelled<' in listing


# --- the queue ------------------------------------------------------------------------


def test_each_waiting_run_shows_its_place_in_the_queue(user_client, api, make_run, other_user):
    running = make_run(state="running", started_at=timezone.now())
    first = make_run(owner=other_user)
    second = make_run()
    third = make_run(owner=other_user)
    assert [queue.queue_position(r) for r in (running, first, second, third)] == [None, 1, 2, 3]
    assert queue.queue_positions() == {first.pk: 1, second.pk: 2, third.pk: 3}

    body = api.get(reverse("api:run", args=[second.id])).json()
    assert body["queue_position"] == 2 and body["activity"] == "waiting for a worker: 2nd in the queue (1 run ahead)"
    rows = {r["id"]: r["queue_position"] for r in api.get(reverse("api:runs")).json()["runs"]}
    assert rows == {str(running.id): None, str(second.id): 2}
    page = user_client.get(reverse("runs:detail", args=[second.id])).content.decode()
    assert 'data-position="2"' in page and "2nd in the queue (1 run ahead)" in page
    listing = user_client.get(reverse("runs:list")).content.decode()
    assert "2nd in the queue (1 run ahead)" in listing
    # the websocket's state message carries it, and it moves as the queue does
    assert consumers.read_batch(second.pk, 0).queue_position == 2
    Run.objects.filter(pk=first.pk).update(state="running", started_at=timezone.now())
    assert consumers.read_batch(second.pk, 0).queue_position == 1  # alice's turn: her last run started before bob's
    assert api.get(reverse("api:run", args=[second.id])).json()["activity"] == "waiting for a worker: next in the queue"


@pytest.mark.parametrize("place, text", [(1, "next in the queue"), (2, "2nd in the queue (1 run ahead)"),
                                         (3, "3rd in the queue (2 runs ahead)"), (11, "11th in the queue (10 runs ahead)"),
                                         (22, "22nd in the queue (21 runs ahead)"), (None, "")])
def test_queue_places_read_as_english(place, text):
    assert queue.describe_position(place) == text


# --- one user cannot starve another --------------------------------------------------


def upload_form(client, good_model):
    from django.core.files.uploadedfile import SimpleUploadedFile

    return client.post(reverse("runs:new"), {"upload": SimpleUploadedFile("m.py", good_model), "overrides": "",
                                             "dtype": "fp32", "device": "cpu"})


def test_a_user_with_runs_in_flight_at_the_limit_is_refused_with_a_message(
    user_client, api, user, other_user, make_run, good_model, settings, monkeypatch, media_root
):
    from django.core.files.uploadedfile import SimpleUploadedFile

    monkeypatch.setattr("webapp.runs.tasks.queue_run", lambda run_id: None)
    settings.LEGO_MAX_RUNS_IN_FLIGHT = 2
    make_run(state="running", started_at=timezone.now())
    make_run(state="queued")
    make_run(state="finished")  # ended runs do not count
    files_before = sorted(p for p in media_root.rglob("*") if p.is_file())

    response = upload_form(user_client, good_model)
    assert response.status_code == 200
    page = response.content.decode()
    assert "You already have 2 runs queued or running, the most one user may have at once." in page
    assert "cancel one on its page" in page
    response = api.post(reverse("api:runs"), {"model": SimpleUploadedFile("m.py", good_model)}, format="multipart")
    assert response.status_code == 429
    assert "You already have 2 runs queued or running" in response.json()["errors"]["non_field_errors"][0]
    assert Run.objects.filter(owner=user).count() == 3
    assert sorted(p for p in media_root.rglob("*") if p.is_file()) == files_before  # no file left behind

    # another user is not held up by this one's runs
    other = APIClient()
    other.force_authenticate(other_user)
    assert other.post(reverse("api:runs"), {"model": SimpleUploadedFile("m.py", good_model)},
                      format="multipart").status_code == 201

    # once one of the user's runs ended, they may upload again
    Run.objects.filter(owner=user, state="running").update(state="finished")
    response = upload_form(user_client, good_model)
    assert response.status_code == 302
    assert Run.objects.filter(owner=user, state="queued").count() == 2


@pytest.mark.django_db(transaction=True)
def test_a_run_the_broker_does_not_take_is_failed_with_the_reason_not_left_queued(api, user_client, good_model, monkeypatch,
                                                                                    settings):
    """An upload while the broker is down (kombu's OperationalError after
    its retries; test_web_faults_broker.py does it with a real broker): the
    run is failed at once saying so, on the API and the page, and does not
    count against the user's runs in flight."""
    from django.core.files.uploadedfile import SimpleUploadedFile
    from kombu.exceptions import OperationalError

    from webapp.runs import tasks

    def refused(run_id):
        raise OperationalError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")

    monkeypatch.setattr(tasks, "queue_run", refused)
    for _ in range(settings.LEGO_MAX_RUNS_IN_FLIGHT):
        response = api.post(reverse("api:runs"), {"model": SimpleUploadedFile("m.py", good_model)}, format="multipart")
        assert response.status_code == 201, response.content
        assert response.json()["state"] == "failed" and response.json()["error_message"] == tasks.QUEUE_UNREACHABLE_MESSAGE
    page = user_client.post(reverse("runs:new"), {"upload": SimpleUploadedFile("m.py", good_model), "overrides": "",
                                                  "dtype": "fp32", "device": "cpu"}, follow=True)
    assert "The run queue could not be reached" in page.content.decode()
    runs = list(Run.objects.all())
    assert len(runs) == settings.LEGO_MAX_RUNS_IN_FLIGHT + 1 and {r.state for r in runs} == {"failed"}
    assert [e.data["error_type"] for r in runs for e in r.events.all()] == [tasks.QUEUE_UNREACHABLE_TYPE] * len(runs)


def test_a_queued_run_whose_message_was_lost_is_sent_again_by_the_reaper(make_run, settings, monkeypatch):
    """A Redis broker restarted without its data (test_web_faults_broker.py
    saw it) loses the message of a queued run: with the worker idle the run
    would wait forever.  The reaper sends the task again once the run has
    been queued LEGO_RESEND_QUEUED_S since its last send, once per interval;
    running and ended runs, and runs sent recently, are left alone, and a
    broker that still refuses is tried at the next reap."""
    from webapp.runs import tasks

    settings.LEGO_RESEND_QUEUED_S = 300
    now = timezone.now()
    lost = make_run(state=Run.State.QUEUED, sent_at=now - datetime.timedelta(seconds=301))
    recent = make_run(state=Run.State.QUEUED, sent_at=now - datetime.timedelta(seconds=30))
    running = make_run(state=Run.State.RUNNING, sent_at=now - datetime.timedelta(seconds=900), started_at=now)
    cancelled = make_run(state=Run.State.CANCELLED, sent_at=now - datetime.timedelta(seconds=900))
    sent = []
    monkeypatch.setattr(tasks.optimize_run, "apply_async", lambda args, task_id: sent.append(task_id))
    assert tasks.resend_lost_runs() == [lost.pk] and sent == [str(lost.pk)]
    lost.refresh_from_db()
    assert lost.sent_at >= now and lost.state == Run.State.QUEUED
    assert tasks.resend_lost_runs() == [] and len(sent) == 1  # not again within the interval
    for run in (recent, running, cancelled):
        run.refresh_from_db()
    assert recent.sent_at < now and running.state == Run.State.RUNNING and cancelled.state == Run.State.CANCELLED

    def refused(args, task_id):
        raise ConnectionError("broker still down")

    Run.objects.filter(pk=lost.pk).update(sent_at=now - datetime.timedelta(seconds=600))
    monkeypatch.setattr(tasks.optimize_run, "apply_async", refused)
    assert tasks.resend_lost_runs() == []
    lost.refresh_from_db()
    assert lost.sent_at < now - datetime.timedelta(seconds=500)  # tried again at the next reap
