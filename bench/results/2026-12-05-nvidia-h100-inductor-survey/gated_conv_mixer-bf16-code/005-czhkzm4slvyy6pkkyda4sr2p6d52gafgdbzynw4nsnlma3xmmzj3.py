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



# kernel path: /tmp/inductor-gated_conv_mixer-bf16-4he9bxct/k4/ck4ym7p7pd5ggrbdmon2s3amzu4asctmz7odm2rsv3e5c5mukbdj.py
# Topologically Sorted Source Nodes: [pow_1, mean, add, rsqrt, mul, h], Original ATen: [aten.pow, aten.mean, aten.add, aten.rsqrt, aten.mul]
# Source node to ATen node mapping:
#   add => add
#   h => mul_1
#   mean => mean
#   mul => mul
#   pow_1 => pow_1
#   rsqrt => rsqrt
# Graph fragment:
#   %arg0_1 : Tensor "bf16[8, 1024, 512][524288, 512, 1]cuda:0" = PlaceHolder[target=arg0_1]
#   %buf0 : Tensor "f32[8, 1024, 1][1024, 1, 8192]cuda:0" = PlaceHolder[target=buf0]
#   %arg1_1 : Tensor "bf16[512][1]cuda:0" = PlaceHolder[target=arg1_1]
#   %pow_1 : Tensor "bf16[8, 1024, 512][524288, 512, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.pow.Tensor_Scalar](args = (%arg0_1, 2), kwargs = {})
#   %mean : Tensor "bf16[8, 1024, 1][1024, 1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mean.dim](args = (%pow_1, [-1], True), kwargs = {})
#   %add : Tensor "bf16[8, 1024, 1][1024, 1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.add.Tensor](args = (%mean, 1e-05), kwargs = {})
#   %rsqrt : Tensor "bf16[8, 1024, 1][1024, 1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.rsqrt.default](args = (%add,), kwargs = {})
#   %mul : Tensor "bf16[8, 1024, 512][524288, 512, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%arg0_1, %rsqrt), kwargs = {})
#   %mul_1 : Tensor "bf16[8, 1024, 512][524288, 512, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%mul, %arg1_1), kwargs = {})
#   return %buf0,%mul_1
triton_per_fused_add_mean_mul_pow_rsqrt_0 = async_compile.triton('triton_per_fused_add_mean_mul_pow_rsqrt_0', '''
import triton
import triton.language as tl

from torch._inductor.runtime import triton_helpers, triton_heuristics
from torch._inductor.runtime.triton_helpers import libdevice, math as tl_math
from torch._inductor.runtime.hints import AutotuneHint, ReductionHint, TileHint, DeviceProperties
triton_helpers.set_driver_to_gpu()

@triton_heuristics.persistent_reduction(
    size_hints={'x': 8192, 'r0_': 512},
    reduction_hint=ReductionHint.INNER,
    filename=__file__,
    triton_meta={'signature': {'in_ptr0': '*bf16', 'in_ptr1': '*bf16', 'out_ptr1': '*bf16', 'xnumel': 'i32', 'r0_numel': 'i32', 'XBLOCK': 'constexpr'}, 'device': DeviceProperties(type='cuda', index=0, multi_processor_count=132, cc=90, major=9, regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048, max_threads_per_block=1024, warp_size=32), 'constants': {}, 'native_matmul': False, 'enable_fp_fusion': True, 'launch_pdl': False, 'disable_ftz': False, 'configs': [{(0,): [['tt.divisibility', 16]], (1,): [['tt.divisibility', 16]], (2,): [['tt.divisibility', 16]], (3,): [['tt.divisibility', 16]], (4,): [['tt.divisibility', 16]]}]},
    inductor_meta={'grid_type': 'Grid1D', 'autotune_hints': set(), 'kernel_name': 'triton_per_fused_add_mean_mul_pow_rsqrt_0', 'mutated_arg_names': [], 'optimize_mem': True, 'no_x_dim': None, 'atomic_add_found': False, 'num_load': 2, 'num_store': 1, 'num_reduction': 1, 'backend_hash': '91D1D1166449D9E2EB66EB9770C9E2C3B0FEB787341F27FEB4D3F0338DA50336', 'assert_indirect_indexing': True, 'autotune_local_cache': True, 'autotune_pointwise': True, 'autotune_remote_cache': None, 'force_disable_caches': False, 'dynamic_scale_rblock': True, 'max_autotune': False, 'max_autotune_pointwise': False, 'min_split_scan_rblock': 256, 'spill_threshold': 16, 'store_cubin': False, 'deterministic': False, 'force_filter_reduction_configs': False, 'mix_order_reduction_allow_multi_stages': False, 'are_deterministic_algorithms_enabled': False, 'tiling_scores': {'x': 0, 'r0_': 25166848}}
)
@triton.jit
def triton_per_fused_add_mean_mul_pow_rsqrt_0(in_ptr0, in_ptr1, out_ptr1, xnumel, r0_numel, XBLOCK : tl.constexpr):
    xnumel = 8192
    r0_numel = 512
    R0_BLOCK: tl.constexpr = 512
    rnumel = r0_numel
    RBLOCK: tl.constexpr = R0_BLOCK
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:, None]
    xmask = tl.full([XBLOCK], True, tl.int1)[:, None]
    r0_index = tl.arange(0, R0_BLOCK)[None, :]
    r0_offset = 0
    r0_mask = tl.full([R0_BLOCK], True, tl.int1)[None, :]
    roffset = r0_offset
    rindex = r0_index
    r0_1 = r0_index
    x0 = xindex
    tmp0 = tl.load(in_ptr0 + (r0_1 + 512*x0), None).to(tl.float32)
    tmp13 = tl.load(in_ptr1 + (r0_1), None, eviction_policy='evict_last').to(tl.float32)
    tmp1 = tmp0 * tmp0
    tmp2 = tmp1.to(tl.float32)
    tmp3 = tl.broadcast_to(tmp2, [XBLOCK, R0_BLOCK])
    tmp5 = tl.sum(tmp3, 1)[:, None].to(tl.float32)
    tmp6 = tl.full([1, 1], 512.0, tl.float32)
    tmp7 = (tmp5 / tmp6)
    tmp8 = tmp7.to(tl.float32)
    tmp9 = tl.full([1, 1], 1e-05, tl.float32)
    tmp10 = tmp8 + tmp9
    tmp11 = libdevice.rsqrt(tmp10)
    tmp12 = tmp0 * tmp11
    tmp14 = tmp12 * tmp13
    tl.store(out_ptr1 + (r0_1 + 512*x0), tmp14, None)
''', device_str='cuda')


