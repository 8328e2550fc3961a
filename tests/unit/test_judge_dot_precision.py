"""The precision of every ``tl.dot`` a candidate runs (issue 27, part 1).

An audit candidate split fp32 operands into fp16 hi/lo parts and summed three
fp16 dots: as accurate as fp32 on N(0, 1) data, inf past 65504.  Only TF32 on
fp32 operands used to be refused.  The call trace now records every dot's
operand, accumulator dtypes and input precision (the interpreter's
``create_dot``; on a GPU the compiled kernel's TTIR, ``verify_trace.ttir_dots``)
and ``verify_policy.dot_problem`` judges them against the problem's dtype.
"""
from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest
import torch
import triton
import triton.language as tl

from lego_core.judge.verify import verify
from lego_core.judge.verify_policy import dot_problem, trace_problem
from lego_core.judge.verify_trace import CallTrace, dot_record, ttir_dots

INTERPRETED = os.environ.get("TRITON_INTERPRET") == "1"

# MODE: 0 an honest IEEE fp32 dot; 1 fp16 hi/lo parts, three fp16 dots (the
# audit's); 2 one fp16 dot; 3 the default precision (TF32 for fp32 operands);
# 4 fp16 operands with an fp16 accumulator; 5 operands cast to bf16
MODES = {"ieee": 0, "fp16_hi_lo": 1, "fp16": 2, "default": 3, "fp16_acc": 4, "bf16": 5}


@triton.jit
def mm_kernel(a_ptr, b_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr, MODE: tl.constexpr):
    rm = tl.arange(0, M)
    rn = tl.arange(0, N)
    rk = tl.arange(0, K)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * N + rn[None, :])
    if MODE == 0:
        acc = tl.dot(a, b, input_precision="ieee")
    elif MODE == 1:
        a_hi = a.to(tl.float16)
        a_lo = (a - a_hi.to(tl.float32)).to(tl.float16)
        b_hi = b.to(tl.float16)
        b_lo = (b - b_hi.to(tl.float32)).to(tl.float16)
        acc = tl.dot(a_hi, b_hi, tl.dot(a_hi, b_lo, tl.dot(a_lo, b_hi)))
    elif MODE == 2:
        acc = tl.dot(a.to(tl.float16), b.to(tl.float16))
    elif MODE == 3:
        acc = tl.dot(a, b)
    elif MODE == 4:
        acc = tl.dot(a.to(tl.float16), b.to(tl.float16), out_dtype=tl.float16)
    else:
        acc = tl.dot(a.to(tl.bfloat16), b.to(tl.bfloat16))
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(c_ptr.dtype.element_ty))


def launch_for(mode: str):
    def launch(a, b, out=None):
        out = out or [torch.empty(a.shape[0], b.shape[1], dtype=a.dtype, device=a.device)]
        mm_kernel[(1,)](a, b, out[0], a.shape[0], b.shape[1], a.shape[1], MODES[mode])
        return out

    return launch


def traced(mode: str, dtype: torch.dtype, device: str = "cpu") -> dict:
    gen = torch.Generator().manual_seed(0)
    a, b = (torch.randn(32, 32, generator=gen).to(device=device, dtype=dtype) for _ in range(2))
    with CallTrace() as trace:
        launch_for(mode)(a, b)
    return trace.summary()


def matmul_sets(dtype=torch.float32, seeds=(1, 2, 3)) -> list[list[torch.Tensor]]:
    sets = []
    for s in seeds:
        gen = torch.Generator().manual_seed(s)
        sets.append([torch.randn(32, 32, generator=gen).to(dtype), torch.randn(32, 32, generator=gen).to(dtype)])
    return sets


def verify_mode(mode: str):
    launch = launch_for(mode)
    return verify(lambda inputs, out: launch(*inputs, out=out), lambda inputs: [inputs[0] @ inputs[1]], matmul_sets(), "fp32", [1, 2, 3])


# --------------------------------------------------------------------------
# The interpreter's create_dot, through the verifier
# --------------------------------------------------------------------------


