"""A plan with one wrong kernel is delivered with that kernel dropped and named
(issue 14, "fall back instead of failing").

The kernel passed sub-problem verification; it is corrupted after it (each
time the output folder is composed, the test's ``write_output`` scales that
kernel's outputs by 1.01, far beyond rounding).  Before this change the run
failed with "the composed model does not match eager end to end"; now the
fallback bisects the plan's Triton items, drops the wrong one (the library
computes its region), and the run delivers a model that matches eager.
"""
from pathlib import Path

import torch

from faithful_support import fresh_pair, load_optimized, write_model
from lego_core import pipeline
from lego_core.config import OptimizeConfig
from lego_core.load.problem import ProblemSpec

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

WRONG = '''

_lego_verified_launch = launch


def launch(*args, **kwargs):  # the test's corruption: outputs 1% off
    result = _lego_verified_launch(*args, **kwargs)
    for value in (result if isinstance(result, (tuple, list)) else (result,)):
        value.mul_(1.01)
    return result
'''


def test_a_plan_with_one_wrong_kernel_is_delivered_with_that_kernel_dropped(tmp_path, monkeypatch):
    path = write_model(tmp_path, "mlp_norm", MODEL)
    compose = pipeline.write_output
    wrong: list[str] = []

    def write_with_a_wrong_kernel(out_dir, graph, items, problem, run_id, layout=None):
        files = compose(out_dir, graph, items, problem, run_id, layout)
        if not wrong and files:
            wrong.append(sorted(files)[0])
        if wrong and wrong[0] in files:
            kernel = Path(out_dir) / wrong[0]
            kernel.write_text(kernel.read_text() + WRONG)
        return files

    monkeypatch.setattr(pipeline, "write_output", write_with_a_wrong_kernel)
    events = []
    config = OptimizeConfig(cache=False, mutation=False, verify_seeds=(11, 12, 13), e2e_seed=99)
    report = pipeline.run_pipeline(ProblemSpec(str(path), {}), str(tmp_path / "out"), config, events.append)

    check = report["end_to_end"]
    assert check["passed"], check["reason"]
    assert [d["kernel"] for d in check["dropped"]] == wrong, (wrong, check["dropped"])
    assert "end-to-end judge failed" in check["dropped"][0]["reason"]
    assert check["plan_before_fallback"]["passed"] is False
    assert report["summary"]["dropped_by_judge"] == 1
    entry = next(e for e in report["subproblems"] if e["node_id"] == check["dropped"][0]["node_id"])
    assert entry["implementation"] == "library" and entry["dropped_by_judge"]["kernel"] == wrong[0]
    assert report["summary"]["triton"] >= 1, "only the wrong kernel is dropped"
    assert not (tmp_path / "out" / wrong[0]).exists()
    assert any(getattr(e, "agent", "") == "judge" and wrong[0] in e.content for e in events)

    model, new = fresh_pair(load_optimized(tmp_path / "out"))
    x = torch.randn(8, 32)
    with torch.no_grad():
        torch.testing.assert_close(new(x), model(x), atol=1e-4, rtol=1e-4)
