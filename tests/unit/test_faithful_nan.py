"""ModelNew is faithful to eager on NaN, inf and bf16 rounding (issue 10, section 2).

Each case optimizes a tiny model on the CPU (Triton interpreter), then calls
ModelNew and the eager model on inputs the search never saw.  Before the
change each of these failed: row maxima skipped NaN (``tl.max``), so a row
with one NaN came back with seven finite wrong values; verification fed only
``randn`` so nothing noticed; and bf16 outputs were truncated by the
interpreter, biased toward zero.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest
import torch

from lego_core import ProblemSpec, optimize
from lego_core.config import OptimizeConfig
from lego_core.judge.edge_inputs import edge_input_sets
from lego_core.judge.verify import precision_mismatch, verify
from lego_core.judge.inputs import load_module  # noqa: E402

pytestmark = pytest.mark.faithful
REPO = Path(__file__).resolve().parents[2]
NAN, INF = float("nan"), float("inf")


def model_file(folder: Path, forward: str, shape: str, init: str = "pass") -> Path:
    """A KernelBench-style file: ``forward(self, x)`` returns ``forward``."""
    path = folder / f"m_{uuid.uuid4().hex[:6]}.py"
    path.write_text(textwrap.dedent(f"""\
        import torch
        import torch.nn as nn
        import torch.nn.functional as F


        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                {init}

            def forward(self, x):
                return {forward}


        def get_inputs():
            return [torch.randn({shape})]


        def get_init_inputs():
            return []
        """))
    return path


def load(folder: Path):
    return load_module(folder / "optimized_model.py", f"opt_{uuid.uuid4().hex[:8]}")


def pair(out: Path, dtype=torch.float32):
    module = load(out)
    torch.manual_seed(0)
    model = module.Model(*module.get_init_inputs()).eval().to(dtype)
    new = module.ModelNew(*module.get_init_inputs()).to(dtype)
    new.load_state_dict(model.state_dict())
    return model, new


def optimized(tmp_path: Path, forward: str, shape: str, **kw) -> tuple[Path, dict]:
    out = tmp_path / "out"
    report = optimize(ProblemSpec(str(model_file(tmp_path, forward, shape, **kw)), {}, **({"dtype": kw["dtype"]} if "dtype" in kw else {})), str(out), OptimizeConfig(cache=False))
    return out, report


def assert_triton(report: dict) -> None:
    """The plan really runs a generated kernel (a library fallback would prove nothing)."""
    assert report["summary"]["triton"] >= 1, report["summary"]


def test_row_max_nan_end_to_end_through_the_cli(tmp_path):
    """The reported case: ``x - x.amax(-1, keepdim=True)`` with one NaN in a row.
    Eager: the whole row NaN.  Before: seven finite wrong values and one NaN."""
    src = model_file(tmp_path, "x - x.amax(dim=-1, keepdim=True)", "4, 8")
    out = tmp_path / "out"
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=str(REPO))
    proc = subprocess.run([sys.executable, "-m", "lego_core", "optimize", str(src), "--out", str(out), "--no-cache"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert_triton(json.loads((out / "report.json").read_text()))
    model, new = pair(out)
    x = torch.randn(4, 8)
    x[1, 3] = NAN
    x[2, 5] = INF
    with torch.no_grad():
        expected, got = model(x), new(x)
    assert torch.isnan(expected[1]).all()
    torch.testing.assert_close(got, expected, equal_nan=True)


def test_absmax_scaling_and_row_min_with_nan_and_inf(tmp_path):
    """Abs-max scaling (as in int8 quantizers) and a row minimum: a NaN makes the
    row NaN, a +inf makes it NaN/0 as eager divides.  Before: finite values in
    the NaN row (``tl.max`` / ``tl.min`` skipped the NaN)."""
    out, report = optimized(tmp_path, "x / x.abs().amax(dim=-1, keepdim=True) + (x - x.amin(dim=-1, keepdim=True))", "6, 16")
    assert_triton(report)
    model, new = pair(out)
    x = torch.randn(6, 16)
    x[0, 2] = NAN
    x[3, 7] = INF
    x[4, 0] = -INF
    with torch.no_grad():
        expected, got = model(x), new(x)
    torch.testing.assert_close(got, expected, equal_nan=True)


def test_attention_with_a_nan_token_matches_eager(tmp_path):
    """Causal SDPA (flash-attention template) where one token of batch 1 is NaN:
    eager's rows that see it are NaN.  Before: the template's empty-row test
    ``l > 0`` was False for a NaN sum, so those rows came back as zeros; and
    a row with no score came back as zeros where eager's ``_safe_softmax``
    zeros @ v carry the NaN of a value row past the horizon, so the
    verifier's NaN edge sets rejected the kernel in 2 of 6 runs (was xfail;
    ``test_attention``'s empty-row test pins the case)."""
    init = "self.qkv = nn.Linear(16, 48)"
    forward = "F.scaled_dot_product_attention(*self.qkv(x).view(2, 8, 3, 2, 8).permute(2, 0, 3, 1, 4), is_causal=True)"
    out, report = optimized(tmp_path, forward, "2, 8, 16", init=init)
    assert any(s["kind"] == "attention" and s["implementation"] == "triton" for s in report["subproblems"]), report["subproblems"]
    model, new = pair(out)
    x = torch.randn(2, 8, 16)
    x[1, 5, 3] = NAN
    with torch.no_grad():
        expected, got = model(x), new(x)
    assert torch.isnan(expected[1]).any() and not torch.isnan(expected[0]).any()
    torch.testing.assert_close(got, expected, equal_nan=True)