@pytest.mark.skipif(not INTERPRETED, reason="the interpreter's create_dot (TRITON_INTERPRET=1)")
def test_fp16_hi_lo_split_of_an_fp32_gemm_is_refused():
    report = verify_mode("fp16_hi_lo")
    assert not report.passed
    assert "tl.dot on float16 operands in kernel mm_kernel for a float32 problem" in report.reason, report.reason
    assert 'input_precision="ieee"' in report.reason and "\n" not in report.reason
    # its values alone would pass: as accurate as fp32 on N(0, 1) data
    a, b = matmul_sets()[0]
    (c,) = launch_for("fp16_hi_lo")(a, b)
    assert torch.allclose(c, a @ b, atol=1e-4, rtol=1e-4)


@pytest.mark.skipif(not INTERPRETED, reason="the interpreter's create_dot (TRITON_INTERPRET=1)")
def test_honest_ieee_fp32_dot_is_accepted():
    report = verify_mode("ieee")
    assert report.passed, report.reason


@pytest.mark.skipif(not INTERPRETED, reason="the interpreter's create_dot (TRITON_INTERPRET=1)")
def test_tf32_and_one_fp16_dot_are_refused_for_fp32():
    assert "tl.dot on fp32 operands in TF32 in kernel mm_kernel" in verify_mode("default").reason
    assert "tl.dot on float16 operands" in verify_mode("fp16").reason
    assert "tl.dot on bfloat16 operands" in verify_mode("bf16").reason


@pytest.mark.skipif(not INTERPRETED, reason="the interpreter's create_dot (TRITON_INTERPRET=1)")
def test_the_trace_records_operand_and_accumulator_dtypes():
    dots = traced("fp16_hi_lo", torch.float32)["dots"]
    assert dots == [{"kernel": "mm_kernel", "a": "float16", "b": "float16", "acc": "float32", "precision": "tf32"}]
    summary = traced("ieee", torch.float32)
    assert summary["dots"] == [{"kernel": "mm_kernel", "a": "float32", "b": "float32", "acc": "float32", "precision": "ieee"}]
    assert summary["tf32_dots"] == []
    assert traced("default", torch.float32)["tf32_dots"] == ["mm_kernel"]
    assert traced("fp16_acc", torch.float32)["dots"][0]["acc"] == "float16"


@pytest.mark.skipif(not INTERPRETED, reason="the interpreter's create_dot (TRITON_INTERPRET=1)")
def test_bf16_problem_bf16_operands_fp32_accumulator_accepted_fp16_operands_refused():
    """The interpreter's bf16 arithmetic is not the GPU's, so the policy is
    checked on the trace (values on a GPU, below)."""
    honest = traced("ieee", torch.bfloat16)
    assert honest["dots"][0] == {"kernel": "mm_kernel", "a": "bfloat16", "b": "bfloat16", "acc": "float32", "precision": "ieee"}
    assert trace_problem(honest, dtype=torch.bfloat16) == ""
    assert trace_problem(traced("default", torch.bfloat16), dtype="bf16") == ""  # "tf32" means nothing for bf16 operands
    fp16 = trace_problem(traced("fp16", torch.bfloat16), dtype=torch.bfloat16)
    assert fp16.startswith("tl.dot on float16 operands in kernel mm_kernel for a bfloat16 problem"), fp16
    narrow = trace_problem(traced("fp16_acc", torch.float16), dtype=torch.float16)
    assert narrow.startswith("tl.dot accumulates in float16 in kernel mm_kernel for a float16 problem"), narrow
    assert trace_problem(traced("fp16", torch.float16), dtype="fp16") == ""
    assert "bfloat16 operands" in trace_problem(traced("bf16", torch.float16), dtype="fp16")


# --------------------------------------------------------------------------
# The policy on dot records
# --------------------------------------------------------------------------


def _summary(*dots: dict) -> dict:
    return {"dots": list(dots), "tf32_dots": []}


