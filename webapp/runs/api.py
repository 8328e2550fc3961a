"""The JSON API for scripts (``/api/``, namespace ``api``): post a model, poll
its run, read its events, download its output.  Documented in ``docs/API.md``.

Django REST framework does the HTTP side: token (``Authorization: Token
<key>``, no CSRF) or session authentication, 401/404 as JSON.  Uploads are
validated by the page's own ``RunForm``, so the API accepts exactly what the
page accepts; its errors come back as ``{"errors": {field: [messages]}}``.

Also here: the "API token" page, where a logged-in user sees, creates or
regenerates the token scripts send.
"""
from __future__ import annotations

import json
import re
from typing import Any, Callable

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpResponsePermanentRedirect, JsonResponse
from django.shortcuts import redirect, render
from django.urls import Resolver404, resolve, reverse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods
from rest_framework import exceptions, serializers, status
from rest_framework.authtoken.models import Token
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.response import Response
from rest_framework.views import APIView, exception_handler

from lego_core.load.overrides import MAX_DEPTH, file_constants
from webapp.runs import downloads, lifecycle, presenters, queue
from webapp.runs.forms import RunForm, source_text
from webapp.runs.models import Run

MAX_EVENTS = 1000  # the most events one events request returns

AUTH_HINT = (
    "Send the header 'Authorization: Token <key>'. Get your key on the API token page "
    "(/api/token/ when logged in) or with 'python manage.py create_api_token <username>'"
)


# --- errors ------------------------------------------------------------------


def api_exception_handler(exc, context):
    """DRF's handler, plus how to authenticate on a 401."""
    response = exception_handler(exc, context)
    if response is not None and isinstance(exc, (exceptions.NotAuthenticated, exceptions.AuthenticationFailed)):
        response.data = {"detail": str(exc.detail), "hint": AUTH_HINT}
    return response


def bad_request(errors: dict[str, list[str]]) -> Response:
    """400 with ``{"errors": {field: [messages]}}``."""
    return Response({"errors": errors}, status=status.HTTP_400_BAD_REQUEST)


class RunAPIView(APIView):
    """Base of the run endpoints: the owner's runs only (others' are 404)."""

    def get_exception_handler(self):
        """``api_exception_handler``: DRF's, with a hint on 401."""
        return api_exception_handler

    def get_run(self, run_id) -> Run:
        """The request user's run ``run_id``; 404 for a missing run or someone else's."""
        run = Run.objects.filter(pk=run_id, owner=self.request.user).first()
        if run is None:
            raise exceptions.NotFound(f"You have no run {run_id} (no such run, or it is someone else's).")
        return run


class AnyAccept(BaseContentNegotiation):
    """File responses ignore the client's ``Accept`` header (a script asking
    for ``application/zip`` gets the zip, not a 406); errors stay JSON."""

    def select_parser(self, request, parsers):
        """The first parser (these views read no body)."""
        return parsers[0]

    def select_renderer(self, request, renderers, format_suffix=None):
        """JSON, for error bodies, whatever ``Accept`` says."""
        return renderers[0], renderers[0].media_type


# --- shapes ------------------------------------------------------------------


def run_urls(request, run: Run) -> dict[str, str]:
    """Absolute URLs of a run: its JSON, events, zip, report.html and page."""
    def absolute(name: str) -> str:
        return request.build_absolute_uri(reverse(name, args=[run.id]))

    return {
        "self": absolute("api:run"),
        "events": absolute("api:events"),
        "download": absolute("api:download"),
        "report_html": absolute("api:report-html"),
        "page": absolute("runs:detail"),
        "cancel": absolute("api:cancel"),
    }


def run_speedup(run: Run) -> float | None:
    """The chosen plan's speedup over the baseline (report.json ``plan.speedup``)."""
    return ((run.report or {}).get("plan") or {}).get("speedup")


def run_json(request, run: Run) -> dict[str, Any]:
    """What ``GET /api/runs/<id>/`` returns: the page's status (state, active,
    queue_position, elapsed_s, last_seq, activity, error_message, error_line), the run's
    options and times, the report (report.json) once finished, and URLs."""
    return {
        **presenters.run_status(run),
        "model": run.original_filename,
        "overrides": run.ordered_overrides,
        "dtype": run.dtype,
        "device": run.device,
        "agent": run.agent,
        "created": run.created_at,
        "started": run.started_at,
        "finished": run.finished_at,
        "speedup": run_speedup(run),
        "report": presenters.shown_report(run) if run.state == Run.State.FINISHED else None,
        "urls": run_urls(request, run),
    }


