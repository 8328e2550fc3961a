"""Each stage of a web run has a time limit (issue 28): ``LEGO_STAGE_LIMIT_<STAGE>_S``.

Through a real run worker (Celery, PostgreSQL or the test database, Redis
when the session has it): an upload whose forward sleeps only while
``torch.compiler.is_exporting()`` (the capture stage's 463 s hang of the
issue, which held the only run worker) fails within seconds of the capture
limit, with a message naming the stage, its limit and the setting, on the
run page too; the same worker then finishes another user's good run.
Also: the settings are passed to the run's config, and a bad value stops
the server at start.  (lego_core's side, every stage: tests/unit/test_stage_limits.py.)
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.urls import reverse

from webapp.runs.models import Run

REPO = Path(__file__).resolve().parents[2]
CAPTURE_LIMIT_S = 5
SLACK_S = 10  # the worker is free within this after the limit

CAPTURE_HANG = b"""import time

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        if torch.compiler.is_exporting():  # eager calls return; torch.export's trace never does
            time.sleep(3600)
        return torch.relu(x) * 2.0


def get_inputs():
    return [torch.randn(4, 16)]


def get_init_inputs():
    return []
"""


def run_state(run: Run) -> str:
    run.refresh_from_db()
    return run.state


def test_the_stage_limit_settings_reach_the_runs_config(settings):
    from webapp.runs.execution import run_config

    settings.LEGO_STAGE_LIMITS = {**settings.LEGO_STAGE_LIMITS, "capture": 7.0, "verify": 9.0}
    limits = run_config(1).stage_limits
    assert (limits.capture_s, limits.verify_s, limits.compose_s) == (7.0, 9.0, 120.0)
    assert limits.for_run(settings.LEGO_RUN_MAX_SEARCH_S)["search"] == settings.LEGO_RUN_MAX_SEARCH_S + limits.search_grace_s


@pytest.mark.parametrize("variable, value, accepted", [
    ("LEGO_STAGE_LIMIT_CAPTURE_S", "600", True),
    ("LEGO_STAGE_LIMIT_VERIFY_S", "soon", False),
    ("LEGO_STAGE_LIMIT_SEARCH_S", "0", False),
    ("LEGO_STAGE_LIMIT_LAUNCH_S", "-5", False),
    ("LEGO_STAGE_LIMIT_LOAD_S", "inf", False),
    ("LEGO_LOAD_TIMEOUT_S", "nan", False),
])
def test_a_bad_stage_limit_stops_the_server_at_start(variable, value, accepted):
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "webapp.config.settings.test", variable: value}
    result = subprocess.run([sys.executable, "-c", "import django; django.setup(); from django.conf import settings; "
                             "print(settings.LEGO_STAGE_LIMITS)"], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    if accepted:
        assert result.returncode == 0 and "'capture': 600.0" in result.stdout, result.stderr
    else:
        assert result.returncode != 0
        assert f"{variable} must be a number of seconds above 0, got {value!r}" in result.stderr, result.stderr[-2000:]


def test_the_old_load_timeout_name_still_sets_the_load_stage(monkeypatch):
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "webapp.config.settings.test", "LEGO_LOAD_TIMEOUT_S": "42"}
    env.pop("LEGO_STAGE_LIMIT_LOAD_S", None)
    result = subprocess.run([sys.executable, "-c", "import django; django.setup(); from django.conf import settings; "
                             "print(settings.LEGO_STAGE_LIMITS['load'])"], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert result.stdout.strip() == "42.0", result.stderr[-2000:]


@pytest.mark.slow
@pytest.mark.faults
@pytest.mark.django_db(transaction=True)
def test_a_capture_that_hangs_fails_naming_the_stage_and_the_worker_takes_the_next_run(
    client, user, other_user, start_worker, agents_worker, wait_for, upload_model, good_model, media_root
):
    proc, log = start_worker("worker", LEGO_STAGE_LIMIT_CAPTURE_S=str(CAPTURE_LIMIT_S))
    client.force_login(user)
    hanging = upload_model(client, "hangs_in_capture.py", CAPTURE_HANG)
    wait_for(lambda: run_state(hanging) != "queued", 60, "the hanging run to start", log, every_s=0.2)
    wait_for(lambda: run_state(hanging) != "running", CAPTURE_LIMIT_S + 120, "the hanging run to end", log, every_s=0.2)
    assert hanging.state == "failed", (hanging.state, hanging.error_message)
    message = hanging.error_message
    assert f"the capture stage ran past its limit of {CAPTURE_LIMIT_S} s and was stopped" in message, message
    assert "LEGO_STAGE_LIMIT_CAPTURE_S" in message and str(media_root) not in message, message
    assert hanging.events.last().data["error_type"] == "StageTimeLimit"
    capture = hanging.events.get(type="stage_started", data__stage="capture")
    took = hanging.finished_at.timestamp() - capture.created_at.timestamp()  # from the capture stage's start to the run's end
    assert CAPTURE_LIMIT_S <= took < CAPTURE_LIMIT_S + SLACK_S, took
    assert not hanging.events.filter(type="stage_started", data__stage="construct").exists()
    page = client.get(reverse("runs:detail", args=[hanging.pk])).content.decode()
    assert f"the capture stage ran past its limit of {CAPTURE_LIMIT_S} s" in page
    assert proc.poll() is None  # the worker lives

    client.force_login(other_user)
    good = upload_model(client, "good.py", good_model)
    wait_for(lambda: run_state(good) not in ("queued", "running"), 300, "the good run", log)
    assert good.state == "finished", (good.error_message, log.read_text()[-4000:])
    assert good.worker == hanging.worker and proc.poll() is None
    print(f"\nthe hanging capture ended {took:.1f} s after it began: {message}")


@pytest.mark.slow
@pytest.mark.faults
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("stage", ["construct", "compose", "launch"])
def test_a_hang_in_a_stage_no_upload_reaches_fails_naming_it_and_the_worker_lives(
    stage, client, user, start_worker, agents_worker, wait_for, upload_model, good_model
):
    """Construct, compose and launch run no uploaded code on a CPU: the run's
    child is made to hang there by fault injection (``lego_core.runtime.faults``,
    ``LEGO_FAULT_HANG_STAGE`` in the worker's environment, which reaches the
    jailed child like every ``LEGO_`` knob).  The worker stops it within
    seconds of the stage's limit, the run fails naming the stage, and the
    worker is alive for the next run."""
    limit = 5
    proc, log = start_worker("worker", **{f"LEGO_STAGE_LIMIT_{stage.upper()}_S": str(limit), "LEGO_FAULT_HANG_STAGE": stage})
    client.force_login(user)
    run = upload_model(client, f"hangs_in_{stage}.py", good_model)
    wait_for(lambda: run_state(run) not in ("queued", "running"), 300, f"the run hanging in {stage} to end", log, every_s=0.2)
    assert run.state == "failed", (run.state, run.error_message)
    assert f"the {stage} stage ran past its limit of {limit} s and was stopped" in run.error_message, run.error_message
    assert f"LEGO_STAGE_LIMIT_{stage.upper()}_S" in run.error_message
    began = run.events.get(type="stage_started", data__stage=stage)
    took = run.finished_at.timestamp() - began.created_at.timestamp()
    assert limit <= took < limit + SLACK_S, took
    assert proc.poll() is None  # the worker lives
