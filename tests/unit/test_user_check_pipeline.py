"""The final user check in a real run (issue 27): a plan that fails it does not ship.

A kernel that passed verification is corrupted after it (each time the
output folder is composed) to count its calls and go wrong after 40: it
passes the end-to-end check (one call in a fresh process) and fails the
final user check, so the fallback drops it as it drops a kernel that fails
the end-to-end check, and ``report.json`` says why.  A plain run through the
jailed optimizer process (``lego_core.optimize``, the default) records the
user check it passed.
"""
from pathlib import Path

import pytest
import torch

from faithful_support import fresh_pair, load_optimized, optimize_api, write_model
from lego_core import pipeline
from lego_core.config import OptimizeConfig
from lego_core.judge.end_to_end import user_check
from lego_core.load.problem import ProblemSpec

pytestmark = pytest.mark.slow

MODEL = '''
import torch
import torch.nn as nn

batch_size = 8
width = 32


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(width, 2 * width)
        self.norm = nn.LayerNorm(2 * width)
        self.fc2 = nn.Linear(2 * width, width)

    def forward(self, x):
        h = torch.nn.functional.gelu(self.fc1(x))
        h = self.norm(h) * 2.0 + 1.0
        return torch.sigmoid(self.fc2(h)) * x


def get_inputs():
    return [torch.randn(batch_size, width)]


def get_init_inputs():
    return []
'''

WRONG_AFTER_40_CALLS = '''

_lego_verified_launch = launch
_lego_calls = [0]


def launch(*args, **kwargs):  # the test's corruption: right for 40 calls, then 1% off
    result = _lego_verified_launch(*args, **kwargs)
    _lego_calls[0] += 1
    if _lego_calls[0] > 40:
        for value in (result if isinstance(result, (tuple, list)) else (result,)):
            value.mul_(1.01)
    return result
'''


def test_a_kernel_that_goes_wrong_after_40_calls_is_dropped_by_the_user_check(tmp_path, monkeypatch):
    path = write_model(tmp_path, "mlp_norm", MODEL)
    compose = pipeline.write_output
    wrong: list[str] = []

    def write_with_a_counting_kernel(out_dir, graph, items, problem, run_id, layout=None):
        files = compose(out_dir, graph, items, problem, run_id, layout)
        if not wrong and files:
            wrong.append(sorted(files)[0])
        if wrong and wrong[0] in files:
            kernel = Path(out_dir) / wrong[0]
            kernel.write_text(kernel.read_text() + WRONG_AFTER_40_CALLS)
        return files

    monkeypatch.setattr(pipeline, "write_output", write_with_a_counting_kernel)
    config = OptimizeConfig(cache=False, mutation=False, verify_seeds=(11, 12, 13), e2e_seed=99)
    report = pipeline.run_pipeline(ProblemSpec(str(path), {}), str(tmp_path / "out"), config, lambda event: None)

    check = report["end_to_end"]
    assert check["passed"], check["reason"]
    assert [d["kernel"] for d in check["dropped"]] == wrong, (wrong, check["dropped"])
    reason = check["dropped"][0]["reason"]
    assert "the final user check failed" in reason and "call 41" in reason, reason
    before = check["plan_before_fallback"]
    assert before["passed"] is False and before["reason"].startswith("the final user check failed")
    assert before["user_check"]["passed"] is False
    shipped = check["user_check"]
    assert shipped["passed"] and shipped["calls"]["made"] >= 41 and shipped["lego_modules"] == [], shipped
    assert [s["name"] for s in shipped["sets"]] == user_check.SET_NAMES
    assert shipped["wall_s"] > 0 and report["phases_s"]["e2e_check"] >= shipped["wall_s"]
    assert not (tmp_path / "out" / wrong[0]).exists()

    model, new = fresh_pair(load_optimized(tmp_path / "out"))
    x = torch.randn(8, 32)
    with torch.no_grad():
        for _ in range(45):
            got = new(x)
        torch.testing.assert_close(got, model(x), atol=1e-4, rtol=1e-4)


def test_a_jailed_run_records_the_user_check_it_passed(tmp_path):
    path = write_model(tmp_path, "mlp_norm", MODEL)
    report = optimize_api(path, tmp_path / "out", mutation=False, verify_seeds=(11, 12, 13), e2e_seed=99)
    entry = report["end_to_end"]["user_check"]
    assert entry["passed"], entry["reason"]
    assert entry["lego_modules"] == [] and set(entry["checks"].values()) == {"passed"}
    assert entry["calls"]["made"] == entry["calls"]["scheduled"]
    assert all(s["passed"] for s in entry["sets"]), entry["sets"]
    if report["sandbox"]["jailed"]:  # started by the jailed optimizer: in its pid namespace, where pids count from 1
        assert entry["runner"]["pid"] < 1000, entry["runner"]