def test_policy_by_problem_dtype():
    f32 = dot_record("k", "float32", "float32", "float32", "ieee")
    assert dot_problem(_summary(f32), torch.float32) == ""
    assert dot_problem(_summary(dot_record("k", "float32", "float32", "float32", "tf32x3")), "fp32") == ""
    assert dot_problem(_summary(dot_record("k", "float32", "float32", "float32", "bf16x6")), "fp32") == ""
    assert "float32 (bf16x3) operands" in dot_problem(_summary(dot_record("k", "float32", "float32", "float32", "bf16x3")), "fp32")
    assert "TF32" in dot_problem(_summary(dot_record("k", "float32", "float32", "float32", "tf32")), "fp32")
    for low in ("float16", "bfloat16", "float8_e4m3fn", "float8_e5m2"):
        reason = dot_problem(_summary(dot_record("k", low, low, "float32", "ieee")), "fp32")
        assert reason == f'tl.dot on {low} operands in kernel k for a float32 problem: compute the dot in float32 with input_precision="ieee"'
    # bf16: TF32 (10 bits) and fp32 are at least bf16's 7; fp16's range is not
    assert dot_problem(_summary(dot_record("k", "float32", "float32", "float32", "tf32")), "bf16") == ""
    assert "float16 operands" in dot_problem(_summary(dot_record("k", "float16", "float16", "float32", "tf32")), "bf16")
    assert "float8_e4m3fn operands" in dot_problem(_summary(dot_record("k", "float8_e4m3fn", "float8_e4m3fn", "float32", "tf32")), "bf16")
    # fp16: bf16 has fewer mantissa bits
    assert "bfloat16 operands" in dot_problem(_summary(dot_record("k", "bfloat16", "bfloat16", "float32", "ieee")), "fp16")
    assert dot_problem(_summary(dot_record("k", "float16", "float16", "float32", "tf32")), "fp16") == ""
    # any float problem: an accumulator narrower than fp32
    assert "accumulates in float16" in dot_problem(_summary(dot_record("k", "float16", "float16", "float16", "tf32")), "fp16")
    assert "tl.dot_scaled" in dot_problem(_summary(dot_record("k", "e2m1", "e4m3", "float32", "scaled", scaled=True)), "bf16")
    # the first offending dot is named
    reason = dot_problem(_summary(f32, dot_record("other", "float16", "float16", "float32", "tf32")), "fp32")
    assert "kernel other" in reason


def test_policy_allows_what_the_region_itself_holds_and_older_summaries():
    fp16 = _summary(dot_record("k", "float16", "float16", "float32", "tf32"))
    assert dot_problem(fp16, torch.float32, {torch.float32, torch.float16}) == ""  # an fp32 model's region that casts to fp16
    tf32 = _summary(dot_record("k", "float32", "float32", "float32", "tf32"))
    assert "TF32" in dot_problem(tf32, torch.float32, {torch.float32})  # fp32 in the region says nothing of TF32
    int8 = _summary(dot_record("k", "int8", "int8", "int32", "ieee"))
    assert dot_problem(int8, torch.float32, {torch.int8, torch.float32}) == ""  # an int8 region: integer dots keep working
    assert "integer operands the region does not hold" in dot_problem(int8, torch.float32, {torch.float32})
    assert dot_problem(int8, torch.int64) == ""  # an integer problem's dots are not judged
    # a summary without dot records (an executor from before them): the TF32 kernels
    assert "TF32 in kernel k" in trace_problem({"launches": 1, "tf32_dots": ["k"]}, fp32=True)
    assert trace_problem({"launches": 1, "dots": fp16["dots"]}) == ""  # no dtype given: not judged


# --------------------------------------------------------------------------
# The TTIR parser (GPU path), on text
# --------------------------------------------------------------------------