# kernel path: /tmp/inductor-gated_conv_mixer-bf16-4he9bxct/n5/cn5rcymbll7zokg6ljovqfh2gjeq5ct5ke2dw2lngyjfu6tm2snf.py
# Topologically Sorted Source Nodes: [linear, chunk, transpose, conv1d], Original ATen: [aten._unsafe_view, aten.split, aten.transpose, aten.convolution]
# Source node to ATen node mapping:
#   chunk => split
#   conv1d => convolution
#   linear => view_1
#   transpose => permute_1
# Graph fragment:
#   %mm : Tensor "bf16[8192, 1024][1024, 1]cuda:0" = PlaceHolder[target=mm]
#   %view_1 : Tensor "bf16[8, 1024, 1024][1048576, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.reshape.default](args = (%mm, [8, 1024, 1024]), kwargs = {})
#   %split : [num_users=2] = call_function[target=torch.ops.aten.split.Tensor](args = (%view_1, 512, -1), kwargs = {})
#   %permute_1 : Tensor "bf16[8, 512, 1024][1048576, 1, 1024]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.permute.default](args = (%getitem, [0, 2, 1]), kwargs = {})
#   %convolution : Tensor "bf16[8, 512, 1027][525824, 1027, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.convolution.default](args = (%permute_1, %arg3_1, %arg4_1, [1], [3], [1], False, [0], 512), kwargs = {})
#   return %buf3
triton_poi_fused__unsafe_view_convolution_split_transpose_1 = async_compile.triton('triton_poi_fused__unsafe_view_convolution_split_transpose_1', '''
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
    inductor_meta={'grid_type': 'Grid2D', 'autotune_hints': set(), 'kernel_name': 'triton_poi_fused__unsafe_view_convolution_split_transpose_1', 'mutated_arg_names': [], 'optimize_mem': True, 'no_x_dim': False, 'atomic_add_found': False, 'num_load': 1, 'num_store': 1, 'num_reduction': 0, 'backend_hash': '91D1D1166449D9E2EB66EB9770C9E2C3B0FEB787341F27FEB4D3F0338DA50336', 'assert_indirect_indexing': True, 'autotune_local_cache': True, 'autotune_pointwise': True, 'autotune_remote_cache': None, 'force_disable_caches': False, 'dynamic_scale_rblock': True, 'max_autotune': False, 'max_autotune_pointwise': False, 'min_split_scan_rblock': 256, 'spill_threshold': 16, 'store_cubin': False, 'deterministic': False, 'force_filter_reduction_configs': False, 'mix_order_reduction_allow_multi_stages': False, 'are_deterministic_algorithms_enabled': False, 'tiling_scores': {'y': 8388608, 'x': 16777216}},
    min_elem_per_thread=0
)
@triton.jit
def triton_poi_fused__unsafe_view_convolution_split_transpose_1(in_ptr0, out_ptr0, ynumel, xnumel, YBLOCK : tl.constexpr, XBLOCK : tl.constexpr):
    ynumel = 4096
    xnumel = 1024
    yoffset = tl.program_id(1) * YBLOCK
    yindex = yoffset + tl.arange(0, YBLOCK)[:, None]
    ymask = tl.full([YBLOCK], True, tl.int1)[:, None]
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[None, :]
    xmask = xindex < xnumel
    x2 = xindex
    y0 = (yindex % 512)
    y1 = yindex // 512
    y3 = yindex
    tmp0 = tl.load(in_ptr0 + (y0 + 1024*x2 + 1048576*y1), xmask, eviction_policy='evict_last').to(tl.float32)
    tl.store(out_ptr0 + (x2 + 1024*y3), tmp0, xmask)
''', device_str='cuda')