def test_bf16_layer_norm_residual_chain_rounds_like_eager(tmp_path):
    """LayerNorm + residual, three times, in bf16 on the CPU.  ModelNew's error
    against a float64 run is no worse than eager-bf16's by more than 1.25x, and
    its mean bias is comparable.  Before: 1.4-1.6x the error and a bias of
    -2.8e-3 against eager's -1.5e-4 (the interpreter truncated fp32 to bf16)."""
    init = "self.ln = nn.ModuleList(nn.LayerNorm(64) for _ in range(3))"
    forward = "(x := x + self.ln[0](x)) is None or (x := x + self.ln[1](x)) is None or x + self.ln[2](x)"
    path = model_file(tmp_path, forward, "16, 64", init=init)
    out = tmp_path / "out"
    report = optimize(ProblemSpec(str(path), {}, dtype="bf16"), str(out), OptimizeConfig(cache=False))
    assert_triton(report)
    module = load(out)
    torch.manual_seed(0)
    model = module.Model().eval()
    for ln in model.ln:  # weights that are not ones and zeros
        ln.weight.data.uniform_(0.5, 1.5)
        ln.bias.data.normal_(0.0, 0.3)
    x = torch.randn(64, 16, 64) * 2 + 0.5  # fresh inputs, more rows than the search saw
    with torch.no_grad():
        exact = model.double()(x.double())
        eager = model.bfloat16()(x.bfloat16()).double()
        new = module.ModelNew().bfloat16()
        new.load_state_dict(model.state_dict())
        got = torch.cat([new(x[k].bfloat16()) for k in range(x.shape[0])]).double().view_as(exact)
    err_eager, err_new = (eager - exact).norm(), (got - exact).norm()
    bias_eager, bias_new = (eager - exact).mean(), (got - exact).mean()
    assert err_new <= 1.25 * err_eager, (float(err_new), float(err_eager))
    assert abs(bias_new) <= 2 * abs(bias_eager) + 2e-4, (float(bias_new), float(bias_eager))


# ---------------------------------------------------------------- the judge: edge sets and the float64 bound


def _sets(shape=(4, 8)):
    return [[torch.randn(*shape, generator=torch.Generator().manual_seed(s))] for s in (1, 2, 3)]


def test_verify_edge_sets_reject_a_nan_dropping_row_max():
    """A row max that skips NaN passes on randn inputs and fails on the edge sets."""
    ref = lambda xs: [xs[0] - xs[0].amax(-1, keepdim=True)]  # noqa: E731

    def nan_dropping(xs, out):
        y = xs[0] - torch.nan_to_num(xs[0], nan=-INF).amax(-1, keepdim=True)
        if out is None:
            return [y]
        out[0].copy_(y)
        return out

    sets = _sets()
    # a PyTorch test double of a kernel: the call-trace rules are off (tests/hacks covers them)
    assert verify(nan_dropping, ref, sets, "fp32", [1, 2, 3], trace=False).passed
    report = verify(nan_dropping, ref, sets, "fp32", [1, 2, 3], edge_sets=edge_input_sets(sets[0], None, 1), trace=False)
    assert not report.passed and "edge input set 0 (NaN and +-inf)" in report.reason and "NaN" in report.reason