# tt.dot lines as triton 3.6 prints them for sm_90 (compiled on the CPU up to TTIR)
TTIR_F16 = "    %acc_14 = tt.dot %a_8, %b_13, %acc, inputPrecision = tf32 : tensor<32x32xf16> * tensor<32x32xf16> -> tensor<32x32xf16> loc(#loc22)"
TTIR_F32_TF32 = "    %acc_12 = tt.dot %a_7, %b_11, %acc, inputPrecision = tf32 : tensor<32x32xf32> * tensor<32x32xf32> -> tensor<32x32xf32> loc(#loc20)"
TTIR_BF16 = "    %acc_12 = tt.dot %a_7, %b_11, %acc : tensor<32x32xbf16> * tensor<32x32xbf16> -> tensor<32x32xf32> loc(#loc20)"
TTIR_TF32X3 = "    %acc_12 = tt.dot %a_7, %b_11, %acc, inputPrecision = tf32x3 : tensor<32x32xf32> * tensor<32x32xf32> -> tensor<32x32xf32> loc(#loc20)"
TTIR_F32_IEEE = "    %acc_12 = tt.dot %a_7, %b_11, %acc : tensor<16x32xf32> * tensor<32x64xf32> -> tensor<16x64xf32> loc(#loc20)"
TTIR_GENERIC = '    %5 = "tt.dot"(%2, %3, %4) <{inputPrecision = 0 : i32, maxNumImpreciseAcc = 0 : i32}> : (tensor<16x16xf32>, tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<16x16xf32>'
TTIR_FP8 = "    %9 = tt.dot %7, %8, %6, inputPrecision = tf32 : tensor<64x32xf8E4M3FN> * tensor<32x64xf8E5M2> -> tensor<64x64xf32>"
TTIR_SCALED = "    %9 = tt.dot_scaled %a scale %as, %b, %c lhs = e2m1 rhs = e4m3 {fastMath = false} : tensor<128x32xi8>, tensor<128x2xi8> * tensor<64x128xf8E4M3FN> -> tensor<128x128xf32>"


def test_ttir_parser_reads_operands_accumulator_and_precision():
    text = "\n".join([
        "module {", "  tt.func public @k(%arg0: !tt.ptr<f32>) {", "    %0 = tt.load %arg0 : tensor<32x32x!tt.ptr<f32>>",
        TTIR_F16, TTIR_F32_TF32, TTIR_BF16, TTIR_TF32X3, TTIR_F32_IEEE, TTIR_GENERIC, TTIR_FP8, TTIR_SCALED,
        "    tt.return", "  }", "}",
    ])
    dots = ttir_dots(text, "k")
    assert [(d["a"], d["b"], d["acc"], d["precision"]) for d in dots] == [
        ("float16", "float16", "float16", "tf32"),
        ("float32", "float32", "float32", "tf32"),
        ("bfloat16", "bfloat16", "float32", "ieee"),
        ("float32", "float32", "float32", "tf32x3"),
        ("float32", "float32", "float32", "ieee"),
        ("float32", "float32", "float32", "tf32"),
        ("float8_e4m3fn", "float8_e5m2", "float32", "tf32"),
        ("e2m1", "e4m3", "float32", "scaled"),
    ]
    assert all(d["kernel"] == "k" for d in dots) and dots[-1]["scaled"]
    verdicts = [dot_problem(_summary(d), "fp32") for d in dots]
    assert "float16 operands" in verdicts[0] and "TF32" in verdicts[1] and "bfloat16 operands" in verdicts[2]
    assert verdicts[3] == verdicts[4] == "" and "TF32" in verdicts[5] and "float8_e4m3fn" in verdicts[6] and "dot_scaled" in verdicts[7]
    assert dot_problem(_summary(dots[2]), "bf16") == ""
    assert ttir_dots("") == [] and ttir_dots(None) == [] and ttir_dots("%1 = tt.dot %a : garbage") == []


