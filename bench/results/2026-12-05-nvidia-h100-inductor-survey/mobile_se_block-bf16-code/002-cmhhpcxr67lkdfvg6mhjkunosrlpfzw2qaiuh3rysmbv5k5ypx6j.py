# AOT ID: ['0_inference']
from ctypes import c_void_p, c_long, c_int
import torch
import math
import random
import os
import tempfile
from math import inf, nan
from cmath import nanj
from torch._inductor.hooks import run_intermediate_hooks
from torch._inductor.utils import maybe_profile
from torch._inductor.codegen.memory_planning import _align as align
from torch import device, empty_strided
from torch._inductor.async_compile import AsyncCompile
from torch._inductor.select_algorithm import extern_kernels
import triton
import triton.language as tl
from torch._inductor.runtime.triton_heuristics import start_graph, end_graph
from torch._C import _cuda_getCurrentRawStream as get_raw_stream

aten = torch.ops.aten
inductor_ops = torch.ops.inductor
_quantized = torch.ops._quantized
assert_size_stride = torch._C._dynamo.guards.assert_size_stride
assert_alignment = torch._C._dynamo.guards.assert_alignment
empty_strided_cpu = torch._C._dynamo.guards._empty_strided_cpu
empty_strided_cpu_pinned = torch._C._dynamo.guards._empty_strided_cpu_pinned
empty_strided_cuda = torch._C._dynamo.guards._empty_strided_cuda
empty_strided_xpu = torch._C._dynamo.guards._empty_strided_xpu
empty_strided_mtia = torch._C._dynamo.guards._empty_strided_mtia
reinterpret_tensor = torch._C._dynamo.guards._reinterpret_tensor
alloc_from_pool = torch.ops.inductor._alloc_from_pool
async_compile = AsyncCompile()
empty_strided_p2p = torch._C._distributed_c10d._SymmetricMemory.empty_strided_p2p
from torch._C import _cuda_getCurrentRawStream as get_raw_stream



# kernel path: /tmp/inductor-mobile_se_block-bf16-p4s4p1ff/2c/c2cy37f5i5ocqxjzqpc7vl5y3vu5ynn6twyojsa5ulpqjgvqp5vz.py
# Topologically Sorted Source Nodes: [input_1], Original ATen: [aten.convolution]
# Source node to ATen node mapping:
#   input_1 => convolution
# Graph fragment:
#   %arg1_1 : Tensor "bf16[64, 40, 28, 28][31360, 784, 28, 1]cuda:0" = PlaceHolder[target=arg1_1]
#   %convolution : Tensor "bf16[64, 240, 28, 28][188160, 784, 28, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.convolution.default](args = (%arg1_1, %arg0_1, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1), kwargs = {})
#   return %buf0
triton_poi_fused_convolution_0 = async_compile.triton('triton_poi_fused_convolution_0', '''
import triton
import triton.language as tl

from torch._inductor.runtime import triton_helpers, triton_heuristics
from torch._inductor.runtime.triton_helpers import libdevice, math as tl_math
from torch._inductor.runtime.hints import AutotuneHint, ReductionHint, TileHint, DeviceProperties
triton_helpers.set_driver_to_gpu()

@triton_heuristics.pointwise(
    size_hints={'y': 4096, 'x': 1024}, tile_hint=TileHint.SQUARE,
    filename=__file__,
    triton_meta={'signature': {'in_ptr0': '*bf16', 'out_ptr0': '*bf16', 'ynumel': 'i32', 'xnumel': 'i32', 'YBLOCK': 'constexpr', 'XBLOCK': 'constexpr'}, 'device': DeviceProperties(type='cuda', index=0, multi_processor_count=132, cc=90, major=9, regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048, max_threads_per_block=1024, warp_size=32), 'constants': {}, 'native_matmul': False, 'enable_fp_fusion': True, 'launch_pdl': False, 'disable_ftz': False, 'configs': [{(0,): [['tt.divisibility', 16]], (1,): [['tt.divisibility', 16]], (2,): [['tt.divisibility', 16]], (3,): [['tt.divisibility', 16]]}]},
    inductor_meta={'grid_type': 'Grid2D', 'autotune_hints': set(), 'kernel_name': 'triton_poi_fused_convolution_0', 'mutated_arg_names': [], 'optimize_mem': True, 'no_x_dim': False, 'atomic_add_found': False, 'num_load': 1, 'num_store': 1, 'num_reduction': 0, 'backend_hash': '91D1D1166449D9E2EB66EB9770C9E2C3B0FEB787341F27FEB4D3F0338DA50336', 'assert_indirect_indexing': True, 'autotune_local_cache': True, 'autotune_pointwise': True, 'autotune_remote_cache': None, 'force_disable_caches': False, 'dynamic_scale_rblock': True, 'max_autotune': False, 'max_autotune_pointwise': False, 'min_split_scan_rblock': 256, 'spill_threshold': 16, 'store_cubin': False, 'deterministic': False, 'force_filter_reduction_configs': False, 'mix_order_reduction_allow_multi_stages': False, 'are_deterministic_algorithms_enabled': False, 'tiling_scores': {'y': 8028160, 'x': 4014080}},
    min_elem_per_thread=0
)
@triton.jit
def triton_poi_fused_convolution_0(in_ptr0, out_ptr0, ynumel, xnumel, YBLOCK : tl.constexpr, XBLOCK : tl.constexpr):
    ynumel = 2560
    xnumel = 784
    yoffset = tl.program_id(1) * YBLOCK
    yindex = yoffset + tl.arange(0, YBLOCK)[:, None]
    ymask = yindex < ynumel
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[None, :]
    xmask = xindex < xnumel
    x2 = xindex
    y3 = yindex
    y0 = (yindex % 40)
    y1 = yindex // 40
    tmp0 = tl.load(in_ptr0 + (x2 + 784*y3), xmask & ymask, eviction_policy='evict_last').to(tl.float32)
    tl.store(out_ptr0 + (y0 + 40*x2 + 31360*y1), tmp0, xmask & ymask)
''', device_str='cuda')


