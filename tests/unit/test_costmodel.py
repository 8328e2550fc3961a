"""lego_core.cost.costmodel: roofline formula, byte and FLOP counts per op."""
import operator

import pytest
import torch

from lego_core.cost.costmodel import (
    TARGETS,
    compute_peak,
    dtype_bytes,
    estimate_ms,
    estimate_op_ms,
    estimate_region_ms,
    get_target,
    is_layout_op,
    op_bytes,
    op_flops,
    op_launches,
    op_name,
    tensor_bytes,
)

BF16, FP32 = torch.bfloat16, torch.float32


def test_targets_hold_the_documented_ceilings():
    h200 = get_target("H200")
    assert h200.bandwidth == 4.3e12
    assert h200.matmul_peak["bf16"] == 790e12 and h200.matmul_peak["tf32"] == 400e12
    assert h200.vector_peak["fp32"] == 60e12 and h200.launch_overhead_s == 3e-6
    assert get_target("h100").bandwidth < h200.bandwidth
    assert set(TARGETS) >= {"H200", "H100"}
    with pytest.raises(ValueError, match="known: H100, H200"):
        get_target("A100")


def test_estimate_ms_is_launches_plus_roofline_max():
    # memory bound: 4.3 GB at 4.3 TB/s = 1 ms, plus 2 launches of 3 us
    assert estimate_ms(4_300_000_000, 1000, False, FP32, launches=2) == pytest.approx(1.006)
    # compute bound: 790 GFLOP of bf16 GEMM = 1 ms, plus one launch
    assert estimate_ms(1000, 790_000_000_000, True, BF16) == pytest.approx(1.003)
    # same FLOPs off the tensor cores take 790/60 times longer
    assert estimate_ms(0, 60_000_000_000, False, BF16, launches=0) == pytest.approx(1.0)
    assert estimate_ms(0, 0, False, "fp32", launches=0) == 0.0
    assert estimate_ms(4_300_000_000, 0, False, FP32, target="H100") > estimate_ms(4_300_000_000, 0, False, FP32)
    with pytest.raises(ValueError):
        estimate_ms(-1, 0, False, FP32)


def test_fp32_matmul_modes():
    # PyTorch's fp32 matmul is IEEE by default and verification rejects TF32
    assert compute_peak(FP32, True) == 60e12
    assert compute_peak(FP32, True, fp32_matmul="tf32") == 400e12
    assert compute_peak(FP32, True, fp32_matmul="tf32x3") == pytest.approx(400e12 / 3)
    assert estimate_ms(0, 400_000_000_000, True, FP32, 0, fp32_matmul="tf32") == pytest.approx(1.0)
    assert compute_peak("fp16", True) == 790e12 and compute_peak(BF16, False) == 60e12
    with pytest.raises(ValueError):
        compute_peak(FP32, True, fp32_matmul="fast")


def test_tensor_bytes_accepts_pairs_tensors_and_names():
    assert dtype_bytes("bf16") == 2 and dtype_bytes(torch.int64) == 8 and dtype_bytes(torch.bool) == 1
    specs = [((2, 3), FP32), ((4,), "bf16"), (torch.Size([5]), "torch.int64"), torch.zeros(2, 2, dtype=torch.float16), ((), FP32)]
    assert tensor_bytes(specs) == 24 + 8 + 40 + 8 + 4
    with pytest.raises(TypeError):
        tensor_bytes([(2, 3)])


def test_op_name_normalises_targets():
    assert op_name("aten.mm.default") == "mm"
    assert op_name(torch.ops.aten.addmm.default) == "addmm"
    assert op_name("torch.ops.aten._softmax.default") == "_softmax"
    assert op_name(operator.getitem) == "getitem"


def test_matmul_flops():
    assert op_flops("aten.mm.default", [(64, 32), (32, 16)], [(64, 16)], ()) == 2 * 64 * 16 * 32
    assert op_flops("aten.addmm.default", [(16,), (64, 32), (32, 16)], [(64, 16)], ()) == 2 * 64 * 16 * 32 + 64 * 16
    assert op_flops("aten.bmm.default", [(8, 64, 32), (8, 32, 16)], [(8, 64, 16)], ()) == 2 * 8 * 64 * 16 * 32
    assert op_flops("aten.linear.default", [(4, 10, 32), (16, 32)], [(4, 10, 16)], ()) == 2 * 40 * 16 * 32


