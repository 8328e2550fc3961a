"""The broker goes down and comes back while a run is running and another is
queued (issue 11): a private redis-server (the broker, result backend and
channel layer of this test's whole service: daphne, a run worker, an agents
worker) is killed with SIGKILL and started again on the same port with its
append-only file.  The running run and the queued one both end (finished,
or failed with a message; never stuck), a run uploaded during the outage
is failed at once saying so, and the service takes a new run afterwards.  The machine's shared Redis is never touched."""
import time

import pytest
import requests

from webapp.runs.models import Run

pytestmark = [pytest.mark.slow, pytest.mark.faults, pytest.mark.django_db(transaction=True)]

OUTAGE_S = 4

SLOW_START = b"import time\n\ntime.sleep(10)\n"  # loads for 10 s (the broker goes down meanwhile), then the good model


def test_a_running_and_a_queued_run_survive_a_broker_restart_and_a_new_run_follows(
    user, private_redis, service_env, start_worker, daphne, wait_for, settings, good_model
):
    from rest_framework.authtoken.models import Token

    broker = {"REDIS_URL": private_redis.url}
    proc, log = start_worker("worker", **broker)
    start_worker("agents", "-Q", settings.LEGO_AGENT_QUEUE, "--pool", "threads", "--concurrency", "4", **broker)
    port, server_log = daphne({**service_env, "LEGO_VAR_DIR": str(settings.MEDIA_ROOT.parent), "LEGO_MAX_RUNS_IN_FLIGHT": "3",
                               **broker})
    api = requests.Session()
    api.headers["Authorization"] = f"Token {Token.objects.create(user=user).key}"
    api.trust_env = False  # loopback: no proxy

    def upload(name: str, content: bytes) -> Run:
        response = api.post(f"http://127.0.0.1:{port}/api/runs/", files={"model": (name, content)}, timeout=60)
        assert response.status_code == 201, response.text[:2000]
        return Run.objects.get(pk=response.json()["id"])

    def state(run: Run) -> str:
        run.refresh_from_db()
        return run.state

    running = upload("slow.py", SLOW_START + good_model)
    wait_for(lambda: state(running) == "running", 60, "the first run to start", log, every_s=0.2)
    queued = upload("queued.py", good_model)
    assert state(queued) == "queued"

    private_redis.kill()
    outage = time.monotonic()
    response = api.post(f"http://127.0.0.1:{port}/api/runs/", files={"model": ("during.py", good_model)}, timeout=60)
    assert response.status_code == 201, response.text[:2000]  # sent while the broker is down: failed, not left queued
    assert response.json()["state"] == "failed" and "run queue could not be reached" in response.json()["error_message"]
    time.sleep(max(0.0, outage + OUTAGE_S - time.monotonic()))
    assert state(running) == "running" and state(queued) == "queued"
    private_redis.start()

    for run in (running, queued):
        wait_for(lambda: state(run) not in ("queued", "running"), 300, f"run {run.original_filename} to end", log)
        print(f"\n{run.original_filename}: {run.state} {run.error_message}")
        assert run.state == "finished" or (run.state == "failed" and run.error_message), (run.state, run.error_message)
    assert queued.state == "finished", (queued.error_message, log.read_text()[-4000:])

    after = upload("after.py", good_model)
    wait_for(lambda: state(after) not in ("queued", "running"), 300, "the run sent after the restart", log)
    assert after.state == "finished", (after.error_message, log.read_text()[-4000:])
    assert proc.poll() is None
    worker_log = log.read_text(errors="replace")  # the outage really reached the worker, which reconnected
    connected = f"Connected to redis://:**@127.0.0.1:{private_redis.port}"
    assert "Connection to broker lost" in worker_log and worker_log.count(connected) >= 2
    assert "Exception inside application" not in server_log.read_text(errors="replace")
