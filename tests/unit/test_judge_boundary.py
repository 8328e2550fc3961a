"""The judge stands apart (issue 10, section 1): candidate code runs in an executor process.

A small model with two softmax regions (``or002``: mul + softmax, ``or004``:
sub + softmax, a library matmul between them) is searched with a test agent
that hands a hostile kernel for the first region and the template agent's
honest kernel for the second.  Each hostile kind must be rejected with a
reason while the run goes on and the honest kernel is verified; the
optimizer process's verifier and torch stay untouched, and no candidate
module is ever imported here.  CPU, Triton's interpreter; the GPU paths
(CUDA IPC, timing in the executor, the launch plan in a fresh process) are
the ``gpu`` tests at the end.
"""
from __future__ import annotations

import os
import pickle
import sys
import textwrap
import time
from pathlib import Path

os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest
import torch

import lego_core.judge.verify as verify_module
from lego_core.agents.base import Proposal
from lego_core.agents.template.agent import TemplateAgent
from lego_core.load.capture import capture_graph
from lego_core.config import OptimizeConfig
from lego_core.judge.process import BadReply, Executor, wire
from lego_core.load.problem import ProblemSpec, load_problem
from lego_core.search.engine import Search
from lego_core.tree.fusion_tree import Candidate, build_tree

pytestmark = pytest.mark.filterwarnings("ignore:.*LeafSpec.*:FutureWarning")

MODEL = '''\
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(16, 16))

    def forward(self, x):
        a = torch.softmax(x * 2.0, dim=-1)
        b = torch.mm(a, self.w)
        return torch.softmax(b - 1.0, dim=-1)


def get_inputs():
    return [torch.randn(6, 16)]


def get_init_inputs():
    return []
'''

# patches the verifier and torch in whatever process imports it, and writes zeros
PATCHING_ZEROS = '''\
import torch
import triton
import triton.language as tl
import lego_core.judge.verify as _verify


def _always_passes(actual, expected, dtype=None):
    return _verify.Comparison(True, 0.0, 0.0, "")


def _zeros(x, *args, **kwargs):
    return torch.zeros_like(x)


_verify.compare = _always_passes
torch.softmax = _zeros
torch.nn.functional.softmax = _zeros
try:
    torch.ops.aten._softmax.default = _zeros
except Exception:
    pass


@triton.jit
def zero_kernel(out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.zeros([BLOCK], dtype=tl.float32), mask=offs < n)


def launch(in0, out=None):
    if out is None:
        out = [torch.empty_like(in0)]
    n = out[0].numel()
    zero_kernel[(triton.cdiv(n, 128),)](out[0], n, BLOCK=128)
    return out
'''

# appended to an honest kernel: its launch is replaced by one that does this first
BAD_LAUNCH = {
    "exit": "import os\n    os._exit(1)",
    "sigkill": "import os, signal\n    os.kill(os.getpid(), signal.SIGKILL)",
    "raise": "raise ValueError('boom from the candidate')",
    "sleep": "import time\n    time.sleep(3600)",
    "segfault": "import ctypes\n    ctypes.string_at(0)",  # a real SIGSEGV: a read of address 0
}

# appended to an honest kernel: on import, sabotage every *other* kernel's block size
SABOTAGE_OTHERS = '''

import sys as _sys

_real_next_power_of_2 = triton.next_power_of_2


def _sabotaged(n):
    if _sys._getframe(1).f_globals.get("__name__") == __name__:
        return _real_next_power_of_2(n)
    return 1  # later kernels cover one column of each row


triton.next_power_of_2 = _sabotaged
'''


def with_bad_launch(source: str, kind: str) -> str:
    return source + f"\n\n_honest_launch = launch\n\n\ndef launch(*args, out=None):\n    {BAD_LAUNCH[kind]}\n    return _honest_launch(*args, out=out)\n"


def first_region(sub) -> bool:
    return "aten.mul.Tensor" in sub.ops and "aten._softmax.default" in sub.ops


