"""The whole web flow through a real Celery worker process, on PostgreSQL and
Redis, with the real lego_core.optimize on a tiny reference model.

The test process serves the pages (Django test client on a transactional
test database); the worker is ``celery -A webapp.config worker`` in a
subprocess connected to that same test database and this session's queue.
"""
import os
import sys

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.urls import reverse

from webapp.runs.models import Run

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

MODEL = "scores_chain.py"
# kills the optimizer's child process the moment lego_core imports it
CRASHING_MODEL = b"import os\nimport signal\n\nos.kill(os.getpid(), signal.SIGKILL)\n"


@pytest.fixture
def worker(spawn, wait_for, media_root, settings):
    """A Celery worker on the test database; MEDIA_ROOT is shared with it."""
    db = connection.settings_dict
    if db["ENGINE"] != "django.db.backends.postgresql" or not settings.CELERY_BROKER_URL.startswith("redis"):
        pytest.skip("this test runs against PostgreSQL and Redis (see webapp/config/settings/test.py)")
    auth = db["USER"] + (f":{db['PASSWORD']}" if db["PASSWORD"] else "")
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "webapp.config.settings.test",
        "DATABASE_URL": f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}",
        "LEGO_VAR_DIR": str(media_root.parent),
        "TRITON_INTERPRET": os.environ.get("TRITON_INTERPRET", "1"),
    }
    queue = settings.CELERY_TASK_DEFAULT_QUEUE
    argv = [sys.executable, "-m", "celery", "-A", "webapp.config", "worker", "--loglevel", "INFO",
            "--hostname", f"{queue}@%h", "--without-gossip", "--without-mingle", "--without-heartbeat"]
    proc, log = spawn("worker", argv, env)
    wait_for(lambda: proc.poll() is not None or "ready." in log.read_text(errors="replace"), 120, "the worker", log)
    assert proc.poll() is None, log.read_text()
    return proc, log


def upload(client, name: str, content: bytes, overrides: dict) -> Run:
    text = "\n".join(f"{k}={v}" for k, v in overrides.items())
    response = client.post(
        reverse("runs:new"),
        {"upload": SimpleUploadedFile(name, content), "overrides": text, "dtype": "fp32", "device": "cpu"},
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    return Run.objects.get(pk=response["Location"].rstrip("/").split("/")[-1])


def wait_until_done(wait_for, client, run: Run, log, timeout_s: float) -> dict:
    url = reverse("runs:api-run", args=[run.id])
    return wait_for(lambda: (s := client.get(url).json())["active"] is False and s, timeout_s, f"run {run.id}", log)


def test_broken_and_crashing_uploads_fail_readably_then_the_same_worker_finishes_a_good_run(
    client, user, worker, wait_for, broken_model, shared_models, tiny_overrides, check_download
):
    proc, log = worker
    client.force_login(user)

    broken = upload(client, "broken.py", broken_model, {})
    status = wait_until_done(wait_for, client, broken, log, 120)
    assert status["state"] == "failed", status
    page = client.get(reverse("runs:detail", args=[broken.id])).content.decode()
    assert "broken.py, line 6" in page
    assert "def forward(self, x) return x" in page
    assert status["error_line"] == 6 and "broken.py" in status["error_message"]

    crashing = upload(client, "crash.py", CRASHING_MODEL, {})
    status = wait_until_done(wait_for, client, crashing, log, 120)
    assert status["state"] == "failed" and "SIGKILL" in status["error_message"], status
    assert proc.poll() is None  # the worker survived its child

    overrides = tiny_overrides(MODEL)
    good = upload(client, MODEL, (shared_models / MODEL).read_bytes(), overrides)
    status = wait_until_done(wait_for, client, good, log, 600)
    good.refresh_from_db()
    assert status["state"] == "finished", (status, good.error_message, log.read_text()[-4000:])
    assert proc.poll() is None  # the same worker, still alive

    seqs = list(good.events.values_list("seq", flat=True))
    assert seqs == list(range(1, len(seqs) + 1))
    assert good.events.filter(type="run_finished").exists()
    page = client.get(reverse("runs:detail", args=[good.id])).content.decode()
    assert 'id="plan-table"' in page and "speedup" in page.lower()

    response = client.get(reverse("runs:download", args=[good.id]))
    assert response.status_code == 200
    names = check_download(b"".join(response.streaming_content), shared_models / MODEL, overrides)
    assert any(n.endswith("/optimized_model.py") for n in names)
    assert any(n.endswith("/report.json") for n in names)