# kernel path: /tmp/inductor-mobile_se_block-bf16-p4s4p1ff/eh/cehkmnivb2gadaodtmlpfem5rt54jw3ix5epm3ofgb7sjgat5bqq.py
# Topologically Sorted Source Nodes: [input_2, input_3], Original ATen: [aten._native_batch_norm_legit_no_training, aten.hardswish]
# Source node to ATen node mapping:
#   input_2 => add, add_1, convert_element_type, convert_element_type_1, mul, mul_1, mul_2, reciprocal, sqrt, sub, unsqueeze, unsqueeze_1, unsqueeze_2, unsqueeze_3, unsqueeze_4, unsqueeze_5, unsqueeze_6, unsqueeze_7
#   input_3 => add_2, clamp_max, clamp_min, convert_element_type_4, div, mul_3
# Graph fragment:
#   %convolution : Tensor "bf16[64, 240, 28, 28][188160, 1, 6720, 240]cuda:0" = PlaceHolder[target=convolution]
#   %arg2_1 : Tensor "bf16[240][1]cuda:0" = PlaceHolder[target=arg2_1]
#   %arg3_1 : Tensor "bf16[240][1]cuda:0" = PlaceHolder[target=arg3_1]
#   %arg4_1 : Tensor "bf16[240][1]cuda:0" = PlaceHolder[target=arg4_1]
#   %arg5_1 : Tensor "bf16[240][1]cuda:0" = PlaceHolder[target=arg5_1]
#   %add_1 : Tensor "f32[64, 240, 28, 28][188160, 1, 6720, 240]cuda:0" = PlaceHolder[target=add_1]
#   %convert_element_type : Tensor "f32[240][1]cuda:0"[num_users=1] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%arg2_1, torch.float32), kwargs = {})
#   %unsqueeze : Tensor "f32[240, 1][1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.unsqueeze.default](args = (%convert_element_type, -1), kwargs = {})
#   %unsqueeze_1 : Tensor "f32[240, 1, 1][1, 1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.unsqueeze.default](args = (%unsqueeze, -1), kwargs = {})
#   %sub : Tensor "f32[64, 240, 28, 28][188160, 784, 28, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.sub.Tensor](args = (%convolution, %unsqueeze_1), kwargs = {})
#   %convert_element_type_1 : Tensor "f32[240][1]cuda:0"[num_users=1] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%arg3_1, torch.float32), kwargs = {})
#   %add : Tensor "f32[240][1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.add.Tensor](args = (%convert_element_type_1, 1e-05), kwargs = {})
#   %sqrt : Tensor "f32[240][1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.sqrt.default](args = (%add,), kwargs = {})
#   %reciprocal : Tensor "f32[240][1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.reciprocal.default](args = (%sqrt,), kwargs = {})
#   %mul : Tensor "f32[240][1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%reciprocal, 1), kwargs = {})
#   %unsqueeze_2 : Tensor "f32[240, 1][1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.unsqueeze.default](args = (%mul, -1), kwargs = {})
#   %unsqueeze_3 : Tensor "f32[240, 1, 1][1, 1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.unsqueeze.default](args = (%unsqueeze_2, -1), kwargs = {})
#   %mul_1 : Tensor "f32[64, 240, 28, 28][188160, 784, 28, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%sub, %unsqueeze_3), kwargs = {})
#   %unsqueeze_4 : Tensor "bf16[240, 1][1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.unsqueeze.default](args = (%arg4_1, -1), kwargs = {})
#   %unsqueeze_5 : Tensor "bf16[240, 1, 1][1, 1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.unsqueeze.default](args = (%unsqueeze_4, -1), kwargs = {})
#   %mul_2 : Tensor "f32[64, 240, 28, 28][188160, 784, 28, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%mul_1, %unsqueeze_5), kwargs = {})
#   %unsqueeze_6 : Tensor "bf16[240, 1][1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.unsqueeze.default](args = (%arg5_1, -1), kwargs = {})
#   %unsqueeze_7 : Tensor "bf16[240, 1, 1][1, 1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.unsqueeze.default](args = (%unsqueeze_6, -1), kwargs = {})
#   %add_1 : Tensor "f32[64, 240, 28, 28][188160, 784, 28, 1]cuda:0"[num_users=2] = call_function[target=torch.ops.aten.add.Tensor](args = (%mul_2, %unsqueeze_7), kwargs = {})
#   %add_2 : Tensor "f32[64, 240, 28, 28][188160, 784, 28, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.add.Tensor](args = (%add_1, 3), kwargs = {})
#   %clamp_min : Tensor "f32[64, 240, 28, 28][188160, 784, 28, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.clamp_min.default](args = (%add_2, 0), kwargs = {})
#   %clamp_max : Tensor "f32[64, 240, 28, 28][188160, 784, 28, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.clamp_max.default](args = (%clamp_min, 6), kwargs = {})
#   %mul_3 : Tensor "f32[64, 240, 28, 28][188160, 784, 28, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%add_1, %clamp_max), kwargs = {})
#   %div : Tensor "f32[64, 240, 28, 28][188160, 784, 28, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.div.Tensor](args = (%mul_3, 6), kwargs = {})
#   %convert_element_type_4 : Tensor "bf16[64, 240, 28, 28][188160, 784, 28, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%div, torch.bfloat16), kwargs = {})
#   return %add_1,%convert_element_type_4
triton_poi_fused__native_batch_norm_legit_no_training_hardswish_1 = async_compile.triton('triton_poi_fused__native_batch_norm_legit_no_training_hardswish_1', '''
import triton
import triton.language as tl

from torch._inductor.runtime import triton_helpers, triton_heuristics
from torch._inductor.runtime.triton_helpers import libdevice, math as tl_math
from torch._inductor.runtime.hints import AutotuneHint, ReductionHint, TileHint, DeviceProperties
triton_helpers.set_driver_to_gpu()

@triton_heuristics.pointwise(
    size_hints={'x': 16777216}, 
    filename=__file__,
    triton_meta={'signature': {'in_ptr0': '*bf16', 'in_ptr1': '*bf16', 'in_ptr2': '*bf16', 'in_ptr3': '*bf16', 'in_ptr4': '*bf16', 'out_ptr1': '*bf16', 'xnumel': 'i32', 'XBLOCK': 'constexpr'}, 'device': DeviceProperties(type='cuda', index=0, multi_processor_count=132, cc=90, major=9, regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048, max_threads_per_block=1024, warp_size=32), 'constants': {}, 'native_matmul': False, 'enable_fp_fusion': True, 'launch_pdl': False, 'disable_ftz': False, 'configs': [{(0,): [['tt.divisibility', 16]], (1,): [['tt.divisibility', 16]], (2,): [['tt.divisibility', 16]], (3,): [['tt.divisibility', 16]], (4,): [['tt.divisibility', 16]], (5,): [['tt.divisibility', 16]], (6,): [['tt.divisibility', 16]]}]},
    inductor_meta={'grid_type': 'Grid1D', 'autotune_hints': set(), 'kernel_name': 'triton_poi_fused__native_batch_norm_legit_no_training_hardswish_1', 'mutated_arg_names': [], 'optimize_mem': True, 'no_x_dim': False, 'atomic_add_found': False, 'num_load': 5, 'num_store': 1, 'num_reduction': 0, 'backend_hash': '91D1D1166449D9E2EB66EB9770C9E2C3B0FEB787341F27FEB4D3F0338DA50336', 'assert_indirect_indexing': True, 'autotune_local_cache': True, 'autotune_pointwise': True, 'autotune_remote_cache': None, 'force_disable_caches': False, 'dynamic_scale_rblock': True, 'max_autotune': False, 'max_autotune_pointwise': False, 'min_split_scan_rblock': 256, 'spill_threshold': 16, 'store_cubin': False, 'deterministic': False, 'force_filter_reduction_configs': False, 'mix_order_reduction_allow_multi_stages': False, 'are_deterministic_algorithms_enabled': False, 'tiling_scores': {'x': 72255360}},
    min_elem_per_thread=0
)
@triton.jit
def triton_poi_fused__native_batch_norm_legit_no_training_hardswish_1(in_ptr0, in_ptr1, in_ptr2, in_ptr3, in_ptr4, out_ptr1, xnumel, XBLOCK : tl.constexpr):
    xnumel = 12042240
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:]
    xmask = tl.full([XBLOCK], True, tl.int1)[:]
    x2 = xindex
    x0 = (xindex % 240)
    tmp0 = tl.load(in_ptr0 + (x2), None).to(tl.float32)
    tmp2 = tl.load(in_ptr1 + (x0), None, eviction_policy='evict_last').to(tl.float32)
    tmp5 = tl.load(in_ptr2 + (x0), None, eviction_policy='evict_last').to(tl.float32)
    tmp15 = tl.load(in_ptr3 + (x0), None, eviction_policy='evict_last').to(tl.float32)
    tmp18 = tl.load(in_ptr4 + (x0), None, eviction_policy='evict_last').to(tl.float32)
    tmp1 = tmp0.to(tl.float32)
    tmp3 = tmp2.to(tl.float32)
    tmp4 = tmp1 - tmp3
    tmp6 = tmp5.to(tl.float32)
    tmp7 = tl.full([1], 1e-05, tl.float32)
    tmp8 = tmp6 + tmp7
    tmp9 = tl.sqrt_rn(tmp8)
    tmp10 = tl.full([1], 1, tl.int32)
    tmp11 = (tmp10 / tmp9)
    tmp12 = tl.full([1], 1.0, tl.float32)
    tmp13 = tmp11 * tmp12
    tmp14 = tmp4 * tmp13
    tmp16 = tmp15.to(tl.float32)
    tmp17 = tmp14 * tmp16
    tmp19 = tmp18.to(tl.float32)
    tmp20 = tmp17 + tmp19
    tmp21 = tl.full([1], 3.0, tl.float32)
    tmp22 = tmp20 + tmp21
    tmp23 = tl.full([1], 0.0, tl.float32)
    tmp24 = triton_helpers.maximum(tmp22, tmp23)
    tmp25 = tl.full([1], 6.0, tl.float32)
    tmp26 = triton_helpers.minimum(tmp24, tmp25)
    tmp27 = tmp20 * tmp26
    tmp28 = tl.full([1], 0.16666666666666666, tl.float32)
    tmp29 = tmp27 * tmp28
    tmp30 = tmp29.to(tl.float32)
    tl.store(out_ptr1 + (x2), tmp30, None)
''', device_str='cuda')