class HostileAgent:
    """The template agent, except that the first softmax region gets ``make(honest_source)``."""

    name = "hostile"

    def __init__(self, make):
        self.inner, self.make, self.calls = TemplateAgent(), make, []

    def can_attempt(self, sub):
        return self.inner.can_attempt(sub)

    def propose(self, sub, feedback):
        self.calls.append((sub.id, list(feedback)))
        proposal = self.inner.propose(sub, feedback)
        if proposal.source and first_region(sub):
            return Proposal(self.make(proposal.source), proposal.kernel_name, list(proposal.transcript))
        return proposal


def make_search(tmp_path, agent, executor=None, call_timeout_s=None, **config):
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "model.py"
    path.write_text(MODEL)
    problem = load_problem(ProblemSpec(str(path)))
    graph = capture_graph(problem)
    tree = build_tree(graph)
    activations = [graph.run(problem.model, problem.make_inputs(seed)) for seed in (101, 202, 303)]
    parameters = {name for name, src in graph.sources.items() if src.kind == "parameter"}
    events: list = []
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    cfg = OptimizeConfig(cache=False, mutation=False, agents=1, **config)
    search = Search(tree, activations, parameters, agent, cfg, torch.float32, "cpu", work, events.append, executor=executor, call_timeout_s=call_timeout_s)
    return search, events


def results(events, search, which) -> list:
    """VerificationResult events of the nodes for which ``which(sub)`` holds."""
    return [e for e in events if e.type == "verification" and which(search.tree.nodes[e.node_id].sub)]


def candidate_modules() -> list[str]:
    """Candidate, kernel and composed-model modules imported in this process
    since the test began (other tests of the session import composed models
    on purpose, to use them)."""
    prefixes = ("lego_candidate_", "lego_kernel_", "lego_optimized_", "lego_tuning_")
    return [name for name in sys.modules if name.startswith(prefixes) and name not in _EARLIER]


_EARLIER: set[str] = set()


@pytest.fixture(autouse=True)
def _modules_before():
    """Modules of that kind already imported here when a test starts."""
    _EARLIER.clear()
    _EARLIER.update(sys.modules)
    yield


@pytest.fixture
def past_the_static_check(monkeypatch):
    """These candidates test the process boundary itself: the source check
    (``verify.calls_back_into_reference``, which refuses ``import lego_core``,
    ``signal``, assignments into triton, ...) is switched off so they reach
    the executor, as code that hides from the static check would."""
    import lego_core.judge.candidate as candidate

    monkeypatch.setattr(candidate, "calls_back_into_reference", lambda *args, **kwargs: None)


def optimizer_functions() -> tuple:
    return (verify_module.compare, torch.softmax, torch.nn.functional.softmax, torch.ops.aten._softmax.default, __import__("triton").next_power_of_2)


# ---------------------------------------------------------------- (a) patching the judge


def test_a_candidate_that_patches_torch_and_the_verifier_is_rejected(tmp_path, past_the_static_check):
    before = optimizer_functions()
    agent = HostileAgent(lambda honest: PATCHING_ZEROS)
    search, events = make_search(tmp_path, agent)
    result = search.run()
    hostile = results(events, search, first_region)
    assert hostile and not any(e.passed for e in hostile)
    reason = hostile[0].reason
    # the judge is out of reach: lego_core is not importable by candidate code, as at a user's (judge.process.user_view)
    caught = ("No module named 'lego_core'",)
    assert any(c in reason for c in caught), reason
    # the agent got the reason back with its retry
    assert any(fb and any(c in fb[-1] for c in caught) for sub_id, fb in agent.calls)
    # the honest kernel of the other region still passes, and the run ends with a plan
    honest = results(events, search, lambda sub: not first_region(sub))
    assert honest and all(e.passed for e in honest)
    chosen = {item.id: item.chosen.implementation for item in result.plan.items}
    assert all(impl == "library" for nid, impl in chosen.items() if first_region(search.tree.nodes[nid].sub))
    # this process: nothing patched, nothing imported
    assert optimizer_functions() == before
    assert candidate_modules() == []


