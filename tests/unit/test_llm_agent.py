"""The LLM agent against a real chat-completions server on 127.0.0.1 (``llm_server``).

The real ``openai`` client talks HTTP to a server written here that replies
from a script (streamed and not); the search verifies what it writes exactly
as it verifies the template agent's kernels.  The model is one row-softmax
group (``softmax(x * 2)``), so every run takes a few seconds under
TRITON_INTERPRET=1.
"""
from __future__ import annotations

import json
import logging
import os
import textwrap

os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest
import torch

from lego_core.agents import make_llm_agent
from lego_core.agents.base import Team
from lego_core.agents.llm.extract import extract_code
from lego_core.agents.llm.settings import LLMSettings
from lego_core.agents.template.agent import TemplateAgent
from lego_core.load.capture import capture_graph
from lego_core.config import OptimizeConfig
from lego_core.load.problem import ProblemSpec, load_problem
from lego_core.search.engine import Search
from lego_core.tree.fusion_tree import build_tree

from llm_server import ScriptedEndpoint

pytestmark = [pytest.mark.llm, pytest.mark.filterwarnings("ignore:.*LeafSpec.*:FutureWarning")]

MODEL = """\
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x * 2.0, dim=-1)


def get_inputs():
    return [torch.randn(4, 16)]


def get_init_inputs():
    return []
"""

KERNEL = '''\
import torch
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, stride_x, stride_y, SCALE: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(x_ptr + pid * stride_x + offs, mask=mask, other=-float("inf")) * SCALE
    x = x - tl.max(x, axis=0)
    e = tl.exp(x)
    tl.store(y_ptr + pid * stride_y + offs, e / tl.sum(e, axis=0), mask=mask)


def launch(x, out=None):
    if out is None:
        out = [torch.empty_strided(x.shape, (x.shape[1], 1), dtype=x.dtype, device=x.device)]
    y = out[0]
    softmax_kernel[(x.shape[0],)](x, y, x.shape[1], x.stride(0), y.stride(0), SCALE=SCALE_VALUE, BLOCK=16)
    return out
'''
CORRECT = KERNEL.replace("SCALE_VALUE", "2.0")
WRONG = KERNEL.replace("SCALE_VALUE", "1.0")  # forgets the * 2
CHEAT = CORRECT.replace("    softmax_kernel[(x.shape[0],)]", "    y.copy_(torch.softmax(x * 2.0, dim=-1))\n    softmax_kernel[(x.shape[0],)]")
KEY = "sk-test-DO-NOT-LEAK-4711"


def fenced(code: str, before: str = "Here is the kernel.") -> str:
    return f"{before}\n\n```python\n{code}```\n\nIt computes one row per program."


def settings(endpoint, **kw) -> LLMSettings:
    base = dict(base_url=endpoint.base_url, model="scripted", api_key=KEY, timeout_s=5.0, retries=2, backoff_s=0.01)
    return LLMSettings(**(base | kw))


def run_search(tmp_path, agent_settings, agent="llm", **config):
    (tmp_path / "model.py").write_text(MODEL)
    problem = load_problem(ProblemSpec(str(tmp_path / "model.py")))
    graph = capture_graph(problem)
    tree = build_tree(graph)
    activations = [graph.run(problem.model, problem.make_inputs(seed)) for seed in (101, 202, 303)]
    events: list = []
    cfg = OptimizeConfig(cache=False, agent=agent, verify_seeds=(101, 202, 303), mutation=False, agents=1, **config)
    llm = make_llm_agent(cfg, events.append, agent_settings)
    team = llm if agent == "llm" else Team([TemplateAgent(), llm])
    work = tmp_path / "work"
    work.mkdir()
    result = Search(tree, activations, set(), team, cfg, torch.float32, "cpu", work, events.append).run()
    return result, events


def chosen(result) -> str:
    (item,) = result.plan.items
    return item.chosen.agent


def transcript(events, agent="llm") -> str:
    return "\n".join(e.content for e in events if e.type == "transcript" and e.agent == agent)


# ------------------------------------------------------------------ extraction


def test_code_is_extracted_fenced_or_not_and_from_several_blocks():
    head, launch = CORRECT.split("\n\ndef launch")
    assert extract_code(fenced(CORRECT)) == CORRECT
    several = f"First the kernel:\n```python\n{head}\n```\nthen the launcher:\n```\ndef launch{launch}```\n```python\nprint(launch(x))\n```"
    assert "def launch" in extract_code(several) and "@triton.jit" in extract_code(several)
    assert extract_code(f"Sure.\n{CORRECT}\nThis should be fast.") == CORRECT
    assert extract_code("I would rather not write a kernel today.") is None


# ------------------------------------------------------------------ the search with the agent


