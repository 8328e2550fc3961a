"""A Hugging Face model through the whole web flow: upload, a real Celery worker
(PostgreSQL, Redis), the run page and the downloaded zip (issue 24).

The upload is ``bench/models/real/hf_bert.py`` as its users write it
(``transformers``' ``BertModel`` from a config: integer ``input_ids`` and an
``attention_mask`` input) at its tiny sizes.  Before, every such run searched
and then failed at the composed-model check, because importing the user's
file (and ``transformers`` through it) counted against LEGO's generated
files.  Now the run finishes, the page shows the plan, the report says that
the end-to-end check ran LEGO's plan (not the user's forward), and the zip's
``ModelNew`` matches the model on inputs the optimizer never saw.
"""
import json
from pathlib import Path

import pytest
from django.urls import reverse

from test_web_worker import upload, wait_until_done
from webapp.runs.models import Run

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

REPO = Path(__file__).resolve().parents[2]
BERT = REPO / "bench" / "models" / "real" / "hf_bert.py"
TINY = json.loads((BERT.parent / "tiny.json").read_text())["hf_bert.py"]


def test_a_hugging_face_bert_upload_finishes_runs_its_plan_and_downloads(client, user, start_worker, agents_worker, wait_for,
                                                                         check_download):
    proc, log = start_worker("worker")
    client.force_login(user)
    run = upload(client, "hf_bert.py", BERT.read_bytes(), TINY)
    status = wait_until_done(wait_for, client, run, log, 900)
    run.refresh_from_db()
    assert status["state"] == "finished", (status, run.error_message, log.read_text(errors="replace")[-4000:])

    page = client.get(reverse("runs:detail", args=[run.id])).content.decode()
    assert 'id="plan-table"' in page
    report = Run.objects.get(pk=run.id).report
    assert report["end_to_end"]["passed"] and report["end_to_end"]["forward"]["ran"] == "plan", report["end_to_end"]
    assert report["summary"]["triton"] >= 1

    response = client.get(reverse("runs:download", args=[run.id]))
    assert response.status_code == 200
    names = check_download(b"".join(response.streaming_content), BERT, TINY)
    assert any(n.endswith("/optimized_model.py") for n in names) and any(n.endswith("/lego_overrides.py") for n in names)
    assert proc.poll() is None

