"""The whole web flow through a real Celery worker process, on PostgreSQL and
Redis, with the real lego_core.optimize on a tiny reference model.

The test process serves the pages (Django test client on a transactional
test database); the workers are ``celery -A webapp.config worker`` in
subprocesses connected to that same test database and this session's queues:
a run worker and, beside it, an agents worker for the agent calls.
"""
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from webapp.runs.models import Run

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

MODEL = "scores_chain.py"
# kills the optimizer's child process the moment lego_core imports it
CRASHING_MODEL = b"import os\nimport signal\n\nos.kill(os.getpid(), signal.SIGKILL)\n"
# compiles, so it is queued; fails when the worker imports it, on line 9
FAILING_AT_IMPORT = (b"import torch\n\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x\n\n\n"
                     b"raise RuntimeError('the weights file is missing')\n")


@pytest.fixture
def worker(start_worker, agents_worker):
    """A run worker (and an agents worker beside it) on the test database;
    MEDIA_ROOT is shared with them."""
    return start_worker("worker")


def upload(client, name: str, content: bytes, overrides: dict) -> Run:
    text = "\n".join(f"{k}={v}" for k, v in overrides.items())
    response = client.post(
        reverse("runs:new"),
        {"upload": SimpleUploadedFile(name, content), "overrides": text, "dtype": "fp32", "device": "cpu"},
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    return Run.objects.get(pk=response["Location"].rstrip("/").split("/")[-1])


def wait_until_done(wait_for, client, run: Run, log, timeout_s: float) -> dict:
    url = reverse("api:run", args=[run.id])
    return wait_for(lambda: (s := client.get(url).json())["active"] is False and s, timeout_s, f"run {run.id}", log)


def test_broken_and_crashing_uploads_fail_readably_then_the_same_worker_finishes_a_good_run(
    client, user, worker, wait_for, broken_model, shared_models, tiny_overrides, check_download
):
    proc, log = worker
    client.force_login(user)

    # a syntax error is refused at submit (issue 28): the form says where, nothing is queued
    before = Run.objects.count()
    response = client.post(reverse("runs:new"), {"upload": SimpleUploadedFile("broken.py", broken_model), "overrides": "", "dtype": "fp32", "device": "cpu"})
    assert response.status_code == 200 and "broken.py:6: syntax error" in response.content.decode()
    assert Run.objects.count() == before

    failing = upload(client, "failing.py", FAILING_AT_IMPORT, {})
    status = wait_until_done(wait_for, client, failing, log, 120)
    assert status["state"] == "failed", status
    page = client.get(reverse("runs:detail", args=[failing.id])).content.decode()
    assert "the weights file is missing" in page
    assert status["error_line"] == 9 and "failing.py" in status["error_message"], status

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