def test_a_correct_streamed_kernel_is_accepted_with_its_usage(tmp_path):
    with ScriptedEndpoint([{"reply": fenced(CORRECT)}]) as endpoint:
        result, events = run_search(tmp_path, settings(endpoint))
    assert chosen(result) == "llm"
    (request,) = endpoint.requests
    prompt = request["body"]["messages"][1]["content"]
    assert "torch.ops.aten._softmax.default" in prompt and "shape [4, 16], stride [16, 1], float32" in prompt
    assert request["body"]["stream"] is True
    chunks = [e for e in events if e.type == "transcript_chunk"]
    assert len(chunks) > 1 and "".join(c.text for c in chunks) == fenced(CORRECT)  # the stream, piece by piece
    assert {c.node_id for c in chunks} == {result.plan.items[0].id}
    assert fenced(CORRECT) in transcript(events)  # the stored transcript is whole
    (usage,) = [e for e in events if e.type == "agent_usage"]
    m = result.metrics
    assert (m["prompt_tokens"], m["completion_tokens"]) == (usage.prompt_tokens, usage.completion_tokens) != (0, 0)
    assert m["tokens_by_node"] == {result.plan.items[0].id: m["tokens"]}


def test_a_wrong_kernel_is_repaired_on_the_second_turn(tmp_path):
    with ScriptedEndpoint([{"reply": fenced(WRONG)}, {"reply": fenced(CORRECT)}]) as endpoint:
        result, events = run_search(tmp_path, settings(endpoint), max_attempts=2)
    assert chosen(result) == "llm"
    assert len(endpoint.requests) == 2
    repair = endpoint.requests[1]["body"]["messages"][-1]["content"]
    assert "rejected by the verifier" in repair and "output 0" in repair and "SCALE=1.0" in repair  # where, and the file
    for seed in ("101", "202", "303"):
        assert seed not in repair  # the verification seeds never reach the model
    verdicts = [e.passed for e in events if e.type == "verification"]
    assert verdicts == [False, True]


def test_a_kernel_calling_torch_softmax_is_rejected_and_told_why(tmp_path):
    with ScriptedEndpoint([{"reply": fenced(CHEAT)}, {"reply": "I cannot do better."}]) as endpoint:
        result, events = run_search(tmp_path, settings(endpoint, stream=False), max_attempts=2)
    assert chosen(result) == "library"
    (verdict,) = [e for e in events if e.type == "verification"]
    assert not verdict.passed and "softmax" in verdict.reason
    assert verdict.reason in endpoint.requests[1]["body"]["messages"][-1]["content"]
    assert endpoint.requests[1]["body"].get("stream") in (None, False)


def test_a_reply_without_code_is_no_candidate(tmp_path):
    with ScriptedEndpoint([{"reply": "As a language model I would use torch.softmax here."}]) as endpoint:
        result, events = run_search(tmp_path, settings(endpoint), max_attempts=2)
    assert chosen(result) == "library"
    assert len(endpoint.requests) == 1  # no kernel: nothing was rejected, nothing to repair
    assert "holds no kernel file" in transcript(events)
    assert not [e for e in events if e.type == "verification"]


def test_429_then_success(tmp_path):
    with ScriptedEndpoint([{"status": 429}, {"status": 503}, {"reply": fenced(CORRECT)}]) as endpoint:
        result, events = run_search(tmp_path, settings(endpoint))
    assert chosen(result) == "llm" and len(endpoint.requests) == 3
    notes = transcript(events)
    assert "answered 429" in notes and "answered 503" in notes and "trying again" in notes


def test_a_timeout_is_retried(tmp_path):
    with ScriptedEndpoint([{"sleep": 1.5, "then": {"reply": "late"}}, {"reply": fenced(CORRECT)}]) as endpoint:
        result, events = run_search(tmp_path, settings(endpoint, timeout_s=0.5))
    assert chosen(result) == "llm"
    assert "did not answer within 0.5 s" in transcript(events)


def test_an_endpoint_that_always_fails_ends_its_agent_and_the_run_finishes(tmp_path):
    with ScriptedEndpoint([{"status": 500}]) as endpoint:
        result, events = run_search(tmp_path, settings(endpoint, retries=1, failures_to_give_up=1), agent="both")
    assert chosen(result) == "template"  # what the other agent found
    assert len(endpoint.requests) == 2  # one call, one retry, then the agent is given up
    assert "llm" in result.metrics["agents_retired"] and "answered 500" in result.metrics["agents_retired"]["llm"]
    assert any(e.type == "progress" and "agent llm stopped" in e.message for e in events)


def test_the_token_budget_stops_the_search(tmp_path):
    with ScriptedEndpoint([{"reply": fenced(WRONG)}]) as endpoint:
        result, events = run_search(tmp_path, settings(endpoint), max_attempts=3, max_tokens=300)
    assert result.metrics["stop_reason"] == "token budget"
    assert len(endpoint.requests) == 1  # the repair turns were not sent
    assert endpoint.requests[0]["body"]["max_tokens"] == 300  # the completion is capped at what is left
    assert result.metrics["tokens"] >= 300


