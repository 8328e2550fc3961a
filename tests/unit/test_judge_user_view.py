"""A candidate cannot tell being judged from being used (issue 27).

The same probe kernel (an honest softmax that records, on every call,
whether its tensors are in shared memory, which LEGO modules are loaded, its
module name and file) is judged by a whole run of the pipeline and then
called by ``optimized_model.py`` in a plain user's process: the two reports
must be equal.  The probe reads ``sys`` and module state, which the kernel-file
allowlist refuses; the static check is switched off here so that it reaches
the executor, as code that hid from the static check would.

Below: the pieces (``judge.process.user_view``) one by one.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest
import torch

from lego_core.agents.base import Proposal
from lego_core.agents.template.agent import TemplateAgent
from lego_core.config import OptimizeConfig
from lego_core.judge.process import user_view
from lego_core.load.problem import ProblemSpec

pytestmark = pytest.mark.filterwarnings("ignore:.*LeafSpec.*:FutureWarning")

MODEL = '''\
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x * 2.0, dim=-1)


def get_inputs():
    return [torch.randn(6, 16)]


def get_init_inputs():
    return []
'''

# appended to the template agent's honest softmax file, whose launch becomes _honest_launch; what it
# records is the same on every call of one process (else the judge's state check rejects it)
PROBE = '''

import sys as _probe_sys

REPORT = {"any_shared": False, "all_plain_tensors": True, "lego_modules": [], "names": [], "files": []}


def launch(*args, out=None):
    tensors = [t for t in (*args, *(out or ())) if isinstance(t, torch.Tensor)]
    REPORT["any_shared"] = REPORT["any_shared"] or any(t.is_shared() for t in tensors)
    REPORT["all_plain_tensors"] = REPORT["all_plain_tensors"] and all(type(t) is torch.Tensor for t in tensors)
    seen = sorted(k for k in _probe_sys.modules if k == "lego_core" or k.startswith("lego_core.") or "judge" in k)
    REPORT["lego_modules"] = sorted(set(REPORT["lego_modules"]) | set(seen))
    REPORT["names"] = sorted(set(REPORT["names"]) | {__name__})
    REPORT["files"] = sorted(set(REPORT["files"]) | {"/".join(__file__.split("/")[-2:])})
    return _honest_launch(*args, out=out)
'''


class ProbeAgent:
    """The template agent, whose softmax kernel also records what it sees (PROBE)."""

    name = "probe"

    def __init__(self):
        self.inner = TemplateAgent()

    def can_attempt(self, sub):
        return self.inner.can_attempt(sub)

    def propose(self, sub, feedback):
        proposal = self.inner.propose(sub, feedback)
        if proposal.source and "softmax" in " ".join(sub.ops):
            source = proposal.source.replace("\ndef launch(", "\ndef _honest_launch(") + PROBE
            return Proposal(source, proposal.kernel_name, list(proposal.transcript))
        return proposal


USER = '''
import json, sys
import torch
sys.path.insert(0, sys.argv[1])
import optimized_model
torch.manual_seed(5)
model = optimized_model.ModelNew(*optimized_model.get_init_inputs()).eval()
with torch.no_grad():
    for _ in range(3):
        model(*optimized_model.get_inputs())
kernels = [m for name, m in vars(optimized_model).items() if getattr(m, "REPORT", None) is not None]
assert len(kernels) == 1, kernels
print("REPORT " + json.dumps(kernels[0].REPORT))
'''


def comparable(report: dict, run_id: str) -> dict:
    """What must be the same in the judge and at a user's (the run id is the same; spelled out for the message)."""
    return {**{k: v for k, v in report.items() if k != "verdict"}, "names": [n.replace(run_id, "<run>") for n in report["names"]]}


