"""lego_core.judge.verify: tolerances, compare, poisoning, verify() and the static check."""
import importlib.util
import math
import os
import re
import textwrap

os.environ.setdefault("TRITON_INTERPRET", "1")  # before triton is imported anywhere

import pytest
import torch

from lego_core.dtypes import EXACT, Tolerance, tolerances
from lego_core.judge.verify import (
    calls_back_into_reference,
    compare,
    forbidden_names,
    op_base_name,
    poisoned_outputs,
    verify,
)

SEEDS = [101, 202, 303]


def verify_values(*args, **kwargs):
    """verify() without the call-trace rules: the candidates here are plain
    PyTorch test doubles of a kernel (tests/hacks/ covers the trace rules)."""
    return verify(*args, trace=False, **kwargs)


def make_sets(shape=(4, 33), dtype=torch.float32, seeds=SEEDS):
    """One input set (a single tensor) per seed."""
    return [[torch.randn(*shape, generator=torch.Generator().manual_seed(s)).to(dtype)] for s in seeds]


def ref_gelu_plus_one(inputs):
    return [torch.nn.functional.gelu(inputs[0]) + 1.0]


def writing(compute):
    """A candidate ``run(inputs, out)`` that writes ``compute(inputs)`` into ``out``."""

    def run(inputs, out):
        results = compute(inputs)
        if out is None:
            return results
        for buf, value in zip(out, results):
            buf.copy_(value)
        return out

    return run


# --------------------------------------------------------------------------
# tolerances
# --------------------------------------------------------------------------


def test_tolerances_order_by_precision():
    fp32, fp16, bf16 = tolerances(torch.float32), tolerances(torch.float16), tolerances(torch.bfloat16)
    assert fp32.atol == pytest.approx(1e-4) and fp32.norm_rel == pytest.approx(1e-5)
    assert fp32.atol < fp16.atol < bf16.atol
    assert fp32.norm_rel < fp16.norm_rel < bf16.norm_rel
    assert 1e-2 <= bf16.atol <= 5e-2


def test_tolerances_accept_names_and_make_ints_exact():
    assert tolerances("fp32") == tolerances(torch.float32)
    assert tolerances("bf16") == tolerances("bfloat16") == tolerances("torch.bfloat16")
    for dtype in (torch.int64, torch.int32, torch.uint8, torch.bool):
        assert tolerances(dtype) == EXACT and tolerances(dtype).exact
    with pytest.raises(ValueError, match="unknown dtype"):
        tolerances("fp7")


# --------------------------------------------------------------------------
# compare
# --------------------------------------------------------------------------


def test_compare_passes_within_tolerance_and_reports_errors():
    expected = torch.linspace(-3, 3, 1024).reshape(32, 32)
    actual = expected + 1e-6
    result = compare([actual], [expected], torch.float32)
    assert result.passed and result.reason == ""
    assert result.max_abs_error == pytest.approx(1e-6, rel=5e-2)
    assert 0 < result.norm_rel_error < 1e-5


def test_compare_reports_worst_element():
    expected = torch.full((4, 256), 0.5)
    actual = expected.clone()
    actual[1, 5] = 0.52
    actual[2, 7] = 0.5001
    actual[3, 9] = 0.501
    result = compare([actual], [expected], "fp32")
    assert not result.passed
    assert result.reason.startswith("output 0: 2 of 1024 elements outside tolerance")
    assert "worst at index (1, 5): 0.52 vs 0.5" in result.reason
    assert result.max_abs_error == pytest.approx(0.02, rel=1e-3)


def test_compare_norm_relative_catches_small_systematic_bias():
    expected = torch.randn(64, 64, generator=torch.Generator().manual_seed(0)) * 100
    actual = expected * (1 + 5e-5)  # each element within 1e-4 relative, norm error 5e-5 > 1e-5
    result = compare([actual], [expected], torch.float32)
    assert not result.passed
    assert "norm-relative error" in result.reason
    assert result.norm_rel_error == pytest.approx(5e-5, rel=1e-2)
    assert compare([actual], [expected], torch.bfloat16).passed  # loose enough for bf16


