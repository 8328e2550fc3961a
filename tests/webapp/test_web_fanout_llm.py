"""The LLM agent on a real agents worker (fan-out on, as ``make run`` works):
its streamed reply and usage reach the run's event log through the relay.

The agents worker (``celery worker -Q <agents queue> --pool threads``) reads
``LEGO_LLM_*`` from its own environment, pointing at the scripted
chat-completions server of ``tests/unit/llm_server.py`` on 127.0.0.1, which
streams slowly.  The run's agents (``CeleryAgents(run_id, on_event)``, the
pool factory lego_core's optimize calls in the worker process) hand what the
worker streams to ``on_event`` while the call is still going; a second call
of the same run is a repair turn that sees the first reply's file.  The API
key is in no event and not in the worker's log.
"""
import sys
import threading
import time
from pathlib import Path

import pytest

from lego_core.load.capture import capture_graph
from lego_core.load.problem import ProblemSpec, load_problem
from lego_core.tree.fusion_tree import build_tree
from webapp.runs.fanout import CeleryAgents

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))
from llm_server import ScriptedEndpoint  # noqa: E402
from test_llm_agent import CORRECT, KEY, MODEL, WRONG, fenced  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.llm]


def llm_env(endpoint) -> dict:
    """``LEGO_LLM_*`` of an agents worker that uses ``endpoint``."""
    return {"LEGO_LLM_BASE_URL": endpoint.base_url, "LEGO_LLM_MODEL": "scripted", "LEGO_LLM_API_KEY": KEY,
            "LEGO_LLM_TIMEOUT_S": "20", "LEGO_LLM_RETRIES": "0"}


def test_an_llm_call_on_the_agents_worker_streams_into_the_runs_events(start_worker, settings, tmp_path, wait_for):
    script = [{"reply": fenced(WRONG), "pause": 0.15}, {"reply": fenced(CORRECT)}, {"reply": fenced(CORRECT)}]
    with ScriptedEndpoint(script) as endpoint:
        proc, log = start_worker("agents", "-Q", settings.LEGO_AGENT_QUEUE, "--pool", "threads", "--concurrency", "2",
                                 **llm_env(endpoint))
        (tmp_path / "model.py").write_text(MODEL)
        tree = build_tree(capture_graph(load_problem(ProblemSpec(str(tmp_path / "model.py")))))
        (sub,) = [leaf.sub for leaf in tree.leaves() if leaf.sub.group is not None and leaf.sub.group.fusable]
        events, seen_at = [], []
        lock = threading.Lock()

        def on_event(data):
            with lock:
                events.append(data)
                seen_at.append(time.monotonic())

        with CeleryAgents(run_id="run-4711", on_event=on_event) as agents:
            pool = agents("llm", 1)
            try:
                first = pool.submit(sub, [])
                wait_for(lambda: any(e["type"] == "transcript_chunk" for e in events) or first.done(), 60, "a streamed chunk", log)
                assert not first.done(), "no chunk arrived before the call ended"  # live, not at the end
                proposal = first.result(timeout=60)
                repair = pool.submit(sub, ["max abs error 0.41 at [0, 3]"]).result(timeout=60)
            finally:
                pool.close()
        first_run = len(events)  # the budget run's events follow (its call ids start again: another agent)
        with CeleryAgents(run_id="run-4712", on_event=on_event, max_tokens=50) as agents:  # the run's budget, from its config
            pool = agents("llm", 1)
            try:
                capped = pool.submit(sub, []).result(timeout=60)
                refused = pool.submit(sub, []).result(timeout=60)
            finally:
                pool.close()
        budget_requests = endpoint.requests[2:]

    assert proposal.source == WRONG and proposal.completion_tokens > 0 and "events" not in proposal.to_dict()
    assert repair.source == CORRECT
    calls = {}
    for e in events[:first_run]:
        if e["type"] == "transcript_chunk":
            calls.setdefault(e["call"], []).append(e)
    assert len(calls) == 2, list(calls)  # the repair turn is a call of its own
    for call, chunks in calls.items():
        assert [c["seq"] for c in chunks] == list(range(len(chunks)))
    assert "".join(c["text"] for c in calls[sorted(calls)[0]]) == fenced(WRONG)
    usage = [e for e in events if e["type"] == "agent_usage"]
    assert [u["completion_tokens"] for u in usage] == [proposal.completion_tokens, repair.completion_tokens, capped.completion_tokens]
    assert usage[1]["run_tokens"] == proposal.tokens + repair.tokens  # one agent per run on the worker ...
    assert len(budget_requests) == 1 and budget_requests[0]["body"]["max_tokens"] <= 50  # the completion is capped ...
    assert capped.tokens > 50 and refused.source is None  # ... and once the budget is spent no call is made
    assert "token budget" in " ".join(text for _, text in refused.transcript)
    assert "max abs error 0.41" in endpoint.requests[1]["body"]["messages"][-1]["content"]
    assert "def launch" in endpoint.requests[1]["body"]["messages"][-1]["content"]  # ... so the repair shows its last file
    assert all(e["node_id"] for e in events)
    assert KEY not in repr(events) and KEY not in log.read_text(errors="replace")
    assert all(r["headers"]["authorization"] == f"Bearer {KEY}" for r in endpoint.requests)
    assert proc.poll() is None
