"""A web run and the model file's folder (issue 24, a model split over files).

The jail shows the model file's folder read-only; for a web run that is the
run's own upload folder, which must hold nothing but its upload, or the
run is told not to show it.  A finished run's zip carries the model's own
modules (``reference_modules/``) with the rest of the output."""
from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import pytest
from django.urls import reverse

from webapp.runs import execution
from webapp.runs.models import Run
from webapp.runs.tasks import optimize_run

pytestmark = pytest.mark.django_db


def test_a_runs_upload_folder_is_its_own_until_something_else_sits_in_it(make_run, media_root):
    run = make_run()
    folder = Path(run.upload.path).parent
    assert folder == Path(media_root) / "runs" / str(run.id) / "upload"
    assert execution.private_upload_folder(run) is True
    (folder / "bob_model.py").write_text("# another user's upload\n")
    assert execution.private_upload_folder(run) is False


def test_an_upload_outside_its_runs_folder_is_not_private(make_run, media_root):
    run, other = make_run(), make_run()
    Run.objects.filter(pk=run.pk).update(upload=other.upload.name)  # another run's upload folder
    run.refresh_from_db()
    assert execution.private_upload_folder(run) is False


@pytest.mark.parametrize("plant, shown", [(False, True), (True, False)], ids=["own-folder", "shared-folder"])
def test_the_run_shows_its_upload_folder_only_when_it_is_its_own(make_run, monkeypatch, sample_report, plant, shown):
    run = make_run()
    if plant:
        (Path(run.upload.path).parent / "other.py").write_text("# not this run's\n")
    configs = []

    def fake(spec, out_dir, config=None, sink=None, run_id=None):
        configs.append(config)
        return sample_report

    monkeypatch.setattr(execution, "optimize", fake)
    optimize_run(str(run.id))
    assert configs[0].model_folder is shown
    assert configs[0].import_paths == ()  # never the worker's PYTHONPATH


def test_the_zip_carries_the_models_own_modules(user_client, make_run, sample_report):
    run = make_run(state="finished", report=sample_report)
    Run.objects.filter(pk=run.pk).update(output_dir=f"runs/{run.id}/output")
    run.refresh_from_db()
    out = run.output_path
    (out / "reference_modules" / "blocks").mkdir(parents=True)
    (out / "optimized_model.py").write_text("# optimized\n")
    (out / "report.json").write_text(json.dumps(sample_report))
    (out / "reference_modules" / "mylayers.py").write_text("class Scale: ...\n")
    (out / "reference_modules" / "blocks" / "__init__.py").write_text("from blocks.inner import Block\n")
    response = user_client.get(reverse("runs:download", args=[run.id]))
    assert response.status_code == 200
    archive = zipfile.ZipFile(io.BytesIO(b"".join(response.streaming_content)))
    members = {name.split("/", 1)[1]: archive.read(name) for name in archive.namelist()}
    assert members["reference_modules/mylayers.py"] == b"class Scale: ...\n"
    assert members["reference_modules/blocks/__init__.py"] == b"from blocks.inner import Block\n"