class RunSummarySerializer(serializers.ModelSerializer):
    """One row of ``GET /api/runs/``."""

    model = serializers.CharField(source="original_filename")
    created = serializers.DateTimeField(source="created_at")
    speedup = serializers.SerializerMethodField()
    queue_position = serializers.SerializerMethodField()
    elapsed_s = serializers.SerializerMethodField()
    url = serializers.SerializerMethodField()

    class Meta:
        model = Run
        fields = ["id", "model", "state", "queue_position", "speedup", "created", "elapsed_s", "url"]

    def get_queue_position(self, run: Run) -> int | None:
        """The run's place in the queue (1: next), None unless queued
        (``context["positions"]``: every queued run's, read once)."""
        return self.context["positions"].get(run.pk)

    def get_speedup(self, run: Run) -> float | None:
        """``plan.speedup`` of the report; None until the run finished
        (read by the database: the list does not load reports)."""
        return float(run.speedup) if run.speedup not in (None, "") else None

    def get_elapsed_s(self, run: Run) -> float:
        """Seconds the run took (or has taken so far), to 0.1 s."""
        return round(run.elapsed_s, 1)

    def get_url(self, run: Run) -> str:
        """The run's absolute ``api:run`` URL."""
        return self.context["request"].build_absolute_uri(reverse("api:run", args=[run.id]))


class WholeNumberField(serializers.IntegerField):
    """An integer written as digits only: DRF's IntegerField also takes
    ``2.0``, which would make ``limit=2.0`` valid but ``after=1.5`` not."""

    def to_internal_value(self, data):
        if isinstance(data, bool) or not re.fullmatch(r"-?[0-9]+", str(data).strip()):
            self.fail("invalid")
        return super().to_internal_value(data)


class EventsQuerySerializer(serializers.Serializer):
    """``?after=<seq>&limit=<n>`` of the events endpoint."""

    after = WholeNumberField(min_value=0, default=0, error_messages={
        key: "after must be a whole number >= 0: the seq of the last event you already have (0 for all)."
        for key in ("invalid", "min_value", "max_string_length")
    })
    limit = WholeNumberField(min_value=1, max_value=MAX_EVENTS, default=MAX_EVENTS, error_messages={
        key: f"limit must be a whole number from 1 to {MAX_EVENTS} (the default)."
        for key in ("invalid", "min_value", "max_value", "max_string_length")
    })


# --- uploads -----------------------------------------------------------------


class OverridesError(ValueError):
    """The ``overrides`` field cannot be read (bad JSON, a value that is no number)."""


def overrides_text(value: Any, file_values: Callable[[], dict] = dict) -> str:
    """The ``overrides`` field as the form's ``name=value`` text: text passes
    through; a JSON object (sent as JSON, or as text starting with ``{``)
    becomes one ``name=value`` line per entry, a JSON array written as a
    list, or as a tuple where the file's constant of that name is one
    (``file_values()``: the model file's constants, read only then; JSON
    has no tuple)."""
    if value is None:
        return ""
    if isinstance(value, str):
        if not value.strip().startswith(("{", "[")):
            return value
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise OverridesError(
                f"overrides is not valid JSON ({exc.msg} at character {exc.pos}). "
                'Send a JSON object like {"batch_size": 2} or text like "batch_size=2, d_model=64".'
            ) from None
    if not isinstance(value, dict):
        raise OverridesError('overrides must be a JSON object like {"batch_size": 2} or text like "batch_size=2".')
    lines = []
    for name, item in value.items():
        if not str(name).isidentifier():
            raise OverridesError(f"override name {name!r} is not a Python identifier. Use the constant's name, e.g. batch_size.")
        if isinstance(item, list):
            item = array_text(name, item, file_values().get(name))
        elif isinstance(item, bool):
            item = "true" if item else "false"
        elif not isinstance(item, (int, float, str)):
            raise OverridesError(f"override {name}={json.dumps(item)} is not a number. "
                                 f"Give {name} an integer, a float, true/false or a list of them, e.g. [64, 32].")
        lines.append(f"{name}={item}")
    return "\n".join(lines)


def array_text(name: str, items: list, like: Any, depth: int = 0) -> str:
    """A JSON array as override text: in parentheses where ``like`` (the
    file's value) is a tuple, else in square brackets; nested arrays
    follow the file's elements alike.  An element that is no number stays
    as JSON wrote it, so that the override parser names it
    (``sizes[1]='"a"' is not a number``)."""
    if depth >= MAX_DEPTH:
        raise OverridesError(f"override {name} is nested more than {MAX_DEPTH} deep. Give {name} lists nested at most {MAX_DEPTH} deep.")
    parts = []
    for k, element in enumerate(items):
        element_like = like[min(k, len(like) - 1)] if type(like) in (list, tuple) and like else None
        if isinstance(element, list):
            parts.append(array_text(name, element, element_like, depth + 1))
        elif isinstance(element, bool):
            parts.append("true" if element else "false")
        elif isinstance(element, (int, float)):
            parts.append(repr(element))
        else:
            parts.append(json.dumps(element))
    if type(like) is tuple:
        return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"
    return "[" + ", ".join(parts) + "]"


