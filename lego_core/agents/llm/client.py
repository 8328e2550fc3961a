"""One chat-completions call on the official ``openai`` client.

``chat(settings, messages, on_chunk)`` sends the messages, streams the reply
(``on_chunk(text)`` per piece) or takes it whole, and returns a
:class:`Reply` with the text and the server's reported usage.  Requests that
fail with 429, a 5xx, a timeout or a broken connection are tried again
``settings.retries`` times with exponential backoff (``backoff_s``, doubled
each time, at most 30 s; a server's ``Retry-After`` is honoured up to that);
other errors (401, 404, 400) are not.  ``EndpointError`` carries a one-line
message that names the endpoint and model, never the key.

``openai`` is imported here, on the first call: the optimizer child does not
have it and never needs it.
"""
from __future__ import annotations

import dataclasses
import time
from typing import Callable

from lego_core.agents.llm.settings import LLMSettings

MAX_BACKOFF_S = 30.0


class EndpointError(RuntimeError):
    """The endpoint did not answer a call (after its retries); ``retryable``:
    whether it was a transient kind (429, 5xx, timeout, connection)."""

    def __init__(self, message: str, retryable: bool):
        super().__init__(message)
        self.retryable = retryable


@dataclasses.dataclass
class Reply:
    """A whole reply.  Tokens are the server's ``usage`` (0 when it reports
    none); ``tries``: requests it took (1 without retries); ``notes``: one line
    per retried failure."""

    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    tries: int = 1
    notes: list = dataclasses.field(default_factory=list)

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


def chat(settings: LLMSettings, messages: list[dict], on_chunk: Callable[[str], None] | None = None, max_tokens: int | None = None) -> Reply:
    """Send ``messages`` (``[{"role": ..., "content": ...}]``) and return the reply.

    ``max_tokens`` caps the completion below ``settings.max_tokens`` (a run's
    remaining token budget).  Raises EndpointError when the endpoint fails
    after the retries, or at once for a non-transient error."""
    import openai

    client = openai.OpenAI(base_url=settings.base_url, api_key=settings.api_key, timeout=settings.timeout_s, max_retries=0)
    limit = min(settings.max_tokens, max_tokens or settings.max_tokens)
    notes: list[str] = []
    delay = settings.backoff_s
    try:
        for attempt in range(settings.retries + 1):
            try:
                reply = _once(client, settings, messages, limit, on_chunk)
                reply.tries, reply.notes = attempt + 1, notes
                return reply
            except openai.APIError as exc:
                retryable, wait, why = _classify(openai, exc, settings)
                if not retryable:
                    raise EndpointError(why, retryable=False) from None
                if attempt == settings.retries:
                    raise EndpointError(f"{why} (gave up after {attempt + 1} tries)", retryable=True) from None
                wait = min(MAX_BACKOFF_S, max(delay, wait or 0.0))
                notes.append(f"{why}; trying again in {wait:.2g} s")
                time.sleep(wait)
                delay = min(MAX_BACKOFF_S, delay * 2)
    finally:
        client.close()
    raise AssertionError("unreachable")


def _once(client, settings: LLMSettings, messages: list[dict], limit: int, on_chunk) -> Reply:
    common = dict(model=settings.model, messages=messages, temperature=settings.temperature, max_tokens=limit)
    if not settings.stream:
        done = client.chat.completions.create(**common)
        text = (done.choices[0].message.content or "") if done.choices else ""
        usage = done.usage
        if on_chunk is not None and text:
            on_chunk(text)
        return Reply(text, getattr(usage, "prompt_tokens", 0) or 0, getattr(usage, "completion_tokens", 0) or 0)
    stream = client.chat.completions.create(**common, stream=True, stream_options={"include_usage": True})
    parts: list[str] = []
    prompt = completion = 0
    try:
        for chunk in stream:
            if chunk.usage is not None:  # the last chunk (include_usage) carries the call's usage
                prompt, completion = chunk.usage.prompt_tokens or 0, chunk.usage.completion_tokens or 0
            for choice in chunk.choices or []:
                piece = getattr(choice.delta, "content", None)
                if piece:
                    parts.append(piece)
                    if on_chunk is not None:
                        on_chunk(piece)
    finally:
        stream.close()
    return Reply("".join(parts), prompt, completion)


def _classify(openai, exc: Exception, settings: LLMSettings) -> tuple[bool, float | None, str]:
    """(transient?, seconds the server asked to wait, one line naming the endpoint)."""
    where = f"the endpoint {settings.base_url} (model {settings.model})"
    if isinstance(exc, openai.APITimeoutError):
        return True, None, f"{where} did not answer within {settings.timeout_s:g} s (LEGO_LLM_TIMEOUT_S)"
    if isinstance(exc, openai.APIConnectionError):
        return True, None, f"{where} cannot be reached ({type(exc.__cause__ or exc).__name__})"
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        wait = _retry_after(exc.response)
        message = _short(exc)
        if len(settings.api_key) >= 4:  # a server that echoes the key back (some do, in 401s)
            message = message.replace(settings.api_key, "***")
        if status == 429 or status >= 500:
            return True, wait, f"{where} answered {status} ({message})"
        hint = {401: "check LEGO_LLM_API_KEY", 403: "check LEGO_LLM_API_KEY", 404: "check LEGO_LLM_BASE_URL and LEGO_LLM_MODEL"}.get(status, "")
        return False, None, f"{where} refused the request: {status} ({message})" + (f"; {hint}" if hint else "")
    return True, None, f"{where} failed: {type(exc).__name__}"


def _retry_after(response) -> float | None:
    try:
        return float(response.headers.get("retry-after"))
    except (TypeError, ValueError, AttributeError):
        return None


def _short(exc: Exception) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        text = inner.get("message") if isinstance(inner, dict) else str(inner)
    else:
        text = getattr(exc, "message", "") or str(exc)
    return " ".join(str(text).split())[:200]