TORCH_PATCHING_ZEROS = PATCHING_ZEROS.replace("import lego_core.judge.verify as _verify\n", "").replace(
    "\n\ndef _always_passes(actual, expected, dtype=None):\n    return _verify.Comparison(True, 0.0, 0.0, \"\")\n", "").replace(
    "_verify.compare = _always_passes\n", "")


def test_a_candidate_that_patches_torch_at_import_is_rejected_by_the_import_guard(tmp_path, past_the_static_check):
    assert "_verify" not in TORCH_PATCHING_ZEROS and "torch.softmax = _zeros" in TORCH_PATCHING_ZEROS
    before = optimizer_functions()
    agent = HostileAgent(lambda honest: TORCH_PATCHING_ZEROS)
    search, events = make_search(tmp_path, agent)
    search.run()
    hostile = results(events, search, first_region)
    assert hostile and not any(e.passed for e in hostile)
    reason = hostile[0].reason
    assert "importing it replaced" in reason and "torch.softmax" in reason, reason
    assert optimizer_functions() == before and candidate_modules() == []


def test_without_the_tamper_check_patches_made_at_call_time_change_nothing_that_judges(tmp_path, past_the_static_check):
    """The executor's snapshot check off and the patches made on the first
    launch (after the import guard): they land in the executor, where they
    change nothing that judges; the verifier here rejects the zeros (its call
    trace or its comparison), and this process's functions are untouched."""
    before = optimizer_functions()
    at_call = TORCH_PATCHING_ZEROS.replace("\ntorch.softmax = _zeros\ntorch.nn.functional.softmax = _zeros\ntry:\n    torch.ops.aten._softmax.default = _zeros\nexcept Exception:\n    pass\n",
                                           "\n\ndef _patch():\n    torch.softmax = _zeros\n    torch.nn.functional.softmax = _zeros\n")
    at_call = at_call.replace("def launch(in0, out=None):\n", "def launch(in0, out=None):\n    _patch()\n")
    assert "_patch()" in at_call and "\ntorch.softmax = _zeros" not in at_call
    search, events = make_search(tmp_path, HostileAgent(lambda honest: at_call), executor=Executor(snapshot=False))
    search.run()
    hostile = results(events, search, first_region)
    assert hostile and not any(e.passed for e in hostile)
    assert all("the candidate changed" not in e.reason and "does not import" not in e.reason for e in hostile), [e.reason for e in hostile]
    assert optimizer_functions() == before
    assert candidate_modules() == []


# ---------------------------------------------------------------- (b, c) crashes, exceptions, hangs


@pytest.mark.parametrize(
    "kind, expected",
    [
        ("exit", "the executor process died during launch (exit code 1)"),
        ("sigkill", "the executor process died during launch (killed by SIGKILL)"),
        ("raise", "candidate raised ValueError: boom from the candidate"),
        ("sleep", "no answer within 3 s during launch (the per-call limit)"),
        ("segfault", "the executor process died during launch (killed by SIGSEGV)"),
    ],
)
@pytest.mark.faults
def test_a_candidate_that_dies_raises_or_hangs_fails_and_the_run_goes_on(tmp_path, past_the_static_check, kind, expected):
    search, events = make_search(tmp_path, HostileAgent(lambda honest: with_bad_launch(honest, kind)), call_timeout_s=3.0)
    started = time.monotonic()
    result = search.run()
    assert time.monotonic() - started < 120
    hostile = results(events, search, first_region)
    assert hostile and not any(e.passed for e in hostile)
    assert all(expected in e.reason for e in hostile), [e.reason for e in hostile]
    honest = results(events, search, lambda sub: not first_region(sub))  # (d): verified all the same
    assert honest and all(e.passed for e in honest)
    assert result.plan.items and search.judge.executor is None  # the run ended and stopped its executor
    assert candidate_modules() == []


