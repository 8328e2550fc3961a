"""The end-to-end check sees through large finite fill values (issue 10, section 1).

A model whose output is ``masked_fill(scores, mask, -1e9)``: in bf16 the
check falls back to "no further from a float64 run than twice eager", and
the fills (rounded alike by eager and by any composed model) dominate that
norm; a composed model with every unmasked element zeroed or 10% off passed
it before ``e2e.fp64_verdict`` judged the other elements apart.  The composed
models here are hand-written output folders, run by the real check in its
fresh process.
"""
from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest
import torch

from lego_core.e2e import check_end_to_end, fp64_verdict
from lego_core.problem import ProblemSpec, load_problem

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


@pytest.fixture(scope="module")
def problem(tmp_path_factory):
    path = tmp_path_factory.mktemp("e2e_fills") / "masked_model.py"
    path.write_text(MODEL)
    return load_problem(ProblemSpec(str(path), dtype="bf16"))


def composed_folder(root, kept):
    folder = root / "out"
    folder.mkdir()
    (folder / "optimized_model.py").write_text(COMPOSED.replace("{kept}", kept))
    return folder


@pytest.mark.parametrize("name", ["zeros_every_unmasked_element", "unmasked_ten_percent_off"])
def test_a_composed_model_wrong_apart_from_the_fills_fails_end_to_end(problem, tmp_path, name):
    result = check_end_to_end(composed_folder(tmp_path, WRONG[name]), problem, seed=7)
    assert not result["passed"], result
    assert "apart from the elements holding the fill value -9.98244e+08" in result["reason"], result  # -1e9 in bf16
    errors = result["fp64_norm_rel_error"]
    assert errors["optimized"] <= 2 * errors["eager"], "the whole-tensor criterion alone passes it (what the check was blind to)"


def test_the_honest_composed_model_passes_end_to_end(problem, tmp_path):
    result = check_end_to_end(composed_folder(tmp_path, WRONG["honest"]), problem, seed=7)
    assert result["passed"], result


def test_fp64_verdict_without_fills_is_the_whole_tensor_rule():
    truth = torch.randn(4, 32, dtype=torch.float64)
    eager = truth.bfloat16()
    assert fp64_verdict(eager, eager, truth)["passed"]
    assert "optimized_apart_from_fills" not in fp64_verdict(eager, eager, truth)["fp64_norm_rel_error"]
    assert not fp64_verdict((truth * 1.1).bfloat16(), eager, truth)["passed"]
