"""Pages of the runs app, for a run's owner (shared pages: ``sharing.py``;
the JSON API: ``api.py``)."""
from __future__ import annotations

from pathlib import Path
from urllib.parse import urlencode

from django.conf import settings

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.http import Http404, HttpResponse, JsonResponse
from django.db.models import Count
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.datastructures import MultiValueDict
from django.views.decorators.http import require_GET, require_POST

from lego_core.load.spec import syntax_error_text
from webapp.runs import downloads, forms, lifecycle, presenters, queue
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
        if run.error_message:  # no server paths, as on the run page (a run stored before they were scrubbed)
            run.error_message = presenters.shown_error_message(run)
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
    ``LEGO_MAX_RUNS_IN_FLIGHT`` runs going (then the form says so).  After a
    validation error the chosen file is kept in the session
    (``forms.keep_upload``) and offered again, so the user does not choose
    it twice."""
    files = request.FILES if request.method == "POST" else None
    kept = forms.kept_upload(request) if request.method == "POST" and not files.get("upload") else None
    if kept is not None:
        files = MultiValueDict({"upload": [kept]})
    form = RunForm(request.POST or None, files or None)
    if request.method == "POST" and form.is_valid():
        try:
            run = form.submit(request.user)
        except queue.RunLimitReached as exc:
            form.add_error(None, str(exc))
        else:
            forms.forget_upload(request)
            return redirect("runs:detail", run_id=run.id)
    kept_name, kept_constants = "", []
    if request.method == "POST" and "upload" not in form.errors and form.cleaned_data.get("upload"):
        kept_name, source = forms.keep_upload(request, form.cleaned_data["upload"])
        kept_constants = forms.constants_of(source)
        form.fields["upload"].required = False  # rendering only: the kept file stands in for a new one
    context = {"form": form, "kept_name": kept_name, "kept_constants": kept_constants, "examples": forms.example_names(),
               "example_cpu_sizes": forms.example_cpu_sizes(),  # upload_form.js's "CPU size" (tiny.json)
               "max_upload_bytes": settings.LEGO_MAX_UPLOAD_BYTES}  # upload_form.js refuses a larger file before it is sent
    return render(request, "runs/new.html", context)


@login_required
@require_POST
def run_constants(request):
    """JSON: the module-level constants of a posted model file (``upload``),
    read from its syntax tree, never executed: ``{"constants": [{"name",
    "value"}...]}``, or ``{"error": ...}`` (400) for a file that does not
    parse."""
    upload = request.FILES.get("upload")
    if upload is None or upload.size > settings.LEGO_MAX_UPLOAD_BYTES:
        return JsonResponse({"error": "Choose a Python file (.py) of at most "
                             f"{settings.LEGO_MAX_UPLOAD_BYTES // 1000} kB."}, status=400)
    try:  # the same words the form says at submit (forms.compiled_source)
        found = forms.constants_of(forms.compiled_source(upload), strict=True)
    except ValidationError as exc:  # not UTF-8 text, or does not compile
        return JsonResponse({"error": " ".join(exc.messages)}, status=400)
    except SyntaxError as exc:  # compiles but the tree does not parse (never expected); Python may give no line
        return JsonResponse({"error": f"The file does not parse: {syntax_error_text(exc)}."}, status=400)
    return JsonResponse({"constants": found})


@login_required
@require_GET
def run_example(request, name):
    """One of the reference models (``LEGO_EXAMPLES_DIR``), as text."""
    if name not in forms.example_names():
        raise Http404("no such example")
    text = (Path(settings.LEGO_EXAMPLES_DIR) / name).read_text()
    return HttpResponse(text, content_type="text/x-python; charset=utf-8")


@login_required
@require_GET
def run_compare(request):
    """Two of the user's runs of the same model side by side
    (``?run=<id>&run=<id>``, the runs list's ticked boxes)."""
    ids = request.GET.getlist("run")
    if len(ids) != 2 or ids[0] == ids[1]:
        messages.info(request, "Tick two runs of the same model to compare them.")
        return redirect("runs:list")
    try:
        runs = [own_run(request, run_id) for run_id in ids]
    except (ValueError, ValidationError):
        raise Http404("no such run") from None
    if runs[0].original_filename != runs[1].original_filename:
        messages.info(request, f"{runs[0].original_filename} and {runs[1].original_filename} are different models; "
                      "tick two runs of the same model to compare them.")
        return redirect("runs:list")
    runs.sort(key=lambda r: r.created_at)
    return render(request, "runs/compare.html", presenters.compare_context(*runs))


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
        messages.info(request, f"The run had already ended ({run.how_ended}); nothing to cancel.")
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
