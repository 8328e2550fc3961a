"""Edge sets judged with a tolerance from eager's own error there (issue 27, part 2).

An honest LayerNorm (mean and variance in fp32, no refinement of the mean) was
refused in about one seed draw in five on the "large, constant and zero rows"
edge set: eager's mean of a constant row is exact, the kernel's is off by an
ulp, and 1/sqrt(eps) turns that into 1.5e-4 of the output against a limit of
1e-4.  ``verify.edge_tolerances`` widens an edge set's tolerance to what
eager's error against a float64 run, and the float64 run on inputs nudged by
sixteen fp32 ulps, say the set allows (the end-to-end judge's rule), and no more.
"""
from __future__ import annotations

import os
import re

os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest
import torch

from judge_inputs_support import layer_norm_case, layer_norm_source
from lego_core.config import draw_seeds
from lego_core.dtypes import tolerances
from lego_core.judge.edge_inputs import edge_input_sets
from lego_core.judge.verify import NUDGE_ULPS, _run_reference, compare, edge_tolerances, float64_outputs, nudged_inputs

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the interpreter on the NaN/inf edge set

DRAWS = 20


@pytest.fixture(scope="module")
def case(tmp_path_factory):
    return layer_norm_case(tmp_path_factory.mktemp("edge_tolerance"))


def test_honest_layer_norm_accepted_in_every_seed_draw(case):
    module = case.load(layer_norm_source())
    for _ in range(DRAWS):
        seeds = draw_seeds(3)  # as a run draws them
        report = case.verify(module, seeds)
        assert report.passed, report.reason
        assert report.runs >= 8  # 3 seeded sets twice, then the 2 edge sets


def test_one_percent_off_on_the_constant_rows_is_rejected(case):
    # the constant row of the edge set (variance (nearly) 0, mean not 0: not the zero row)
    module = case.load(layer_norm_source(extra="y = tl.where((var < 1e-10) & (tl.abs(mean) > 0.0), y + 0.01, y)\n"))
    for _ in range(5):
        report = case.verify(module, draw_seeds(3))
        assert not report.passed
        assert report.reason.startswith("edge input set 1 (large, constant and zero rows)"), report.reason
        assert "256 of 2048 elements outside tolerance" in report.reason, report.reason  # the constant row, all of it
        worst = re.search(r"worst at index \(\d, \d+\): (\S+) vs 0$", report.reason)
        assert worst and abs(float(worst.group(1)) - 0.01) < 1e-3, report.reason


def test_the_derived_tolerance_is_tight_on_constant_rows_and_normal_elsewhere(case):
    ref = case.node.sub.run_reference
    normal = tolerances(torch.float32)
    for seed in (5, 6, 7):
        sets, edges = case.sets((seed, seed + 1, seed + 2))
        for j, (what, inputs) in enumerate(edges):
            expected = _run_reference(ref, inputs, what)
            (tol,) = edge_tolerances(ref, inputs, expected, torch.float32, seed=seed)
            assert tol.atol == normal.atol and tol.rtol == normal.rtol and tol.norm_rel >= normal.norm_rel  # never tighter
            if j == 0:  # NaN and inf rows (NaN there), the rest well conditioned: the normal limit
                assert tol.norm_rel == normal.norm_rel and tol.abs_floor <= normal.atol
            else:  # a constant row: 1/sqrt(eps) times a few ulps of its value, under 1% of the output
                assert 0 < tol.abs_floor < 1e-2 and tol.norm_rel < 1e-3
    # the seeded sets are well conditioned: the same rule gives the normal tolerance there
    inputs = sets[0]
    expected = _run_reference(ref, inputs, "set 0")
    (tol,) = edge_tolerances(ref, inputs, expected, torch.float32)
    assert tol.norm_rel == normal.norm_rel and tol.abs_floor <= normal.atol