def upload_constants(upload) -> dict:
    """The constants of an uploaded model file, from its syntax tree
    (``lego_core.load.overrides.file_constants``); none for a file that is too
    large, not UTF-8 text or does not parse (the form says why)."""
    if upload is None or upload.size > settings.LEGO_MAX_UPLOAD_BYTES:
        return {}
    try:
        return file_constants(source_text(upload))
    except (ValidationError, SyntaxError, ValueError, RecursionError, MemoryError):
        return {}


def form_errors(form: RunForm) -> dict[str, list[str]]:
    """The form's errors with the API's field names (``upload`` -> ``model``)
    and, where the form only says what is wrong, how to fix it (the
    overrides' messages carry their fix already: ``forms.field_message``)."""
    errors: dict[str, list[str]] = {}
    for field, items in form.errors.get_json_data().items():
        messages = []
        for item in items:
            message, code = item["message"], item["code"]
            if field == "upload" and code == "required":
                message = "No model file. Send the .py file as the multipart field 'model', e.g. curl -F model=@my_model.py."
            elif field in ("dtype", "device", "agent") and code == "invalid_choice":
                choices = ", ".join(value for value, _ in Run._meta.get_field(field).choices)
                message = f"{message} Use one of: {choices}."
            messages.append(message)
        key = {"upload": "model", "__all__": "non_field_errors"}.get(field, field)
        errors[key] = messages
    return errors


def create_run(request) -> tuple[Run | None, dict[str, list[str]]]:
    """Validate an upload like the page does and, when it is valid, save the
    run and queue it once the transaction commits.  Returns ``(run, {})`` or
    ``(None, errors)``; raises ``queue.RunLimitReached`` when the user has
    too many runs going."""
    data = request.data
    upload = request.FILES.get("model")
    if upload is None and isinstance(data.get("model"), str) and data.get("model"):
        return None, {"model": [
            "model was sent as text, not as a file. Send the file itself: curl -F model=@path/to/model.py "
            "(note the @)."
        ]}
    try:
        overrides = overrides_text(data.get("overrides"), lambda: upload_constants(upload))
    except OverridesError as exc:
        return None, {"overrides": [str(exc)]}
    fields = {
        "overrides": overrides,
        "dtype": data.get("dtype") or "fp32",
        "device": data.get("device") or "cpu",
        "agent": data.get("agent") or "template",
    }
    form = RunForm(fields, {"upload": upload} if upload is not None else {})
    if not form.is_valid():
        return None, form_errors(form)
    return form.submit(request.user), {}


# --- endpoints ---------------------------------------------------------------


class RunListCreate(RunAPIView):
    """``GET /api/runs/`` the user's runs (``?state=`` keeps one state);
    ``POST /api/runs/`` starts a run from a multipart upload."""

    def get(self, request):
        """``{"count", "runs": [{id, model, state, speedup, created, elapsed_s, url}]}``, newest first."""
        runs = Run.objects.filter(owner=request.user).without_reports()
        wanted = request.query_params.get("state", "")
        if wanted:
            if wanted not in Run.State.values:
                return bad_request({"state": [f"unknown state {wanted!r}. Use one of: {', '.join(Run.State.values)}."]})
            runs = runs.filter(state=wanted)
        context = {"request": request, "positions": queue.queue_positions()}
        rows = RunSummarySerializer(runs, many=True, context=context).data
        return Response({"count": len(rows), "runs": rows})

    def post(self, request):
        """201 with the new run's JSON (``Location``: its URL), 400 with the
        errors, or 429 when the user already has ``LEGO_MAX_QUEUED_PER_USER``
        runs queued or ``LEGO_MAX_RUNS_IN_FLIGHT`` queued or running."""
        try:
            run, errors = create_run(request)
        except queue.RunLimitReached as exc:
            return Response({"errors": {"non_field_errors": [str(exc)]}}, status=status.HTTP_429_TOO_MANY_REQUESTS)
        if run is None:
            return bad_request(errors)
        body = run_json(request, run)
        return Response(body, status=status.HTTP_201_CREATED, headers={"Location": body["urls"]["self"]})


class RunDetail(RunAPIView):
    """``GET /api/runs/<id>/``: state, elapsed time, last event, error, report."""

    def get(self, request, run_id):
        """The run's JSON (``run_json``)."""
        return Response(run_json(request, self.get_run(run_id)))