def test_the_api_key_is_in_no_event_log_or_report(tmp_path, monkeypatch, caplog):
    """A whole run through the sandboxed child: the agent runs in this process
    (``agents.relay``), the key is sent to the server and found nowhere else."""
    from lego_core.api import optimize

    caplog.set_level(logging.DEBUG)
    (tmp_path / "model.py").write_text(MODEL)
    events: list = []
    with ScriptedEndpoint([{"reply": fenced(CORRECT)}]) as endpoint:
        for name, value in {"BASE_URL": endpoint.base_url, "MODEL": "scripted", "API_KEY": KEY}.items():
            monkeypatch.setenv(f"LEGO_LLM_{name}", value)
        config = OptimizeConfig(agent="llm", cache=False, mutation=False, agents=1, compare_compile=False)
        report = optimize(ProblemSpec(str(tmp_path / "model.py")), tmp_path / "out", config, sink=events.append)
    assert endpoint.requests[0]["headers"].get("authorization") == f"Bearer {KEY}"  # it was used
    assert report["summary"]["triton"] == 1 and report["metrics"]["prompt_tokens"] > 0
    assert any(e.type == "transcript_chunk" for e in events)
    assert KEY not in json.dumps([e.to_dict() for e in events])
    assert KEY not in caplog.text
    for path in (tmp_path / "out").rglob("*"):
        if path.is_file():
            assert KEY not in path.read_text(errors="replace"), path


def test_the_kernel_cache_key_names_the_llm_model(monkeypatch):
    from lego_core.api import with_llm_model

    monkeypatch.setenv("LEGO_LLM_MODEL", "model-a")
    a = with_llm_model(OptimizeConfig(agent="llm", verify_seeds=(1, 2, 3)))
    monkeypatch.setenv("LEGO_LLM_MODEL", "model-b")
    b = with_llm_model(OptimizeConfig(agent="both", verify_seeds=(1, 2, 3)))
    assert (a.llm_model, b.llm_model) == ("model-a", "model-b") and a.key()["llm_model"] != b.key()["llm_model"]
    template = with_llm_model(OptimizeConfig(verify_seeds=(1, 2, 3)))
    assert template.llm_model == "" and "llm_model" not in template.key()  # template keys as before


# ------------------------------------------------------------------ the time to beat (a retry on a GPU)


def test_a_retry_on_a_gpu_is_told_the_time_to_beat(tmp_path):
    from types import SimpleNamespace

    from lego_core.agents.base import split_time_to_beat, with_time_to_beat
    from lego_core.search.agents_at_work import time_to_beat
    from lego_core.tree.fusion_tree import Candidate

    reason = "input set 2 (seed label ab12), call 1: max abs error 0.41 at [0, 3]"
    assert with_time_to_beat(reason, None, None) == reason
    assert split_time_to_beat(with_time_to_beat(reason, 0.0123, 0.0101)) == (reason, 0.0123, 0.0101)
    assert split_time_to_beat(with_time_to_beat(reason, 0.0123, None)) == (reason, 0.0123, None)
    assert split_time_to_beat(reason) == (reason, None, None)

    def cand(impl, ms, kind="measured", reason=None):
        c = Candidate(f"c-{impl}-{ms}", "or000", impl, impl if impl == "library" else "triton", time_ms=ms, time_kind=kind)
        c.verified = SimpleNamespace(passed=reason is None)
        c.rejected_reason = reason or ""
        return c

    node = SimpleNamespace(candidates=[cand("library", 0.0123), cand("llm", 0.0101), cand("llm", 0.0050, reason="wrong"),
                                       cand("template", 0.0001, kind="estimated")])
    assert time_to_beat(node) == (0.0123, 0.0101)  # a rejected or estimated time is no target

    (tmp_path / "model.py").write_text(MODEL)
    tree = build_tree(capture_graph(load_problem(ProblemSpec(str(tmp_path / "model.py")))))
    sub = tree.leaves()[0].sub
    agent = make_llm_agent(OptimizeConfig(), None, LLMSettings(base_url="http://127.0.0.1:9/v1", model="m", api_key="k"))
    messages, shown = agent._messages(sub, ["first reason", with_time_to_beat(reason, 0.0123, 0.0101)])
    assert shown == messages[-1]["content"]
    assert reason in shown and "Time to beat on the GPU: the library takes 0.0123 ms" in shown and "so far takes 0.0101 ms" in shown
    assert "time to beat on the GPU:" not in shown  # the marker line is read, not repeated
    template_note = TemplateAgent().propose(sub, [with_time_to_beat(reason, 0.0123, None)]).transcript[-1][1]
    assert "time to beat" not in template_note and reason in template_note