def test_compare_elementwise_slack_scales_with_reference_magnitude():
    # a K=4096 fp32 GEMM: outputs of RMS ~64; an honest kernel's rounding error
    # at an element near cancellation (measured on an H200: -0.02485 vs -0.02450)
    expected = torch.randn(64, 64, generator=torch.Generator().manual_seed(1)) * 64
    expected[3, 4] = -0.0245008
    honest = expected.clone()
    honest[3, 4] = -0.0248556
    assert compare([honest], [expected], torch.float32).passed
    wrong = expected.clone()
    wrong[3, 4] = 0.05  # off by ~0.1% of the output RMS: still a failure
    result = compare([wrong], [expected], torch.float32)
    assert not result.passed and "x reference RMS" in result.reason and "index (3, 4)" in result.reason


def test_compare_shape_dtype_count_and_type():
    assert compare([torch.zeros(2, 3)], [torch.zeros(2, 4)]).reason == "output 0: shape (2, 3) != expected (2, 4)"
    dtype = compare([torch.zeros(2, dtype=torch.float16)], [torch.zeros(2)])
    assert not dtype.passed and "dtype torch.float16 != expected torch.float32" in dtype.reason
    count = compare([torch.zeros(2)], [torch.zeros(2), torch.zeros(2)])
    assert not count.passed and "returned 1 outputs, expected 2" in count.reason
    assert "got int, expected a tensor" in compare([3], [torch.zeros(2)]).reason


def test_compare_nan_and_inf_rules():
    expected = [torch.zeros(8), torch.ones(32)]
    actual = [torch.zeros(8), torch.ones(32)]
    actual[1][:12] = math.nan
    result = compare(actual, expected, torch.float32)
    assert not result.passed
    assert result.reason.startswith("output 1: NaN at 12 elements where the reference has none")

    inf = torch.ones(4)
    inf[2] = math.inf
    assert "inf at 1 elements where the reference is finite" in compare([inf], [torch.ones(4)]).reason

    # NaN/inf in the same places as the reference are fine, elsewhere compared normally
    ref = torch.tensor([1.0, math.nan, math.inf, -math.inf])
    assert compare([ref.clone()], [ref]).passed
    wrong_sign = torch.tensor([1.0, math.nan, -math.inf, -math.inf])
    assert "reference is NaN/inf and the candidate differs" in compare([wrong_sign], [ref]).reason
    finite_where_nan = torch.tensor([1.0, 0.0, math.inf, -math.inf])
    assert not compare([finite_where_nan], [ref]).passed


def test_compare_integers_exactly_and_uses_looser_of_output_and_problem_dtype():
    expected = torch.arange(10)
    actual = expected.clone()
    actual[3] = 4
    result = compare([actual], [expected], "bf16")
    assert not result.passed
    assert "1 of 10 elements differ" in result.reason and "index (3,): 4 vs 3" in result.reason

    # an fp32 output of a bf16 problem is judged with bf16 tolerances
    e = torch.ones(16)
    assert compare([e + 0.01], [e], "bf16").passed
    assert not compare([e + 0.01], [e], "fp32").passed


# --------------------------------------------------------------------------
# poisoning
# --------------------------------------------------------------------------


def test_poisoned_outputs_fill_by_dtype_and_variant():
    like = [torch.zeros(2, 3), torch.zeros(4, dtype=torch.int32), torch.zeros(5, dtype=torch.bool),
            torch.zeros(3, 2).t()]
    v0, v1 = poisoned_outputs(like, 0), poisoned_outputs(like, 1)
    assert torch.isnan(v0[0]).all() and torch.isnan(v1[0]).all()
    assert (v0[1] == torch.iinfo(torch.int32).max).all() and (v1[1] == torch.iinfo(torch.int32).min).all()
    assert v0[2].all() and not v1[2].any()
    assert v0[3].stride() == like[3].stride()  # keeps the reference's layout
    assert v0[0].data_ptr() != like[0].data_ptr()
    with pytest.raises(ValueError):
        poisoned_outputs(like, 2)


# --------------------------------------------------------------------------
# verify()
# --------------------------------------------------------------------------