# kernel path: /tmp/inductor-mobile_se_block-bf16-p4s4p1ff/pa/cpa3sivdqtc3uasee2kxhkeknfdvla3hnrqsi5rn3rxeil6o2t6d.py
# Topologically Sorted Source Nodes: [input_5, input_6, s], Original ATen: [aten._native_batch_norm_legit_no_training, aten.hardswish, aten.mean]
# Source node to ATen node mapping:
#   input_5 => add_3, add_4, convert_element_type_5, convert_element_type_6, mul_4, mul_5, mul_6, reciprocal_1, sqrt_1, sub_1, unsqueeze_10, unsqueeze_11, unsqueeze_12, unsqueeze_13, unsqueeze_14, unsqueeze_15, unsqueeze_8, unsqueeze_9
#   input_6 => add_5, clamp_max_1, clamp_min_1, convert_element_type_9, div_1, mul_7
#   s => mean
# Graph fragment:
#   %convolution_1 : Tensor "bf16[64, 240, 28, 28][188160, 1, 6720, 240]cuda:0" = PlaceHolder[target=convolution_1]
#   %arg7_1 : Tensor "bf16[240][1]cuda:0" = PlaceHolder[target=arg7_1]
#   %arg8_1 : Tensor "bf16[240][1]cuda:0" = PlaceHolder[target=arg8_1]
#   %arg9_1 : Tensor "bf16[240][1]cuda:0" = PlaceHolder[target=arg9_1]
#   %arg10_1 : Tensor "bf16[240][1]cuda:0" = PlaceHolder[target=arg10_1]
#   %add_4 : Tensor "f32[64, 240, 28, 28][188160, 1, 6720, 240]cuda:0" = PlaceHolder[target=add_4]
#   %buf6 : Tensor "f32[64, 240, 1, 1][240, 1, 15360, 15360]cuda:0" = PlaceHolder[target=buf6]
#   %convert_element_type_5 : Tensor "f32[240][1]cuda:0"[num_users=1] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%arg7_1, torch.float32), kwargs = {})
#   %unsqueeze_8 : Tensor "f32[240, 1][1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.unsqueeze.default](args = (%convert_element_type_5, -1), kwargs = {})
#   %unsqueeze_9 : Tensor "f32[240, 1, 1][1, 1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.unsqueeze.default](args = (%unsqueeze_8, -1), kwargs = {})
#   %sub_1 : Tensor "f32[64, 240, 28, 28][188160, 784, 28, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.sub.Tensor](args = (%convolution_1, %unsqueeze_9), kwargs = {})
#   %convert_element_type_6 : Tensor "f32[240][1]cuda:0"[num_users=1] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%arg8_1, torch.float32), kwargs = {})
#   %add_3 : Tensor "f32[240][1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.add.Tensor](args = (%convert_element_type_6, 1e-05), kwargs = {})
#   %sqrt_1 : Tensor "f32[240][1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.sqrt.default](args = (%add_3,), kwargs = {})
#   %reciprocal_1 : Tensor "f32[240][1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.reciprocal.default](args = (%sqrt_1,), kwargs = {})
#   %mul_4 : Tensor "f32[240][1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%reciprocal_1, 1), kwargs = {})
#   %unsqueeze_10 : Tensor "f32[240, 1][1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.unsqueeze.default](args = (%mul_4, -1), kwargs = {})
#   %unsqueeze_11 : Tensor "f32[240, 1, 1][1, 1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.unsqueeze.default](args = (%unsqueeze_10, -1), kwargs = {})
#   %mul_5 : Tensor "f32[64, 240, 28, 28][188160, 784, 28, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%sub_1, %unsqueeze_11), kwargs = {})
#   %unsqueeze_12 : Tensor "bf16[240, 1][1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.unsqueeze.default](args = (%arg9_1, -1), kwargs = {})
#   %unsqueeze_13 : Tensor "bf16[240, 1, 1][1, 1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.unsqueeze.default](args = (%unsqueeze_12, -1), kwargs = {})
#   %mul_6 : Tensor "f32[64, 240, 28, 28][188160, 784, 28, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%mul_5, %unsqueeze_13), kwargs = {})
#   %unsqueeze_14 : Tensor "bf16[240, 1][1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.unsqueeze.default](args = (%arg10_1, -1), kwargs = {})
#   %unsqueeze_15 : Tensor "bf16[240, 1, 1][1, 1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.unsqueeze.default](args = (%unsqueeze_14, -1), kwargs = {})
#   %add_4 : Tensor "f32[64, 240, 28, 28][188160, 784, 28, 1]cuda:0"[num_users=2] = call_function[target=torch.ops.aten.add.Tensor](args = (%mul_6, %unsqueeze_15), kwargs = {})
#   %add_5 : Tensor "f32[64, 240, 28, 28][188160, 784, 28, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.add.Tensor](args = (%add_4, 3), kwargs = {})
#   %clamp_min_1 : Tensor "f32[64, 240, 28, 28][188160, 784, 28, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.clamp_min.default](args = (%add_5, 0), kwargs = {})
#   %clamp_max_1 : Tensor "f32[64, 240, 28, 28][188160, 784, 28, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.clamp_max.default](args = (%clamp_min_1, 6), kwargs = {})
#   %mul_7 : Tensor "f32[64, 240, 28, 28][188160, 784, 28, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%add_4, %clamp_max_1), kwargs = {})
#   %div_1 : Tensor "f32[64, 240, 28, 28][188160, 784, 28, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.div.Tensor](args = (%mul_7, 6), kwargs = {})
#   %convert_element_type_9 : Tensor "bf16[64, 240, 28, 28][188160, 784, 28, 1]cuda:0"[num_users=2] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%div_1, torch.bfloat16), kwargs = {})
#   %mean : Tensor "bf16[64, 240, 1, 1][240, 1, 1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mean.dim](args = (%convert_element_type_9, [-1, -2], True), kwargs = {})
#   return %add_4,%buf6,%mean
triton_red_fused__native_batch_norm_legit_no_training_hardswish_mean_2 = async_compile.triton('triton_red_fused__native_batch_norm_legit_no_training_hardswish_mean_2', '''
import triton
import triton.language as tl

from torch._inductor.runtime import triton_helpers, triton_heuristics
from torch._inductor.runtime.triton_helpers import libdevice, math as tl_math
from torch._inductor.runtime.hints import AutotuneHint, ReductionHint, TileHint, DeviceProperties
triton_helpers.set_driver_to_gpu()

@triton_heuristics.reduction(
    size_hints={'x': 16384, 'r0_': 1024},
    reduction_hint=ReductionHint.DEFAULT,
    filename=__file__,
    triton_meta={'signature': {'in_ptr0': '*bf16', 'in_ptr1': '*bf16', 'in_ptr2': '*bf16', 'in_ptr3': '*bf16', 'in_ptr4': '*bf16', 'out_ptr0': '*fp32', 'out_ptr2': '*bf16', 'xnumel': 'i32', 'r0_numel': 'i32', 'XBLOCK': 'constexpr', 'R0_BLOCK': 'constexpr'}, 'device': DeviceProperties(type='cuda', index=0, multi_processor_count=132, cc=90, major=9, regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048, max_threads_per_block=1024, warp_size=32), 'constants': {}, 'native_matmul': False, 'enable_fp_fusion': True, 'launch_pdl': False, 'disable_ftz': False, 'configs': [{(0,): [['tt.divisibility', 16]], (1,): [['tt.divisibility', 16]], (2,): [['tt.divisibility', 16]], (3,): [['tt.divisibility', 16]], (4,): [['tt.divisibility', 16]], (5,): [['tt.divisibility', 16]], (6,): [['tt.divisibility', 16]], (7,): [['tt.divisibility', 16]], (8,): [['tt.divisibility', 16]]}]},
    inductor_meta={'grid_type': 'Grid1D', 'autotune_hints': set(), 'kernel_name': 'triton_red_fused__native_batch_norm_legit_no_training_hardswish_mean_2', 'mutated_arg_names': [], 'optimize_mem': True, 'no_x_dim': False, 'atomic_add_found': False, 'num_load': 5, 'num_store': 2, 'num_reduction': 1, 'backend_hash': '91D1D1166449D9E2EB66EB9770C9E2C3B0FEB787341F27FEB4D3F0338DA50336', 'assert_indirect_indexing': True, 'autotune_local_cache': True, 'autotune_pointwise': True, 'autotune_remote_cache': None, 'force_disable_caches': False, 'dynamic_scale_rblock': True, 'max_autotune': False, 'max_autotune_pointwise': False, 'min_split_scan_rblock': 256, 'spill_threshold': 16, 'store_cubin': False, 'deterministic': False, 'force_filter_reduction_configs': False, 'mix_order_reduction_allow_multi_stages': False, 'are_deterministic_algorithms_enabled': False, 'tiling_scores': {'x': 120485760, 'r0_': 0}}
)
@triton.jit
def triton_red_fused__native_batch_norm_legit_no_training_hardswish_mean_2(in_ptr0, in_ptr1, in_ptr2, in_ptr3, in_ptr4, out_ptr0, out_ptr2, xnumel, r0_numel, XBLOCK : tl.constexpr, R0_BLOCK : tl.constexpr):
    xnumel = 15360
    r0_numel = 784
    rnumel = r0_numel
    RBLOCK: tl.constexpr = R0_BLOCK
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:, None]
    xmask = xindex < xnumel
    r0_base = tl.arange(0, R0_BLOCK)[None, :]
    rbase = r0_base
    x0 = (xindex % 240)
    x1 = xindex // 240
    tmp2 = tl.load(in_ptr1 + (x0), xmask, eviction_policy='evict_last').to(tl.float32)
    tmp5 = tl.load(in_ptr2 + (x0), xmask, eviction_policy='evict_last').to(tl.float32)
    tmp15 = tl.load(in_ptr3 + (x0), xmask, eviction_policy='evict_last').to(tl.float32)
    tmp18 = tl.load(in_ptr4 + (x0), xmask, eviction_policy='evict_last').to(tl.float32)
    _tmp33 = tl.full([XBLOCK, R0_BLOCK], 0, tl.float32)
    x3 = xindex
    for r0_offset in tl.range(0, r0_numel, R0_BLOCK):
        r0_index = r0_offset + r0_base
        r0_mask = r0_index < r0_numel
        roffset = r0_offset
        rindex = r0_index
        r0_2 = r0_index
        tmp0 = tl.load(in_ptr0 + (x0 + 240*r0_2 + 188160*x1), r0_mask & xmask, eviction_policy='evict_first', other=0.0).to(tl.float32)
        tmp1 = tmp0.to(tl.float32)
        tmp3 = tmp2.to(tl.float32)
        tmp4 = tmp1 - tmp3
        tmp6 = tmp5.to(tl.float32)
        tmp7 = tl.full([1, 1], 1e-05, tl.float32)
        tmp8 = tmp6 + tmp7
        tmp9 = tl.sqrt_rn(tmp8)
        tmp10 = tl.full([1, 1], 1, tl.int32)
        tmp11 = (tmp10 / tmp9)
        tmp12 = tl.full([1, 1], 1.0, tl.float32)
        tmp13 = tmp11 * tmp12
        tmp14 = tmp4 * tmp13
        tmp16 = tmp15.to(tl.float32)
        tmp17 = tmp14 * tmp16
        tmp19 = tmp18.to(tl.float32)
        tmp20 = tmp17 + tmp19
        tmp21 = tl.full([1, 1], 3.0, tl.float32)
        tmp22 = tmp20 + tmp21
        tmp23 = tl.full([1, 1], 0.0, tl.float32)
        tmp24 = triton_helpers.maximum(tmp22, tmp23)
        tmp25 = tl.full([1, 1], 6.0, tl.float32)
        tmp26 = triton_helpers.minimum(tmp24, tmp25)
        tmp27 = tmp20 * tmp26
        tmp28 = tl.full([1, 1], 0.16666666666666666, tl.float32)
        tmp29 = tmp27 * tmp28
        tmp30 = tmp29.to(tl.float32)
        tmp31 = tmp30.to(tl.float32)
        tmp32 = tl.broadcast_to(tmp31, [XBLOCK, R0_BLOCK])
        tmp34 = _tmp33 + tmp32
        _tmp33 = tl.where(r0_mask & xmask, tmp34, _tmp33)
        tl.store(out_ptr0 + (x0 + 240*r0_2 + 188160*x1), tmp20, r0_mask & xmask)
    tmp33 = tl.sum(_tmp33, 1)[:, None]
    tmp35 = tl.full([1, 1], 784.0, tl.float32)
    tmp36 = (tmp33 / tmp35)
    tmp37 = tmp36.to(tl.float32)
    tl.store(out_ptr2 + (x3), tmp37, xmask)
''', device_str='cuda')