def test_well_conditioned_edge_sets_keep_the_normal_limit():
    """An elementwise region on the edge sets: eager's error there is an ulp,
    so the tolerance is the normal one: the same verdicts, and an output 1e-3
    off fails on the NaN/inf set (on the other, the RMS scale of the
    1e4-sized elements already allows it, derived or not)."""
    gen = torch.Generator().manual_seed(3)
    x, y = torch.randn(16, 64, generator=gen), torch.randn(16, 64, generator=gen)

    def ref(inputs):
        return [torch.relu(inputs[0] + inputs[1]) * 0.5]

    normal = tolerances(torch.float32)
    for what, inputs in edge_input_sets([x, y], None, seed=11):
        expected = ref(inputs)
        (tol,) = edge_tolerances(ref, inputs, expected, torch.float32, seed=11)
        rms = float(expected[0][torch.isfinite(expected[0])].square().mean().sqrt())
        assert tol.norm_rel == normal.norm_rel and tol.abs_floor <= normal.atol * max(1.0, rms), (what, tol)
        off = expected[0] + 1e-3 * (expected[0].abs() > 0.5)
        derived = compare([off], expected, torch.float32, tolerances_for=[tol])
        assert derived.passed == compare([off], expected, torch.float32).passed
        if what == "NaN and +-inf":
            assert not derived.passed


def test_nudged_inputs_move_every_float_by_nudge_ulps():
    x = torch.tensor([1.0, -2.0, 0.0, float("nan"), float("inf")])
    idx = torch.tensor([1, 2])
    moved, same = nudged_inputs([x, idx], seed=1)
    assert moved.dtype == torch.float64 and same is idx
    step = (moved[:3] - x[:3].double()).abs() / x[:3].double().abs().clamp_min(1e-300)
    assert torch.allclose(step[:2], torch.full((2,), NUDGE_ULPS * torch.finfo(torch.float32).eps, dtype=torch.float64))
    assert moved[2] == 0 and torch.isnan(moved[3]) and torch.isinf(moved[4])


def test_no_float64_run_means_the_normal_tolerance():
    def ref(inputs):
        return [inputs[0] * 2]

    x = torch.randn(4, 8)
    expected = ref([x])
    truth = float64_outputs(ref, [x], expected)
    assert truth is not None and truth[0].dtype == torch.float64 and torch.equal(truth[0], x.double() * 2)

    def needs_its_dtype(inputs):
        if inputs[0].dtype != torch.float32:
            raise TypeError("float32 only")
        return [inputs[0] * 2]

    assert float64_outputs(needs_its_dtype, [x], expected) is None
    assert edge_tolerances(needs_its_dtype, [x], expected, torch.float32) is None


def _seeds_with(kind: str) -> tuple:
    """Seeds drawn as a run draws them, until input set 1 or 2 is redrawn as ``kind``."""
    from lego_core.judge.inputs import distributions_for

    while True:
        seeds = draw_seeds(3)
        if kind in distributions_for(seeds):
            return seeds


def test_the_template_layer_norm_passes_shifted_sets(case):
    """A set redrawn shifted (rows with a large common offset) makes a
    LayerNorm's mean subtraction cancel in fp32; eager's own error grows
    there too, and the set is judged with the tolerance eager's error allows
    (as edge sets are): the template agent's honest kernel passes, a kernel
    that skips the mean subtraction does not.  (A CI run rejected the
    template's kernel on vit_encoder's LayerNorms at 1.9e-5 > 1e-5 on a
    shifted set before these sets got the derived tolerance; that draw is
    rare and this small case does not reproduce it: it pins the behaviour.)"""
    from lego_core.agents.template.agent import TemplateAgent

    proposal = TemplateAgent().propose(case.node.sub, [])
    honest = case.load(proposal.source)
    uncentred = case.load(layer_norm_source(centre="def centre(x):\n    return False\n"))
    for _ in range(5):
        seeds = _seeds_with("shifted")
        report = case.verify(honest, seeds)
        assert report.passed, report.reason
        assert not case.verify(uncentred, seeds).passed
