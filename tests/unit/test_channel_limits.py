"""Every channel from the jail bounded (issue 28): what the jailed optimizer
child (which runs the upload's code) sends its parent, the run worker, costs
the parent a bounded amount of memory, and a channel over its limit stops
the run with a message that says so.

* The agent relay (``lego_core.agents.relay``): a flood of 1 GB into its
  socket, from another process as the jailed child would, is cut off after
  ``MAX_MESSAGE_BYTES`` (the writer never gets the rest in) and raises the
  parent's resident memory by far less than 500 MB (the audit: 600 MB once
  raised the worker from 343 MB to 2,058 MB); the same from a model file's
  import-time code stops a real isolated run.  A large but real-sized call
  still works; a stalled request, one call too many and an oversize answer
  are refused.
* The result (``lego_core.runtime.staged`` / ``output``): a report over
  16 MiB, a staging folder of too many files, too deep or too large in all
  is refused before anything in it is read or moved.
"""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import lego_core.pipeline_entry  # noqa: F401 - what optimize() imports on its way, loaded before memory is measured
from lego_core import optimize
from lego_core.agents import relay
from lego_core.agents.base import Proposal
from lego_core.agents.pool import InlineAgentPool, LocalAgentPool
from lego_core.agents.relay import AgentServer, RelayFlooded, RelayPool, RelayServer, exchange
from lego_core.agents.template.agent import TemplateAgent
from lego_core.config import OptimizeConfig
from lego_core.load.capture import capture_graph
from lego_core.load.problem import ProblemSpec, load_problem
from lego_core.load.spec import ProblemError
from lego_core.runtime import output, staged
from lego_core.tree.fusion_tree import build_tree

from test_llm_agent import MODEL  # one row-softmax group
from test_staged import RUN_ID, stage  # noqa: F401 - an honest run's staging folder (a fixture)

pytestmark = pytest.mark.filterwarnings("ignore:.*LeafSpec.*:FutureWarning")

MB = 1_000_000
GB = 1000 * MB
FLOODED = r"the agent relay received more than 16 MiB in one message from the jailed run"


class PeakRSS:
    """This process's peak resident memory above its level at the start, in
    bytes: ``VmHWM`` after resetting it (``/proc/self/clear_refs``), and
    ``VmRSS`` sampled every 2 ms in a thread (where the reset is refused)."""

    def __enter__(self):
        self.reset = _reset_hwm()
        self.start = _status("VmRSS")
        self.peak = self.start
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self):
        while not self._stop.wait(0.002):
            self.peak = max(self.peak, _status("VmRSS"))

    def __exit__(self, *exc_info):
        self._stop.set()
        self._thread.join()
        if self.reset:
            self.peak = max(self.peak, _status("VmHWM"))
        self.growth = self.peak - self.start


