"""lego_core.agents.relay on its own: the parent's ``RelayServer`` (socket,
threads, environment, the hooks a subclass sets), its ``AgentServer`` (the
pools it serves: the LLM agent's, or those a caller's
``agents.pool.AgentPoolFactory`` makes) and the child's side (``exchange``,
``proposal_of``, ``RelayPool``, ``make_pool`` for a relayed agent), over a
real Unix socket; and a whole isolated run whose agent calls a caller's
factory answers in the calling process."""
from __future__ import annotations

import os
import socket
import threading
import time

import pytest

from lego_core.agents.base import Proposal
from lego_core import optimize
from lego_core.agents.pool import InlineAgentPool, LocalAgentPool, make_pool
from lego_core.agents.relay import GRACE_S, RELAY_ENV, TIMEOUT_ENV, AgentServer, RelayPool, RelayServer, exchange, proposal_of
from lego_core.agents.template.agent import TemplateAgent
from lego_core.config import OptimizeConfig
from lego_core.load.capture import capture_graph
from lego_core.load.problem import ProblemSpec, load_problem
from lego_core.tree.fusion_tree import build_tree

from test_llm_agent import MODEL  # one row-softmax group

pytestmark = pytest.mark.filterwarnings("ignore:.*LeafSpec.*:FutureWarning")


def call(path: str, request: dict, timeout_s: float = 10.0) -> dict:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        return exchange(sock, path, request, timeout_s)


class Echo(RelayServer):
    """A relay that answers with what it was asked, fails on ``{"fail": ...}``,
    blocks on ``{"wait": true}`` until closed, and sets a variable of its own."""

    handler_join_s = 5.0

    def __init__(self):
        self.stopped = threading.Event()
        self.released = threading.Event()
        super().__init__()

    def environment(self) -> dict[str, str]:
        return {**super().environment(), "LEGO_TEST_RELAY_EXTRA": "yes"}

    def answer(self, request: dict) -> dict:
        if "fail" in request:
            raise KeyError(request["fail"])
        if request.get("wait"):
            self.stopped.wait(10)
            self.released.set()
        return {"proposal": {"source": None, "kernel_name": "echo", "transcript": [["user", repr(request)]]}}

    def error_answer(self, exc: Exception) -> dict:
        return {**super().error_answer(exc), "kind": "echo"}

    def stopping(self) -> None:
        self.stopped.set()


def test_a_relay_server_answers_sets_its_environment_and_cleans_up(monkeypatch):
    monkeypatch.delenv("LEGO_TEST_RELAY_EXTRA", raising=False)
    monkeypatch.setenv(RELAY_ENV, "/earlier/socket")
    with Echo() as server:
        assert os.environ[RELAY_ENV] == server.path and os.environ["LEGO_TEST_RELAY_EXTRA"] == "yes"
        answer = call(server.path, {"agent": "x"})
        assert proposal_of(answer)["kernel_name"] == "echo"
        failed = call(server.path, {"fail": "payload"})
        assert failed == {"error": "KeyError: 'payload'", "kind": "echo"}  # the subclass's error answer
        with pytest.raises(RuntimeError, match="KeyError: 'payload'"):
            proposal_of(failed)
        waiting = threading.Thread(target=call, args=(server.path, {"wait": True}), daemon=True)
        waiting.start()
        time.sleep(0.3)  # the call is being answered when the relay closes
    assert server.stopped.is_set() and server.released.is_set()  # stopping() ran, and close() waited for the call
    assert os.environ[RELAY_ENV] == "/earlier/socket" and "LEGO_TEST_RELAY_EXTRA" not in os.environ
    assert not os.path.exists(os.path.dirname(server.path))
    waiting.join(timeout=5)


def test_the_childs_side_says_why_a_call_failed(tmp_path):
    with pytest.raises(RuntimeError, match="the agent relay at .* failed"):
        call(str(tmp_path / "nobody.sock"), {"agent": "x"})
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as silent:  # accepts, never answers
        silent.bind(str(tmp_path / "silent.sock"))
        silent.listen(1)
        with pytest.raises(TimeoutError, match="did not answer within 0.3 s"):
            call(str(tmp_path / "silent.sock"), {"agent": "x"}, timeout_s=0.3)
    with pytest.raises(RuntimeError, match="closed the connection without an answer"):
        proposal_of({})