# kernel path: /tmp/inductor-mobile_se_block-bf16-p4s4p1ff/z2/cz2i3b2dryigu5og4o5caqjeyg627peqbjozhv353t5i4bcqgiwz.py
# Topologically Sorted Source Nodes: [input_6, s, conv2d_2, relu], Original ATen: [aten.hardswish, aten.mean, aten.convolution, aten.relu]
# Source node to ATen node mapping:
#   conv2d_2 => convolution_2
#   input_6 => add_5, clamp_max_1, clamp_min_1, convert_element_type_9, div_1, mul_7
#   relu => relu
#   s => mean
# Graph fragment:
#   %buf8 : Tensor "bf16[64, 60, 1, 1][60, 1, 1, 1]cuda:0" = PlaceHolder[target=buf8]
#   %arg12_1 : Tensor "bf16[60][1]cuda:0" = PlaceHolder[target=arg12_1]
#   %add_5 : Tensor "f32[64, 240, 28, 28][188160, 784, 28, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.add.Tensor](args = (%add_4, 3), kwargs = {})
#   %clamp_min_1 : Tensor "f32[64, 240, 28, 28][188160, 784, 28, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.clamp_min.default](args = (%add_5, 0), kwargs = {})
#   %clamp_max_1 : Tensor "f32[64, 240, 28, 28][188160, 784, 28, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.clamp_max.default](args = (%clamp_min_1, 6), kwargs = {})
#   %mul_7 : Tensor "f32[64, 240, 28, 28][188160, 784, 28, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%add_4, %clamp_max_1), kwargs = {})
#   %div_1 : Tensor "f32[64, 240, 28, 28][188160, 784, 28, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.div.Tensor](args = (%mul_7, 6), kwargs = {})
#   %convert_element_type_9 : Tensor "bf16[64, 240, 28, 28][188160, 784, 28, 1]cuda:0"[num_users=2] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%div_1, torch.bfloat16), kwargs = {})
#   %mean : Tensor "bf16[64, 240, 1, 1][240, 1, 1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mean.dim](args = (%convert_element_type_9, [-1, -2], True), kwargs = {})
#   %convolution_2 : Tensor "bf16[64, 60, 1, 1][60, 1, 1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.convolution.default](args = (%mean, %arg11_1, %arg12_1, [1, 1], [0, 0], [1, 1], False, [0, 0], 1), kwargs = {})
#   %relu : Tensor "bf16[64, 60, 1, 1][60, 1, 1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.relu.default](args = (%convolution_2,), kwargs = {})
#   return %relu
triton_poi_fused_convolution_hardswish_mean_relu_3 = async_compile.triton('triton_poi_fused_convolution_hardswish_mean_relu_3', '''
import triton
import triton.language as tl

from torch._inductor.runtime import triton_helpers, triton_heuristics
from torch._inductor.runtime.triton_helpers import libdevice, math as tl_math
from torch._inductor.runtime.hints import AutotuneHint, ReductionHint, TileHint, DeviceProperties
triton_helpers.set_driver_to_gpu()

@triton_heuristics.pointwise(
    size_hints={'x': 4096}, 
    filename=__file__,
    triton_meta={'signature': {'in_out_ptr0': '*bf16', 'in_ptr0': '*bf16', 'xnumel': 'i32', 'XBLOCK': 'constexpr'}, 'device': DeviceProperties(type='cuda', index=0, multi_processor_count=132, cc=90, major=9, regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048, max_threads_per_block=1024, warp_size=32), 'constants': {}, 'native_matmul': False, 'enable_fp_fusion': True, 'launch_pdl': False, 'disable_ftz': False, 'configs': [{(0,): [['tt.divisibility', 16]], (1,): [['tt.divisibility', 16]], (2,): [['tt.divisibility', 16]]}]},
    inductor_meta={'grid_type': 'Grid1D', 'autotune_hints': set(), 'kernel_name': 'triton_poi_fused_convolution_hardswish_mean_relu_3', 'mutated_arg_names': ['in_out_ptr0'], 'optimize_mem': True, 'no_x_dim': False, 'atomic_add_found': False, 'num_load': 2, 'num_store': 1, 'num_reduction': 0, 'backend_hash': '91D1D1166449D9E2EB66EB9770C9E2C3B0FEB787341F27FEB4D3F0338DA50336', 'assert_indirect_indexing': True, 'autotune_local_cache': True, 'autotune_pointwise': True, 'autotune_remote_cache': None, 'force_disable_caches': False, 'dynamic_scale_rblock': True, 'max_autotune': False, 'max_autotune_pointwise': False, 'min_split_scan_rblock': 256, 'spill_threshold': 16, 'store_cubin': False, 'deterministic': False, 'force_filter_reduction_configs': False, 'mix_order_reduction_allow_multi_stages': False, 'are_deterministic_algorithms_enabled': False, 'tiling_scores': {'x': 23160}},
    min_elem_per_thread=0
)
@triton.jit
def triton_poi_fused_convolution_hardswish_mean_relu_3(in_out_ptr0, in_ptr0, xnumel, XBLOCK : tl.constexpr):
    xnumel = 3840
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:]
    xmask = xindex < xnumel
    x2 = xindex
    x0 = (xindex % 60)
    tmp0 = tl.load(in_out_ptr0 + (x2), xmask).to(tl.float32)
    tmp1 = tl.load(in_ptr0 + (x0), xmask, eviction_policy='evict_last').to(tl.float32)
    tmp2 = tmp0 + tmp1
    tmp3 = tl.full([1], 0, tl.int32)
    tmp4 = triton_helpers.maximum(tmp3, tmp2)
    tl.store(in_out_ptr0 + (x2), tmp4, xmask)
''', device_str='cuda')