class RunCancel(RunAPIView):
    """``POST /api/runs/<id>/cancel/``: cancel a queued or running run."""

    def post(self, request, run_id):
        """200 with the run's JSON (state ``cancelled``), or 409 when the
        run had already ended."""
        run = self.get_run(run_id)
        if not lifecycle.cancel_run(run):
            run.refresh_from_db()
            return Response(
                {"detail": f"This run already ended ({run.how_ended}); only a queued or running run can be cancelled.",
                 "state": run.state},
                status=status.HTTP_409_CONFLICT,
            )
        run.refresh_from_db()
        return Response(run_json(request, run))


class RunEvents(RunAPIView):
    """``GET /api/runs/<id>/events/?after=<seq>&limit=<n>``: stored events
    with ``seq > after``, oldest first, at most ``limit`` (≤ 1000)."""

    def get(self, request, run_id):
        """``{"state", "events": [{seq, type, data}], "last_seq", "more"}``:
        ``last_seq`` is the last returned event's seq (when none, ``after``
        or the run's last seq if that is smaller), the next request's
        ``after``; ``more`` says whether more are stored."""
        run = self.get_run(run_id)
        query = EventsQuerySerializer(data=request.query_params)
        if not query.is_valid():
            return bad_request({field: [str(m) for m in messages] for field, messages in query.errors.items()})
        after = min(query.validated_data["after"], presenters.MAX_SEQ)  # a bigger one is past any seq (and SQLite's integers)
        limit = query.validated_data["limit"]
        state = run.state  # read before the events: a run that ended has all its events stored
        events = list(run.events.filter(seq__gt=after).order_by("seq")[: limit + 1])
        more = len(events) > limit
        events = events[:limit]
        return Response({
            "state": state,
            "events": [presenters.event_json(e) for e in events],
            "last_seq": events[-1].seq if events else min(after, presenters.last_event_seq(run.id)) if after else 0,
            "more": more,
        })


class RunDownload(RunAPIView):
    """``GET /api/runs/<id>/download.zip``: the finished run's output folder."""

    content_negotiation_class = AnyAccept

    def get(self, request, run_id):
        """The zip (404 until the run has finished)."""
        return downloads.zip_response(self.get_run(run_id))


class RunReportHtml(RunAPIView):
    """``GET /api/runs/<id>/report.html``: the finished run's self-contained report."""

    content_negotiation_class = AnyAccept

    def get(self, request, run_id):
        """report.html as an attachment (404 until the run has finished)."""
        return downloads.report_html_response(self.get_run(run_id))


# --- anything else under /api/ ---------------------------------------------------


def _is_endpoint(path: str) -> bool:
    """Whether ``path`` is one of the API's own URLs (not the catch-all)."""
    try:
        return resolve(path).url_name != "not-found"
    except Resolver404:
        return False


@csrf_exempt
def not_found(request, path: str = ""):
    """The catch-all at the end of ``api_urls``: a JSON 404 for any other
    path under ``/api/`` (a malformed run id included) instead of Django's
    HTML page.  A path that only lacks its trailing slash is redirected on
    GET/HEAD, as ``APPEND_SLASH`` would (the catch-all stops it), and named
    in the 404 otherwise (a redirect would lose a POST's body)."""
    if not request.path.endswith("/") and _is_endpoint(request.path + "/"):
        with_slash = request.path + "/"
        if request.method in ("GET", "HEAD"):
            query = request.META.get("QUERY_STRING", "")
            return HttpResponsePermanentRedirect(with_slash + (f"?{query}" if query else ""))
        detail = f"No API endpoint at {request.path}: use {with_slash} (with the trailing slash)."
    else:
        detail = (
            f"No API endpoint at {request.path}. The endpoints are /api/runs/ and "
            "/api/runs/<run id>/ (a UUID) with events/, cancel/, download.zip and report.html; see docs/API.md."
        )
    return JsonResponse({"detail": detail}, status=404)


# --- the API token page --------------------------------------------------------


def regenerate_token(user) -> Token:
    """Replace the user's token with a new one (the old key stops working)."""
    Token.objects.filter(user=user).delete()
    return Token.objects.create(user=user)


@login_required
@require_http_methods(["GET", "POST"])
def api_token_page(request):
    """Show the user's API token; POST ``action=create`` makes one,
    ``action=regenerate`` replaces it."""
    if request.method == "POST":
        if request.POST.get("action") == "regenerate":
            regenerate_token(request.user)
        else:
            Token.objects.get_or_create(user=request.user)
        return redirect("api:token")
    token = Token.objects.filter(user=request.user).first()
    context = {
        "token": token,
        "api_root": request.build_absolute_uri(reverse("api:runs")),
    }
    return render(request, "runs/api_token.html", context)
