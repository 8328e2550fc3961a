"""File responses of a finished run: its output folder as a zip, and its
self-contained ``report.html``.  Callers check who may see the run; these
only check that the run has the output."""
from __future__ import annotations

import tempfile
import zipfile
from pathlib import Path

from django.core.exceptions import SuspiciousFileOperation
from django.http import FileResponse, Http404, HttpResponse
from django.utils.http import content_disposition_header
from django.utils.text import get_valid_filename

from webapp.runs.models import Run


def zip_folder_name(run: Run) -> str:
    """``<model>-lego-<first 8 hex of the run id>``: the zip's top folder
    (and the downloads' names).  ``<model>`` is made safe here too, for runs
    stored before uploads' names were (letters, digits, -, _ and . only;
    ``model`` when nothing is left)."""
    try:
        stem = get_valid_filename(Path(run.original_filename).stem)
    except SuspiciousFileOperation:  # nothing usable left ("", "." or "..")
        stem = ""
    return f"{stem.strip('.') or 'model'}-lego-{str(run.id)[:8]}"


def finished_output(run: Run) -> Path:
    """The run's output folder; Http404 when the run has not finished."""
    out = run.output_path
    if run.state != Run.State.FINISHED or out is None or not out.is_dir():
        raise Http404("this run has no output to download (it has not finished)")
    return out


def zip_response(run: Run) -> FileResponse:
    """The output folder (kernels, optimized_model.py, report.json,
    report.html) as ``<folder>.zip``, built into a temporary file."""
    out = finished_output(run)
    folder = zip_folder_name(run)
    archive = tempfile.TemporaryFile()
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(out.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                zf.write(path, f"{folder}/{path.relative_to(out).as_posix()}")
    archive.seek(0)
    return FileResponse(archive, as_attachment=True, filename=f"{folder}.zip", content_type="application/zip")


def report_html_response(run: Run, *, attachment: bool = True) -> HttpResponse:
    """The run's ``report.html`` (written when the run finished; built now
    for a run that finished before reports existed)."""
    from webapp.runs.report_html import ensure_report_html

    path = ensure_report_html(run, finished_output(run))
    response = HttpResponse(path.read_bytes(), content_type="text/html; charset=utf-8")
    if attachment:
        # as FileResponse writes it: filename*= for a name that is not ASCII
        response["Content-Disposition"] = content_disposition_header(True, f"{zip_folder_name(run)}-report.html")
    return response