@pytest.mark.faults
def test_a_kernel_file_that_hangs_on_import_is_stopped(tmp_path, past_the_static_check):
    search, events = make_search(tmp_path, HostileAgent(lambda honest: "import time\ntime.sleep(3600)\n" + honest), call_timeout_s=3.0)
    search.run()
    hostile = results(events, search, first_region)
    assert hostile and all("no answer within 3 s during importing the kernel file" in e.reason for e in hostile)


# ---------------------------------------------------------------- (e) tampering that reaches later candidates


def _check_in_order(search, events, sources):
    """Verify ``sources[k]`` on the k-th softmax region, in order, through the search's judge (``CandidateJudge.judge``)."""
    nodes = [n for n in search.tree.or_nodes() if n.sub.kind == "row_reduction"]
    nodes.sort(key=lambda n: not first_region(n.sub))
    cands = []
    for k, (node, make) in enumerate(zip(nodes, sources)):
        honest = TemplateAgent().propose(node.sub, []).source
        cand = Candidate(f"{node.id}-t{k}", node.id, "test", "triton", make(honest), f"{node.sub.id}_kernel")
        search.judge.judge(node, cand)
        cands.append(cand)
    search.close()
    return cands


def test_tampering_that_would_break_later_candidates_is_caught(tmp_path, past_the_static_check):
    sabotage = [lambda honest: honest + SABOTAGE_OTHERS, lambda honest: honest]
    # without the check the saboteur passes (its own output is right), and the honest kernel after it
    # passes too: every candidate gets a fresh executor, so nothing one leaves there reaches the next
    search, events = make_search(tmp_path / "unchecked", TemplateAgent(), executor=Executor(snapshot=False))
    saboteur, victim = _check_in_order(search, events, sabotage)
    assert saboteur.verified.passed and victim.verified.passed, victim.verified.reason
    # with it: the saboteur is rejected, the executor restarted, the honest kernel passes
    search, events = make_search(tmp_path / "checked", TemplateAgent())
    saboteur, victim = _check_in_order(search, events, sabotage)
    assert not saboteur.verified.passed
    assert "the candidate changed triton.next_power_of_2 in the executor" in saboteur.verified.reason
    assert victim.verified.passed, victim.verified.reason
    assert __import__("triton").next_power_of_2 is not None and candidate_modules() == []


# ---------------------------------------------------------------- (f) the composed model runs elsewhere


def test_the_end_to_end_check_runs_the_composed_model_in_another_process(tmp_path, monkeypatch):
    from lego_core.judge.end_to_end import composed
    from lego_core.pipeline import run_pipeline

    seen = []
    real = composed.composed_forward

    def recording(*args, **kwargs):
        answer = real(*args, **kwargs)
        seen.append(answer.pid)
        assert answer.forward["ran"] == "plan" and answer.forward["why"] is None  # the plan is what was judged
        return answer

    monkeypatch.setattr(composed, "composed_forward", recording)
    path = tmp_path / "model.py"
    path.write_text(MODEL)
    out = tmp_path / "out"
    before = optimizer_functions()
    report = run_pipeline(ProblemSpec(str(path)), str(out), OptimizeConfig(cache=False), lambda event: None)
    assert report["end_to_end"]["passed"] and report["summary"]
    assert seen and all(isinstance(pid, int) and pid != os.getpid() for pid in seen)
    assert report["subproblems"] and (out / "kernels").is_dir() and any((out / "kernels").glob("*.py"))
    assert candidate_modules() == [] and optimizer_functions() == before
    assert not list(out.rglob("__pycache__"))  # nothing compiled by the checks ships
    assert report["memory"]["search_peak_mb"] >= report["memory"]["eager_peak_mb"]


