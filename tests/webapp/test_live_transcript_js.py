"""The node panel follows an LLM agent's reply while it streams (issue 12):
``transcript_chunk`` events grow a "writing" message in RunModel and
NodePanel, the stored transcript replaces it, and ``agent_usage`` gives the
node's and the run's tokens.  Same harness page as ``test_live_views_js``
(headless Chromium, no server)."""
from __future__ import annotations

import pytest

from test_live_views_js import browser, harness, leaf, node, page, said, started, wire  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.browser, pytest.mark.llm]


def chunk(node_id, call, seq, text):
    return ("transcript_chunk", dict(node_id=node_id, agent="llm", call=call, seq=seq, text=text))


def usage(node_id, prompt, completion, cost=0.0, total=0):
    return ("agent_usage", dict(node_id=node_id, agent="llm", prompt_tokens=prompt, completion_tokens=completion,
                                cost_usd=cost, run_tokens=total))


def test_the_panel_shows_a_reply_growing_then_the_stored_transcript_and_tokens(page):
    events = wire([
        node("or0", "or", None, "model"),
        leaf("or1", "or0", "softmax", "s1"),
        started("or1"),
        chunk("or1", "llm-s1-1", 0, "Here is "),
        chunk("or1", "llm-s1-1", 1, "the kernel <b>x</b>"),
        chunk("or1", "llm-s1-1", 2, " ```python"),
        usage("or1", 700, 300, 0.0012, 1000),
        said("or1", "user", "Write a Triton kernel ...", agent="llm"),
        said("or1", "agent", "Here is the kernel <b>x</b> ```python ...", agent="llm"),
        chunk("or1", "llm-s1-1", 3, " late piece"),  # a call already stored: dropped
        chunk("or1", "llm-s1-2", 0, "Fixed: "),
        usage("or1", 900, 100, 0.0008, 2000),
    ])
    page.evaluate("(events) => { T.feed(events.slice(0, 4)); T.panel.show('or1'); }", events)
    streaming = "#node-panel .transcript-streaming .transcript-content"
    seen = [page.inner_text(streaming)]
    page.evaluate("(events) => T.feed(events.slice(4, 6))", events)
    seen.append(page.inner_text(streaming))
    assert seen == ["Here is ", "Here is the kernel <b>x</b> ```python"]  # grows, as text
    assert page.evaluate("() => document.querySelectorAll('#node-panel b').length") == 0
    assert "writing" in page.inner_text("#node-panel .transcript-streaming .transcript-meta")

    page.evaluate("(events) => T.feed(events.slice(6, 10))", events)
    assert page.locator("#node-panel .transcript-streaming").count() == 0  # the stored transcript replaced it
    assert "Here is the kernel <b>x</b> ```python ..." in page.inner_text("#node-panel .node-transcript")
    facts = page.inner_text("#node-panel .node-facts")
    assert "1000 (700 prompt + 300 completion, 1 call), $0.0012" in facts

    page.evaluate("(events) => T.feed(events.slice(10))", events)
    assert page.inner_text(streaming) == "Fixed: "  # the repair turn streams as a call of its own
    assert "2000 (1600 prompt + 400 completion, 2 calls), $0.0020" in page.inner_text("#node-panel .node-facts")
    header = page.evaluate("() => T.model.header")
    assert (header["tokens"], header["promptTokens"], header["completionTokens"]) == (2000, 1600, 400)
    assert abs(header["costUsd"] - 0.002) < 1e-9