# kernel path: /tmp/inductor-mobile_se_block-bf16-p4s4p1ff/n6/cn6lonkjaglbmmftynu54ccyovyjuqkeigpdnlvosjmtsr7c6nsf.py
# Topologically Sorted Source Nodes: [input_6, s, conv2d_2, relu, conv2d_3, s_1, mul], Original ATen: [aten.hardswish, aten.mean, aten.convolution, aten.relu, aten.hardsigmoid, aten.mul]
# Source node to ATen node mapping:
#   conv2d_2 => convolution_2
#   conv2d_3 => convolution_3
#   input_6 => add_5, clamp_max_1, clamp_min_1, convert_element_type_9, div_1, mul_7
#   mul => mul_8
#   relu => relu
#   s => mean
#   s_1 => add_6, clamp_max_2, clamp_min_2, convert_element_type_10, convert_element_type_11, div_2
# Graph fragment:
#   %add_4 : Tensor "f32[64, 240, 28, 28][188160, 1, 6720, 240]cuda:0" = PlaceHolder[target=add_4]
#   %buf10 : Tensor "bf16[64, 240, 1, 1][240, 1, 1, 1]cuda:0" = PlaceHolder[target=buf10]
#   %arg14_1 : Tensor "bf16[240][1]cuda:0" = PlaceHolder[target=arg14_1]
#   %add_5 : Tensor "f32[64, 240, 28, 28][188160, 784, 28, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.add.Tensor](args = (%add_4, 3), kwargs = {})
#   %clamp_min_1 : Tensor "f32[64, 240, 28, 28][188160, 784, 28, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.clamp_min.default](args = (%add_5, 0), kwargs = {})
#   %clamp_max_1 : Tensor "f32[64, 240, 28, 28][188160, 784, 28, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.clamp_max.default](args = (%clamp_min_1, 6), kwargs = {})
#   %mul_7 : Tensor "f32[64, 240, 28, 28][188160, 784, 28, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%add_4, %clamp_max_1), kwargs = {})
#   %div_1 : Tensor "f32[64, 240, 28, 28][188160, 784, 28, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.div.Tensor](args = (%mul_7, 6), kwargs = {})
#   %convert_element_type_9 : Tensor "bf16[64, 240, 28, 28][188160, 784, 28, 1]cuda:0"[num_users=2] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%div_1, torch.bfloat16), kwargs = {})
#   %mean : Tensor "bf16[64, 240, 1, 1][240, 1, 1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mean.dim](args = (%convert_element_type_9, [-1, -2], True), kwargs = {})
#   %convolution_2 : Tensor "bf16[64, 60, 1, 1][60, 1, 1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.convolution.default](args = (%mean, %arg11_1, %arg12_1, [1, 1], [0, 0], [1, 1], False, [0, 0], 1), kwargs = {})
#   %relu : Tensor "bf16[64, 60, 1, 1][60, 1, 1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.relu.default](args = (%convolution_2,), kwargs = {})
#   %convolution_3 : Tensor "bf16[64, 240, 1, 1][240, 1, 1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.convolution.default](args = (%relu, %arg13_1, %arg14_1, [1, 1], [0, 0], [1, 1], False, [0, 0], 1), kwargs = {})
#   %convert_element_type_10 : Tensor "f32[64, 240, 1, 1][240, 1, 1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%convolution_3, torch.float32), kwargs = {})
#   %add_6 : Tensor "f32[64, 240, 1, 1][240, 1, 1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.add.Tensor](args = (%convert_element_type_10, 3), kwargs = {})
#   %clamp_min_2 : Tensor "f32[64, 240, 1, 1][240, 1, 1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.clamp_min.default](args = (%add_6, 0), kwargs = {})
#   %clamp_max_2 : Tensor "f32[64, 240, 1, 1][240, 1, 1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.clamp_max.default](args = (%clamp_min_2, 6), kwargs = {})
#   %div_2 : Tensor "f32[64, 240, 1, 1][240, 1, 1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.div.Tensor](args = (%clamp_max_2, 6), kwargs = {})
#   %convert_element_type_11 : Tensor "bf16[64, 240, 1, 1][240, 1, 1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%div_2, torch.bfloat16), kwargs = {})
#   %mul_8 : Tensor "bf16[64, 240, 28, 28][188160, 784, 28, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%convert_element_type_9, %convert_element_type_11), kwargs = {})
#   return %mul_8
triton_poi_fused_convolution_hardsigmoid_hardswish_mean_mul_relu_4 = async_compile.triton('triton_poi_fused_convolution_hardsigmoid_hardswish_mean_mul_relu_4', '''
import triton
import triton.language as tl

from torch._inductor.runtime import triton_helpers, triton_heuristics
from torch._inductor.runtime.triton_helpers import libdevice, math as tl_math
from torch._inductor.runtime.hints import AutotuneHint, ReductionHint, TileHint, DeviceProperties
triton_helpers.set_driver_to_gpu()

@triton_heuristics.pointwise(
    size_hints={'y': 16384, 'x': 1024}, tile_hint=TileHint.DEFAULT,
    filename=__file__,
    triton_meta={'signature': {'in_ptr0': '*fp32', 'in_ptr1': '*bf16', 'in_ptr2': '*bf16', 'out_ptr0': '*bf16', 'ynumel': 'i32', 'xnumel': 'i32', 'YBLOCK': 'constexpr', 'XBLOCK': 'constexpr'}, 'device': DeviceProperties(type='cuda', index=0, multi_processor_count=132, cc=90, major=9, regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048, max_threads_per_block=1024, warp_size=32), 'constants': {}, 'native_matmul': False, 'enable_fp_fusion': True, 'launch_pdl': False, 'disable_ftz': False, 'configs': [{(0,): [['tt.divisibility', 16]], (1,): [['tt.divisibility', 16]], (2,): [['tt.divisibility', 16]], (3,): [['tt.divisibility', 16]], (4,): [['tt.divisibility', 16]], (5,): [['tt.divisibility', 16]]}]},
    inductor_meta={'grid_type': 'Grid2D', 'autotune_hints': set(), 'kernel_name': 'triton_poi_fused_convolution_hardsigmoid_hardswish_mean_mul_relu_4', 'mutated_arg_names': [], 'optimize_mem': True, 'no_x_dim': False, 'atomic_add_found': False, 'num_load': 3, 'num_store': 1, 'num_reduction': 0, 'backend_hash': '91D1D1166449D9E2EB66EB9770C9E2C3B0FEB787341F27FEB4D3F0338DA50336', 'assert_indirect_indexing': True, 'autotune_local_cache': True, 'autotune_pointwise': True, 'autotune_remote_cache': None, 'force_disable_caches': False, 'dynamic_scale_rblock': True, 'max_autotune': False, 'max_autotune_pointwise': False, 'min_split_scan_rblock': 256, 'spill_threshold': 16, 'store_cubin': False, 'deterministic': False, 'force_filter_reduction_configs': False, 'mix_order_reduction_allow_multi_stages': False, 'are_deterministic_algorithms_enabled': False, 'tiling_scores': {'y': 96369120, 'x': 0}},
    min_elem_per_thread=0
)
@triton.jit
def triton_poi_fused_convolution_hardsigmoid_hardswish_mean_mul_relu_4(in_ptr0, in_ptr1, in_ptr2, out_ptr0, ynumel, xnumel, YBLOCK : tl.constexpr, XBLOCK : tl.constexpr):
    ynumel = 15360
    xnumel = 784
    yoffset = tl.program_id(1) * YBLOCK
    yindex = yoffset + tl.arange(0, YBLOCK)[:, None]
    ymask = tl.full([YBLOCK], True, tl.int1)[:, None]
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[None, :]
    xmask = xindex < xnumel
    x2 = xindex
    y0 = (yindex % 240)
    y1 = yindex // 240
    y3 = yindex
    tmp0 = tl.load(in_ptr0 + (y0 + 240*x2 + 188160*y1), xmask, eviction_policy='evict_last')
    tmp11 = tl.load(in_ptr1 + (y3), None, eviction_policy='evict_last').to(tl.float32)
    tmp12 = tl.load(in_ptr2 + (y0), None, eviction_policy='evict_last').to(tl.float32)
    tmp1 = tl.full([1, 1], 3.0, tl.float32)
    tmp2 = tmp0 + tmp1
    tmp3 = tl.full([1, 1], 0.0, tl.float32)
    tmp4 = triton_helpers.maximum(tmp2, tmp3)
    tmp5 = tl.full([1, 1], 6.0, tl.float32)
    tmp6 = triton_helpers.minimum(tmp4, tmp5)
    tmp7 = tmp0 * tmp6
    tmp8 = tl.full([1, 1], 0.16666666666666666, tl.float32)
    tmp9 = tmp7 * tmp8
    tmp10 = tmp9.to(tl.float32)
    tmp13 = tmp11 + tmp12
    tmp14 = tmp13.to(tl.float32)
    tmp15 = tmp14 + tmp1
    tmp16 = triton_helpers.maximum(tmp15, tmp3)
    tmp17 = triton_helpers.minimum(tmp16, tmp5)
    tmp18 = tmp17 * tmp8
    tmp19 = tmp18.to(tl.float32)
    tmp20 = tmp10 * tmp19
    tl.store(out_ptr0 + (y0 + 240*x2 + 188160*y1), tmp20, xmask)
''', device_str='cuda')


