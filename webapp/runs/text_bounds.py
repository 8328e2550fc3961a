"""Bounds on the text a run stores: an upload chooses its own error
messages, and its events carry what its code printed or raised, so a file
that raises ``ValueError("x" * 50_000_000)`` would otherwise put 50 MB in
the run's row, in every viewer's websocket and on its page.

``bound_text`` cuts one string, saying how much was cut;
``bound_strings`` does it to every string inside an event's data.
"""
from __future__ import annotations

from typing import Any

MAX_MESSAGE_CHARS = 10_000  # a run's error message (Run.error_message, the closing event)
MAX_EVENT_TEXT_CHARS = 100_000  # any one string of an event (a kernel's source is far shorter)


def bound_text(text: str, limit: int) -> str:
    """``text`` itself when it has at most ``limit`` characters; else its
    beginning and how many more characters were cut, ``limit`` characters
    in all (so a bounded text is its own bound)."""
    if len(text) <= limit:
        return text
    kept = limit - len(f" … ({len(text):,} more characters cut)")
    return f"{text[:kept]} … ({len(text) - kept:,} more characters cut)"


def bound_strings(value: Any, limit: int = MAX_EVENT_TEXT_CHARS) -> Any:
    """A copy of JSON-ready ``value`` with every string (keys too) bounded by
    :func:`bound_text`, and a run's error ``message`` by MAX_MESSAGE_CHARS."""
    if isinstance(value, str):
        return bound_text(value, limit)
    if isinstance(value, dict):
        return {bound_text(str(k), limit): bound_strings(v, MAX_MESSAGE_CHARS if (k == "message" and value.get("type") == "run_failed") else limit)
                for k, v in value.items()}
    if isinstance(value, list):
        return [bound_strings(v, limit) for v in value]
    return value