# kernel path: /tmp/inductor-gated_conv_mixer-bf16-4he9bxct/c6/cc6lrxskhzkc4rm3vh5qklpidcv7pe4i7tjkilj6pgkiudptzyii.py
# Topologically Sorted Source Nodes: [linear, chunk, transpose, conv1d, getitem_2, v_1, v_2, exp, decay, neg_1, arange, steps, mul_2, exp_1, scaled, cumsum, mul_4, exp_2, mul_5, mixed, sigmoid, mul_6], Original ATen: [aten._unsafe_view, aten.split, aten.transpose, aten.convolution, aten.slice, aten.silu, aten.exp, aten.neg, aten.arange, aten.unsqueeze, aten.mul, aten.cumsum, aten.div, aten.sigmoid]
# Source node to ATen node mapping:
#   arange => add_2, convert_element_type_4, iota, mul_2
#   chunk => split
#   conv1d => convolution
#   cumsum => cumsum
#   decay => neg_1
#   exp => exp_1
#   exp_1 => exp_2
#   exp_2 => exp_3
#   getitem_2 => slice_1
#   linear => view_1
#   mixed => div_1
#   mul_2 => mul_3
#   mul_4 => mul_5
#   mul_5 => mul_6
#   mul_6 => mul_7
#   neg_1 => neg_2
#   scaled => mul_4
#   sigmoid => sigmoid
#   steps => unsqueeze
#   transpose => permute_1
#   v_1 => permute_2
#   v_2 => add_1, convert_element_type_2, convert_element_type_3, div, exp, neg
# Graph fragment:
#   %buf4 : Tensor "bf16[8, 512, 1027][525824, 1027, 1]cuda:0" = PlaceHolder[target=buf4]
#   %arg4_1 : Tensor "bf16[512][1]cuda:0" = PlaceHolder[target=arg4_1]
#   %arg5_1 : Tensor "bf16[512][1]cuda:0" = PlaceHolder[target=arg5_1]
#   %cumsum : Tensor "bf16[8, 1024, 512][524288, 512, 1]cuda:0" = PlaceHolder[target=cumsum]
#   %mm : Tensor "bf16[8192, 1024][1024, 1]cuda:0" = PlaceHolder[target=mm]
#   %view_1 : Tensor "bf16[8, 1024, 1024][1048576, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.reshape.default](args = (%mm, [8, 1024, 1024]), kwargs = {})
#   %split : [num_users=2] = call_function[target=torch.ops.aten.split.Tensor](args = (%view_1, 512, -1), kwargs = {})
#   %permute_1 : Tensor "bf16[8, 512, 1024][1048576, 1, 1024]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.permute.default](args = (%getitem, [0, 2, 1]), kwargs = {})
#   %convolution : Tensor "bf16[8, 512, 1027][525824, 1027, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.convolution.default](args = (%permute_1, %arg3_1, %arg4_1, [1], [3], [1], False, [0], 512), kwargs = {})
#   %slice_1 : Tensor "bf16[8, 512, 1024][525824, 1027, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.slice.Tensor](args = (%convolution, 2, 0, 1024), kwargs = {})
#   %permute_2 : Tensor "bf16[8, 1024, 512][525824, 1, 1027]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.permute.default](args = (%slice_1, [0, 2, 1]), kwargs = {})
#   %convert_element_type_2 : Tensor "f32[8, 1024, 512][524288, 1, 1024]cuda:0"[num_users=2] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%permute_2, torch.float32), kwargs = {})
#   %neg : Tensor "f32[8, 1024, 512][524288, 1, 1024]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.neg.default](args = (%convert_element_type_2,), kwargs = {})
#   %exp : Tensor "f32[8, 1024, 512][524288, 1, 1024]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.exp.default](args = (%neg,), kwargs = {})
#   %add_1 : Tensor "f32[8, 1024, 512][524288, 1, 1024]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.add.Tensor](args = (%exp, 1), kwargs = {})
#   %div : Tensor "f32[8, 1024, 512][524288, 1, 1024]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.div.Tensor](args = (%convert_element_type_2, %add_1), kwargs = {})
#   %convert_element_type_3 : Tensor "bf16[8, 1024, 512][524288, 1, 1024]cuda:0"[num_users=1] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%div, torch.bfloat16), kwargs = {})
#   %exp_1 : Tensor "bf16[512][1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.exp.default](args = (%arg5_1,), kwargs = {})
#   %neg_1 : Tensor "bf16[512][1]cuda:0"[num_users=2] = call_function[target=torch.ops.aten.neg.default](args = (%exp_1,), kwargs = {})
#   %neg_2 : Tensor "bf16[512][1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.neg.default](args = (%neg_1,), kwargs = {})
#   %iota : Tensor "i64[1024][1]cuda:0"[num_users=1] = call_function[target=torch.ops.prims.iota.default](args = (1024,), kwargs = {start: 0, step: 1, dtype: torch.int64, device: cuda:0, requires_grad: False})
#   %mul_2 : Tensor "i64[1024][1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%iota, 1), kwargs = {})
#   %add_2 : Tensor "i64[1024][1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.add.Tensor](args = (%mul_2, 0), kwargs = {})
#   %convert_element_type_4 : Tensor "bf16[1024][1]cuda:0"[num_users=1] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%add_2, torch.bfloat16), kwargs = {})
#   %unsqueeze : Tensor "bf16[1024, 1][1, 1]cuda:0"[num_users=2] = call_function[target=torch.ops.aten.unsqueeze.default](args = (%convert_element_type_4, 1), kwargs = {})
#   %mul_3 : Tensor "bf16[1024, 512][512, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%neg_2, %unsqueeze), kwargs = {})
#   %exp_2 : Tensor "bf16[1024, 512][512, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.exp.default](args = (%mul_3,), kwargs = {})
#   %mul_4 : Tensor "bf16[8, 1024, 512][524288, 1, 1024]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%convert_element_type_3, %exp_2), kwargs = {})
#   %cumsum : Tensor "bf16[8, 1024, 512][524288, 512, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.cumsum.default](args = (%mul_4, 1), kwargs = {})
#   %mul_5 : Tensor "bf16[1024, 512][512, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%neg_1, %unsqueeze), kwargs = {})
#   %exp_3 : Tensor "bf16[1024, 512][512, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.exp.default](args = (%mul_5,), kwargs = {})
#   %mul_6 : Tensor "bf16[8, 1024, 512][524288, 512, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%cumsum, %exp_3), kwargs = {})
#   %div_1 : Tensor "bf16[8, 1024, 512][524288, 512, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.div.Tensor](args = (%mul_6, 1024), kwargs = {})
#   %sigmoid : Tensor "bf16[8, 1024, 512][524288, 512, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.sigmoid.default](args = (%getitem_1,), kwargs = {})
#   %mul_7 : Tensor "bf16[8, 1024, 512][524288, 512, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%div_1, %sigmoid), kwargs = {})
#   return %cumsum,%mul_7
triton_red_fused__unsafe_view_arange_convolution_cumsum_div_exp_mul_neg_sigmoid_silu_slice_split_transpose_unsqueeze_2 = async_compile.triton('triton_red_fused__unsafe_view_arange_convolution_cumsum_div_exp_mul_neg_sigmoid_silu_slice_split_transpose_unsqueeze_2', '''
import triton
import triton.language as tl

from torch._inductor.runtime import triton_helpers, triton_heuristics
from torch._inductor.runtime.triton_helpers import libdevice, math as tl_math
from torch._inductor.runtime.hints import AutotuneHint, ReductionHint, TileHint, DeviceProperties
triton_helpers.set_driver_to_gpu()

@triton.jit
def _triton_helper_fn_add0(arg0_0, arg1_0):
    tmp0 = arg0_0 + arg1_0
    return tmp0

@triton_heuristics.reduction(
    size_hints={'x': 4096, 'r0_': 1024},
    reduction_hint=ReductionHint.DEFAULT,
    filename=__file__,
    triton_meta={'signature': {'in_out_ptr0': '*bf16', 'in_ptr0': '*bf16', 'in_ptr1': '*bf16', 'in_ptr2': '*bf16', 'in_ptr3': '*bf16', 'xnumel': 'i32', 'r0_numel': 'i32', 'XBLOCK': 'constexpr', 'R0_BLOCK': 'constexpr'}, 'device': DeviceProperties(type='cuda', index=0, multi_processor_count=132, cc=90, major=9, regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048, max_threads_per_block=1024, warp_size=32), 'constants': {}, 'native_matmul': False, 'enable_fp_fusion': True, 'launch_pdl': False, 'disable_ftz': False, 'configs': [{(0,): [['tt.divisibility', 16]], (1,): [['tt.divisibility', 16]], (2,): [['tt.divisibility', 16]], (3,): [['tt.divisibility', 16]], (4,): [['tt.divisibility', 16]], (5,): [['tt.divisibility', 16]], (6,): [['tt.divisibility', 16]]}]},
    inductor_meta={'grid_type': 'Grid1D', 'autotune_hints': set(), 'kernel_name': 'triton_red_fused__unsafe_view_arange_convolution_cumsum_div_exp_mul_neg_sigmoid_silu_slice_split_transpose_unsqueeze_2', 'mutated_arg_names': ['in_out_ptr0'], 'optimize_mem': True, 'no_x_dim': False, 'atomic_add_found': False, 'num_load': 4, 'num_store': 1, 'num_reduction': 0, 'backend_hash': '91D1D1166449D9E2EB66EB9770C9E2C3B0FEB787341F27FEB4D3F0338DA50336', 'assert_indirect_indexing': True, 'autotune_local_cache': True, 'autotune_pointwise': True, 'autotune_remote_cache': None, 'force_disable_caches': False, 'dynamic_scale_rblock': True, 'max_autotune': False, 'max_autotune_pointwise': False, 'min_split_scan_rblock': 256, 'spill_threshold': 16, 'store_cubin': False, 'deterministic': False, 'force_filter_reduction_configs': False, 'mix_order_reduction_allow_multi_stages': False, 'are_deterministic_algorithms_enabled': False, 'tiling_scores': {'x': 25167872, 'r0_': 8388608}}
)
@triton.jit
def triton_red_fused__unsafe_view_arange_convolution_cumsum_div_exp_mul_neg_sigmoid_silu_slice_split_transpose_unsqueeze_2(in_out_ptr0, in_ptr0, in_ptr1, in_ptr2, in_ptr3, xnumel, r0_numel, XBLOCK : tl.constexpr, R0_BLOCK : tl.constexpr):
    xnumel = 4096
    r0_numel = 1024
    rnumel = r0_numel
    RBLOCK: tl.constexpr = R0_BLOCK
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:, None]
    xmask = tl.full([XBLOCK], True, tl.int1)[:, None]
    r0_base = tl.arange(0, R0_BLOCK)[None, :]
    rbase = r0_base
    x3 = xindex
    x0 = (xindex % 512)
    tmp1 = tl.load(in_ptr1 + (x0), None, eviction_policy='evict_last').to(tl.float32)
    tmp10 = tl.load(in_ptr2 + (x0), None, eviction_policy='evict_last').to(tl.float32)
    tmp21 = tl.full([XBLOCK, 1], float('nan'), tl.float32)
    x1 = xindex // 512
    for r0_offset in tl.range(0, r0_numel, R0_BLOCK):
        r0_index = r0_offset + r0_base
        r0_mask = r0_index < r0_numel
        roffset = r0_offset
        rindex = r0_index
        r0_2 = r0_index
        tmp0 = tl.load(in_ptr0 + (r0_2 + 1027*x3), r0_mask, eviction_policy='evict_first', other=0.0).to(tl.float32)
        tmp32 = tl.load(in_ptr3 + (512 + x0 + 1024*r0_2 + 1048576*x1), r0_mask, eviction_policy='evict_first', other=0.0).to(tl.float32)
        tmp2 = tmp0 + tmp1
        tmp3 = tmp2.to(tl.float32)
        tmp4 = -tmp3
        tmp5 = libdevice.exp(tmp4)
        tmp6 = tl.full([1, 1], 1.0, tl.float32)
        tmp7 = tmp5 + tmp6
        tmp8 = (tmp3 / tmp7)
        tmp9 = tmp8.to(tl.float32)
        tmp11 = libdevice.exp(tmp10)
        tmp12 = -tmp11
        tmp13 = -tmp12
        tmp14 = r0_2
        tmp15 = tmp14.to(tl.float32)
        tmp16 = tmp13 * tmp15
        tmp17 = libdevice.exp(tmp16)
        tmp18 = tmp9 * tmp17
        tmp19 = tmp18.to(tl.float32)
        tmp20 = tl.broadcast_to(tmp19, [XBLOCK, R0_BLOCK])
        tmp22, = tl.associative_scan((tmp20,), 1, _triton_helper_fn_add0)
        tmp23 = triton_helpers.select_one((tmp22), rbase == (RBLOCK - 1), dim=-1, keep_dims=True)
        tmp24 = tmp21 + tmp23
        tmp25 = tmp21 + tmp22
        tmp26 = tl.where(roffset > 0, tmp25, tmp22)
        tmp21 = tl.where(roffset > 0, tmp24, tmp23)
        tmp27 = tmp12 * tmp15
        tmp28 = libdevice.exp(tmp27)
        tmp29 = tmp26 * tmp28
        tmp30 = tl.full([1, 1], 0.0009765625, tl.float32)
        tmp31 = tmp29 * tmp30
        tmp33 = tl.sigmoid(tmp32)
        tmp34 = tmp31 * tmp33
        tl.store(in_out_ptr0 + (x0 + 512*r0_2 + 524288*x1), tmp34, r0_mask)
''', device_str='cuda')


