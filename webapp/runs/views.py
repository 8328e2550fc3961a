"""Pages of the runs app, for a run's owner (shared pages: ``sharing.py``;
the JSON API: ``api.py``)."""
from __future__ import annotations

from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import Count
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

from webapp.runs import downloads, lifecycle, presenters, queue
from webapp.runs.forms import RunForm
from webapp.runs.models import Run


RUNS_PER_PAGE = 50


def own_run(request, run_id) -> Run:
    return get_object_or_404(Run, pk=run_id, owner=request.user)


@login_required
def run_list(request):
    """The user's runs, newest first, 50 to a page (``?page=``); ``?state=``
    (queued, running, finished, failed, cancelled) keeps one state; a
    queued run shows its place in the queue.  An unknown state
    shows every run and says so.  Reports are not loaded: the speedup and
    its kind are read from the database's JSON (works on SQLite and
    PostgreSQL)."""
    own = Run.objects.filter(owner=request.user)
    counts = {state: 0 for state in Run.State.values}
    for row in own.order_by().values("state").annotate(n=Count("pk")):
        counts[row["state"]] = row["n"]
    wanted = request.GET.get("state", "")
    unknown = wanted and wanted not in Run.State.values
    runs = own.without_reports()
    if wanted and not unknown:
        runs = runs.filter(state=wanted)
    page = Paginator(runs, RUNS_PER_PAGE).get_page(request.GET.get("page"))
    positions = queue.queue_positions() if counts[Run.State.QUEUED] else {}
    for run in page.object_list:
        run.queue_place = queue.describe_position(positions.get(run.pk))
    context = {
        "runs": page.object_list,
        "page": page,
        # what page links keep of the query: the state filter
        "page_query": urlencode({"state": wanted}) + "&" if wanted and not unknown else "",
        "state_filter": "" if unknown else wanted,
        "unknown_state": wanted if unknown else "",
        "state_counts": counts,
        "total": sum(counts.values()),
    }
    return render(request, "runs/list.html", context)


@login_required
def run_new(request):
    """The upload form; a valid upload starts a run, unless the user has
    ``LEGO_MAX_RUNS_IN_FLIGHT`` runs going (then the form says so)."""
    form = RunForm(request.POST or None, request.FILES or None)
    if request.method == "POST" and form.is_valid():
        try:
            run = form.submit(request.user)
        except queue.RunLimitReached as exc:
            form.add_error(None, str(exc))
        else:
            return redirect("runs:detail", run_id=run.id)
    return render(request, "runs/new.html", {"form": form})


@login_required
def run_detail(request, run_id):
    run = own_run(request, run_id)
    return render(request, "runs/detail.html", presenters.run_page_context(run, request))


@login_required
@require_POST
def run_cancel(request, run_id):
    """Cancel the owner's queued or running run, then show its page."""
    run = own_run(request, run_id)
    if lifecycle.cancel_run(run):
        messages.info(request, "The run was cancelled.")
    else:
        run.refresh_from_db()
        messages.info(request, f"The run had already ended ({run.state}); nothing to cancel.")
    return redirect("runs:detail", run_id=run.id)


@login_required
@require_GET
def run_download(request, run_id):
    """The run's output folder as a zip."""
    return downloads.zip_response(own_run(request, run_id))


@login_required
@require_GET
def run_report_html(request, run_id):
    """The finished run's self-contained report.html (opens without a server)."""
    return downloads.report_html_response(own_run(request, run_id))
