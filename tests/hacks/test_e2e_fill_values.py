"""The end-to-end check sees through large finite fill values (issue 10, section 1).

A model whose output is ``masked_fill(scores, mask, -1e9)``: in bf16 the
check falls back to "no further from a float64 run than twice eager", and
the fills (rounded alike by eager and by any composed model) dominate that
norm; a composed model with every unmasked element zeroed or 10% off passed
it before the end-to-end judge (``e2e_judge.judge_outputs``) judged the other
elements apart.  The composed
models here are hand-written output folders, run by the real check in its
fresh process.
"""
from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest
import torch

from lego_core.judge.end_to_end.e2e import check_end_to_end
from lego_core.judge.end_to_end.e2e_judge import judge_outputs
from lego_core.load.problem import ProblemSpec, load_problem

pytestmark = pytest.mark.hacks

MODEL = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(64))

    def forward(self, scores, mask):
        return (scores * self.scale).masked_fill(mask, -1e9)


def get_inputs():
    return [torch.randn(8, 64), torch.rand(8, 64) < 0.3]


def get_init_inputs():
    return []
'''

COMPOSED = '''
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(64))

    def forward(self, scores, mask):
        kept = {kept}
        return kept.masked_fill(mask, -1e9)


def get_inputs():
    return [torch.randn(8, 64), torch.rand(8, 64) < 0.3]


def get_init_inputs():
    return []
'''

WRONG = {
    "honest": "scores * self.scale",
    "zeros_every_unmasked_element": "torch.zeros_like(scores)",
    "unmasked_ten_percent_off": "scores * self.scale * 1.1",
}


@pytest.fixture(scope="module", params=["bf16", "fp32"])
def problem(request, tmp_path_factory):
    path = tmp_path_factory.mktemp("e2e_fills") / "masked_model.py"
    path.write_text(MODEL)
    return load_problem(ProblemSpec(str(path), dtype=request.param))


def composed_folder(root, kept):
    folder = root / "out"
    folder.mkdir()
    (folder / "optimized_model.py").write_text(COMPOSED.replace("{kept}", kept))
    return folder


def _passes_whole(errors: dict, multiplier: float, floor: float) -> bool:
    plan, eager = errors["plan"], errors["eager"]
    return all(plan[k] <= multiplier * eager[k] + floor for k in ("rmse", "max_abs"))


@pytest.mark.parametrize("name", ["zeros_every_unmasked_element", "unmasked_ten_percent_off"])
def test_a_composed_model_wrong_apart_from_the_fills_fails_end_to_end(problem, tmp_path, name):
    result = check_end_to_end(composed_folder(tmp_path, WRONG[name]), problem, seed=7)
    assert not result["passed"], result
    if problem.spec.dtype == "bf16":  # -1e9 rounds to bf16's -9.98244e+08 (in fp32 eager is exact there: the whole rule sees it)
        assert "apart from the elements holding the fill value -9.98244e+08" in result["reason"], result
        assert _passes_whole(result["errors_vs_fp64"], result["multiplier"], result["floor"]), \
            "the whole-output rule alone passes it (what the check was blind to)"
    apart = result["errors_vs_fp64_apart_from_fills"]
    assert apart["plan"]["rmse"] > apart["eager"]["rmse"] * 10


def test_the_honest_composed_model_passes_end_to_end(problem, tmp_path):
    result = check_end_to_end(composed_folder(tmp_path, WRONG["honest"]), problem, seed=7)
    assert result["passed"], result
    assert result["errors_vs_fp64_apart_from_fills"]["fill_values"], result


def test_the_judge_without_fills_is_the_whole_output_rule():
    truth = torch.randn(4, 32, dtype=torch.float64)
    eager = truth.bfloat16()
    verdict = judge_outputs(eager, eager, truth, torch.bfloat16)
    assert verdict.passed and verdict.apart_from_fills is None
    assert verdict.to_dict()["errors_vs_fp64_apart_from_fills"] is None
    assert not judge_outputs((truth * 1.1).bfloat16(), eager, truth, torch.bfloat16).passed
