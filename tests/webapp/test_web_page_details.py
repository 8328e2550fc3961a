"""Page details of issue 28 (the browser half: ``test_browser_page_details.py``):

- a revoked share page offers "Back to your runs" only to someone logged in;
- the downloaded zip's ``.lego_output.json`` (and report.json) names the run
  by the same id as the zip's name;
- a CPU run's headline speedup says it is a GPU-targeted estimate, not
  measured, and what the zip does on a CPU (Triton's interpreter, far slower
  than eager).
"""
from __future__ import annotations

import html
import io
import json
import re
import zipfile

import pytest
from django.test import Client
from django.urls import reverse

from webapp.runs import downloads, execution
from webapp.runs.models import Run
from webapp.runs.tasks import optimize_run

pytestmark = pytest.mark.django_db


def text_of(response) -> str:
    return html.unescape(re.sub(r"\s+", " ", response.content.decode()))


# --- 5. a revoked share page --------------------------------------------------------------


def test_a_revoked_share_page_offers_back_to_your_runs_only_to_logged_in_users(make_run, user, other_user, sample_report):
    run = make_run(state=Run.State.FINISHED, report=sample_report)
    token = run.create_share_token()
    run.revoke_share_token()
    shared = reverse("runs:shared", args=[token])
    visitor = Client()
    page = visitor.get(shared)
    assert page.status_code == 404 and "the link is wrong or was revoked" in text_of(page)
    assert "Back to your runs" not in text_of(page) and 'id="back-to-runs"' not in page.content.decode()
    for someone in (user, other_user):  # the owner, and any other logged-in user, have runs to go back to
        client = Client()
        client.force_login(someone)
        page = client.get(shared)
        assert page.status_code == 404 and "Back to your runs" in text_of(page)


# --- 6. the zip's record and its name ------------------------------------------------------


def test_the_worker_gives_lego_core_the_runs_id_the_zip_is_named_by(make_run, monkeypatch, sample_report):
    run = make_run(state=Run.State.QUEUED)
    given = []
    monkeypatch.setattr(execution, "optimize", lambda spec, out_dir, config=None, sink=None, run_id=None:
                        given.append(run_id) or sample_report)
    optimize_run(str(run.id))
    assert given == [str(run.id)[:8]]
    assert downloads.zip_folder_name(run).endswith(f"-lego-{given[0]}")


@pytest.mark.slow
def test_the_downloaded_zips_record_names_the_run_of_the_zips_name(make_run, user_client, settings, tmp_path,
                                                                    shared_models, tiny_overrides):
    """A real run (scores_chain at its tiny sizes, on the CPU) through the
    task, then the zip: before, ``.lego_output.json`` held lego_core's own
    random id, unrelated to the ``-lego-<id>`` of the zip's name."""
    settings.LEGO_AGENT_FANOUT = False  # agents in the run's own process: no agents worker here
    settings.LEGO_CACHE_DIR = tmp_path / "kernel-cache"
    run = make_run(state=Run.State.QUEUED, source=(shared_models / "scores_chain.py").read_bytes(),
                   filename="scores_chain.py", overrides=tiny_overrides("scores_chain.py"), device="cpu")
    optimize_run(str(run.id))
    run.refresh_from_db()
    assert run.state == Run.State.FINISHED, run.error_message
    response = user_client.get(reverse("runs:download", args=[run.id]))
    assert response.status_code == 200
    name = re.search(r'filename="([^"]+)\.zip"', response["Content-Disposition"]).group(1)
    assert name == f"scores_chain-lego-{str(run.id)[:8]}"
    with zipfile.ZipFile(io.BytesIO(b"".join(response.streaming_content))) as zf:
        record = json.loads(zf.read(f"{name}/.lego_output.json"))
        report = json.loads(zf.read(f"{name}/report.json"))
    assert name.endswith("-lego-" + record["run_id"])
    assert report["run_id"] == record["run_id"] == str(run.id)[:8]


# --- 7. what a CPU run's speedup is ------------------------------------------------------------


def test_a_cpu_runs_speedup_says_it_is_a_gpu_estimate_and_what_the_zip_does_on_a_cpu(user_client, make_run, sample_report):
    """Before: "1.80x, estimated by the cost model", while the zip's ModelNew
    ran 440x slower than eager on that CPU (Triton's interpreter)."""
    run = make_run(state=Run.State.FINISHED, device="cpu", report=sample_report)
    page = text_of(user_client.get(reverse("runs:detail", args=[run.id])))
    speedup = re.search(r'<dd id="run-speedup-live".*?</dd>', page).group(0)
    assert "2.16×" in speedup and "estimated by the cost model for a GPU, not measured" in speedup
    note = re.search(r'<p class="note" id="run-speedup-cpu">(.*?)</p>', speedup).group(1)
    assert "estimate for the plan on a GPU" in note and "not a time measured" in note
    assert "need a CUDA GPU" in note and "Triton's interpreter" in note and "far slower than eager" in note
    # the shared page says the same
    token = run.create_share_token()
    assert 'id="run-speedup-cpu"' in Client().get(reverse("runs:shared", args=[token])).content.decode()
    # a GPU run's measured speedup says neither
    measured = dict(sample_report, device="cuda", plan=dict(sample_report["plan"], cost_kind="measured"))
    gpu_run = make_run(state=Run.State.FINISHED, device="cuda", report=measured)
    page = text_of(user_client.get(reverse("runs:detail", args=[gpu_run.id])))
    assert "measured on the GPU" in page and 'id="run-speedup-cpu"' not in page
