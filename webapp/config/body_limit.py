"""A request-body limit enforced before the body is read, for everyone.

Django reads a request's whole body (into a spooled file) before any
middleware, authentication or view runs, and its own limits
(``DATA_UPLOAD_MAX_MEMORY_SIZE``) leave file uploads out.  These wrappers
sit in front of Django, in ``asgi.py`` and ``wsgi.py``:

- a declared ``Content-Length`` over ``LEGO_MAX_REQUEST_BYTES`` (or one that
  is not a number) is answered 413 (400) at once; not one byte is read;
- a body without a length (``Transfer-Encoding: chunked``) is counted while
  it streams in; once past the limit the client gets 413 and the
  application sees the client go away (Django then gives up on the request).

The 413 says what the limit is and how big a model file may be: JSON under
``/api/``, elsewhere the site's own page (``templates/413.html``: the upload's
size, the model file's limit, that nothing was stored, and the way back to
the form, whose fields the browser's Back button keeps).
"""
from __future__ import annotations

import html
import json

from django.conf import settings

API_PREFIX = "/api/"


def limit_bytes() -> int:
    """``LEGO_MAX_REQUEST_BYTES``: the largest request body accepted."""
    return int(settings.LEGO_MAX_REQUEST_BYTES)


def size_text(size: int) -> str:
    """``50.0 MB``, ``812 kB``, ``90 bytes`` (decimal units, as the model file's limit is said)."""
    if size >= 1_000_000:
        return f"{size / 1_000_000:.1f} MB"
    return f"{size // 1000} kB" if size >= 1000 else f"{size} bytes"


def too_large_message(size: int | None, limit: int) -> str:
    """What the client is told when its body is over ``limit`` bytes: the
    body's size (when declared), then the limit, never read as "N bytes
    over the limit"."""
    said = f"The request body is {size:,} bytes ({size_text(size)}), over" if size is not None else "The request body is over"
    upload_kb = settings.LEGO_MAX_UPLOAD_BYTES // 1000
    return (
        f"{said} the limit of {limit:,} bytes. "
        f"A model file may be at most {upload_kb} kB; upload the .py file alone."
    )


def too_large_page(path: str, size: int | None, limit: int) -> str | None:
    """The site's 413 page (``413.html`` on ``base.html``) for a page's
    upload over the limit; None when it cannot be rendered (the caller
    falls back to a plain page)."""
    try:
        from django.template.loader import render_to_string

        upload_kb = settings.LEGO_MAX_UPLOAD_BYTES // 1000
        form = path.rstrip("/").endswith("/runs/new")
        return render_to_string("413.html", {
            "title": "File too large", "upload_kb": upload_kb, "limit": f"{limit:,}",
            "size": f"{size:,}" if size is not None else None, "size_text": size_text(size) if size is not None else None,
            "from_form": form, "back": "/runs/new/" if form else "/",
        })
    except Exception:  # noqa: BLE001 - an error page must not fail: the plain one goes out instead
        return None


def error_body(path: str, status: int, message: str, size: int | None = None) -> tuple[bytes, bytes]:
    """``(content type, body)`` of an error: JSON under ``/api/``, else HTML
    (a 413: the site's page, :func:`too_large_page`, with the body's
    declared ``size``)."""
    if path.startswith(API_PREFIX):
        return b"application/json", json.dumps({"detail": message}).encode()
    if status == 413:
        page = too_large_page(path, size, limit_bytes())
        if page is not None:
            return b"text/html; charset=utf-8", page.encode()
    title = "Request too large" if status == 413 else "Bad request"
    page = (
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>{title} · LEGO</title></head><body><main><h1>{title}</h1>"
        f"<p>{html.escape(message)}</p><p><a href=\"/\">Back to your runs</a></p></main></body></html>"
    )
    return b"text/html; charset=utf-8", page.encode()


def declared_length(value: str | bytes | None) -> int | None:
    """The Content-Length as an int; None when absent; -1 when malformed."""
    if value is None:
        return None
    text = value.decode("latin-1") if isinstance(value, bytes) else value
    text = text.strip()
    return int(text) if text.isdigit() else -1


class ASGIBodyLimit:
    """ASGI middleware: HTTP requests whose body is over the limit get 413
    before the wrapped application reads any of it (declared length) or as
    soon as the streamed body passes it (no length).  Other scopes
    (websockets, lifespan) pass through."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        limit = limit_bytes()
        headers = dict(scope.get("headers") or [])
        length = declared_length(headers.get(b"content-length"))
        if length == -1:
            return await self.respond(send, scope, 400, "The Content-Length header is not a whole number.")
        if length is not None and length > limit:
            return await self.respond(send, scope, 413, too_large_message(length, limit), length)

        received = 0
        state = {"started": False, "rejected": False}

        async def limited_receive():
            nonlocal received
            if state["rejected"]:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    state["rejected"] = True
                    if not state["started"]:
                        await self.respond(send, scope, 413, too_large_message(None, limit))
                    return {"type": "http.disconnect"}  # the application stops reading
            return message

        async def guarded_send(message):
            if state["rejected"]:
                return  # the 413 went out already
            if message["type"] == "http.response.start":
                state["started"] = True
            await send(message)

        await self.app(scope, limited_receive, guarded_send)

    @staticmethod
    async def respond(send, scope, status: int, message: str, size: int | None = None) -> None:
        """Send a complete error response (the connection closes after it)."""
        content_type, body = error_body(scope.get("path", ""), status, message, size)
        await send({
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", content_type),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        })
        await send({"type": "http.response.body", "body": body})


class WSGIBodyLimit:
    """WSGI middleware: a declared ``Content-Length`` over the limit gets 413
    before the application reads anything.  (Django under WSGI reads only
    ``CONTENT_LENGTH`` bytes, so a body without a length reads as empty.)"""

    def __init__(self, app):
        self.app = app

    def __call__(self, environ, start_response):
        limit = limit_bytes()
        length = declared_length(environ.get("CONTENT_LENGTH") or None)
        if length == -1 or (length is not None and length > limit):
            status = 400 if length == -1 else 413
            message = "The Content-Length header is not a whole number." if length == -1 else too_large_message(length, limit)
            content_type, body = error_body(environ.get("PATH_INFO", ""), status, message, length if status == 413 else None)
            reason = "Bad Request" if status == 400 else "Content Too Large"
            start_response(f"{status} {reason}", [
                ("Content-Type", content_type.decode()),
                ("Content-Length", str(len(body))),
                ("Connection", "close"),
            ])
            return [body]
        return self.app(environ, start_response)