_COMPILE_TTIR = r"""
import json, sys
import test_judge_dot_precision as t
from triton._C.libtriton import ir
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from triton.compiler.compiler import make_backend

target = GPUTarget("cuda", 90, 32)
backend = make_backend(target)
sig = {"a_ptr": "*fp32", "b_ptr": "*fp32", "c_ptr": "*fp32", "M": "constexpr", "N": "constexpr", "K": "constexpr", "MODE": "constexpr"}
texts = {}
for mode in sys.argv[1:]:
    src = ASTSource(t.mm_kernel, sig, {"M": 32, "N": 32, "K": 32, "MODE": t.MODES[mode]})
    options = backend.parse_options({})
    context = ir.context()
    ir.load_dialects(context)
    backend.load_dialects(context)
    module = src.make_ir(target, options, backend.get_codegen_implementation(options), backend.get_module_map(), context)
    stages = {}
    backend.add_stages(stages, options, src.language)
    texts[mode] = str(stages["ttir"](module, {}))
print(json.dumps(texts))
"""


def test_ttir_parser_on_triton_s_own_ttir():
    """The same kernel compiled by this triton up to TTIR for sm_90, in a
    fresh process without the interpreter (no GPU needed; skipped where the
    CUDA backend cannot build it)."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    modes = ("ieee", "fp16_hi_lo", "default", "fp16_acc")
    env = {**os.environ, "TRITON_INTERPRET": "0", "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", _COMPILE_TTIR, *modes], capture_output=True, text=True, env=env, timeout=300)
    if done.returncode != 0:
        pytest.skip(f"cannot compile to TTIR here: {done.stderr.strip().splitlines()[-1:] }")
    found = {mode: ttir_dots(text, "mm_kernel") for mode, text in json.loads(done.stdout.strip().splitlines()[-1]).items()}
    assert [(d["a"], d["acc"], d["precision"]) for d in found["ieee"]] == [("float32", "float32", "ieee")]
    assert [(d["a"], d["acc"]) for d in found["fp16_hi_lo"]] == [("float16", "float32")] * 3
    assert [(d["a"], d["precision"]) for d in found["default"]] == [("float32", "tf32")]
    assert [(d["a"], d["acc"]) for d in found["fp16_acc"]] == [("float16", "float16")]


# --------------------------------------------------------------------------
# On a GPU: compiled kernels, their TTIR read at launch
# --------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available() or INTERPRETED, reason="needs a CUDA GPU and compiled Triton (TRITON_INTERPRET=0)")
def test_compiled_kernels_dots_are_read_from_their_ttir():
    cases = {
        ("ieee", torch.float32): ("float32", "float32", "ieee", ""),
        ("fp16_hi_lo", torch.float32): ("float16", "float32", None, "tl.dot on float16 operands in kernel mm_kernel for a float32 problem"),
        ("default", torch.float32): ("float32", "float32", "tf32", "tl.dot on fp32 operands in TF32"),
        ("ieee", torch.bfloat16): ("bfloat16", "float32", "ieee", ""),
        ("fp16", torch.bfloat16): ("float16", "float32", None, "tl.dot on float16 operands in kernel mm_kernel for a bfloat16 problem"),
        ("fp16_acc", torch.float16): ("float16", "float16", None, "tl.dot accumulates in float16"),
    }
    for (mode, dtype), (operand, acc, precision, refused) in cases.items():
        summary = traced(mode, dtype, device="cuda")
        dots = summary["dots"]
        assert dots and all(d["kernel"] == "mm_kernel" and d["a"] == operand and d["acc"] == acc for d in dots), (mode, dtype, dots)
        if precision is not None:
            assert {d["precision"] for d in dots} == {precision}, (mode, dtype, dots)
        reason = trace_problem(summary, dtype=dtype)
        assert (reason.startswith(refused) if refused else reason == ""), (mode, dtype, reason)
    # the honest fp32 GEMM verifies on the GPU; the hi/lo split is refused there too
    sets = [[x.cuda() for x in s] for s in matmul_sets()]
    for mode, passes in (("ieee", True), ("fp16_hi_lo", False)):
        launch = launch_for(mode)
        report = verify(lambda inputs, out: launch(*inputs, out=out), lambda inputs: [inputs[0] @ inputs[1]], sets, "fp32", [1, 2, 3])
        assert report.passed == passes, report.reason