class Recording:
    def __init__(self):
        self.calls = []

    def propose(self, sub, feedback):
        self.calls.append((sub.id, feedback))
        return Proposal(source="# kernel", kernel_name=f"k_{sub.id}", transcript=[("assistant", "done")], tokens=7)


def test_the_agent_server_serves_its_agents_to_a_relay_pool(tmp_path):
    (tmp_path / "model.py").write_text(MODEL)
    sub = build_tree(capture_graph(load_problem(ProblemSpec(str(tmp_path / "model.py"))))).leaves()[0].sub
    agent = Recording()
    with AgentServer({"llm": InlineAgentPool(agent)}) as server:
        pool = RelayPool("llm", server.path, size=2, timeout_s=30)
        unknown = RelayPool("other", server.path)
        try:
            proposal = pool.submit(sub, ["wrong at [0, 3]"]).result(timeout=30)
            with pytest.raises(RuntimeError, match="ValueError: no agent 'other' is served here"):
                unknown.submit(sub, []).result(timeout=30)
        finally:
            pool.close()
            unknown.close()
    assert proposal == Proposal(source="# kernel", kernel_name=f"k_{sub.id}", transcript=[("assistant", "done")], tokens=7)
    assert agent.calls == [(sub.id, ["wrong at [0, 3]"])]


def test_a_relayed_agent_gets_a_relay_pool_that_waits_the_parents_timeout(monkeypatch, tmp_path):
    monkeypatch.delenv(RELAY_ENV, raising=False)
    agent = TemplateAgent()
    assert isinstance(make_pool(agent, 2), LocalAgentPool)
    with pytest.raises(RuntimeError, match=r"\$LEGO_AGENT_RELAY names no socket"):
        make_pool(agent, 2, relayed=("template",))
    with AgentServer({"template": InlineAgentPool(agent)}, timeout_s=5) as server:
        assert os.environ[TIMEOUT_ENV] == "5.0"
        pool = make_pool(agent, 2, relayed=("template",))
        assert isinstance(pool, RelayPool) and (pool.path, pool.size, pool.timeout_s) == (server.path, 2, 5 + GRACE_S)
        pool.close()
    assert TIMEOUT_ENV not in os.environ


def test_a_dotted_path_is_no_agent_pool():
    with pytest.raises(ValueError, match="an object that makes agent pools"):
        OptimizeConfig(agent_pool="webapp.runs.fanout:CeleryAgentPool")


class Factory:
    """An ``AgentPoolFactory``: template agents in this process, every call recorded."""

    timeout_s = 30.0

    def __init__(self):
        self.made, self.calls = [], []

    def __call__(self, agent_name, size):
        self.made.append((agent_name, size))
        factory = self

        class Recorded(LocalAgentPool):
            def submit(self, sub, feedback):
                factory.calls.append((os.getpid(), sub.id))
                return super().submit(sub, feedback)

            def close(self):
                factory.made.append(("closed", agent_name))
                super().close()

        return Recorded(TemplateAgent(), size)


def test_an_isolated_run_sends_its_agent_calls_to_the_callers_pools(tmp_path, monkeypatch):
    monkeypatch.delenv(RELAY_ENV, raising=False)
    (tmp_path / "model.py").write_text(MODEL)
    factory = Factory()
    config = OptimizeConfig(agent_pool=factory, agents=2, cache=False, mutation=False, verify_seeds=(101, 202, 303))
    report = optimize(ProblemSpec(str(tmp_path / "model.py")), tmp_path / "out", config)
    assert factory.made == [("template", 2), ("closed", "template")]
    assert factory.calls and {pid for pid, _ in factory.calls} == {os.getpid()}  # answered here, not in the child
    assert report["metrics"]["agent_calls"] == len(factory.calls)
    assert [e["implementation"] for e in report["subproblems"]].count("triton") >= 1
    assert RELAY_ENV not in os.environ
