"""``make run`` on a fresh machine: no PostgreSQL, no Redis. Starts it on an
empty LEGO_VAR_DIR (SQLite file, filesystem broker, a worker beside the web
server), logs in as the printed development user and optimizes a tiny model
over HTTP."""
import os
import re
import signal
import socket

import pytest
import requests

pytestmark = pytest.mark.slow

MODEL = "scores_chain.py"
SERVICE_VARS = ("DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE", "LEGO_CELERY_QUEUE", "LEGO_AGENT_QUEUE")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def csrf_token(html: str) -> str:
    return re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', html).group(1)


def test_make_run_serves_a_working_app_on_embedded_defaults(
    spawn, wait_for, tmp_path, shared_models, tiny_overrides, check_download
):
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in SERVICE_VARS and not k.startswith("PYTEST")}
    env.update(LEGO_VAR_DIR=str(tmp_path / "var"), PORT=str(port), TRITON_INTERPRET="1")
    proc, log = spawn("make-run", ["make", "--no-print-directory", "run"], env)
    base = f"http://127.0.0.1:{port}"

    def login_page():
        assert proc.poll() is None, log.read_text()
        try:
            return requests.get(f"{base}/accounts/login/", timeout=5).ok
        except requests.ConnectionError:
            return False

    wait_for(login_page, 180, "make run to serve", log)
    # printed once the server answers (issue 28: it was printed before), by a poller a moment after
    wait_for(lambda: f"LEGO is at http://127.0.0.1:{port}/" in log.read_text(), 30, "make run to print its URL", log)
    assert "log in as dev / lego-dev" in log.read_text()
    assert (tmp_path / "var" / "db.sqlite3").exists()

    session = requests.Session()
    page = session.get(f"{base}/accounts/login/")
    response = session.post(
        f"{base}/accounts/login/",
        data={"username": "dev", "password": "lego-dev", "csrfmiddlewaretoken": csrf_token(page.text)},
    )
    assert response.url == f"{base}/", response.text[:500]

    overrides = tiny_overrides(MODEL)
    form = session.get(f"{base}/runs/new/")
    response = session.post(
        f"{base}/runs/new/",
        data={
            "csrfmiddlewaretoken": csrf_token(form.text),
            "overrides": ", ".join(f"{k}={v}" for k, v in overrides.items()),
            "dtype": "fp32",
            "device": "cpu",
        },
        files={"upload": (MODEL, (shared_models / MODEL).read_bytes(), "text/x-python")},
    )
    run_id = re.search(r"/runs/([0-9a-f-]{36})/$", response.url).group(1)

    def finished():
        status = session.get(f"{base}/api/runs/{run_id}/").json()
        return not status["active"] and status

    status = wait_for(finished, 600, f"run {run_id}", log, every_s=1)
    assert status["state"] == "finished", (status, log.read_text()[-4000:])
    assert 'id="plan-table"' in session.get(f"{base}/runs/{run_id}/").text

    download = session.get(f"{base}/runs/{run_id}/download.zip")
    assert download.headers["Content-Type"] == "application/zip"
    names = check_download(download.content, shared_models / MODEL, overrides)
    assert any(n.endswith("/optimized_model.py") for n in names)

    # a worker that dies takes ``make run`` down with it, saying which one
    # stopped, instead of leaving a web app whose runs never start
    workers = run_worker_pids(proc.pid)
    assert workers, "no run worker found in make run's process group"
    for pid in workers:
        os.kill(pid, signal.SIGKILL)
    wait_for(lambda: proc.poll() is not None, 60, "make run to stop after its run worker died", log)
    assert proc.returncode != 0
    assert "make run: the run_worker process stopped" in log.read_text()


def run_worker_pids(group: int) -> list:
    """The processes of process group ``group`` that are the run worker (the
    Celery worker without ``-n agents@``) or its pool."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if os.getpgid(int(entry)) != group:
                continue
            argv = open(f"/proc/{entry}/cmdline", "rb").read().split(b"\0")
        except (OSError, ProcessLookupError):
            continue
        if b"celery" in argv and b"worker" in argv and not any(a.startswith(b"agents@") for a in argv):
            pids.append(int(entry))
    return pids
