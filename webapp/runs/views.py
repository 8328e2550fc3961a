"""Pages and JSON endpoints of the runs app. Every run is visible to its owner only."""
from __future__ import annotations

import tempfile
import zipfile
from pathlib import Path

from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.http import FileResponse, Http404, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET

from webapp.runs import presenters
from webapp.runs.forms import RunForm
from webapp.runs.models import Run
from webapp.runs.tasks import optimize_run


def own_run(request, run_id) -> Run:
    return get_object_or_404(Run, pk=run_id, owner=request.user)


@login_required
def run_list(request):
    return render(request, "runs/list.html", {"runs": Run.objects.filter(owner=request.user)})


@login_required
def run_new(request):
    form = RunForm(request.POST or None, request.FILES or None)
    if request.method == "POST" and form.is_valid():
        run = form.save(commit=False)
        run.owner = request.user
        run.original_filename = Path(form.cleaned_data["upload"].name).name
        run.save()
        transaction.on_commit(lambda: optimize_run.delay(str(run.id)))
        return redirect("runs:detail", run_id=run.id)
    return render(request, "runs/new.html", {"form": form})


@login_required
def run_detail(request, run_id):
    run = own_run(request, run_id)
    report = run.report or {}
    context = {
        "run": run,
        "status": presenters.run_status(run),
        "report": report,
        "plan": report.get("plan") or {},
        "end_to_end": report.get("end_to_end") or {},
        "rows": presenters.plan_rows(report),
        "layout_count": presenters.layout_count(report),
        "metrics": report.get("metrics") or {},
        "timing": report.get("timing") or {},
        "error_source_line": presenters.error_source_line(run),
    }
    return render(request, "runs/detail.html", context)


@login_required
@require_GET
def run_download(request, run_id):
    """The run's output folder as a zip, built into a temporary file."""
    run = own_run(request, run_id)
    out = run.output_path
    if run.state != Run.State.FINISHED or out is None or not out.is_dir():
        raise Http404("this run has no output to download")
    folder = f"{Path(run.original_filename).stem}-lego-{str(run.id)[:8]}"
    archive = tempfile.TemporaryFile()
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(out.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                zf.write(path, f"{folder}/{path.relative_to(out).as_posix()}")
    archive.seek(0)
    return FileResponse(archive, as_attachment=True, filename=f"{folder}.zip", content_type="application/zip")


@login_required
@require_GET
def api_run(request, run_id):
    return JsonResponse(presenters.run_status(own_run(request, run_id)))


@login_required
@require_GET
def api_run_events(request, run_id):
    """Events with ``seq`` greater than ``?after=`` (default 0), oldest first."""
    run = own_run(request, run_id)
    try:
        after = int(request.GET.get("after", 0))
    except ValueError:
        return JsonResponse({"error": "after must be an integer"}, status=400)
    events = run.events.filter(seq__gt=after).order_by("seq")[:1000]
    return JsonResponse({"state": run.state, "events": [presenters.event_json(e) for e in events]})
