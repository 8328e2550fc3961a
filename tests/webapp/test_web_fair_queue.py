"""Fair scheduling (issue 28): two uploads that slept at import held the only
run worker 2 x 300 s while another user's 22 s run waited 620 s.

- Workers take runs in a fair order (``queue.fair_order``): users in turn,
  the one with the fewest runs running first, then the one whose last run
  started longest ago; a message is a worker's turn, not a ticket for its
  own run (``execution.claim``), and ``LEGO_MAX_RUNNING_PER_USER`` holds
  across workers (``queue.claim_next``: the owner's row locked, the run's
  row ``SKIP LOCKED``, a conditional update).
- Per-user limits at submit: ``LEGO_MAX_QUEUED_PER_USER`` (and
  ``LEGO_MAX_RUNS_IN_FLIGHT``), the same message on the form and the API,
  nothing queued; bad values stop the server.
- Places and expected waits on the run page and the API, from the fair
  order and recent run durations.
- Slow: a real run worker, user A's five uploads that sleep at import (a
  15 s load limit) and user B's good run, which starts after at most one of
  A's, not behind all five.
"""
from __future__ import annotations

import datetime
import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from webapp.runs import execution, queue
from webapp.runs.models import Run

REPO = Path(__file__).resolve().parents[2]
LOAD_LIMIT_S = 15  # also covers the jailed child importing torch for the good model, on 2 loaded cores
START_SLACK_S = 25  # the jailed child's start (torch) and the worker's turn, on 2 shared cores

SLEEPS_AT_IMPORT = b"""import time

time.sleep(3600)  # the audit's upload: holds the load stage until its limit

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x + 1


def get_inputs():
    return [torch.randn(2, 2)]


def get_init_inputs():
    return []
"""


def ago(seconds: float) -> datetime.datetime:
    return timezone.now() - datetime.timedelta(seconds=seconds)