# kernel path: /tmp/inductor-mobile_se_block-bf16-p4s4p1ff/tj/ctj5qscgwcngksn27sv6f6svpcfmz4eay5ll5rxbvl7j6qna66tn.py
# Topologically Sorted Source Nodes: [input_8, add], Original ATen: [aten._native_batch_norm_legit_no_training, aten.add]
# Source node to ATen node mapping:
#   add => add_9
#   input_8 => add_7, add_8, convert_element_type_12, convert_element_type_13, convert_element_type_14, mul_10, mul_11, mul_9, reciprocal_2, sqrt_2, sub_2, unsqueeze_16, unsqueeze_17, unsqueeze_18, unsqueeze_19, unsqueeze_20, unsqueeze_21, unsqueeze_22, unsqueeze_23
# Graph fragment:
#   %arg1_1 : Tensor "bf16[64, 40, 28, 28][31360, 784, 28, 1]cuda:0" = PlaceHolder[target=arg1_1]
#   %convolution_4 : Tensor "bf16[64, 40, 28, 28][31360, 1, 1120, 40]cuda:0" = PlaceHolder[target=convolution_4]
#   %arg16_1 : Tensor "bf16[40][1]cuda:0" = PlaceHolder[target=arg16_1]
#   %arg17_1 : Tensor "bf16[40][1]cuda:0" = PlaceHolder[target=arg17_1]
#   %arg18_1 : Tensor "bf16[40][1]cuda:0" = PlaceHolder[target=arg18_1]
#   %arg19_1 : Tensor "bf16[40][1]cuda:0" = PlaceHolder[target=arg19_1]
#   %convert_element_type_12 : Tensor "f32[40][1]cuda:0"[num_users=1] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%arg16_1, torch.float32), kwargs = {})
#   %unsqueeze_16 : Tensor "f32[40, 1][1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.unsqueeze.default](args = (%convert_element_type_12, -1), kwargs = {})
#   %unsqueeze_17 : Tensor "f32[40, 1, 1][1, 1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.unsqueeze.default](args = (%unsqueeze_16, -1), kwargs = {})
#   %sub_2 : Tensor "f32[64, 40, 28, 28][31360, 784, 28, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.sub.Tensor](args = (%convolution_4, %unsqueeze_17), kwargs = {})
#   %convert_element_type_13 : Tensor "f32[40][1]cuda:0"[num_users=1] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%arg17_1, torch.float32), kwargs = {})
#   %add_7 : Tensor "f32[40][1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.add.Tensor](args = (%convert_element_type_13, 1e-05), kwargs = {})
#   %sqrt_2 : Tensor "f32[40][1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.sqrt.default](args = (%add_7,), kwargs = {})
#   %reciprocal_2 : Tensor "f32[40][1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.reciprocal.default](args = (%sqrt_2,), kwargs = {})
#   %mul_9 : Tensor "f32[40][1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%reciprocal_2, 1), kwargs = {})
#   %unsqueeze_18 : Tensor "f32[40, 1][1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.unsqueeze.default](args = (%mul_9, -1), kwargs = {})
#   %unsqueeze_19 : Tensor "f32[40, 1, 1][1, 1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.unsqueeze.default](args = (%unsqueeze_18, -1), kwargs = {})
#   %mul_10 : Tensor "f32[64, 40, 28, 28][31360, 784, 28, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%sub_2, %unsqueeze_19), kwargs = {})
#   %unsqueeze_20 : Tensor "bf16[40, 1][1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.unsqueeze.default](args = (%arg18_1, -1), kwargs = {})
#   %unsqueeze_21 : Tensor "bf16[40, 1, 1][1, 1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.unsqueeze.default](args = (%unsqueeze_20, -1), kwargs = {})
#   %mul_11 : Tensor "f32[64, 40, 28, 28][31360, 784, 28, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%mul_10, %unsqueeze_21), kwargs = {})
#   %unsqueeze_22 : Tensor "bf16[40, 1][1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.unsqueeze.default](args = (%arg19_1, -1), kwargs = {})
#   %unsqueeze_23 : Tensor "bf16[40, 1, 1][1, 1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.unsqueeze.default](args = (%unsqueeze_22, -1), kwargs = {})
#   %add_8 : Tensor "f32[64, 40, 28, 28][31360, 784, 28, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.add.Tensor](args = (%mul_11, %unsqueeze_23), kwargs = {})
#   %convert_element_type_14 : Tensor "bf16[64, 40, 28, 28][31360, 784, 28, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%add_8, torch.bfloat16), kwargs = {})
#   %add_9 : Tensor "bf16[64, 40, 28, 28][31360, 784, 28, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.add.Tensor](args = (%arg1_1, %convert_element_type_14), kwargs = {})
#   return %add_9
triton_poi_fused__native_batch_norm_legit_no_training_add_5 = async_compile.triton('triton_poi_fused__native_batch_norm_legit_no_training_add_5', '''
import triton
import triton.language as tl

from torch._inductor.runtime import triton_helpers, triton_heuristics
from torch._inductor.runtime.triton_helpers import libdevice, math as tl_math
from torch._inductor.runtime.hints import AutotuneHint, ReductionHint, TileHint, DeviceProperties
triton_helpers.set_driver_to_gpu()

@triton_heuristics.pointwise(
    size_hints={'y': 4096, 'x': 1024}, tile_hint=TileHint.DEFAULT,
    filename=__file__,
    triton_meta={'signature': {'in_ptr0': '*bf16', 'in_ptr1': '*bf16', 'in_ptr2': '*bf16', 'in_ptr3': '*bf16', 'in_ptr4': '*bf16', 'in_ptr5': '*bf16', 'out_ptr0': '*bf16', 'ynumel': 'i32', 'xnumel': 'i32', 'YBLOCK': 'constexpr', 'XBLOCK': 'constexpr'}, 'device': DeviceProperties(type='cuda', index=0, multi_processor_count=132, cc=90, major=9, regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048, max_threads_per_block=1024, warp_size=32), 'constants': {}, 'native_matmul': False, 'enable_fp_fusion': True, 'launch_pdl': False, 'disable_ftz': False, 'configs': [{(0,): [['tt.divisibility', 16]], (1,): [['tt.divisibility', 16]], (2,): [['tt.divisibility', 16]], (3,): [['tt.divisibility', 16]], (4,): [['tt.divisibility', 16]], (5,): [['tt.divisibility', 16]], (6,): [['tt.divisibility', 16]], (7,): [['tt.divisibility', 16]], (8,): [['tt.divisibility', 16]]}]},
    inductor_meta={'grid_type': 'Grid2D', 'autotune_hints': set(), 'kernel_name': 'triton_poi_fused__native_batch_norm_legit_no_training_add_5', 'mutated_arg_names': [], 'optimize_mem': True, 'no_x_dim': False, 'atomic_add_found': False, 'num_load': 6, 'num_store': 1, 'num_reduction': 0, 'backend_hash': '91D1D1166449D9E2EB66EB9770C9E2C3B0FEB787341F27FEB4D3F0338DA50336', 'assert_indirect_indexing': True, 'autotune_local_cache': True, 'autotune_pointwise': True, 'autotune_remote_cache': None, 'force_disable_caches': False, 'dynamic_scale_rblock': True, 'max_autotune': False, 'max_autotune_pointwise': False, 'min_split_scan_rblock': 256, 'spill_threshold': 16, 'store_cubin': False, 'deterministic': False, 'force_filter_reduction_configs': False, 'mix_order_reduction_allow_multi_stages': False, 'are_deterministic_algorithms_enabled': False, 'tiling_scores': {'y': 4014400, 'x': 12042240}},
    min_elem_per_thread=0
)
@triton.jit
def triton_poi_fused__native_batch_norm_legit_no_training_add_5(in_ptr0, in_ptr1, in_ptr2, in_ptr3, in_ptr4, in_ptr5, out_ptr0, ynumel, xnumel, YBLOCK : tl.constexpr, XBLOCK : tl.constexpr):
    ynumel = 2560
    xnumel = 784
    yoffset = tl.program_id(1) * YBLOCK
    yindex = yoffset + tl.arange(0, YBLOCK)[:, None]
    ymask = yindex < ynumel
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[None, :]
    xmask = xindex < xnumel
    x2 = xindex
    y3 = yindex
    y0 = (yindex % 40)
    y1 = yindex // 40
    tmp0 = tl.load(in_ptr0 + (x2 + 784*y3), xmask & ymask, eviction_policy='evict_last').to(tl.float32)
    tmp1 = tl.load(in_ptr1 + (y0 + 40*x2 + 31360*y1), xmask & ymask, eviction_policy='evict_last').to(tl.float32)
    tmp3 = tl.load(in_ptr2 + (y0), ymask, eviction_policy='evict_last').to(tl.float32)
    tmp6 = tl.load(in_ptr3 + (y0), ymask, eviction_policy='evict_last').to(tl.float32)
    tmp16 = tl.load(in_ptr4 + (y0), ymask, eviction_policy='evict_last').to(tl.float32)
    tmp19 = tl.load(in_ptr5 + (y0), ymask, eviction_policy='evict_last').to(tl.float32)
    tmp2 = tmp1.to(tl.float32)
    tmp4 = tmp3.to(tl.float32)
    tmp5 = tmp2 - tmp4
    tmp7 = tmp6.to(tl.float32)
    tmp8 = tl.full([1, 1], 1e-05, tl.float32)
    tmp9 = tmp7 + tmp8
    tmp10 = tl.sqrt_rn(tmp9)
    tmp11 = tl.full([1, 1], 1, tl.int32)
    tmp12 = (tmp11 / tmp10)
    tmp13 = tl.full([1, 1], 1.0, tl.float32)
    tmp14 = tmp12 * tmp13
    tmp15 = tmp5 * tmp14
    tmp17 = tmp16.to(tl.float32)
    tmp18 = tmp15 * tmp17
    tmp20 = tmp19.to(tl.float32)
    tmp21 = tmp18 + tmp20
    tmp22 = tmp21.to(tl.float32)
    tmp23 = tmp0 + tmp22
    tl.store(out_ptr0 + (x2 + 784*y3), tmp23, xmask & ymask)
''', device_str='cuda')