# kernel path: /tmp/inductor-gated_conv_mixer-bf16-4he9bxct/mq/cmqyxkloz4is64ysnmjykeqfpfygdpczkyiicjubserr446sj7ko.py
# Topologically Sorted Source Nodes: [linear_1, x, pow_2, mean_1, add_2, rsqrt_1, mul_7, h_1], Original ATen: [aten._unsafe_view, aten.add, aten.pow, aten.mean, aten.rsqrt, aten.mul]
# Source node to ATen node mapping:
#   add_2 => add_4
#   h_1 => mul_9
#   linear_1 => view_3
#   mean_1 => mean_1
#   mul_7 => mul_8
#   pow_2 => pow_2
#   rsqrt_1 => rsqrt_1
#   x => add_3
# Graph fragment:
#   %arg0_1 : Tensor "bf16[8, 1024, 512][524288, 512, 1]cuda:0" = PlaceHolder[target=arg0_1]
#   %mm_1 : Tensor "bf16[8192, 512][512, 1]cuda:0" = PlaceHolder[target=mm_1]
#   %buf8 : Tensor "f32[8, 1024, 1][1024, 1, 8192]cuda:0" = PlaceHolder[target=buf8]
#   %arg7_1 : Tensor "bf16[512][1]cuda:0" = PlaceHolder[target=arg7_1]
#   %view_3 : Tensor "bf16[8, 1024, 512][524288, 512, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.reshape.default](args = (%mm_1, [8, 1024, 512]), kwargs = {})
#   %add_3 : Tensor "bf16[8, 1024, 512][524288, 512, 1]cuda:0"[num_users=3] = call_function[target=torch.ops.aten.add.Tensor](args = (%arg0_1, %view_3), kwargs = {})
#   %pow_2 : Tensor "bf16[8, 1024, 512][524288, 512, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.pow.Tensor_Scalar](args = (%add_3, 2), kwargs = {})
#   %mean_1 : Tensor "bf16[8, 1024, 1][1024, 1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mean.dim](args = (%pow_2, [-1], True), kwargs = {})
#   %add_4 : Tensor "bf16[8, 1024, 1][1024, 1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.add.Tensor](args = (%mean_1, 1e-05), kwargs = {})
#   %rsqrt_1 : Tensor "bf16[8, 1024, 1][1024, 1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.rsqrt.default](args = (%add_4,), kwargs = {})
#   %mul_8 : Tensor "bf16[8, 1024, 512][524288, 512, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%add_3, %rsqrt_1), kwargs = {})
#   %mul_9 : Tensor "bf16[8, 1024, 512][524288, 512, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%mul_8, %arg7_1), kwargs = {})
#   return %buf8,%mul_9
triton_per_fused__unsafe_view_add_mean_mul_pow_rsqrt_3 = async_compile.triton('triton_per_fused__unsafe_view_add_mean_mul_pow_rsqrt_3', '''
import triton
import triton.language as tl

from torch._inductor.runtime import triton_helpers, triton_heuristics
from torch._inductor.runtime.triton_helpers import libdevice, math as tl_math
from torch._inductor.runtime.hints import AutotuneHint, ReductionHint, TileHint, DeviceProperties
triton_helpers.set_driver_to_gpu()

@triton_heuristics.persistent_reduction(
    size_hints={'x': 8192, 'r0_': 512},
    reduction_hint=ReductionHint.INNER,
    filename=__file__,
    triton_meta={'signature': {'in_ptr0': '*bf16', 'in_ptr1': '*bf16', 'in_ptr2': '*bf16', 'out_ptr1': '*bf16', 'xnumel': 'i32', 'r0_numel': 'i32', 'XBLOCK': 'constexpr'}, 'device': DeviceProperties(type='cuda', index=0, multi_processor_count=132, cc=90, major=9, regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048, max_threads_per_block=1024, warp_size=32), 'constants': {}, 'native_matmul': False, 'enable_fp_fusion': True, 'launch_pdl': False, 'disable_ftz': False, 'configs': [{(0,): [['tt.divisibility', 16]], (1,): [['tt.divisibility', 16]], (2,): [['tt.divisibility', 16]], (3,): [['tt.divisibility', 16]], (4,): [['tt.divisibility', 16]], (5,): [['tt.divisibility', 16]]}]},
    inductor_meta={'grid_type': 'Grid1D', 'autotune_hints': set(), 'kernel_name': 'triton_per_fused__unsafe_view_add_mean_mul_pow_rsqrt_3', 'mutated_arg_names': [], 'optimize_mem': True, 'no_x_dim': None, 'atomic_add_found': False, 'num_load': 3, 'num_store': 1, 'num_reduction': 1, 'backend_hash': '91D1D1166449D9E2EB66EB9770C9E2C3B0FEB787341F27FEB4D3F0338DA50336', 'assert_indirect_indexing': True, 'autotune_local_cache': True, 'autotune_pointwise': True, 'autotune_remote_cache': None, 'force_disable_caches': False, 'dynamic_scale_rblock': True, 'max_autotune': False, 'max_autotune_pointwise': False, 'min_split_scan_rblock': 256, 'spill_threshold': 16, 'store_cubin': False, 'deterministic': False, 'force_filter_reduction_configs': False, 'mix_order_reduction_allow_multi_stages': False, 'are_deterministic_algorithms_enabled': False, 'tiling_scores': {'x': 0, 'r0_': 33555456}}
)
@triton.jit
def triton_per_fused__unsafe_view_add_mean_mul_pow_rsqrt_3(in_ptr0, in_ptr1, in_ptr2, out_ptr1, xnumel, r0_numel, XBLOCK : tl.constexpr):
    xnumel = 8192
    r0_numel = 512
    R0_BLOCK: tl.constexpr = 512
    rnumel = r0_numel
    RBLOCK: tl.constexpr = R0_BLOCK
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:, None]
    xmask = tl.full([XBLOCK], True, tl.int1)[:, None]
    r0_index = tl.arange(0, R0_BLOCK)[None, :]
    r0_offset = 0
    r0_mask = tl.full([R0_BLOCK], True, tl.int1)[None, :]
    roffset = r0_offset
    rindex = r0_index
    r0_1 = r0_index
    x0 = xindex
    tmp0 = tl.load(in_ptr0 + (r0_1 + 512*x0), None).to(tl.float32)
    tmp1 = tl.load(in_ptr1 + (r0_1 + 512*x0), None).to(tl.float32)
    tmp15 = tl.load(in_ptr2 + (r0_1), None, eviction_policy='evict_last').to(tl.float32)
    tmp2 = tmp0 + tmp1
    tmp3 = tmp2 * tmp2
    tmp4 = tmp3.to(tl.float32)
    tmp5 = tl.broadcast_to(tmp4, [XBLOCK, R0_BLOCK])
    tmp7 = tl.sum(tmp5, 1)[:, None].to(tl.float32)
    tmp8 = tl.full([1, 1], 512.0, tl.float32)
    tmp9 = (tmp7 / tmp8)
    tmp10 = tmp9.to(tl.float32)
    tmp11 = tl.full([1, 1], 1e-05, tl.float32)
    tmp12 = tmp10 + tmp11
    tmp13 = libdevice.rsqrt(tmp12)
    tmp14 = tmp2 * tmp13
    tmp16 = tmp14 * tmp15
    tl.store(out_ptr1 + (r0_1 + 512*x0), tmp16, None)
''', device_str='cuda')