def test_verify_accepts_correct_candidate_and_records_seeds():
    run = writing(lambda xs: [0.5 * xs[0] * (1 + torch.erf(xs[0] / math.sqrt(2))) + 1.0])
    report = verify_values(run, ref_gelu_plus_one, make_sets(), torch.float32, SEEDS)
    assert report.passed, report.reason
    assert report.seeds == SEEDS
    assert report.runs == 6  # each set twice, in two shuffled passes: once poisoned, once allocating
    assert "seeds" not in report.to_dict() and len(report.to_dict()["seed_labels"]) == 3
    assert report.max_abs_error < 1e-5
    assert report.to_dict()["passed"] is True


def test_verify_rejects_wrong_values():
    run = writing(lambda xs: [torch.nn.functional.gelu(xs[0]) + 1.01])
    report = verify_values(run, ref_gelu_plus_one, make_sets(), torch.float32, SEEDS)
    assert not report.passed
    assert re.match(r"input set \d \(seed label [0-9a-f]{8}\), call 1, poison variant 0: output 0: 132 of 132 elements outside tolerance", report.reason), report.reason
    assert not any(str(seed) in report.reason for seed in SEEDS)  # labels, not the seeds still in use
    assert report.max_abs_error == pytest.approx(0.01, rel=1e-3)


def test_verify_rejects_one_unwritten_element():
    def run(inputs, out):
        value = ref_gelu_plus_one(inputs)[0]
        value.view(-1)[-1] = out[0].view(-1)[-1]  # keep whatever the buffer held at the last element
        out[0].copy_(value)
        return out

    report = verify_values(run, ref_gelu_plus_one, make_sets(), torch.float32, SEEDS)
    assert not report.passed
    assert "NaN at 1 elements where the reference has none (first at index (3, 32))" in report.reason


def test_verify_runs_integer_and_bool_outputs_twice():
    def ref(inputs):
        return [inputs[0] > 0, inputs[0].argmax(dim=1)]

    def skips_first_positive(inputs, out):
        mask, index = ref(inputs)
        first = int(mask.view(-1).nonzero()[0])
        mask.view(-1)[first] = out[0].view(-1)[first]  # unwritten: holds True in variant 0
        out[0].copy_(mask)
        out[1].copy_(index)
        return out

    report = verify_values(skips_first_positive, ref, make_sets(), None, SEEDS)
    assert not report.passed
    assert "poison variant 1" in report.reason and "exact match required for torch.bool" in report.reason
    assert verify_values(writing(ref), ref, make_sets(), None, SEEDS).passed


def test_verify_rejects_nan_wrong_shape_and_wrong_dtype():
    def nan_run(inputs, out):
        out[0].copy_(ref_gelu_plus_one(inputs)[0] / (inputs[0] > 0))  # 0/0 and x/0 where x <= 0
        return out

    nan_report = verify_values(nan_run, ref_gelu_plus_one, make_sets(), torch.float32, SEEDS)
    assert not nan_report.passed and "where the reference" in nan_report.reason

    def wrong_shape(inputs, out):
        return [ref_gelu_plus_one(inputs)[0][:, :-1]]

    shape = verify_values(wrong_shape, ref_gelu_plus_one, make_sets(), torch.float32, SEEDS)
    assert not shape.passed and "new tensor instead of writing into the preallocated output" in shape.reason

    def alloc_wrong_shape(inputs, out):
        if out is not None:
            return writing(ref_gelu_plus_one)(inputs, out)
        return [ref_gelu_plus_one(inputs)[0][:, :-1]]

    alloc = verify_values(alloc_wrong_shape, ref_gelu_plus_one, make_sets(), torch.float32, SEEDS)
    assert not alloc.passed
    assert alloc.reason.endswith("allocating call (out=None): output 0: shape (4, 32) != expected (4, 33)"), alloc.reason

    def alloc_wrong_dtype(inputs, out):
        if out is not None:
            return writing(ref_gelu_plus_one)(inputs, out)
        return [ref_gelu_plus_one(inputs)[0].half()]

    dtype = verify_values(alloc_wrong_dtype, ref_gelu_plus_one, make_sets(), "fp32", SEEDS)
    assert not dtype.passed and "dtype torch.float16 != expected torch.float32" in dtype.reason
    assert verify_values(alloc_wrong_dtype, ref_gelu_plus_one, make_sets(), "fp32", SEEDS, check_allocating_call=False).passed