def partition_0(args):
    arg1_1, arg0_1, arg2_1, arg3_1, arg4_1, arg5_1, arg6_1, arg7_1, arg8_1, arg9_1, arg10_1, arg11_1, arg12_1, arg13_1, arg14_1, arg15_1, arg16_1, arg17_1, arg18_1, arg19_1 = args
    args.clear()
    assert_size_stride(arg1_1, (64, 40, 28, 28), (31360, 784, 28, 1))
    assert_size_stride(arg0_1, (240, 40, 1, 1), (40, 1, 1, 1))
    assert_size_stride(arg2_1, (240, ), (1, ))
    assert_size_stride(arg3_1, (240, ), (1, ))
    assert_size_stride(arg4_1, (240, ), (1, ))
    assert_size_stride(arg5_1, (240, ), (1, ))
    assert_size_stride(arg6_1, (240, 1, 5, 5), (25, 25, 5, 1))
    assert_size_stride(arg7_1, (240, ), (1, ))
    assert_size_stride(arg8_1, (240, ), (1, ))
    assert_size_stride(arg9_1, (240, ), (1, ))
    assert_size_stride(arg10_1, (240, ), (1, ))
    assert_size_stride(arg11_1, (60, 240, 1, 1), (240, 1, 1, 1))
    assert_size_stride(arg12_1, (60, ), (1, ))
    assert_size_stride(arg13_1, (240, 60, 1, 1), (60, 1, 1, 1))
    assert_size_stride(arg14_1, (240, ), (1, ))
    assert_size_stride(arg15_1, (40, 240, 1, 1), (240, 1, 1, 1))
    assert_size_stride(arg16_1, (40, ), (1, ))
    assert_size_stride(arg17_1, (40, ), (1, ))
    assert_size_stride(arg18_1, (40, ), (1, ))
    assert_size_stride(arg19_1, (40, ), (1, ))
    with torch.cuda._DeviceGuard(0):
        torch.cuda.set_device(0)
        buf0 = empty_strided_cuda((64, 40, 28, 28), (31360, 1, 1120, 40), torch.bfloat16)
        # Topologically Sorted Source Nodes: [input_1], Original ATen: [aten.convolution]
        stream0 = get_raw_stream(0)
        triton_poi_fused_convolution_0.run(arg1_1, buf0, 2560, 784, stream=stream0)
        # Topologically Sorted Source Nodes: [input_1], Original ATen: [aten.convolution]
        buf1 = extern_kernels.convolution(buf0, arg0_1, stride=(1, 1), padding=(0, 0), dilation=(1, 1), transposed=False, output_padding=(0, 0), groups=1, bias=None)
        assert_size_stride(buf1, (64, 240, 28, 28), (188160, 1, 6720, 240), 'torch.ops.aten.convolution.default')
        del arg0_1
        del buf0
        buf3 = empty_strided_cuda((64, 240, 28, 28), (188160, 1, 6720, 240), torch.bfloat16)
        # Topologically Sorted Source Nodes: [input_2, input_3], Original ATen: [aten._native_batch_norm_legit_no_training, aten.hardswish]
        stream0 = get_raw_stream(0)
        triton_poi_fused__native_batch_norm_legit_no_training_hardswish_1.run(buf1, arg2_1, arg3_1, arg4_1, arg5_1, buf3, 12042240, stream=stream0)
        del arg2_1
        del arg3_1
        del arg4_1
        del arg5_1
        del buf1
        # Topologically Sorted Source Nodes: [input_3, input_4], Original ATen: [aten.hardswish, aten.convolution]
        buf4 = extern_kernels.convolution(buf3, arg6_1, stride=(1, 1), padding=(2, 2), dilation=(1, 1), transposed=False, output_padding=(0, 0), groups=240, bias=None)
        assert_size_stride(buf4, (64, 240, 28, 28), (188160, 1, 6720, 240), 'torch.ops.aten.convolution.default')
        del arg6_1
        del buf3
        buf5 = empty_strided_cuda((64, 240, 28, 28), (188160, 1, 6720, 240), torch.float32)
        buf7 = empty_strided_cuda((64, 240, 1, 1), (240, 1, 1, 1), torch.bfloat16)
        # Topologically Sorted Source Nodes: [input_5, input_6, s], Original ATen: [aten._native_batch_norm_legit_no_training, aten.hardswish, aten.mean]
        stream0 = get_raw_stream(0)
        triton_red_fused__native_batch_norm_legit_no_training_hardswish_mean_2.run(buf4, arg7_1, arg8_1, arg9_1, arg10_1, buf5, buf7, 15360, 784, stream=stream0)
        del arg10_1
        del arg7_1
        del arg8_1
        del arg9_1
        # Topologically Sorted Source Nodes: [input_6, s, conv2d_2], Original ATen: [aten.hardswish, aten.mean, aten.convolution]
        buf8 = extern_kernels.convolution(buf7, arg11_1, stride=(1, 1), padding=(0, 0), dilation=(1, 1), transposed=False, output_padding=(0, 0), groups=1, bias=None)
        assert_size_stride(buf8, (64, 60, 1, 1), (60, 1, 1, 1), 'torch.ops.aten.convolution.default')
        del arg11_1
        del buf7
        buf9 = buf8; del buf8  # reuse
        # Topologically Sorted Source Nodes: [input_6, s, conv2d_2, relu], Original ATen: [aten.hardswish, aten.mean, aten.convolution, aten.relu]
        stream0 = get_raw_stream(0)
        triton_poi_fused_convolution_hardswish_mean_relu_3.run(buf9, arg12_1, 3840, stream=stream0)
        del arg12_1
        # Topologically Sorted Source Nodes: [input_6, s, conv2d_2, relu, conv2d_3], Original ATen: [aten.hardswish, aten.mean, aten.convolution, aten.relu]
        buf10 = extern_kernels.convolution(buf9, arg13_1, stride=(1, 1), padding=(0, 0), dilation=(1, 1), transposed=False, output_padding=(0, 0), groups=1, bias=None)
        assert_size_stride(buf10, (64, 240, 1, 1), (240, 1, 1, 1), 'torch.ops.aten.convolution.default')
        del arg13_1
        del buf9
        buf11 = buf4; del buf4  # reuse
        # Topologically Sorted Source Nodes: [input_6, s, conv2d_2, relu, conv2d_3, s_1, mul], Original ATen: [aten.hardswish, aten.mean, aten.convolution, aten.relu, aten.hardsigmoid, aten.mul]
        stream0 = get_raw_stream(0)
        triton_poi_fused_convolution_hardsigmoid_hardswish_mean_mul_relu_4.run(buf5, buf10, arg14_1, buf11, 15360, 784, stream=stream0)
        del arg14_1
        del buf10
        del buf5
        # Topologically Sorted Source Nodes: [input_6, s, conv2d_2, relu, conv2d_3, s_1, mul, input_7], Original ATen: [aten.hardswish, aten.mean, aten.convolution, aten.relu, aten.hardsigmoid, aten.mul]
        buf12 = extern_kernels.convolution(buf11, arg15_1, stride=(1, 1), padding=(0, 0), dilation=(1, 1), transposed=False, output_padding=(0, 0), groups=1, bias=None)
        assert_size_stride(buf12, (64, 40, 28, 28), (31360, 1, 1120, 40), 'torch.ops.aten.convolution.default')
        del arg15_1
        del buf11
        buf13 = empty_strided_cuda((64, 40, 28, 28), (31360, 784, 28, 1), torch.bfloat16)
        # Topologically Sorted Source Nodes: [input_8, add], Original ATen: [aten._native_batch_norm_legit_no_training, aten.add]
        stream0 = get_raw_stream(0)
        triton_poi_fused__native_batch_norm_legit_no_training_add_5.run(arg1_1, buf12, arg16_1, arg17_1, arg18_1, arg19_1, buf13, 2560, 784, stream=stream0)
        del arg16_1
        del arg17_1
        del arg18_1
        del arg19_1
        del arg1_1
        del buf12
    return (buf13, )