def test_a_probe_kernel_sees_the_same_in_the_judge_as_in_a_users_process(tmp_path, monkeypatch):
    import lego_core.judge.candidate as candidate
    import lego_core.pipeline as pipeline
    from lego_core.judge.process import child

    monkeypatch.setattr(candidate, "calls_back_into_reference", lambda *args, **kwargs: None)
    for name in ("kernel_file_refusal", "candidate_refusal"):  # the kernel-file allowlist, whatever its entry point is called
        if hasattr(candidate, name):
            monkeypatch.setattr(candidate, name, lambda *args, **kwargs: None)
    monkeypatch.setattr(pipeline, "make_agent", lambda *args, **kwargs: ProbeAgent())
    # the judge's reports: read from the executor after each verified call, before the executor is replaced
    judged: list[dict] = []
    real_verify = candidate.CandidateJudge._verify

    def verify_and_read(self, sub, cand, input_sets):
        module = real_verify(self, sub, cand, input_sets)
        if module is not None and "REPORT" in cand.source:
            judged.append({**module.REPORT, "verdict": cand.verified.reason})
        return module

    monkeypatch.setattr(candidate.CandidateJudge, "_verify", verify_and_read)
    path = tmp_path / "model.py"
    path.write_text(MODEL)
    out = tmp_path / "out"
    report = pipeline.run_pipeline(ProblemSpec(str(path)), str(out), OptimizeConfig(cache=False, mutation=False), lambda event: None,
                                   run_id="probe123")
    # the probe keeps no state that changes after its first call, so it passes the state checks
    assert judged and judged[0]["verdict"].startswith("3 input sets"), [j["verdict"] for j in judged]
    assert any(c["implementation"] == "triton" for c in report["subproblems"]), "the probe kernel was not chosen"
    kernel_files = list((out / "kernels").glob("*.py"))
    assert len(kernel_files) == 1 and "REPORT" in kernel_files[0].read_text()

    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    user = subprocess.run([sys.executable, "-c", USER, str(out)], capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert user.returncode == 0, user.stderr[-3000:]
    at_user = json.loads(user.stdout.split("REPORT ", 1)[1])

    assert comparable(judged[0], "probe123") == comparable(at_user, "probe123"), (judged[0], at_user)
    # and what that means, spelled out
    assert judged[0]["any_shared"] is False and judged[0]["lego_modules"] == []
    assert judged[0]["names"] == [f"lego_kernel_probe123_{kernel_files[0].stem}"]
    assert judged[0]["files"] == [f"kernels/{kernel_files[0].name}"]
    assert child.__name__ in sys.modules  # the judge's own modules are back where they were


# ---------------------------------------------------------------- the pieces


def test_private_tensors_are_not_shared_keep_aliasing_and_identity_and_write_back():
    base = torch.arange(24, dtype=torch.float32).share_memory_()
    a, b = base[:12].view(3, 4), base[12:].view(3, 4)  # two views of one shared storage
    private = user_view.PrivateTensors()
    private.begin()
    pa, pb, n = private.private([a, b, 7])
    assert n == 7 and not pa.is_shared() and not pb.is_shared()
    assert pa.untyped_storage().data_ptr() == pb.untyped_storage().data_ptr()  # aliasing kept
    assert pa.stride() == a.stride() and pb.storage_offset() == b.storage_offset()
    assert torch.equal(pa, a) and torch.equal(pb, b)
    pb.fill_(-1.0)  # the candidate writes in place
    private.write_back()
    assert torch.equal(b, torch.full((3, 4), -1.0)) and torch.equal(a, torch.arange(12.0).view(3, 4))
    base.fill_(5.0)  # the judge refills its buffer for the next call
    private.begin()
    pa2, = private.private([a])
    assert pa2 is pa and torch.equal(pa2, torch.full((3, 4), 5.0))  # the same object, the new contents


def test_a_private_tensor_is_passed_as_it_is():
    x = torch.ones(4)
    private = user_view.PrivateTensors()
    private.begin()
    assert private.private([x])[0] is x


def test_the_judge_is_out_of_sight_and_out_of_reach_while_candidate_code_runs():
    import lego_core.judge.verify  # noqa: F401

    before = {k: v for k, v in sys.modules.items() if k.startswith("lego_core")}
    with user_view.hidden_judge():
        assert not [k for k in sys.modules if k.startswith("lego_core")]
        with pytest.raises(ModuleNotFoundError, match="lego_core"):
            __import__("lego_core.judge.verify")
        sys.modules["lego_core.fake"] = object()  # put there meanwhile: dropped
    after = {k: v for k, v in sys.modules.items() if k.startswith("lego_core")}
    assert after.keys() == before.keys() and all(after[k] is before[k] for k in before)


class Deferred(torch.Tensor):
    pass


@pytest.mark.parametrize("value, fragment", [
    (torch.ones(2).as_subclass(Deferred), "a subclass of torch.Tensor"),
    ((torch.ones(2), [torch.ones(2).as_subclass(Deferred)]), "a subclass of torch.Tensor"),
    (torch.nn.Parameter(torch.ones(2)), "a subclass of torch.Tensor"),
])
def test_only_plain_tensors_may_be_returned(value, fragment):
    assert fragment in user_view.returned_problem(value)


def test_plain_results_pass():
    assert user_view.returned_problem([torch.ones(2), (torch.zeros(1), 3)]) is None


def test_a_buffer_handed_out_again_or_changed_after_return_is_caught():
    earlier = user_view.EarlierOutputs()
    buffer = torch.zeros(4)
    x = torch.ones(4)
    assert earlier.check(buffer, [x]) is None
    assert "already returned" in earlier.check(buffer, [x])  # the same memory, second call
    earlier = user_view.EarlierOutputs()
    first = torch.ones(4)
    assert earlier.check(first, [x]) is None
    first.mul_(3)  # the kernel keeps writing into what it returned
    assert "changed when it was called again" in earlier.check(torch.ones(4), [x])


def test_returning_an_input_or_the_out_buffer_again_is_not_reuse():
    earlier = user_view.EarlierOutputs()
    x, out = torch.ones(4), torch.empty(4)
    for _ in range(3):
        assert earlier.check(out, [x, out]) is None
        assert earlier.check(x.view(2, 2), [x]) is None
        assert earlier.check(torch.ones(4), [x]) is None
    assert earlier.check(torch.tensor([float("nan")]), [x]) is None  # NaN equals itself bitwise