def test_verify_reports_candidate_exception_without_raising():
    def broken(inputs, out):
        raise IndexError("block index 7 out of range")

    report = verify_values(broken, ref_gelu_plus_one, make_sets(), torch.float32, SEEDS)
    assert not report.passed
    assert report.reason.endswith(", call 1, poison variant 0: candidate raised IndexError: block index 7 out of range"), report.reason
    assert report.to_dict()["max_abs_error"] is None


def test_verify_clones_inputs_so_mutation_cannot_fool_it():
    sets = make_sets()
    originals = [s[0].clone() for s in sets]

    def mutating(inputs, out):
        inputs[0].zero_()  # would make a shared reference compute gelu(0) + 1 = 1
        out[0].fill_(1.0)
        return out

    report = verify_values(mutating, ref_gelu_plus_one, sets, torch.float32, SEEDS)
    assert not report.passed
    for s, original in zip(sets, originals):
        assert torch.equal(s[0], original)


def test_verify_argument_errors_and_reference_failure():
    run = writing(ref_gelu_plus_one)
    with pytest.raises(ValueError, match="at least 3 input sets"):
        verify_values(run, ref_gelu_plus_one, make_sets(seeds=[1, 2]), torch.float32, [1, 2])
    with pytest.raises(ValueError, match="seeds"):
        verify_values(run, ref_gelu_plus_one, make_sets(), torch.float32, [1, 2])

    def bad_ref(inputs):
        raise KeyError("weight")

    with pytest.raises(RuntimeError, match=r"reference failed on input set \d \(seed label"):
        verify_values(run, bad_ref, make_sets(), torch.float32, SEEDS)


# --------------------------------------------------------------------------
# A real Triton kernel under the interpreter
# --------------------------------------------------------------------------

TRITON_SOURCE = textwrap.dedent('''
    import torch
    import triton
    import triton.language as tl


    @triton.jit
    def scale_shift_kernel(x_ptr, y_ptr, n_elements, LIMIT_SHIFT: tl.constexpr, BLOCK_SIZE: tl.constexpr):
        pid = tl.program_id(axis=0)
        offs = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
        mask = offs < n_elements - LIMIT_SHIFT
        x = tl.load(x_ptr + offs, mask=mask, other=0.0)
        tl.store(y_ptr + offs, x * 2.0 + 1.0, mask=mask)


    def make_run(limit_shift):
        def run(inputs, out):
            x = inputs[0].contiguous()
            if out is None:
                out = [torch.empty_like(x)]
            n = x.numel()
            grid = (triton.cdiv(n, 64),)
            scale_shift_kernel[grid](x, out[0], n, LIMIT_SHIFT=limit_shift, BLOCK_SIZE=64)
            return out
        return run
''')


