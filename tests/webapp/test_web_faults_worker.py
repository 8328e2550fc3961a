"""No run ever stuck, with real processes (issue 11): a run worker (prefork,
one pool process), an agents worker that also runs the reaper, and Celery
beat, on PostgreSQL and Redis.  The run's pool process is killed from
outside, frozen, and its run cancelled; each time the run ends with its
reason within the limits the issue sets, and the same worker goes on to
finish a good run."""
import os
import signal
import time
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from webapp.runs.models import Run

pytestmark = [pytest.mark.slow, pytest.mark.faults, pytest.mark.django_db(transaction=True)]

# holds its run in the load stage (lego_core allows a file 300 s to load)
SLEEPY_MODEL = b"""import time

import torch
import torch.nn as nn

time.sleep(240)


class Model(nn.Module):
    def forward(self, x):
        return x + 1


def get_inputs():
    return [torch.randn(2, 2)]


def get_init_inputs():
    return []
"""

# kills the process that started lego_core's child: the run's pool process
PARENT_KILLER = b"import os\nimport signal\n\nos.kill(os.getppid(), signal.SIGKILL)\n"

FAST_BEAT = {"LEGO_HEARTBEAT_S": "1", "LEGO_HEARTBEAT_TIMEOUT_S": "8", "LEGO_REAP_EVERY_S": "2"}


def children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (read from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def upload(client, name: str, content: bytes) -> Run:
    response = client.post(reverse("runs:new"), {"upload": SimpleUploadedFile(name, content), "overrides": "",
                                                 "dtype": "fp32", "device": "cpu"})
    assert response.status_code == 302, response.content.decode()[:2000]
    return Run.objects.get(pk=response["Location"].rstrip("/").split("/")[-1])


def state(run: Run) -> str:
    run.refresh_from_db()
    return run.state


def test_a_killed_a_frozen_and_a_cancelled_run_end_in_time_and_the_worker_goes_on(
    client, user, start_worker, spawn, wait_for, settings, tmp_path, good_model
):
    proc, log = start_worker("worker", **FAST_BEAT)
    start_worker("agents", "-Q", settings.LEGO_AGENT_QUEUE, "--pool", "threads", "--concurrency", "4", **FAST_BEAT)
    beat_env = {**os.environ, **FAST_BEAT, "DJANGO_SETTINGS_MODULE": "webapp.config.settings.test",
                "DATABASE_URL": os.environ.get("DATABASE_URL", "")}
    spawn("beat", [os.sys.executable, "-m", "celery", "-A", "webapp.config", "beat", "--loglevel", "INFO",
                   "--schedule", str(tmp_path / "beat-schedule")], beat_env)
    client.force_login(user)

    def pool_process(run: Run) -> int:
        wait_for(lambda: state(run) == "running", 120, f"run {run.id} to start", log)
        [pid] = wait_for(lambda: children(proc.pid), 30, "the pool process", log)
        return pid

    # 0. the upload kills its parent, the pool process: jailed (bubblewrap,
    #    lego_core.runtime.jail) it cannot reach any process of the worker's, so the
    #    run fails on the file's own fault; unjailed it kills the pool
    #    process, and the run fails saying so; either way the worker goes on
    from lego_core.runtime import jail

    suicidal = upload(client, "parent_killer.py", PARENT_KILLER)
    wait_for(lambda: state(suicidal) not in ("queued", "running"), 60, "the parent-killing run to end", log)
    expected = "defines no `Model`" if jail.wanted() else "died"
    assert suicidal.state == "failed" and expected in suicidal.error_message, suicidal.error_message

    # 1. the pool process running a run is killed from outside: the message
    #    comes back (reject_on_worker_lost) and its next delivery fails the run
    killed = upload(client, "killed.py", SLEEPY_MODEL)
    pid = pool_process(killed)
    os.kill(pid, signal.SIGKILL)
    at = time.monotonic()
    wait_for(lambda: state(killed) != "running", 60, "the killed run to end", log)
    assert time.monotonic() - at < 60
    assert killed.state == "failed" and "died" in killed.error_message, killed.error_message
    assert killed.events.last().data["error_type"] == "WorkerLost"

    # 2. the pool process stops answering (frozen): beat's reaper fails the
    #    run once its heartbeat is 8 s old; thawed, the process ends itself
    frozen = upload(client, "frozen.py", SLEEPY_MODEL)
    pid = pool_process(frozen)
    os.kill(pid, signal.SIGSTOP)
    at = time.monotonic()
    try:
        wait_for(lambda: state(frozen) != "running", 60, "the reaper to fail the frozen run", log)
        assert time.monotonic() - at < 60
    finally:
        os.kill(pid, signal.SIGCONT)
    assert frozen.state == "failed" and "stopped answering" in frozen.error_message, frozen.error_message
    wait_for(lambda: pid not in children(proc.pid), 30, "the thawed pool process to end itself", log)

    # 3. a running run is cancelled: its pool process is stopped and the
    #    next run in the queue starts within 10 s
    cancelled = upload(client, "cancelled.py", SLEEPY_MODEL)
    pool_process(cancelled)
    good = upload(client, "good.py", good_model)
    assert client.get(reverse("api:run", args=[good.id])).json()["queue_position"] == 1
    response = client.post(reverse("api:cancel", args=[cancelled.id]))
    assert response.status_code == 200 and response.json()["state"] == "cancelled"
    at = time.monotonic()
    wait_for(lambda: state(good) != "queued", 10, "the next run to start after the cancel", log, every_s=0.2)
    assert time.monotonic() - at < 10

    # 4. the same worker finishes a good run
    wait_for(lambda: state(good) not in ("queued", "running"), 300, "the good run", log)
    assert good.state == "finished", (good.error_message, log.read_text()[-4000:])
    assert proc.poll() is None
    cancelled.refresh_from_db()
    assert cancelled.state == "cancelled"
    assert [e.data.get("error_type") for e in cancelled.events.filter(type="run_failed")] == ["RunCancelled"]
