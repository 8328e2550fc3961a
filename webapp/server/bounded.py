"""Daphne with the request-body limit enforced in the server itself.

Daphne (Twisted underneath) receives a request's whole body before it
starts the ASGI application, then hands it over at once: a 300 MB POST
raised the process to 3.6 GB before any middleware could refuse it.  Here
the Twisted request refuses it while it streams in:

- ``gotLength``: a declared ``Content-Length`` over ``LEGO_MAX_REQUEST_BYTES``
  is answered 413 before one byte of the body is read;
- ``handleContentChunk``: a body without a length (chunked) is counted and
  answered 413 as soon as it passes the limit;

then the connection is closed and the rest of the body is dropped unread.
The 413 body is the one ``webapp.config.body_limit`` writes (JSON under
``/api/``).  ``BoundedServer`` is daphne's ``Server`` with this request
class; ``manage.py runserver`` (this app's command) serves with it.
"""
from __future__ import annotations

import io

from daphne.http_protocol import HTTPFactory, WebRequest
from daphne.server import Server

from webapp.config import body_limit

REASONS = {400: b"Bad Request", 413: b"Content Too Large"}


class BoundedWebRequest(WebRequest):
    """Daphne's request, refusing a body over the limit as it arrives."""

    refused = False
    body_seen = 0

    def gotLength(self, length):
        """Refuse a declared length over the limit before reading the body."""
        limit = body_limit.limit_bytes()
        if length is not None and length > limit:
            self.refuse(413, body_limit.too_large_message(length, limit), length)
            return
        super().gotLength(length)

    def handleContentChunk(self, data):
        """Count the body; refuse it once past the limit; drop what follows."""
        if self.refused:
            return
        self.body_seen += len(data)
        limit = body_limit.limit_bytes()
        if self.body_seen > limit:
            self.refuse(413, body_limit.too_large_message(None, limit))
            return
        super().handleContentChunk(data)

    def process(self):
        """Daphne's, unless the body was refused (the reply went out already)."""
        if self.refused:
            return None
        return super().process()

    def refuse(self, status: int, message: str, size: int | None = None) -> None:
        """Write ``status`` with ``message`` straight to the connection and
        close it once written; nothing more of the body is kept."""
        self.refused = True
        self.content = io.BytesIO()  # Twisted may still finish the request; nothing is stored
        # the request line is parsed before the headers; ``path`` is set only once the body is in
        raw = getattr(self, "path", None) or getattr(self.channel, "_path", None) or b""
        path = (raw.decode("ascii", "replace") if isinstance(raw, bytes) else str(raw)).split("?", 1)[0]
        content_type, body = body_limit.error_body(path, status, message, size)
        head = (
            b"HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
            % (status, REASONS[status], content_type, len(body))
        )
        transport = self.channel.transport if self.channel is not None else None
        if transport is not None:
            transport.write(head + body)
            transport.loseConnection()


class BoundedHTTPFactory(HTTPFactory):
    """Daphne's HTTP factory, building ``BoundedWebRequest``s."""

    def buildProtocol(self, addr):
        protocol = super().buildProtocol(addr)
        if protocol is not None:
            protocol.requestFactory = BoundedWebRequest
        return protocol


class BoundedServer(Server):
    """Daphne's server with ``BoundedHTTPFactory`` (``Server.run`` builds
    its HTTP factory itself; this swaps in ours as it is assigned)."""

    @property
    def http_factory(self):
        return self._bounded_http_factory

    @http_factory.setter
    def http_factory(self, factory):
        self._bounded_http_factory = factory if isinstance(factory, BoundedHTTPFactory) else BoundedHTTPFactory(self)