def api_client(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


# --- the fair order -------------------------------------------------------------


@pytest.mark.faults
@pytest.mark.django_db
def test_another_users_run_goes_ahead_of_all_but_one_of_a_users_five(make_run, user, other_user, settings):
    """The audit's queue: alice's five uploads first, then bob's.  FIFO
    would put bob 5th; the fair order puts him next once alice has a run
    going, and alice's runs then take turns with anyone else's."""
    settings.LEGO_MAX_RUNNING_PER_USER = 1
    alices = [make_run(owner=user) for _ in range(5)]
    bobs = make_run(owner=other_user)
    assert [run_id for run_id, _ in queue.fair_order()][:2] == [alices[0].pk, bobs.pk]  # nobody ran yet: oldest user first

    first = execution.claim(str(alices[0].pk), worker="gpu0@h")  # alice's message: her first run
    assert first.pk == alices[0].pk and first.task_id == str(alices[0].pk)
    assert queue.queue_position(bobs) == 1 and queue.queue_position(alices[1]) == 2
    # the second worker takes the turn of alice's second message: bob's run, not alice's
    second = execution.claim(str(alices[1].pk), worker="gpu1@h")
    assert second.pk == bobs.pk and second.task_id == str(alices[1].pk) and second.worker == "gpu1@h"
    # a third worker: alice is at her running limit, bob has nothing queued
    assert execution.claim(str(alices[2].pk), worker="gpu2@h") is None
    assert Run.objects.filter(state="queued").count() == 4
    settings.LEGO_MAX_RUNNING_PER_USER = 2
    assert execution.claim(str(alices[2].pk), worker="gpu2@h").pk == alices[1].pk


@pytest.mark.faults
@pytest.mark.django_db
def test_users_take_turns_by_running_runs_then_by_whose_last_run_started_first(make_run, user, other_user,
                                                                              django_user_model):
    carol = django_user_model.objects.create_user("carol", password="pw")
    make_run(owner=user, state="finished", started_at=ago(100), finished_at=ago(90))  # alice ran 100 s ago
    make_run(owner=other_user, state="finished", started_at=ago(50), finished_at=ago(40))  # bob 50 s ago
    b1, a1, b2, a2 = make_run(owner=other_user), make_run(owner=user), make_run(owner=other_user), make_run(owner=user)
    c1 = make_run(owner=carol)  # never ran: her turn first, although she uploaded last
    assert [run_id for run_id, _ in queue.fair_order()] == [c1.pk, a1.pk, b1.pk, a2.pk, b2.pk]
    make_run(owner=carol, state="running", started_at=ago(1))  # carol has a run going: the others first
    assert [run_id for run_id, _ in queue.fair_order()] == [a1.pk, b1.pk, c1.pk, a2.pk, b2.pk]


@pytest.mark.faults
@pytest.mark.django_db
def test_the_redelivered_message_fails_the_run_it_had_started_not_its_own(make_run, user, other_user):
    """A message can start another run than its own; when its pool process
    dies, its next delivery finds that run by ``task_id`` and fails it."""
    own = make_run(owner=user)
    taken = make_run(owner=other_user, state="running", worker="gpu0@h", task_id=str(own.pk), started_at=ago(9))
    assert execution.claim(str(own.pk), worker="gpu0@h", task_id=str(own.pk)) is None
    taken.refresh_from_db()
    own.refresh_from_db()
    assert taken.state == "failed" and taken.error_message == execution.PROCESS_LOST_MESSAGE
    assert own.state == "queued"  # its turn comes with another message


@pytest.mark.faults
@pytest.mark.django_db(transaction=True)
def test_two_workers_claiming_at_once_never_exceed_a_users_running_limit(make_run, user, other_user, settings):
    """Eight threads (eight workers) claim at once on the real database:
    with ``LEGO_MAX_RUNNING_PER_USER`` 1 each user gets one run, no run is
    taken twice (PostgreSQL: the owner's row lock and SKIP LOCKED)."""
    if connection.vendor != "postgresql":
        pytest.skip("several run workers at once need PostgreSQL (the embedded SQLite default has one)")
    settings.LEGO_MAX_RUNNING_PER_USER = 1
    for _ in range(3):
        make_run(owner=user)
        make_run(owner=other_user)
    got, barrier = [], threading.Barrier(8)

    def worker(n: int) -> None:
        from django.db import connections

        try:
            barrier.wait(timeout=30)
            message = str(uuid.uuid4())  # a turn: its own run long gone
            run = execution.claim(message, worker=f"gpu{n}@h", task_id=message)
            got.append(run.pk if run else None)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    claimed = [pk for pk in got if pk is not None]
    assert len(got) == 8 and len(claimed) == len(set(claimed)) == 2, got
    running = Run.objects.filter(state="running")
    assert sorted(r.owner_id for r in running) == sorted([user.pk, other_user.pk])
    assert len({r.worker for r in running}) == 2


# --- places and expected waits ------------------------------------------------------


@pytest.mark.faults
@pytest.mark.django_db
def test_the_run_page_and_the_api_show_the_fair_place_and_the_expected_wait(user_client, api, make_run, user,
                                                                           other_user):
    """Two workers seen in the last day, runs that took 60 s: bob's five
    queued runs and alice's one, uploaded last.  Alice is next (bob has a
    run going, she has none) and starts on the idle worker; bob's follow
    as the workers free up: gpu0's run in 40 s, then every 60 s a run."""
    for worker in ("gpu0@h", "gpu1@h"):
        make_run(owner=other_user, state="finished", worker=worker, started_at=ago(3600), finished_at=ago(3540))
    make_run(owner=other_user, state="running", worker="gpu0@h", started_at=ago(20))  # 40 s left of the typical 60
    bobs = [make_run(owner=other_user) for _ in range(5)]
    mine = make_run(owner=user)
    assert round(queue.typical_run_s()) == 60 and queue.run_workers() == 2
    assert queue.queue_positions() == {mine.pk: 1, **{run.pk: n for n, run in enumerate(bobs, 2)}}
    waits = queue.expected_waits()
    assert waits[mine.pk] == 0  # the idle worker
    assert 39 <= waits[bobs[0].pk] <= 41  # when gpu0's run should end
    assert 59 <= waits[bobs[1].pk] <= 61 and 99 <= waits[bobs[2].pk] <= 101 and 119 <= waits[bobs[3].pk] <= 121

    body = api.get(reverse("api:run", args=[mine.id])).json()
    assert body["queue_position"] == 1 and body["expected_wait_s"] == 0
    assert body["activity"] == "waiting for a worker: next in the queue"
    page = user_client.get(reverse("runs:detail", args=[mine.id])).content.decode()
    assert 'data-position="1"' in page and "next in the queue" in page
    assert 'id="run-expected-wait" data-seconds="0">expected to start in under a minute<' in page
    # bob's third run, 4th in the queue, as he sees it
    bob = api_client(other_user).get(reverse("api:run", args=[bobs[2].id])).json()
    assert bob["queue_position"] == 4 and 99 <= bob["expected_wait_s"] <= 101
    assert bob["activity"] == "waiting for a worker: 4th in the queue (3 runs ahead)"
    # a run that is not queued has neither
    Run.objects.filter(pk=mine.pk).update(state="running", started_at=timezone.now(), worker="gpu1@h")
    body = api.get(reverse("api:run", args=[mine.id])).json()
    assert body["queue_position"] is None and body["expected_wait_s"] is None


@pytest.mark.faults
@pytest.mark.django_db
def test_no_expected_wait_before_any_run_ended(api, make_run):
    run = make_run()
    body = api.get(reverse("api:run", args=[run.id])).json()
    assert body["queue_position"] == 1 and body["expected_wait_s"] is None
    assert queue.describe_wait(None) == "" and queue.describe_wait(150) == "about 2 min"
    assert queue.describe_wait(7200) == "about 2.0 h" and queue.describe_wait(30) == "under a minute"


# --- the per-user limits at submit -------------------------------------------------------


@pytest.mark.faults
@pytest.mark.django_db
def test_a_user_at_the_queued_limit_is_refused_on_the_form_and_the_api_with_one_message(
    user_client, api, user, other_user, make_run, good_model, settings, queued, media_root
):
    settings.LEGO_MAX_QUEUED_PER_USER = 2
    settings.LEGO_MAX_RUNS_IN_FLIGHT = 10
    make_run(state="running", started_at=timezone.now())  # running runs do not count against the queued limit
    make_run()
    make_run()
    files_before = sorted(p for p in media_root.rglob("*") if p.is_file())
    message = ("You already have 2 runs waiting in the queue, the most one user may have queued at once "
               "(LEGO_MAX_QUEUED_PER_USER). Wait until one starts, or cancel one on its page, then upload again.")
    assert queue.queued_limit_message(2) == message

    page = user_client.post(reverse("runs:new"), {"upload": SimpleUploadedFile("m.py", good_model), "overrides": "",
                                                  "dtype": "fp32", "device": "cpu"})
    assert page.status_code == 200 and message in page.content.decode()
    response = api.post(reverse("api:runs"), {"model": SimpleUploadedFile("m.py", good_model)}, format="multipart")
    assert response.status_code == 429 and response.json()["errors"]["non_field_errors"] == [message]
    assert Run.objects.filter(owner=user).count() == 3  # nothing saved, nothing sent
    assert sorted(p for p in media_root.rglob("*") if p.is_file()) == files_before  # nothing stored

    # another user is not held up; once one of alice's runs started she may upload again
    assert api_client(other_user).post(reverse("api:runs"), {"model": SimpleUploadedFile("m.py", good_model)},
                                       format="multipart").status_code == 201
    Run.objects.filter(pk=Run.objects.filter(owner=user, state="queued").first().pk).update(state="running")
    assert api.post(reverse("api:runs"), {"model": SimpleUploadedFile("m.py", good_model)},
                    format="multipart").status_code == 201
    assert Run.objects.filter(owner=user).count() == 4


@pytest.mark.faults
@pytest.mark.parametrize("variable, value, ok", [
    ("LEGO_MAX_QUEUED_PER_USER", "5", True),
    ("LEGO_MAX_RUNNING_PER_USER", "0", False),
    ("LEGO_MAX_QUEUED_PER_USER", "lots", False),
])
def test_the_limits_default_and_a_bad_value_stops_the_server(variable, value, ok):
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEGO_MAX_")}
    env.update({"DJANGO_SETTINGS_MODULE": "webapp.config.settings.test", variable: value})
    result = subprocess.run([sys.executable, "-c", "import django; django.setup(); from django.conf import settings as s; "
                             "print(s.LEGO_MAX_QUEUED_PER_USER, s.LEGO_MAX_RUNNING_PER_USER, s.LEGO_MAX_RUNS_IN_FLIGHT)"],
                            cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    if ok:
        assert result.returncode == 0 and result.stdout.split() == ["5", "1", "6"], result.stderr[-2000:]
    else:
        assert result.returncode != 0
        assert f"{variable} must be a whole number above 0, got {value!r}" in result.stderr, result.stderr[-2000:]


# --- a real run worker ---------------------------------------------------------------------


def state_of(run: Run) -> str:
    run.refresh_from_db()
    return run.state


@pytest.mark.slow
@pytest.mark.faults
@pytest.mark.django_db(transaction=True)
def test_another_users_run_starts_after_one_of_five_uploads_that_sleep_at_import(
    client, user, other_user, start_worker, agents_worker, wait_for, upload_model, good_model, settings
):
    """The audit, with a 15 s load limit: alice uploads five files that sleep
    at import, then bob a good model.  One run worker: bob's run is next in
    the queue at once, starts when alice's first run hits the load limit
    (within one stage limit of his upload, plus the child's start), before
    alice's second, and finishes."""
    settings.LEGO_MAX_QUEUED_PER_USER = 5
    settings.LEGO_MAX_RUNS_IN_FLIGHT = 6
    proc, log = start_worker("worker", LEGO_STAGE_LIMIT_LOAD_S=str(LOAD_LIMIT_S))
    client.force_login(user)
    alices = [upload_model(client, f"sleeps{n}.py", SLEEPS_AT_IMPORT) for n in range(5)]
    client.force_login(other_user)
    bobs = upload_model(client, "good.py", good_model)
    status = client.get(reverse("api:run", args=[bobs.pk])).json()
    if status["state"] == "queued":  # alice's first run is going (or about to): bob is next, not 5th
        assert status["queue_position"] == 1, status
        page = client.get(reverse("runs:detail", args=[bobs.pk])).content.decode()
        assert "next in the queue" in page or 'id="run-state">running<' in page

    wait_for(lambda: state_of(bobs) != "queued", LOAD_LIMIT_S + START_SLACK_S + 30, "bob's run to start", log, every_s=0.2)
    started_before = Run.objects.filter(owner=user, started_at__lt=bobs.started_at).count()
    assert started_before <= 1, f"{started_before} of alice's runs started before bob's"
    waited = (bobs.started_at - bobs.created_at).total_seconds()
    assert waited < LOAD_LIMIT_S + START_SLACK_S, waited
    first = Run.objects.get(pk=alices[0].pk)
    if started_before:
        assert first.state == "failed" and "load" in first.error_message, first.error_message
    wait_for(lambda: state_of(bobs) not in ("queued", "running"), 240, "bob's run to end", log)
    assert bobs.state == "finished", (bobs.error_message, log.read_text()[-4000:])
    assert proc.poll() is None
    print(f"\nbob waited {waited:.1f} s behind {started_before} of alice's five sleeping uploads (load limit {LOAD_LIMIT_S} s)")
