"""The app's own error pages (``handler400/403/404/500`` in ``urls.py``).

Pages get the templates ``400.html``, ``403.html``, ``404.html`` and
``500.html`` (in ``webapp/templates``, with the site's header and a way
back); anything under ``/api/`` gets JSON ``{"detail": ...}``, the shape DRF
gives the API's own errors.  Shown with ``DEBUG`` off, which ``make run``
is by default: Django's debug pages list the URL patterns and settings.
"""
from __future__ import annotations

from django.conf import settings
from django.core.exceptions import RequestDataTooBig, TooManyFieldsSent, TooManyFilesSent
from django.http import JsonResponse
from django.shortcuts import render
from django.urls import Resolver404

API_PREFIX = "/api/"

TITLES = {
    400: "Bad request",
    403: "Not allowed",
    404: "Not found",
    500: "Something went wrong",
}

DEFAULT_DETAIL = {
    400: "The request could not be read. Check what you sent and try again.",
    403: "You may not do this. If you were logged out, log in again and retry.",
    404: "There is nothing at this address. A run you do not own, and a share link that was revoked, look the same.",
    500: "The server met an error it did not expect. It has been logged; try again, and if it keeps happening tell the service's administrator.",
}


def exception_message(exception) -> str:
    """The message an Http404/PermissionDenied/SuspiciousOperation was raised
    with, when it is one of ours (plain text); "" for the resolver's own."""
    if exception is None or isinstance(exception, Resolver404):
        return ""
    args = getattr(exception, "args", ())
    return args[0] if args and isinstance(args[0], str) else ""


def bad_request_message(exception) -> str:
    """What is wrong with a request Django refused to read, and how to fix
    it ("" for anything else: its text is Django's, not for users)."""
    if isinstance(exception, RequestDataTooBig):
        return (
            f"The form fields other than the file are larger than {settings.DATA_UPLOAD_MAX_MEMORY_SIZE // 1024} kB. "
            "Send shorter overrides (only the constants you change)."
        )
    if isinstance(exception, TooManyFieldsSent):
        return f"The request has more than {settings.DATA_UPLOAD_MAX_NUMBER_FIELDS} form fields. Send only model, overrides, dtype and device."
    if isinstance(exception, TooManyFilesSent):
        return f"The request has more than {settings.DATA_UPLOAD_MAX_NUMBER_FILES} files. Send the model file alone."
    return ""


def error_response(request, status: int, exception=None):
    """JSON under ``/api/``, else the ``<status>.html`` page."""
    message = {400: bad_request_message, 404: exception_message}.get(status, lambda exc: "")(exception)
    detail = message or DEFAULT_DETAIL[status]
    if request.path.startswith(API_PREFIX):
        return JsonResponse({"detail": detail}, status=status)
    context = {"status": status, "title": TITLES[status], "detail": detail, "request_path": request.path}
    return render(request, f"{status}.html", context, status=status)


def bad_request(request, exception=None):
    """400: an unreadable request (e.g. a form body over Django's limits)."""
    return error_response(request, 400, exception)


def permission_denied(request, exception=None):
    """403."""
    return error_response(request, 403, exception)


def page_not_found(request, exception=None):
    """404, with the message of our own Http404 (e.g. a revoked share link)."""
    return error_response(request, 404, exception)


def server_error(request):
    """500: never the exception's text (it may hold server details)."""
    try:
        return error_response(request, 500)
    except Exception:  # noqa: BLE001 - the error page itself must not fail
        from django.http import HttpResponseServerError

        return HttpResponseServerError(b"<h1>Something went wrong</h1><p>The error has been logged.</p>", content_type="text/html")