async_compile.wait(globals())
del async_compile

class Runner:
    def __init__(self, partitions):
        self.partitions = partitions

    def recursively_apply_fns(self, fns):
        new_callables = []
        for fn, c in zip(fns, self.partitions):
            new_callables.append(fn(c))
        self.partitions = new_callables

    def call(self, args):
        arg0_1, arg1_1, arg2_1, arg3_1, arg4_1, arg5_1, arg6_1, arg7_1, arg8_1, arg9_1, arg10_1, arg11_1, arg12_1, arg13_1, arg14_1, arg15_1, arg16_1, arg17_1, arg18_1, arg19_1 = args
        args.clear()
        partition0_args = [arg1_1, arg0_1, arg2_1, arg3_1, arg4_1, arg5_1, arg6_1, arg7_1, arg8_1, arg9_1, arg10_1, arg11_1, arg12_1, arg13_1, arg14_1, arg15_1, arg16_1, arg17_1, arg18_1, arg19_1]
        del arg1_1, arg0_1, arg2_1, arg3_1, arg4_1, arg5_1, arg6_1, arg7_1, arg8_1, arg9_1, arg10_1, arg11_1, arg12_1, arg13_1, arg14_1, arg15_1, arg16_1, arg17_1, arg18_1, arg19_1
        (buf13,) = self.partitions[0](partition0_args)
        del partition0_args
        return (buf13, )

runner = Runner(partitions=[partition_0,])
call = runner.call
recursively_apply_fns = runner.recursively_apply_fns


def get_args():
    from torch._dynamo.testing import rand_strided
    arg0_1 = rand_strided((240, 40, 1, 1), (40, 1, 1, 1), device='cuda:0', dtype=torch.bfloat16)
    arg1_1 = rand_strided((64, 40, 28, 28), (31360, 784, 28, 1), device='cuda:0', dtype=torch.bfloat16)
    arg2_1 = rand_strided((240, ), (1, ), device='cuda:0', dtype=torch.bfloat16)
    arg3_1 = rand_strided((240, ), (1, ), device='cuda:0', dtype=torch.bfloat16)
    arg4_1 = rand_strided((240, ), (1, ), device='cuda:0', dtype=torch.bfloat16)
    arg5_1 = rand_strided((240, ), (1, ), device='cuda:0', dtype=torch.bfloat16)
    arg6_1 = rand_strided((240, 1, 5, 5), (25, 25, 5, 1), device='cuda:0', dtype=torch.bfloat16)
    arg7_1 = rand_strided((240, ), (1, ), device='cuda:0', dtype=torch.bfloat16)
    arg8_1 = rand_strided((240, ), (1, ), device='cuda:0', dtype=torch.bfloat16)
    arg9_1 = rand_strided((240, ), (1, ), device='cuda:0', dtype=torch.bfloat16)
    arg10_1 = rand_strided((240, ), (1, ), device='cuda:0', dtype=torch.bfloat16)
    arg11_1 = rand_strided((60, 240, 1, 1), (240, 1, 1, 1), device='cuda:0', dtype=torch.bfloat16)
    arg12_1 = rand_strided((60, ), (1, ), device='cuda:0', dtype=torch.bfloat16)
    arg13_1 = rand_strided((240, 60, 1, 1), (60, 1, 1, 1), device='cuda:0', dtype=torch.bfloat16)
    arg14_1 = rand_strided((240, ), (1, ), device='cuda:0', dtype=torch.bfloat16)
    arg15_1 = rand_strided((40, 240, 1, 1), (240, 1, 1, 1), device='cuda:0', dtype=torch.bfloat16)
    arg16_1 = rand_strided((40, ), (1, ), device='cuda:0', dtype=torch.bfloat16)
    arg17_1 = rand_strided((40, ), (1, ), device='cuda:0', dtype=torch.bfloat16)
    arg18_1 = rand_strided((40, ), (1, ), device='cuda:0', dtype=torch.bfloat16)
    arg19_1 = rand_strided((40, ), (1, ), device='cuda:0', dtype=torch.bfloat16)
    return [arg0_1, arg1_1, arg2_1, arg3_1, arg4_1, arg5_1, arg6_1, arg7_1, arg8_1, arg9_1, arg10_1, arg11_1, arg12_1, arg13_1, arg14_1, arg15_1, arg16_1, arg17_1, arg18_1, arg19_1]


def benchmark_compiled_module(args, times=10, repeat=10):
    from torch._inductor.utils import print_performance
    fn = lambda: call(list(args))
    return print_performance(fn, times=times, repeat=repeat)


if __name__ == "__main__":
    from torch._inductor.wrapper_benchmark import compiled_module_main
    args = get_args()
    compiled_module_main('None', lambda times, repeat: benchmark_compiled_module(args, times=times, repeat=repeat))