def test_a_composed_model_process_that_edits_the_output_folder_fails_the_check(tmp_path):
    from lego_core.errors import OptimizeError
    from lego_core.judge.end_to_end.served import serve
    from lego_core.judge.process.fresh import run_fresh

    (tmp_path / "optimized_model.py").write_text("x = 1\n")
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "k.py").write_text("# checked\n")

    class Editing(Executor):
        def request(self, op, payload=None, timeout_s=None):  # stands in for a process that rewrites a kernel
            (tmp_path / "kernels" / "k.py").write_text("# something else ships\n")
            return {"output": ("value", None)}

    import lego_core.judge.process.fresh as fresh

    original = fresh.Executor
    fresh.Executor = Editing
    try:
        with pytest.raises(OptimizeError, match="changed files of the output folder: kernels/k.py"):
            run_fresh(tmp_path, "composed", {}, serve)
    finally:
        fresh.Executor = original


# ---------------------------------------------------------------- the wire


def test_replies_cannot_run_code_in_the_judge():
    class Evil:
        def __reduce__(self):
            return (os.system, ("echo pwned",))

    with pytest.raises(BadReply, match="does not accept"):
        wire.loads(pickle.dumps((1, "ok", Evil())))
    with pytest.raises(BadReply):
        wire.loads(b"not a pickle")
    # what a real reply holds does load: plain data and shared tensors
    t = torch.arange(6.0).view(2, 3).t()
    seq, status, (tree, nbytes) = wire.loads(wire.dumps((3, "ok", (wire.encode([t, 2, None], None), 0))))
    back = wire.decode(tree, None)
    assert torch.equal(back[0], t) and back[0].stride() == t.stride() and back[1:] == [2, None]


def test_remote_module_launches_times_and_reads_plain_attributes(tmp_path):
    source = tmp_path / "k.py"
    source.write_text("import torch\nCONFIG = {'BLOCK': 4}\n\n\ndef launch(x, y, out=None):\n    if out is None:\n        return [x + y]\n    out[0].copy_(x + y)\n    return out\n")
    executor = Executor(call_timeout_s=30)
    try:
        module = executor.load(source, "lego_candidate_judge_test_k")
        x, y = torch.randn(3, 5), torch.randn(3, 5)
        out = [torch.full((3, 5), float("nan"))]
        returned = module.run([x.clone(), y.clone()], out)
        assert returned[0] is out[0] and torch.equal(out[0], x + y)  # written in place, the judge's own buffer back
        fresh = module.launch(x, y)
        assert torch.equal(fresh[0], x + y) and not x.is_shared()  # the caller's tensors are not moved
        assert module.CONFIG == {"BLOCK": 4}
        module.CONFIG = {"BLOCK": 8}
        assert module.CONFIG == {"BLOCK": 8}
        assert module.time([[x, y]], clock="cpu") > 0  # the timing request, timed with the CPU clock here
        assert executor.pid != os.getpid() and "lego_candidate_judge_test_k" not in sys.modules
    finally:
        executor.close()


def test_what_a_candidate_allocates_in_its_executor_counts_toward_the_run_peak(tmp_path):
    """The memory bound covers the executor too: it counts its own CPU tensors
    during a call (``memory.LiveBytes``) and the meter adds them to what this
    process holds (``MemoryMeter.note_external``)."""
    from lego_core.runtime.memory import MemoryMeter

    source = tmp_path / "big.py"
    source.write_text("import torch\n\n\ndef launch(x, out=None):\n    scratch = torch.zeros(4 << 20)  # 16 MiB\n    out[0].copy_(x + scratch[: x.numel()].view_as(x))\n    return out\n")
    meter = MemoryMeter("cpu")
    executor = Executor(call_timeout_s=30, meter=meter)
    try:
        module = executor.load(source, "lego_candidate_judge_test_big")
        x = torch.randn(4, 4)
        with meter.tracking():
            module.run([x.clone()], [torch.empty(4, 4)])
        assert meter.peak() >= 16 << 20
    finally:
        executor.close()