def test_edge_sets_edit_activations_only_and_keep_the_reference_in_charge():
    """Parameters stay as they are; a region that turns NaN into a number
    (``nan_to_num``) is judged by what the reference does there."""
    x, w = torch.randn(4, 8), torch.randn(8)
    sets = edge_input_sets([x, w], [True, False], seed=7)
    assert [label for label, _ in sets] == ["NaN and +-inf", "large, constant and zero rows"]
    special = sets[0][1]
    assert torch.isnan(special[0]).sum() == 1 and torch.isposinf(special[0]).sum() == 1 and torch.isneginf(special[0]).sum() == 1
    assert torch.equal(special[1], w) and torch.equal(x, x)  # the original is not edited
    ref = lambda xs: [torch.nan_to_num(xs[0], nan=0.0, posinf=1.0, neginf=-1.0) * xs[1]]  # noqa: E731
    honest = lambda xs, out: ref(xs) if out is None else [out[0].copy_(ref(xs)[0])]  # noqa: E731
    assert verify(honest, ref, _sets() and [[x, w]] * 3, "fp32", [1, 2, 3], edge_sets=sets, trace=False).passed


def test_precision_bound_rejects_truncation_to_bf16():
    """Truncating fp32 to bf16 is about twice as far from float64 as rounding to
    nearest even (what eager does): the bound rejects it, accepts rounding."""
    hi = torch.randn(4096, dtype=torch.float64) * 3
    eager = hi.float().bfloat16()
    truncated = (hi.float().view(torch.int32) & -65536).view(torch.float32).bfloat16()
    assert precision_mismatch("output 0", eager.clone(), eager, hi) == ""
    reason = precision_mismatch("output 0", truncated, eager, hi)
    assert "as far from a float64 reference" in reason


def test_the_float64_bound_is_skipped_when_its_reference_would_not_fit():
    """verify() judges a bf16 candidate against float64 only when a float64
    run of the reference fits ``precise_limit_bytes`` (a 16k-token attention
    region in float64 holds 4x its score matrices): a truncating candidate is
    caught with room, passes on the dtype tolerance without it."""
    ref = lambda xs: [(xs[0].float() * 1.5).bfloat16()]  # noqa: E731

    def truncating(xs, out):
        y = (xs[0].float() * 1.5).view(torch.int32) & -65536
        y = y.view(torch.float32).bfloat16()
        return [y] if out is None else [out[0].copy_(y)]

    sets = [[torch.randn(64, 64).bfloat16()] for _ in range(3)]
    caught = verify(truncating, ref, sets, "bf16", [1, 2, 3], trace=False)
    assert not caught.passed and "as far from a float64 reference" in caught.reason
    from lego_core.judge.verify import float64_working_bytes

    need = float64_working_bytes(ref, sets[0], ref(sets[0]))
    assert need == 8 * 64 * 64 * 3  # input, and twice the output (no sub-problem: no intermediates)
    assert verify(truncating, ref, sets, "bf16", [1, 2, 3], trace=False, precise_limit_bytes=need - 1).passed
    assert not verify(truncating, ref, sets, "bf16", [1, 2, 3], trace=False, precise_limit_bytes=need).passed


def _decayed_scan(xs):
    """gated_conv_mixer's scan in the dtype it is given: undo an exponential
    decay (values grow by up to e^7), accumulate over time, redo it; in bf16
    every step rounds, so eager's own result is off where the growth is large."""
    x, = xs
    steps = torch.arange(x.shape[1], dtype=x.dtype)[:, None]
    decay = -torch.exp(torch.linspace(-9.0, -5.0, x.shape[2], dtype=torch.float64)).to(x.dtype)
    return [torch.cumsum(x * torch.exp(-decay * steps), dim=1) * torch.exp(decay * steps) / x.shape[1]]


def test_a_bf16_output_nearer_the_exact_result_than_eager_is_accepted():
    """A fused bf16 kernel that keeps fp32 inside can differ from eager's
    bf16 result by more than the bf16 tolerance exactly where eager's own
    rounding is amplified (on the H200 the gated_conv_mixer scan was
    rejected for 9% on one element of 16,384 on the large-values edge set,
    and the library's 0.3 ms cumsum path shipped instead).  Such an output
    passes when it is within the tolerance of the float64 result rounded
    once to bf16; one that is wrong by as much still fails."""
    torch.manual_seed(0)
    sets = [[(torch.randn(1, 1024, 16) * 1e4).bfloat16()] for _ in range(3)]

    def exact(xs, out):
        y = _decayed_scan([xs[0].double()])[0].bfloat16()
        return [y] if out is None else [out[0].copy_(y)]

    plain = verify(exact, _decayed_scan, sets, "bf16", [1, 2, 3], trace=False)
    assert plain.passed, plain.reason
    eager_off = [float(((_decayed_scan(s)[0].double() - _decayed_scan([s[0].double()])[0]).abs() / _decayed_scan([s[0].double()])[0].abs().clamp_min(1)).max()) for s in sets]
    assert max(eager_off) > 0.02, "the case must be one where eager's own bf16 result is outside the bf16 tolerance"

    def off_by_five_percent(xs, out):
        y = (_decayed_scan([xs[0].double()])[0] * 1.05).bfloat16()
        return [y] if out is None else [out[0].copy_(y)]

    wrong = verify(off_by_five_percent, _decayed_scan, sets, "bf16", [1, 2, 3], trace=False)
    assert not wrong.passed and "outside tolerance" in wrong.reason