# kernel path: /tmp/inductor-gated_conv_mixer-bf16-4he9bxct/zn/cznsfkid7sgap6nixjdgtdt5c4fgtb4h4nadmsiqulx2wp4a3qa2.py
# Topologically Sorted Source Nodes: [linear_1, x, linear_3, x_1, pow_3, mean_2, add_4, rsqrt_2, mul_14, h_2], Original ATen: [aten._unsafe_view, aten.add, aten.pow, aten.mean, aten.rsqrt, aten.mul]
# Source node to ATen node mapping:
#   add_4 => add_8
#   h_2 => mul_17
#   linear_1 => view_3
#   linear_3 => view_7
#   mean_2 => mean_2
#   mul_14 => mul_16
#   pow_3 => pow_3
#   rsqrt_2 => rsqrt_2
#   x => add_3
#   x_1 => add_7
# Graph fragment:
#   %arg0_1 : Tensor "bf16[8, 1024, 512][524288, 512, 1]cuda:0" = PlaceHolder[target=arg0_1]
#   %mm_1 : Tensor "bf16[8192, 512][512, 1]cuda:0" = PlaceHolder[target=mm_1]
#   %mm_3 : Tensor "bf16[8192, 512][512, 1]cuda:0" = PlaceHolder[target=mm_3]
#   %buf16 : Tensor "f32[8, 1024, 1][1024, 1, 8192]cuda:0" = PlaceHolder[target=buf16]
#   %arg13_1 : Tensor "bf16[512][1]cuda:0" = PlaceHolder[target=arg13_1]
#   %view_3 : Tensor "bf16[8, 1024, 512][524288, 512, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.reshape.default](args = (%mm_1, [8, 1024, 512]), kwargs = {})
#   %add_3 : Tensor "bf16[8, 1024, 512][524288, 512, 1]cuda:0"[num_users=3] = call_function[target=torch.ops.aten.add.Tensor](args = (%arg0_1, %view_3), kwargs = {})
#   %view_7 : Tensor "bf16[8, 1024, 512][524288, 512, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.reshape.default](args = (%mm_3, [8, 1024, 512]), kwargs = {})
#   %add_7 : Tensor "bf16[8, 1024, 512][524288, 512, 1]cuda:0"[num_users=3] = call_function[target=torch.ops.aten.add.Tensor](args = (%add_3, %view_7), kwargs = {})
#   %pow_3 : Tensor "bf16[8, 1024, 512][524288, 512, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.pow.Tensor_Scalar](args = (%add_7, 2), kwargs = {})
#   %mean_2 : Tensor "bf16[8, 1024, 1][1024, 1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mean.dim](args = (%pow_3, [-1], True), kwargs = {})
#   %add_8 : Tensor "bf16[8, 1024, 1][1024, 1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.add.Tensor](args = (%mean_2, 1e-05), kwargs = {})
#   %rsqrt_2 : Tensor "bf16[8, 1024, 1][1024, 1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.rsqrt.default](args = (%add_8,), kwargs = {})
#   %mul_16 : Tensor "bf16[8, 1024, 512][524288, 512, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%add_7, %rsqrt_2), kwargs = {})
#   %mul_17 : Tensor "bf16[8, 1024, 512][524288, 512, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%mul_16, %arg13_1), kwargs = {})
#   return %buf16,%mul_17
triton_per_fused__unsafe_view_add_mean_mul_pow_rsqrt_4 = async_compile.triton('triton_per_fused__unsafe_view_add_mean_mul_pow_rsqrt_4', '''
import triton
import triton.language as tl

from torch._inductor.runtime import triton_helpers, triton_heuristics
from torch._inductor.runtime.triton_helpers import libdevice, math as tl_math
from torch._inductor.runtime.hints import AutotuneHint, ReductionHint, TileHint, DeviceProperties
triton_helpers.set_driver_to_gpu()

@triton_heuristics.persistent_reduction(
    size_hints={'x': 8192, 'r0_': 512},
    reduction_hint=ReductionHint.INNER,
    filename=__file__,
    triton_meta={'signature': {'in_ptr0': '*bf16', 'in_ptr1': '*bf16', 'in_ptr2': '*bf16', 'in_ptr3': '*bf16', 'out_ptr1': '*bf16', 'xnumel': 'i32', 'r0_numel': 'i32', 'XBLOCK': 'constexpr'}, 'device': DeviceProperties(type='cuda', index=0, multi_processor_count=132, cc=90, major=9, regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048, max_threads_per_block=1024, warp_size=32), 'constants': {}, 'native_matmul': False, 'enable_fp_fusion': True, 'launch_pdl': False, 'disable_ftz': False, 'configs': [{(0,): [['tt.divisibility', 16]], (1,): [['tt.divisibility', 16]], (2,): [['tt.divisibility', 16]], (3,): [['tt.divisibility', 16]], (4,): [['tt.divisibility', 16]], (5,): [['tt.divisibility', 16]], (6,): [['tt.divisibility', 16]]}]},
    inductor_meta={'grid_type': 'Grid1D', 'autotune_hints': set(), 'kernel_name': 'triton_per_fused__unsafe_view_add_mean_mul_pow_rsqrt_4', 'mutated_arg_names': [], 'optimize_mem': True, 'no_x_dim': None, 'atomic_add_found': False, 'num_load': 4, 'num_store': 1, 'num_reduction': 1, 'backend_hash': '91D1D1166449D9E2EB66EB9770C9E2C3B0FEB787341F27FEB4D3F0338DA50336', 'assert_indirect_indexing': True, 'autotune_local_cache': True, 'autotune_pointwise': True, 'autotune_remote_cache': None, 'force_disable_caches': False, 'dynamic_scale_rblock': True, 'max_autotune': False, 'max_autotune_pointwise': False, 'min_split_scan_rblock': 256, 'spill_threshold': 16, 'store_cubin': False, 'deterministic': False, 'force_filter_reduction_configs': False, 'mix_order_reduction_allow_multi_stages': False, 'are_deterministic_algorithms_enabled': False, 'tiling_scores': {'x': 0, 'r0_': 41944064}}
)
@triton.jit
def triton_per_fused__unsafe_view_add_mean_mul_pow_rsqrt_4(in_ptr0, in_ptr1, in_ptr2, in_ptr3, out_ptr1, xnumel, r0_numel, XBLOCK : tl.constexpr):
    xnumel = 8192
    r0_numel = 512
    R0_BLOCK: tl.constexpr = 512
    rnumel = r0_numel
    RBLOCK: tl.constexpr = R0_BLOCK
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:, None]
    xmask = tl.full([XBLOCK], True, tl.int1)[:, None]
    r0_index = tl.arange(0, R0_BLOCK)[None, :]
    r0_offset = 0
    r0_mask = tl.full([R0_BLOCK], True, tl.int1)[None, :]
    roffset = r0_offset
    rindex = r0_index
    r0_1 = r0_index
    x0 = xindex
    tmp0 = tl.load(in_ptr0 + (r0_1 + 512*x0), None).to(tl.float32)
    tmp1 = tl.load(in_ptr1 + (r0_1 + 512*x0), None).to(tl.float32)
    tmp3 = tl.load(in_ptr2 + (r0_1 + 512*x0), None).to(tl.float32)
    tmp17 = tl.load(in_ptr3 + (r0_1), None, eviction_policy='evict_last').to(tl.float32)
    tmp2 = tmp0 + tmp1
    tmp4 = tmp2 + tmp3
    tmp5 = tmp4 * tmp4
    tmp6 = tmp5.to(tl.float32)
    tmp7 = tl.broadcast_to(tmp6, [XBLOCK, R0_BLOCK])
    tmp9 = tl.sum(tmp7, 1)[:, None].to(tl.float32)
    tmp10 = tl.full([1, 1], 512.0, tl.float32)
    tmp11 = (tmp9 / tmp10)
    tmp12 = tmp11.to(tl.float32)
    tmp13 = tl.full([1, 1], 1e-05, tl.float32)
    tmp14 = tmp12 + tmp13
    tmp15 = libdevice.rsqrt(tmp14)
    tmp16 = tmp4 * tmp15
    tmp18 = tmp16 * tmp17
    tl.store(out_ptr1 + (r0_1 + 512*x0), tmp18, None)
''', device_str='cuda')