@pytest.fixture(scope="module")
def triton_module(tmp_path_factory):
    """TRITON_SOURCE imported from a real file (triton.jit reads the source)."""
    pytest.importorskip("triton")
    path = tmp_path_factory.mktemp("kernels") / "scale_shift.py"
    path.write_text(TRITON_SOURCE)
    spec = importlib.util.spec_from_file_location("scale_shift_kernels", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_verify_real_triton_kernel(triton_module):
    def ref(inputs):
        return [inputs[0] * 2.0 + 1.0]

    sets = make_sets(shape=(3, 50))  # 150 elements: three blocks of 64, the last one masked
    good = verify(triton_module.make_run(0), ref, sets, torch.float32, SEEDS)
    assert good.passed, good.reason
    assert good.max_abs_error <= 1e-6

    off_by_one = verify(triton_module.make_run(1), ref, sets, torch.float32, SEEDS)
    assert not off_by_one.passed
    assert "NaN at 1 elements where the reference has none (first at index (2, 49))" in off_by_one.reason

    assert calls_back_into_reference(TRITON_SOURCE, ["aten.mul.Tensor", "aten.add.Tensor"]) is None


# --------------------------------------------------------------------------
# calls_back_into_reference
# --------------------------------------------------------------------------

KERNEL = '''
import torch
import triton
import triton.language as tl
import torch.nn.functional as F

@triton.jit
def k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, tl.sum(x, axis=0) + tl.exp(x), mask=mask)

def run(inputs, out):
    x = inputs[0]
    y = torch.empty_like(x).view(-1)
    k[(1,)](x, y, x.numel(), BLOCK=1024)
    {extra}
    return [y]
'''


@pytest.mark.parametrize(
    "extra, ops, expected",
    [
        ("y = torch.softmax(x, -1)", ["aten._softmax.default"], "torch.softmax"),
        ("y = F.layer_norm(x, x.shape[-1:])", ["aten.native_layer_norm.default"], "torch.nn.functional.layer_norm"),
        ("y = torch.ops.aten.mm.default(x, x)", ["aten.mm.default"], "torch.ops.aten.mm.default"),
        ("y = torch.ops.aten.exp.default(x)", ["aten.exp.default"], "torch.ops.aten.exp.default"),
        ("y = torch.matmul(x, x)", ["aten.add.Tensor"], "torch.matmul"),
        ("y = x.softmax(dim=-1)", [], ".softmax()"),
        ("y = x @ x", [], "@ operator"),
        ("y = torch.add(x, 1)", ["aten.add.Tensor"], "torch.add"),
        ("y = x.sum(-1)", ["aten.sum.dim_IntList"], ".sum()"),
        ("y = torch.nn.Linear(4, 4)(x)", [], "torch.nn.Linear"),
        ("y = torch.compile(run)(x)", [], "torch.compile"),
        ("y = eval('torch.softmax')(x, -1)", [], "eval()"),
        ("y = getattr(torch, 'softmax')(x, -1)", [], "getattr()"),
    ],
)
def test_static_check_flags_callbacks(extra, ops, expected):
    reason = calls_back_into_reference(KERNEL.format(extra=extra), ops)
    assert reason is not None and expected in reason, reason
    assert reason.startswith("line ")


def test_static_check_passes_kernel_and_layout_calls():
    ops = ["aten.view.default", "aten.permute.default", "aten.exp.default", "aten.sum.dim_IntList"]
    source = KERNEL.format(extra="y = y.view(x.shape).permute(1, 0).contiguous()\n    seen = set(); seen.add(1)")
    # the allow-list every kernel file passes takes no torch.nn.functional import (judge.host_allowlist)
    assert calls_back_into_reference(source.replace("import torch.nn.functional as F\n", ""), ops) is None


def test_static_check_imported_names_and_structure():
    from_import = KERNEL.format(extra="pass").replace("import torch.nn.functional as F", "from torch.nn.functional import gelu")
    source = from_import.replace("    return [y]", "    y = gelu(x)\n    return [y]")
    assert "torch.nn.functional.gelu" in calls_back_into_reference(source, ["aten.gelu.default"])
    # gelu is not in this region: not refused as a region op, but by the allow-list (judge.host_allowlist)
    assert "a from-import" in calls_back_into_reference(source, ["aten.exp.default"])

    no_kernel = "import torch\ndef run(inputs, out):\n    return [inputs[0] + 1]\n"
    assert calls_back_into_reference(no_kernel, ["aten.add.Tensor"]) == "no @triton.jit kernel is defined"
    not_launched = KERNEL.format(extra="pass").replace("k[(1,)](x, y, x.numel(), BLOCK=1024)", "")
    assert "no @triton.jit kernel is launched" in calls_back_into_reference(not_launched, [])
    assert calls_back_into_reference("def run(:\n", []).startswith("source does not parse")


def test_op_names_and_forbidden_set():
    assert op_base_name("aten._softmax.default") == "softmax"
    assert op_base_name("torch.ops.aten.native_layer_norm.default") == "native_layer_norm"
    assert op_base_name("aten.add_.Tensor") == "add"
    assert op_base_name("mm") == "mm"
    names = forbidden_names(["aten.sub.Tensor", "aten.view.default"])
    assert {"sub", "subtract", "matmul", "softmax"} <= names
    assert "view" not in names


def test_tolerance_is_plain_data():
    tol = Tolerance(1e-3, 1e-3, 1e-4)
    assert not tol.exact and EXACT.exact