def _status(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(field)


def _reset_hwm() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # resets VmHWM to the current VmRSS
        return True
    except OSError:
        return False


FLOOD = r"""
import socket, sys
sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
sock.connect(sys.argv[1])
chunk, sent = b"x" * (1 << 20), 0
try:
    while sent < int(sys.argv[2]):
        sock.sendall(chunk)
        sent += len(chunk)
    sock.shutdown(socket.SHUT_WR)
    answer = sock.recv(1 << 16)
except OSError as exc:
    print(sent, type(exc).__name__)
else:
    print(sent, "answered", answer[:200])
"""


class Echo(RelayServer):
    """Answers any request with the size it read."""

    handler_join_s = 5.0

    def answer(self, request: dict) -> dict:
        return {"proposal": {"source": None, "kernel_name": "echo", "transcript": [["user", str(len(request.get("text", "")))]]}}


def test_a_1_gb_flood_into_the_relay_is_cut_off_without_buffering_and_stops_the_run():
    with Echo() as server, PeakRSS() as memory:
        started = time.monotonic()
        flood = subprocess.run([sys.executable, "-c", FLOOD, server.path, str(GB)], capture_output=True, text=True, timeout=60)
        took = time.monotonic() - started
        alarm = server.alarm()
    sent, how = flood.stdout.split()[:2]
    assert int(sent) < 64 * MB and how in ("BrokenPipeError", "ConnectionResetError"), flood.stdout + flood.stderr  # cut off
    assert isinstance(alarm, RelayFlooded) and alarm.args[0].startswith(FLOODED.replace("\\", "")), alarm
    assert memory.growth < 500 * MB, f"the parent grew by {memory.growth / MB:.0f} MB"
    print(f"flood cut off after {int(sent) / MB:.0f} MB in {took:.1f} s; parent peak +{memory.growth / MB:.0f} MB")


FLOODING_MODEL = MODEL + r"""

import os, socket, sys, time
_sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
_sock.connect(os.environ["LEGO_AGENT_RELAY"])  # the relay's socket, mounted in the jail
_chunk, _sent = b"x" * (1 << 20), 0
try:
    while _sent < 1_000_000_000:
        _sock.sendall(_chunk)
        _sent += len(_chunk)
except OSError as exc:
    print(f"flood cut off after {_sent} bytes: {exc}", file=sys.stderr)
time.sleep(120)  # the parent stops the run long before
"""


class Factory:
    """An ``AgentPoolFactory`` (so the run has an agent relay): template agents here."""

    timeout_s = 30.0

    def __call__(self, agent_name, size):
        return LocalAgentPool(TemplateAgent(), size)


def test_a_model_file_that_floods_the_relay_stops_its_run(tmp_path, monkeypatch):
    monkeypatch.delenv(relay.RELAY_ENV, raising=False)
    (tmp_path / "model.py").write_text(FLOODING_MODEL)
    events = []
    config = OptimizeConfig(agent_pool=Factory(), agents=1, cache=False, mutation=False)
    started = time.monotonic()
    with PeakRSS() as memory, pytest.raises(RelayFlooded, match=FLOODED):
        optimize(ProblemSpec(str(tmp_path / "model.py")), tmp_path / "out", config, events.append)
    assert time.monotonic() - started < 100  # stopped by the relay, not by the model's own end or the load limit
    assert memory.growth < 500 * MB, f"the parent grew by {memory.growth / MB:.0f} MB"
    failed = [e for e in events if e.type == "run_failed"]
    assert failed and failed[-1].message.startswith(FLOODED.replace("\\", ""))
    assert not (tmp_path / "out").exists() and relay.RELAY_ENV not in os.environ
    print(f"run stopped in {time.monotonic() - started:.1f} s; parent peak +{memory.growth / MB:.0f} MB")


class Recording:
    """An agent that answers with a large transcript, as a language model's with kernel sources would."""

    def __init__(self):
        self.feedback = []

    def propose(self, sub, feedback):
        self.feedback.append(feedback)
        prompt = "def launch(x, out=None):\n    ...\n" * 150_000  # 5 MB of prompts and kernels
        return Proposal(source="# kernel", kernel_name=f"k_{sub.id}", transcript=[("user", prompt), ("agent", "done")], tokens=7)


def test_a_large_real_agent_call_still_goes_through(tmp_path):
    (tmp_path / "model.py").write_text(MODEL)
    sub = build_tree(capture_graph(load_problem(ProblemSpec(str(tmp_path / "model.py"))))).leaves()[0].sub
    feedback = [f"wrong at [{i}, 3]: " + "x" * 100_000 for i in range(30)]  # 3 MB of reasons
    agent = Recording()
    with AgentServer({"llm": InlineAgentPool(agent)}) as server:
        pool = RelayPool("llm", server.path, size=2, timeout_s=30)
        try:
            proposal = pool.submit(sub, feedback).result(timeout=30)
        finally:
            pool.close()
        assert server.alarm() is None
    assert agent.feedback == [feedback]
    assert proposal.kernel_name == f"k_{sub.id}" and len(proposal.transcript[0][1]) == 4_950_000


class Small(Echo):
    request_timeout_s = 0.5
    max_calls = 2


def _connect(path: str) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(10)
    sock.connect(path)
    return sock


def _answer(sock: socket.socket) -> bytes:
    data = b""
    while chunk := sock.recv(1 << 16):
        data += chunk
    return data


def test_a_stalled_request_and_a_call_too_many_are_refused_without_stopping_the_run():
    with Small() as server:
        slow = [_connect(server.path) for _ in range(2)]
        for sock in slow:
            sock.sendall(b'{"text": "never ends')  # no end: a slowloris
        time.sleep(0.1)
        extra = _connect(server.path)
        assert b"serves at most 2 calls at once" in _answer(extra)  # refused at once
        for sock in slow:
            assert b"did not arrive whole within 0.5 s" in _answer(sock)
            sock.close()
        extra.close()
        assert exchange(socket.socket(socket.AF_UNIX, socket.SOCK_STREAM), server.path, {"text": "x" * 8 * MB}, 10)["proposal"]["transcript"] == [["user", str(8 * MB)]]
        assert server.alarm() is None  # the child's own calls failed; the run goes on


def test_many_json_values_or_many_pending_bytes_stop_the_run():
    with Echo() as server:
        sock = _connect(server.path)
        sock.sendall(b"[" + b"[]," * 300_000 + b"[]]")  # 1 MB, 300,001 values
        sock.shutdown(socket.SHUT_WR)
        assert _answer(sock) == b""  # dropped unanswered
        assert "more than 200,000 JSON values in one message" in str(server.alarm())

    class Tight(Echo):
        max_pending_bytes = 1 << 20

    with Tight() as server:
        socks = [_connect(server.path) for _ in range(3)]
        for sock in socks:
            sock.sendall(b" " * 400_000)  # three requests in progress, none finished
        deadline = time.monotonic() + 10
        while server.alarm() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert "more than 1 MiB in the requests of the calls in progress" in str(server.alarm())
        for sock in socks:
            sock.close()


def test_the_childs_side_refuses_an_oversize_answer(tmp_path):
    path = str(tmp_path / "big.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind(path)
        listener.listen(1)

        def answer_17_mib():
            conn, _ = listener.accept()
            with conn:
                try:
                    conn.sendall(b'{"proposal": "' + b"x" * (17 << 20) + b'"}')
                except OSError:
                    pass

        server = threading.Thread(target=answer_17_mib, daemon=True)
        server.start()
        with pytest.raises(RuntimeError, match="the agent relay's answer was refused: more than 16 MiB in one message"):
            exchange(socket.socket(socket.AF_UNIX, socket.SOCK_STREAM), path, {"agent": "x"}, 10)
        server.join(timeout=10)


def test_an_oversize_report_is_refused_before_the_folder_is_read(stage):  # noqa: F811
    folder, report, spec = stage
    report["plan"]["notes"] = "x" * (17 << 20)
    with pytest.raises(ProblemError, match=r"the optimizer process returned a report of more than 16 MiB as JSON"):
        staged.accept(folder, report, RUN_ID, spec)
    del report["plan"]["notes"]
    assert staged.accept(folder, report, RUN_ID, spec)["summary"]["e2e_passed"] is True  # the honest one still passes


def test_a_staging_folder_of_too_many_files_too_deep_or_too_large_is_refused(stage):  # noqa: F811
    folder, report, spec = stage
    many = folder / "kernels"
    for i in range(output.MAX_STAGED_ENTRIES):
        (many / f"k{i}.py").touch()
    with pytest.raises(ProblemError, match=r"it holds more than 8,192 files and folders"):
        staged.accept(folder, report, RUN_ID, spec)
    for path in many.iterdir():
        path.unlink()

    deep = folder / "reference_modules"
    deep.joinpath(*["pkg"] * 12).mkdir(parents=True)
    with pytest.raises(ProblemError, match=r"it nests reference_modules/(pkg/){11}pkg more than 12 folders deep"):
        staged.accept(folder, report, RUN_ID, spec)
    import shutil

    shutil.rmtree(deep)

    for i in range(3):  # sparse: 3 GB of apparent size that cost no disk
        with open(folder / "kernels" / f"big{i}.py", "wb") as f:
            f.truncate(1 << 30)
    with pytest.raises(ProblemError, match=r"its files hold more than 2,048 MiB in all"):
        staged.accept(folder, report, RUN_ID, spec)