# kernel path: /tmp/inductor-gated_conv_mixer-bf16-4he9bxct/wm/cwmsetozipygnhge2mkh4kpkgtgux3cacynlh35fwpykfmu7hniz.py
# Topologically Sorted Source Nodes: [linear_1, x, linear_3, x_1, linear_5, x_2], Original ATen: [aten._unsafe_view, aten.add]
# Source node to ATen node mapping:
#   linear_1 => view_3
#   linear_3 => view_7
#   linear_5 => view_11
#   x => add_3
#   x_1 => add_7
#   x_2 => add_11
# Graph fragment:
#   %arg0_1 : Tensor "bf16[8, 1024, 512][524288, 512, 1]cuda:0" = PlaceHolder[target=arg0_1]
#   %mm_1 : Tensor "bf16[8192, 512][512, 1]cuda:0" = PlaceHolder[target=mm_1]
#   %mm_3 : Tensor "bf16[8192, 512][512, 1]cuda:0" = PlaceHolder[target=mm_3]
#   %mm_5 : Tensor "bf16[8192, 512][512, 1]cuda:0" = PlaceHolder[target=mm_5]
#   %view_3 : Tensor "bf16[8, 1024, 512][524288, 512, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.reshape.default](args = (%mm_1, [8, 1024, 512]), kwargs = {})
#   %add_3 : Tensor "bf16[8, 1024, 512][524288, 512, 1]cuda:0"[num_users=3] = call_function[target=torch.ops.aten.add.Tensor](args = (%arg0_1, %view_3), kwargs = {})
#   %view_7 : Tensor "bf16[8, 1024, 512][524288, 512, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.reshape.default](args = (%mm_3, [8, 1024, 512]), kwargs = {})
#   %add_7 : Tensor "bf16[8, 1024, 512][524288, 512, 1]cuda:0"[num_users=3] = call_function[target=torch.ops.aten.add.Tensor](args = (%add_3, %view_7), kwargs = {})
#   %view_11 : Tensor "bf16[8, 1024, 512][524288, 512, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.reshape.default](args = (%mm_5, [8, 1024, 512]), kwargs = {})
#   %add_11 : Tensor "bf16[8, 1024, 512][524288, 512, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.add.Tensor](args = (%add_7, %view_11), kwargs = {})
#   return %add_11
triton_poi_fused__unsafe_view_add_5 = async_compile.triton('triton_poi_fused__unsafe_view_add_5', '''
import triton
import triton.language as tl

from torch._inductor.runtime import triton_helpers, triton_heuristics
from torch._inductor.runtime.triton_helpers import libdevice, math as tl_math
from torch._inductor.runtime.hints import AutotuneHint, ReductionHint, TileHint, DeviceProperties
triton_helpers.set_driver_to_gpu()

@triton_heuristics.pointwise(
    size_hints={'x': 4194304}, 
    filename=__file__,
    triton_meta={'signature': {'in_out_ptr0': '*bf16', 'in_ptr0': '*bf16', 'in_ptr1': '*bf16', 'in_ptr2': '*bf16', 'xnumel': 'i32', 'XBLOCK': 'constexpr'}, 'device': DeviceProperties(type='cuda', index=0, multi_processor_count=132, cc=90, major=9, regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048, max_threads_per_block=1024, warp_size=32), 'constants': {}, 'native_matmul': False, 'enable_fp_fusion': True, 'launch_pdl': False, 'disable_ftz': False, 'configs': [{(0,): [['tt.divisibility', 16]], (1,): [['tt.divisibility', 16]], (2,): [['tt.divisibility', 16]], (3,): [['tt.divisibility', 16]], (4,): [['tt.divisibility', 16]]}]},
    inductor_meta={'grid_type': 'Grid1D', 'autotune_hints': set(), 'kernel_name': 'triton_poi_fused__unsafe_view_add_5', 'mutated_arg_names': ['in_out_ptr0'], 'optimize_mem': True, 'no_x_dim': False, 'atomic_add_found': False, 'num_load': 4, 'num_store': 1, 'num_reduction': 0, 'backend_hash': '91D1D1166449D9E2EB66EB9770C9E2C3B0FEB787341F27FEB4D3F0338DA50336', 'assert_indirect_indexing': True, 'autotune_local_cache': True, 'autotune_pointwise': True, 'autotune_remote_cache': None, 'force_disable_caches': False, 'dynamic_scale_rblock': True, 'max_autotune': False, 'max_autotune_pointwise': False, 'min_split_scan_rblock': 256, 'spill_threshold': 16, 'store_cubin': False, 'deterministic': False, 'force_filter_reduction_configs': False, 'mix_order_reduction_allow_multi_stages': False, 'are_deterministic_algorithms_enabled': False, 'tiling_scores': {'x': 50331648}},
    min_elem_per_thread=0
)
@triton.jit
def triton_poi_fused__unsafe_view_add_5(in_out_ptr0, in_ptr0, in_ptr1, in_ptr2, xnumel, XBLOCK : tl.constexpr):
    xnumel = 4194304
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:]
    xmask = tl.full([XBLOCK], True, tl.int1)[:]
    x0 = xindex
    tmp0 = tl.load(in_ptr0 + (x0), None).to(tl.float32)
    tmp1 = tl.load(in_out_ptr0 + (x0), None).to(tl.float32)
    tmp3 = tl.load(in_ptr1 + (x0), None).to(tl.float32)
    tmp5 = tl.load(in_ptr2 + (x0), None).to(tl.float32)
    tmp2 = tmp0 + tmp1
    tmp4 = tmp2 + tmp3
    tmp6 = tmp4 + tmp5
    tl.store(in_out_ptr0 + (x0), tmp6, None)
''', device_str='cuda')