def test_convolution_flops():
    # N=2, Cin=8, groups=2, Cout=16, 3x3 kernel, 10x10 output
    args = (None, None, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 2)
    flops = op_flops("aten.convolution.default", [(2, 8, 10, 10), (16, 4, 3, 3)], [(2, 16, 10, 10)], args)
    assert flops == 2 * 2 * 16 * 10 * 10 * (8 // 2) * 3 * 3
    with_bias = op_flops("aten.convolution.default", [(2, 8, 10, 10), (16, 4, 3, 3), (16,)], [(2, 16, 10, 10)], args)
    assert with_bias == flops + 2 * 16 * 10 * 10
    # transposed: weight [Cin, Cout/groups, kh, kw], every input position scatters a window
    targs = (None, None, None, [2, 2], [0, 0], [1, 1], True, [0, 0], 1)
    tflops = op_flops("aten.convolution.default", [(1, 4, 5, 5), (4, 6, 2, 2)], [(1, 6, 10, 10)], targs)
    assert tflops == 2 * (1 * 4 * 5 * 5) * 6 * 2 * 2


def test_pointwise_reduction_and_row_op_flops():
    assert op_flops("aten.add.Tensor", [(4, 8), (8,)], [(4, 8)], ()) == 32
    assert op_flops("aten.gelu.default", [(4, 8)], [(4, 8)], ()) == 32
    assert op_flops("aten.sum.dim_IntList", [(4, 8)], [(4,)], ()) == 32
    assert op_flops("aten.amax.default", [(4, 8)], [(4, 1)], ()) == 32
    assert op_flops("aten._softmax.default", [(4, 8)], [(4, 8)], ()) == 5 * 32
    assert op_flops("aten.native_layer_norm.default", [(4, 8), (8,), (8,)], [(4, 8), (4, 1), (4, 1)], ()) == 8 * 32
    assert op_flops("aten.max_pool2d_with_indices.default", [(1, 2, 8, 8)], [(1, 2, 4, 4), (1, 2, 4, 4)], (None, [2, 2])) == 32 * 4
    assert op_flops("aten._scaled_dot_product_flash_attention.default", [(2, 4, 16, 8), (2, 4, 32, 8), (2, 4, 32, 8)], [(2, 4, 16, 8)], ()) == 2 * 8 * 16 * 32 * 16
    assert op_flops("aten.clone.default", [(4, 8)], [(4, 8)], ()) == 0


@pytest.mark.parametrize("op", ["aten.view.default", "aten.permute.default", "aten.expand.default",
                                "aten.unsqueeze.default", "aten.squeeze.dim", "aten.alias.default",
                                "aten.slice.Tensor", "aten.select.int", "aten.split.Tensor", operator.getitem])
def test_layout_ops_cost_nothing(op):
    spec = [((1024, 1024), BF16)]
    assert is_layout_op(op)
    assert op_bytes(op, spec, spec) == 0 and op_launches(op) == 0 and op_flops(op, [(1024, 1024)], [(1024, 1024)]) == 0
    assert estimate_op_ms(op, spec, spec) == 0.0


def test_estimate_op_ms_for_library_ops():
    a = ((4096, 4096), BF16)
    gemm = estimate_op_ms("aten.mm.default", [a, a], [a])
    expected = 3e-3 + max(3 * 4096 * 4096 * 2 / 4.3e12, 2 * 4096**3 / 790e12) * 1e3
    assert gemm == pytest.approx(expected)
    assert not is_layout_op("aten.mm.default") and op_launches("aten.add.Tensor") == 1
    assert op_bytes("aten.add.Tensor", [a, a], [a]) == 3 * 4096 * 4096 * 2


def test_fused_region_beats_its_ops_run_one_by_one():
    x = ((8192, 8192), BF16)
    ops = [("aten.mul.Tensor", [x, x], [x], ()), ("aten.add.Tensor", [x, x], [x], ()), ("aten.relu.default", [x], [x], ())]
    eager = sum(estimate_op_ms(op, ins, outs, args) for op, ins, outs, args in ops)
    fused = estimate_region_ms(ops, boundary_inputs=[x, x, x], boundary_outputs=[x], dtype=BF16)
    assert fused == pytest.approx(3e-3 + 4 * 8192 * 8192 * 2 / 4.3e12 * 1e3)
    assert fused < eager