def _growing_scan(xs):
    """The same scan with a decay rate of 0.1 per step over 1,024 steps: in
    bf16 (as in fp32) ``exp(0.1 * t)`` overflows past t = 887, so eager's
    result is NaN there (inf times an underflowed 0) while the float64 result
    is finite, as gated_conv_mixer's scan was at file size on the H200 (the
    fused kernel's 0.0011 against eager's inf)."""
    x, = xs
    steps = torch.arange(x.shape[1], dtype=x.dtype)[:, None]
    rate = torch.full((x.shape[2],), 0.1, dtype=x.dtype)
    return [torch.cumsum(x * torch.exp(rate * steps), dim=1) * torch.exp(-rate * steps) / x.shape[1]]


def test_a_bf16_output_finite_where_eager_overflowed_is_judged_against_float64():
    """Where eager's 16-bit intermediate overflows but the float64 result is
    finite, a candidate that keeps the value finite is judged against the
    float64 result rounded once to bf16: the exact answer passes, and one
    that writes zeros (or anything else) where eager has NaN still fails."""
    torch.manual_seed(0)
    sets = [[torch.randn(1, 1024, 8).bfloat16()] for _ in range(3)]
    eager = _growing_scan(sets[0])[0]
    assert not bool(torch.isfinite(eager).all()), "the case must be one where eager's own bf16 result overflows"
    assert bool(torch.isfinite(_growing_scan([sets[0][0].double()])[0]).all())

    def exact(xs, out):
        y = _growing_scan([xs[0].double()])[0].bfloat16()
        return [y] if out is None else [out[0].copy_(y)]

    accepted = verify(exact, _growing_scan, sets, "bf16", [1, 2, 3], trace=False)
    assert accepted.passed, accepted.reason

    def zeros_where_eager_overflowed(xs, out):
        y = _growing_scan([xs[0].double()])[0].bfloat16()
        y = torch.where(torch.isfinite(_growing_scan(xs)[0]), y, torch.zeros_like(y))
        return [y] if out is None else [out[0].copy_(y)]

    rejected = verify(zeros_where_eager_overflowed, _growing_scan, sets, "bf16", [1, 2, 3], trace=False)
    assert not rejected.passed and "NaN/inf" in rejected.reason, rejected.reason

    def nan_where_the_result_is_finite(xs, out):
        y = _growing_scan([xs[0].double()])[0].bfloat16()
        y[0, :10] = float("nan")
        return [y] if out is None else [out[0].copy_(y)]

    assert not verify(nan_where_the_result_is_finite, _growing_scan, sets, "bf16", [1, 2, 3], trace=False).passed


def test_the_timing_guard_judges_the_calls_after_timing_as_the_verifier_does():
    """On the H200 a bf16 ``exp`` kernel and the gated_conv_mixer scan passed
    verification against the float64 result and were then rejected by the
    timing guard's calls after timing, which compared with eager's bf16
    values only ("did not compute its output: 4384 vs 4512").  The guard now
    judges those calls with ``verify.judge_values``: the exact answer is
    believed, a wrong one is still rejected."""
    from lego_core.judge.timing_guard import guard_timing

    torch.manual_seed(0)
    sets = [[torch.randn(1, 1024, 8).bfloat16()] for _ in range(2)]

    def guarded(candidate):
        def time_sets(xs_list, outs):
            for xs, out in zip(xs_list, outs):
                candidate(xs, out)
            return 1.0  # ms: far above the roofline floor of these few bytes

        def traced_call(xs, out):
            candidate(xs, out)
            return {"launches": 1}  # the values are what this test is about, not the trace

        return guard_timing(time_sets, traced_call, sets, _growing_scan, dtype=torch.bfloat16)

    def exact(xs, out):
        out[0].copy_(_growing_scan([xs[0].double()])[0].bfloat16())

    def zeros_where_eager_overflowed(xs, out):
        y = _growing_scan([xs[0].double()])[0].bfloat16()
        out[0].copy_(torch.where(torch.isfinite(_growing_scan(xs)[0]), y, torch.zeros_like(y)))

    believed = guarded(exact)
    assert believed.believed, believed.reason
    rejected = guarded(zeros_where_eager_overflowed)
    assert not rejected.believed and "did not compute its output" in rejected.reason
