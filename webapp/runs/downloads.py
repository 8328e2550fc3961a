"""File responses of a finished run: its output folder as a zip, and its
self-contained ``report.html``.  Callers check who may see the run; these
only check that the run has the output.

The output folder was written next to uploaded code, so it is read only
through ``safe_files``: the zip holds the folder's regular files and nothing
a link, a FIFO, a device or a hard link points at."""
from __future__ import annotations

import os
import shutil
import tempfile
import time
import zipfile
from pathlib import Path

from django.core.exceptions import SuspiciousFileOperation
from django.http import FileResponse, Http404, HttpResponse
from django.utils.http import content_disposition_header
from django.utils.text import get_valid_filename

from webapp.runs import safe_files
from webapp.runs.models import Run


def short_run_id(run: Run) -> str:
    """The first 8 hex digits of the run's id: the zip's name ends with it,
    and the worker gives it to ``lego_core.optimize`` as the run id written
    into ``.lego_output.json`` and report.json, so the two agree."""
    return str(run.id)[:8]


def zip_folder_name(run: Run) -> str:
    """``<model>-lego-<first 8 hex of the run id>``: the zip's top folder
    (and the downloads' names).  ``<model>`` is made safe here too, for runs
    stored before uploads' names were (letters, digits, -, _ and . only;
    ``model`` when nothing is left)."""
    try:
        stem = get_valid_filename(Path(run.original_filename).stem)
    except SuspiciousFileOperation:  # nothing usable left ("", "." or "..")
        stem = ""
    return f"{stem.strip('.') or 'model'}-lego-{short_run_id(run)}"


def finished_output(run: Run) -> Path:
    """The run's output folder; Http404 when the run has not finished or
    its folder is missing or not a real folder (a link planted in its place)."""
    out = run.output_path
    if run.state != Run.State.FINISHED or out is None or not safe_files.is_plain_dir(out):
        raise Http404("this run has no output to download (it has not finished)")
    return out


def zip_response(run: Run) -> FileResponse:
    """The output folder (kernels, optimized_model.py, report.json,
    report.html) as ``<folder>.zip``, built into a temporary file: its
    regular files only (``safe_files.regular_files``: no links followed, no
    special or hard-linked files, no ``__pycache__``)."""
    out = finished_output(run)
    folder = zip_folder_name(run)
    archive = tempfile.TemporaryFile()
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        for relative, fd, st in safe_files.regular_files(out):
            info = zipfile.ZipInfo(f"{folder}/{relative}", date_time=time.localtime(max(st.st_mtime, 315532800))[:6])
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            with os.fdopen(fd, "rb") as src, zf.open(info, "w") as dst:
                shutil.copyfileobj(src, dst)
    archive.seek(0)
    return FileResponse(archive, as_attachment=True, filename=f"{folder}.zip", content_type="application/zip")


def report_html_response(run: Run, *, attachment: bool = True) -> HttpResponse:
    """The run's ``report.html`` (written when the run finished; built now
    for a run that finished before reports existed, or whose file is not a
    regular file of its own)."""
    from webapp.runs.report_html import report_html_bytes

    response = HttpResponse(report_html_bytes(run, finished_output(run)), content_type="text/html; charset=utf-8")
    if attachment:
        # as FileResponse writes it: filename*= for a name that is not ASCII
        response["Content-Disposition"] = content_disposition_header(True, f"{zip_folder_name(run)}-report.html")
    return response