def partition_0(args):
    arg0_1, arg1_1, arg2_1, arg3_1, arg4_1, arg5_1, arg6_1, arg7_1, arg8_1, arg9_1, arg10_1, arg11_1, arg12_1, arg13_1, arg14_1, arg15_1, arg16_1, arg17_1, arg18_1 = args
    args.clear()
    assert_size_stride(arg0_1, (8, 1024, 512), (524288, 512, 1))
    assert_size_stride(arg1_1, (512, ), (1, ))
    assert_size_stride(arg2_1, (1024, 512), (512, 1))
    assert_size_stride(arg3_1, (512, 1, 4), (4, 4, 1))
    assert_size_stride(arg4_1, (512, ), (1, ))
    assert_size_stride(arg5_1, (512, ), (1, ))
    assert_size_stride(arg6_1, (512, 512), (512, 1))
    assert_size_stride(arg7_1, (512, ), (1, ))
    assert_size_stride(arg8_1, (1024, 512), (512, 1))
    assert_size_stride(arg9_1, (512, 1, 4), (4, 4, 1))
    assert_size_stride(arg10_1, (512, ), (1, ))
    assert_size_stride(arg11_1, (512, ), (1, ))
    assert_size_stride(arg12_1, (512, 512), (512, 1))
    assert_size_stride(arg13_1, (512, ), (1, ))
    assert_size_stride(arg14_1, (1024, 512), (512, 1))
    assert_size_stride(arg15_1, (512, 1, 4), (4, 4, 1))
    assert_size_stride(arg16_1, (512, ), (1, ))
    assert_size_stride(arg17_1, (512, ), (1, ))
    assert_size_stride(arg18_1, (512, 512), (512, 1))
    with torch.cuda._DeviceGuard(0):
        torch.cuda.set_device(0)
        buf1 = empty_strided_cuda((8, 1024, 512), (524288, 512, 1), torch.bfloat16)
        # Topologically Sorted Source Nodes: [pow_1, mean, add, rsqrt, mul, h], Original ATen: [aten.pow, aten.mean, aten.add, aten.rsqrt, aten.mul]
        stream0 = get_raw_stream(0)
        triton_per_fused_add_mean_mul_pow_rsqrt_0.run(arg0_1, arg1_1, buf1, 8192, 512, stream=stream0)
        del arg1_1
        buf2 = empty_strided_cuda((8192, 1024), (1024, 1), torch.bfloat16)
        # Topologically Sorted Source Nodes: [pow_1, mean, add, rsqrt, mul, h, linear], Original ATen: [aten.pow, aten.mean, aten.add, aten.rsqrt, aten.mul, aten.view, aten.t, aten.mm]
        extern_kernels.mm(reinterpret_tensor(buf1, (8192, 512), (512, 1), 0), reinterpret_tensor(arg2_1, (512, 1024), (1, 512), 0), out=buf2)
        del arg2_1
        buf3 = reinterpret_tensor(buf1, (8, 512, 1024), (524288, 1024, 1), 0); del buf1  # reuse
        # Topologically Sorted Source Nodes: [linear, chunk, transpose, conv1d], Original ATen: [aten._unsafe_view, aten.split, aten.transpose, aten.convolution]
        stream0 = get_raw_stream(0)
        triton_poi_fused__unsafe_view_convolution_split_transpose_1.run(buf2, buf3, 4096, 1024, stream=stream0)
        # Topologically Sorted Source Nodes: [linear, chunk, transpose, conv1d], Original ATen: [aten._unsafe_view, aten.split, aten.transpose, aten.convolution]
        buf4 = extern_kernels.convolution(buf3, arg3_1, stride=(1,), padding=(3,), dilation=(1,), transposed=False, output_padding=(0,), groups=512, bias=None)
        assert_size_stride(buf4, (8, 512, 1027), (525824, 1027, 1), 'torch.ops.aten.convolution.default')
        del arg3_1
        buf5 = reinterpret_tensor(buf3, (8, 1024, 512), (524288, 512, 1), 0); del buf3  # reuse
        buf6 = buf5; del buf5  # reuse
        # Topologically Sorted Source Nodes: [linear, chunk, transpose, conv1d, getitem_2, v_1, v_2, exp, decay, neg_1, arange, steps, mul_2, exp_1, scaled, cumsum, mul_4, exp_2, mul_5, mixed, sigmoid, mul_6], Original ATen: [aten._unsafe_view, aten.split, aten.transpose, aten.convolution, aten.slice, aten.silu, aten.exp, aten.neg, aten.arange, aten.unsqueeze, aten.mul, aten.cumsum, aten.div, aten.sigmoid]
        stream0 = get_raw_stream(0)
        triton_red_fused__unsafe_view_arange_convolution_cumsum_div_exp_mul_neg_sigmoid_silu_slice_split_transpose_unsqueeze_2.run(buf6, buf4, arg4_1, arg5_1, buf2, 4096, 1024, stream=stream0)
        del arg4_1
        del arg5_1
        del buf4
        buf7 = empty_strided_cuda((8192, 512), (512, 1), torch.bfloat16)
        # Topologically Sorted Source Nodes: [linear, chunk, exp, decay, arange, steps, mul_4, exp_2, mul_5, mixed, sigmoid, mul_6, linear_1], Original ATen: [aten._unsafe_view, aten.split, aten.exp, aten.neg, aten.arange, aten.unsqueeze, aten.mul, aten.div, aten.sigmoid, aten.view, aten.t, aten.mm]
        extern_kernels.mm(reinterpret_tensor(buf6, (8192, 512), (512, 1), 0), reinterpret_tensor(arg6_1, (512, 512), (1, 512), 0), out=buf7)
        del arg6_1
        buf9 = buf6; del buf6  # reuse
        # Topologically Sorted Source Nodes: [linear_1, x, pow_2, mean_1, add_2, rsqrt_1, mul_7, h_1], Original ATen: [aten._unsafe_view, aten.add, aten.pow, aten.mean, aten.rsqrt, aten.mul]
        stream0 = get_raw_stream(0)
        triton_per_fused__unsafe_view_add_mean_mul_pow_rsqrt_3.run(arg0_1, buf7, arg7_1, buf9, 8192, 512, stream=stream0)
        del arg7_1
        buf10 = buf2; del buf2  # reuse
        # Topologically Sorted Source Nodes: [linear_1, x, pow_2, mean_1, add_2, rsqrt_1, mul_7, h_1, linear_2], Original ATen: [aten._unsafe_view, aten.add, aten.pow, aten.mean, aten.rsqrt, aten.mul, aten.view, aten.t, aten.mm]
        extern_kernels.mm(reinterpret_tensor(buf9, (8192, 512), (512, 1), 0), reinterpret_tensor(arg8_1, (512, 1024), (1, 512), 0), out=buf10)
        del arg8_1
        buf11 = reinterpret_tensor(buf9, (8, 512, 1024), (524288, 1024, 1), 0); del buf9  # reuse
        # Topologically Sorted Source Nodes: [linear_2, chunk_1, transpose_2, conv1d_1], Original ATen: [aten._unsafe_view, aten.split, aten.transpose, aten.convolution]
        stream0 = get_raw_stream(0)
        triton_poi_fused__unsafe_view_convolution_split_transpose_1.run(buf10, buf11, 4096, 1024, stream=stream0)
        # Topologically Sorted Source Nodes: [linear_2, chunk_1, transpose_2, conv1d_1], Original ATen: [aten._unsafe_view, aten.split, aten.transpose, aten.convolution]
        buf12 = extern_kernels.convolution(buf11, arg9_1, stride=(1,), padding=(3,), dilation=(1,), transposed=False, output_padding=(0,), groups=512, bias=None)
        assert_size_stride(buf12, (8, 512, 1027), (525824, 1027, 1), 'torch.ops.aten.convolution.default')
        del arg9_1
        buf13 = reinterpret_tensor(buf11, (8, 1024, 512), (524288, 512, 1), 0); del buf11  # reuse
        buf14 = buf13; del buf13  # reuse
        # Topologically Sorted Source Nodes: [linear_2, chunk_1, transpose_2, conv1d_1, getitem_6, v_4, v_5, exp_3, decay_1, neg_3, arange_1, steps_1, mul_9, exp_4, scaled_1, cumsum_1, mul_11, exp_5, mul_12, mixed_1, sigmoid_1, mul_13], Original ATen: [aten._unsafe_view, aten.split, aten.transpose, aten.convolution, aten.slice, aten.silu, aten.exp, aten.neg, aten.arange, aten.unsqueeze, aten.mul, aten.cumsum, aten.div, aten.sigmoid]
        stream0 = get_raw_stream(0)
        triton_red_fused__unsafe_view_arange_convolution_cumsum_div_exp_mul_neg_sigmoid_silu_slice_split_transpose_unsqueeze_2.run(buf14, buf12, arg10_1, arg11_1, buf10, 4096, 1024, stream=stream0)
        del arg10_1
        del arg11_1
        del buf12
        buf15 = empty_strided_cuda((8192, 512), (512, 1), torch.bfloat16)
        # Topologically Sorted Source Nodes: [linear_2, chunk_1, exp_3, decay_1, arange_1, steps_1, mul_11, exp_5, mul_12, mixed_1, sigmoid_1, mul_13, linear_3], Original ATen: [aten._unsafe_view, aten.split, aten.exp, aten.neg, aten.arange, aten.unsqueeze, aten.mul, aten.div, aten.sigmoid, aten.view, aten.t, aten.mm]
        extern_kernels.mm(reinterpret_tensor(buf14, (8192, 512), (512, 1), 0), reinterpret_tensor(arg12_1, (512, 512), (1, 512), 0), out=buf15)
        del arg12_1
        buf17 = buf14; del buf14  # reuse
        # Topologically Sorted Source Nodes: [linear_1, x, linear_3, x_1, pow_3, mean_2, add_4, rsqrt_2, mul_14, h_2], Original ATen: [aten._unsafe_view, aten.add, aten.pow, aten.mean, aten.rsqrt, aten.mul]
        stream0 = get_raw_stream(0)
        triton_per_fused__unsafe_view_add_mean_mul_pow_rsqrt_4.run(arg0_1, buf7, buf15, arg13_1, buf17, 8192, 512, stream=stream0)
        del arg13_1
        buf18 = buf10; del buf10  # reuse
        # Topologically Sorted Source Nodes: [linear_1, x, linear_3, x_1, pow_3, mean_2, add_4, rsqrt_2, mul_14, h_2, linear_4], Original ATen: [aten._unsafe_view, aten.add, aten.pow, aten.mean, aten.rsqrt, aten.mul, aten.view, aten.t, aten.mm]
        extern_kernels.mm(reinterpret_tensor(buf17, (8192, 512), (512, 1), 0), reinterpret_tensor(arg14_1, (512, 1024), (1, 512), 0), out=buf18)
        del arg14_1
        buf19 = reinterpret_tensor(buf17, (8, 512, 1024), (524288, 1024, 1), 0); del buf17  # reuse
        # Topologically Sorted Source Nodes: [linear_4, chunk_2, transpose_4, conv1d_2], Original ATen: [aten._unsafe_view, aten.split, aten.transpose, aten.convolution]
        stream0 = get_raw_stream(0)
        triton_poi_fused__unsafe_view_convolution_split_transpose_1.run(buf18, buf19, 4096, 1024, stream=stream0)
        # Topologically Sorted Source Nodes: [linear_4, chunk_2, transpose_4, conv1d_2], Original ATen: [aten._unsafe_view, aten.split, aten.transpose, aten.convolution]
        buf20 = extern_kernels.convolution(buf19, arg15_1, stride=(1,), padding=(3,), dilation=(1,), transposed=False, output_padding=(0,), groups=512, bias=None)
        assert_size_stride(buf20, (8, 512, 1027), (525824, 1027, 1), 'torch.ops.aten.convolution.default')
        del arg15_1
        buf21 = reinterpret_tensor(buf19, (8, 1024, 512), (524288, 512, 1), 0); del buf19  # reuse
        buf22 = buf21; del buf21  # reuse
        # Topologically Sorted Source Nodes: [linear_4, chunk_2, transpose_4, conv1d_2, getitem_10, v_7, v_8, exp_6, decay_2, neg_5, arange_2, steps_2, mul_16, exp_7, scaled_2, cumsum_2, mul_18, exp_8, mul_19, mixed_2, sigmoid_2, mul_20], Original ATen: [aten._unsafe_view, aten.split, aten.transpose, aten.convolution, aten.slice, aten.silu, aten.exp, aten.neg, aten.arange, aten.unsqueeze, aten.mul, aten.cumsum, aten.div, aten.sigmoid]
        stream0 = get_raw_stream(0)
        triton_red_fused__unsafe_view_arange_convolution_cumsum_div_exp_mul_neg_sigmoid_silu_slice_split_transpose_unsqueeze_2.run(buf22, buf20, arg16_1, arg17_1, buf18, 4096, 1024, stream=stream0)
        del arg16_1
        del arg17_1
        del buf18
        del buf20
        buf23 = empty_strided_cuda((8192, 512), (512, 1), torch.bfloat16)
        # Topologically Sorted Source Nodes: [linear_4, chunk_2, exp_6, decay_2, arange_2, steps_2, mul_18, exp_8, mul_19, mixed_2, sigmoid_2, mul_20, linear_5], Original ATen: [aten._unsafe_view, aten.split, aten.exp, aten.neg, aten.arange, aten.unsqueeze, aten.mul, aten.div, aten.sigmoid, aten.view, aten.t, aten.mm]
        extern_kernels.mm(reinterpret_tensor(buf22, (8192, 512), (512, 1), 0), reinterpret_tensor(arg18_1, (512, 512), (1, 512), 0), out=buf23)
        del arg18_1
        del buf22
        buf24 = reinterpret_tensor(buf7, (8, 1024, 512), (524288, 512, 1), 0); del buf7  # reuse
        # Topologically Sorted Source Nodes: [linear_1, x, linear_3, x_1, linear_5, x_2], Original ATen: [aten._unsafe_view, aten.add]
        stream0 = get_raw_stream(0)
        triton_poi_fused__unsafe_view_add_5.run(buf24, arg0_1, buf15, buf23, 4194304, stream=stream0)
        del arg0_1
        del buf15
        del buf23
    return (buf24, )


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
        arg0_1, arg1_1, arg2_1, arg3_1, arg4_1, arg5_1, arg6_1, arg7_1, arg8_1, arg9_1, arg10_1, arg11_1, arg12_1, arg13_1, arg14_1, arg15_1, arg16_1, arg17_1, arg18_1 = args
        args.clear()
        partition0_args = [arg0_1, arg1_1, arg2_1, arg3_1, arg4_1, arg5_1, arg6_1, arg7_1, arg8_1, arg9_1, arg10_1, arg11_1, arg12_1, arg13_1, arg14_1, arg15_1, arg16_1, arg17_1, arg18_1]
        del arg0_1, arg1_1, arg2_1, arg3_1, arg4_1, arg5_1, arg6_1, arg7_1, arg8_1, arg9_1, arg10_1, arg11_1, arg12_1, arg13_1, arg14_1, arg15_1, arg16_1, arg17_1, arg18_1
        (buf24,) = self.partitions[0](partition0_args)
        del partition0_args
        return (buf24, )