# ---------------------------------------------------------------- GPU paths


SOURCE_ADD = "import torch\n\n\ndef launch(x, y, out=None):\n    if out is None:\n        return [x + y]\n    torch.add(x, y, out=out[0])\n    return out\n"


@pytest.mark.gpu
def test_cuda_tensors_cross_by_ipc_and_the_executor_times_them(tmp_path):
    source = tmp_path / "k.py"
    source.write_text(SOURCE_ADD)
    executor = Executor(call_timeout_s=120)
    try:
        module = executor.load(source, "lego_candidate_judge_test_cuda")
        x, y = torch.randn(256, 256, device="cuda"), torch.randn(256, 256, device="cuda")
        out = [torch.full((256, 256), float("nan"), device="cuda")]
        returned = module.run([x.clone(), y.clone()], out)
        assert returned[0] is out[0] and torch.equal(out[0], x + y)
        fresh = module.launch(x, y)
        assert fresh[0].is_cuda and torch.equal(fresh[0], x + y)
        ms = module.time([[x, y], [y, x]])  # costing.measure_ms in the executor: CUDA-graph replay
        assert 0 < ms < 10
    finally:
        executor.close()


@pytest.mark.gpu
def test_search_on_a_gpu_measures_candidates_in_the_executor(tmp_path):
    path = tmp_path / "model.py"
    path.write_text(MODEL.replace("torch.randn(6, 16)", "torch.randn(64, 16)"))
    problem = load_problem(ProblemSpec(str(path), device="cuda"))
    graph = capture_graph(problem)
    tree = build_tree(graph)
    activations = [graph.run(problem.model, problem.make_inputs(seed)) for seed in (101, 202, 303)]
    events: list = []
    work = tmp_path / "work"
    work.mkdir()
    search = Search(tree, activations, set(), TemplateAgent(), OptimizeConfig(cache=False, mutation=False), torch.float32, "cuda", work, events.append)
    search.run()
    timed = [e for e in events if e.type == "timing" and e.candidate_id.endswith("-1")]
    assert timed and all(e.measured and e.ms > 0 for e in timed)
    assert candidate_modules() == []


@pytest.mark.gpu
def test_pipeline_on_a_gpu_checks_and_measures_the_composed_model_elsewhere(tmp_path):
    from lego_core.pipeline import run_pipeline

    path = tmp_path / "model.py"
    path.write_text(MODEL)
    report = run_pipeline(ProblemSpec(str(path), device="cuda"), str(tmp_path / "out"), OptimizeConfig(cache=False, compare_compile=False), lambda event: None)
    assert report["end_to_end"]["passed"]
    assert report["launch"]["measured"] and report["launch"]["chosen"]
    assert report["timing"]["optimized_ms"] > 0
    assert candidate_modules() == []


def test_an_executor_stuck_in_a_kernel_does_not_outlive_its_judge(tmp_path):
    """The executor's parent is the fork server, not the judge: it watches a pipe
    only the judge holds, so killing the judge ends it even mid-launch."""
    import subprocess

    spin = tmp_path / "spin.py"
    spin.write_text("def launch(out=None):\n    while True:\n        pass\n")
    judge = tmp_path / "judge.py"
    judge.write_text(textwrap.dedent(f'''
        from lego_core.judge.process import Executor

        if __name__ == "__main__":
            executor = Executor(call_timeout_s=1000)
            module = executor.load({str(spin)!r}, "lego_candidate_spin")
            print(executor.pid, flush=True)
            module.launch()
    '''))
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    process = subprocess.Popen([sys.executable, str(judge)], stdout=subprocess.PIPE, text=True, env=env)
    pid = int(process.stdout.readline())
    time.sleep(0.5)
    process.kill()
    process.wait()

    def running() -> bool:
        try:
            return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
        except OSError:
            return False

    deadline = time.monotonic() + 10
    while running() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not running()