runner = Runner(partitions=[partition_0,])
call = runner.call
recursively_apply_fns = runner.recursively_apply_fns


def get_args():
    from torch._dynamo.testing import rand_strided
    arg0_1 = rand_strided((8, 1024, 512), (524288, 512, 1), device='cuda:0', dtype=torch.bfloat16)
    arg1_1 = rand_strided((512, ), (1, ), device='cuda:0', dtype=torch.bfloat16)
    arg2_1 = rand_strided((1024, 512), (512, 1), device='cuda:0', dtype=torch.bfloat16)
    arg3_1 = rand_strided((512, 1, 4), (4, 4, 1), device='cuda:0', dtype=torch.bfloat16)
    arg4_1 = rand_strided((512, ), (1, ), device='cuda:0', dtype=torch.bfloat16)
    arg5_1 = rand_strided((512, ), (1, ), device='cuda:0', dtype=torch.bfloat16)
    arg6_1 = rand_strided((512, 512), (512, 1), device='cuda:0', dtype=torch.bfloat16)
    arg7_1 = rand_strided((512, ), (1, ), device='cuda:0', dtype=torch.bfloat16)
    arg8_1 = rand_strided((1024, 512), (512, 1), device='cuda:0', dtype=torch.bfloat16)
    arg9_1 = rand_strided((512, 1, 4), (4, 4, 1), device='cuda:0', dtype=torch.bfloat16)
    arg10_1 = rand_strided((512, ), (1, ), device='cuda:0', dtype=torch.bfloat16)
    arg11_1 = rand_strided((512, ), (1, ), device='cuda:0', dtype=torch.bfloat16)
    arg12_1 = rand_strided((512, 512), (512, 1), device='cuda:0', dtype=torch.bfloat16)
    arg13_1 = rand_strided((512, ), (1, ), device='cuda:0', dtype=torch.bfloat16)
    arg14_1 = rand_strided((1024, 512), (512, 1), device='cuda:0', dtype=torch.bfloat16)
    arg15_1 = rand_strided((512, 1, 4), (4, 4, 1), device='cuda:0', dtype=torch.bfloat16)
    arg16_1 = rand_strided((512, ), (1, ), device='cuda:0', dtype=torch.bfloat16)
    arg17_1 = rand_strided((512, ), (1, ), device='cuda:0', dtype=torch.bfloat16)
    arg18_1 = rand_strided((512, 512), (512, 1), device='cuda:0', dtype=torch.bfloat16)
    return [arg0_1, arg1_1, arg2_1, arg3_1, arg4_1, arg5_1, arg6_1, arg7_1, arg8_1, arg9_1, arg10_1, arg11_1, arg12_1, arg13_1, arg14_1, arg15_1, arg16_1, arg17_1, arg18_1]


def benchmark_compiled_module(args, times=10, repeat=10):
    from torch._inductor.utils import print_performance
    fn = lambda: call(list(args))
    return print_performance(fn, times=times, repeat=repeat)


if __name__ == "__main__":
    from torch._inductor.wrapper_benchmark import compiled_module_main
    args = get_args()
    compiled_module_main('None', lambda times, repeat: benchmark_compiled_module(args, times=times, repeat=repeat))
