"""Generate a flash-attention Triton kernel file for an ``attention`` group.

The group (``lego_core.tree.fusion.attention``) carries an ``AttentionSpec``:
sizes, how q / k / v / the output are addressed in their boundary tensors
(``OperandMap``: the launcher turns the tensors' runtime strides into the
kernel's per-(batch, head, row, column) strides), scale, mask, causality
and GQA head sharing.  The kernel (``templates/attention_kernel_file.py.j2``)
follows the Triton tutorial 06-fused-attention and FlashAttention-2
(Dao 2023, arXiv:2307.08691): one program per BLOCK_M query rows of one
(batch, head), online softmax over BLOCK_N key tiles in fp32, P V
accumulated in fp32, causal key tiles past the diagonal skipped.  fp32
inputs use ``tl.dot(..., input_precision="ieee")`` (no TF32); bf16 / fp16
run on tensor cores with fp32 accumulation.  Head dims that are not powers
of two are padded to ``BLOCK_D`` with masks; any sequence length works
(rows and keys past the end are masked).

A mask that is not known to be causal at generation time (a sliced ``tril``
buffer, SDPA's decomposed causal bias) stays a boundary input; the launcher
checks on every call whether it is the causal mask (a kernel file keeps no
state between calls, ``judge.host_allowlist``; not while a CUDA graph is
captured) and then runs the causal variant (no mask reads, tile skipping);
otherwise the kernel reads it per tile through its broadcast strides.

Causal attention runs in two stages (as tutorial 06): the key tiles strictly
below the diagonal with no causal mask, then the diagonal tiles with it.
Scores are kept in log2 units (``exp2``; scale, post-scale and log2(e) folded
into one factor on the host).  When N is a multiple of BLOCK_N (constexpr
``EVEN_N``) the key loads carry no bounds mask.

``generate(sp)`` returns the file's source; ``attention_tiles(d, dtype, m, n)``
the default tile configuration (the file's ``CONFIG``);
``attention_tune_configs`` the candidates the file offers as ``TUNE_CONFIGS``
(timed at search time on a GPU by ``lego_core.judge.tuning``);
``launch_config(group)`` one line for transcripts.
"""
from __future__ import annotations

import dataclasses
import math

import torch

from lego_core.agents.template.kernel_source import kernel_name, operand_names, render, triton_next_pow2
from lego_core.agents.template.expressions import Unsupported
from lego_core.agents.template.rounding import complete_file
from lego_core.tree.subproblem import SubProblem

MAX_HEAD_DIM = 256


@dataclasses.dataclass(frozen=True)
class AttentionTiles:
    """A launch configuration: query rows and keys per tile (powers of two), warps, stages."""

    block_m: int
    block_n: int
    num_warps: int
    num_stages: int

    def as_dict(self) -> dict:
        return {"BLOCK_M": self.block_m, "BLOCK_N": self.block_n, "num_warps": self.num_warps, "num_stages": self.num_stages}


# (max padded head dim, 16-bit?) -> (BLOCK_M, BLOCK_N, num_warps, num_stages).  After the
# configurations of the Triton tutorial 06 for Hopper: 128 x 64 tiles for d <= 128 in
# 16-bit; fp32 tiles hold twice the bytes, so half the rows; d = 256 halves again
# (the Q tile and the accumulator stay in registers).
TILE_TABLE = {
    (64, True): (128, 64, 4, 3),
    (128, True): (128, 64, 8, 3),
    (256, True): (64, 32, 8, 2),
    (64, False): (64, 32, 4, 2),
    (128, False): (64, 32, 8, 2),
    (256, False): (32, 32, 4, 1),
}


def attention_tiles(d: int, dtype: torch.dtype, m: int, n: int) -> AttentionTiles:
    """Tiles for head dim ``d`` (padded to a power of two), ``dtype`` and ``m`` query rows
    x ``n`` keys: the table's entry, shrunk (to >= 16) for short sequences, with BLOCK_N <= BLOCK_M."""
    padded = max(16, triton_next_pow2(d))
    key = min(k for k in (64, 128, 256) if k >= padded)
    return _fit(*TILE_TABLE[(key, dtype.itemsize == 2)], m, n)


# Candidates timed at search time on a GPU (``lego_core.judge.tuning``), per (max padded
# head dim, 16-bit?): (BLOCK_M, BLOCK_N, num_warps, num_stages), after the Hopper
# configurations of Triton's tutorial 06 (BLOCK_M in {64, 128}, BLOCK_N in {32, 64, 128},
# 4 or 8 warps, 2-4 stages), pruned to eight per head dim and dtype: 8 warps only for
# tiles of 128 rows or a head dim of 128 and more, BLOCK_N <= BLOCK_M (the causal
# diagonal stage steps through BLOCK_M in whole key tiles), fewer stages where K / V
# tiles are large (shared memory).
TUNE_TABLE = {
    (64, True): [(128, 64, 4, 3), (128, 128, 8, 3), (128, 64, 8, 3), (128, 32, 4, 4), (64, 64, 4, 3), (64, 32, 4, 4), (128, 128, 8, 2), (128, 64, 4, 4)],
    (128, True): [(128, 64, 8, 3), (128, 128, 8, 2), (128, 64, 8, 2), (128, 64, 4, 3), (128, 32, 8, 4), (64, 64, 4, 3), (64, 32, 4, 4), (64, 64, 4, 2)],
    (256, True): [(64, 32, 8, 2), (64, 64, 8, 2), (64, 32, 4, 2), (128, 32, 8, 2), (64, 64, 4, 2), (128, 64, 8, 2), (64, 32, 4, 3)],
    (64, False): [(64, 32, 4, 2), (64, 64, 4, 2), (128, 32, 8, 2), (128, 64, 8, 2), (64, 32, 4, 3), (64, 64, 8, 3), (128, 32, 4, 3), (64, 32, 8, 2)],
    (128, False): [(64, 32, 8, 2), (64, 64, 8, 2), (64, 32, 4, 2), (128, 32, 8, 2), (64, 32, 4, 3), (128, 64, 8, 2), (64, 64, 4, 2), (64, 32, 8, 3)],
    (256, False): [(32, 32, 4, 1), (64, 32, 8, 2), (32, 32, 4, 2), (64, 32, 4, 1), (64, 64, 8, 1), (64, 32, 8, 1)],
}


def _fit(block_m: int, block_n: int, warps: int, stages: int, m: int, n: int) -> AttentionTiles:
    """A configuration shrunk (to >= 16) for short sequences, with BLOCK_N <= BLOCK_M."""
    block_m = min(block_m, max(16, triton_next_pow2(m)))
    block_n = min(block_n, max(16, triton_next_pow2(n)), block_m)
    if block_m * block_n < 64 * 64:
        warps = min(warps, 4)
    return AttentionTiles(block_m, block_n, warps, stages)


def attention_tune_configs(d: int, dtype: torch.dtype, m: int, n: int) -> list[AttentionTiles]:
    """The configurations tuning times for head dim ``d``, ``dtype`` and ``m`` x ``n``
    scores: ``attention_tiles`` first, then ``TUNE_TABLE``'s, fitted to the sizes, without repeats."""
    padded = max(16, triton_next_pow2(d))
    key = min(k for k in (64, 128, 256) if k >= padded)
    configs = [attention_tiles(d, dtype, m, n)] + [_fit(*row, m, n) for row in TUNE_TABLE[(key, dtype.itemsize == 2)]]
    return list(dict.fromkeys(configs))[:8]


def _spec(sp: SubProblem):
    group = sp.group
    spec = getattr(group, "spec", None)
    if group is None or group.kind != "attention" or spec is None:
        raise Unsupported("not an attention group")
    return spec


def launch_config(group) -> str:
    """One line describing the tiles of ``group``'s kernel (for transcripts)."""
    s = group.spec
    t = attention_tiles(max(s.d, s.dv), s.dtype, s.m, s.n)
    programs = -(-s.m // t.block_m) * s.b * s.h
    dot = 'tl.dot input_precision="ieee"' if s.dtype == torch.float32 else "tl.dot on tensor cores"
    causal = "causal (tiles below the diagonal unmasked, past it skipped), " if s.causal else ""
    gqa = f"GQA {s.h} query heads / {s.h // s.k_map.rep} kv heads, " if s.k_map.rep > 1 else ""
    mask = f"{s.mask_kind} mask {list(s.mask_shape)}, " if s.mask is not None else ""
    return (
        f"B={s.b} H={s.h} M={s.m} N={s.n} D={s.d}; {causal}{gqa}{mask}BLOCK_M={t.block_m} x BLOCK_N={t.block_n} "
        f"({programs} programs), fp32 online softmax (exp2) and accumulator, {dot}, num_warps={t.num_warps}, num_stages={t.num_stages}; "
        f"{len(attention_tune_configs(max(s.d, s.dv), s.dtype, s.m, s.n))} configurations to tune on a GPU"
    )


def _float(x: float) -> str:
    return f'float("{x}")' if math.isinf(x) or math.isnan(x) else repr(float(x))


@complete_file
def generate(sp: SubProblem) -> str:
    """Triton source (one importable file with ``launch``) for an ``attention`` leaf.

    Raises Unsupported for a head dim above 256, an input or output that is
    not a single tensor, or a group without an AttentionSpec."""
    s = _spec(sp)
    if max(s.d, s.dv) > MAX_HEAD_DIM:
        raise Unsupported(f"head dim {max(s.d, s.dv)} > {MAX_HEAD_DIM}")
    if any(spec is None for spec in sp.input_specs + sp.output_specs) or len(sp.outputs) != 1:
        raise Unsupported("the inputs and the one output must be tensors")
    names = dict(zip((node.name for node in sp.inputs), operand_names(sp.inputs)))
    out = sp.output_specs[0]
    tiles = attention_tiles(max(s.d, s.dv), s.dtype, s.m, s.n)
    mask_kind = {"none": 0, "add": 1, "keep": 2, "fill": 3}[s.mask_kind]
    causal_hint = s.mask is not None and not s.causal and s.mask_shape[-2:] == (s.m, s.n) and math.prod(s.mask_shape[:-2]) == 1
    causal_hint = causal_hint and (s.mask_kind == "add" or s.fill == -math.inf)
    return render(
        "attention_kernel_file.py.j2",
        title=f"Triton kernel for sub-problem {sp.id}: {sp.label}",
        label=sp.label,
        module_path=sp.module_path,
        ops=sp.ops,
        shape_text=f"B={s.b} H={s.h} M={s.m} N={s.n} D={s.d} Dv={s.dv}, {str(s.dtype).removeprefix('torch.')}, {s.form} form",
        inputs_text=", ".join(f"{names[n.name]} {spec.describe()}" for n, spec in zip(sp.inputs, sp.input_specs)),
        outputs_text=f"out {out.describe()}",
        kernel_name=kernel_name(sp) + "_attention_kernel",
        output_decl=f"({tuple(out.shape)}, {tuple(out.stride)}, {out.dtype})",
        q_map=repr(s.q_map.coeffs), k_map=repr(s.k_map.coeffs), v_map=repr(s.v_map.coeffs), out_map=repr(s.out_map.coeffs),
        mask_target=repr(tuple(s.mask_target)),
        causal_hint=bool(causal_hint),
        has_mask=s.mask is not None,
        may_be_causal=bool(s.causal or causal_hint),
        fill_kind=repr(s.mask_kind == "fill"),
        launch_args=[names[n.name] for n in sp.inputs],
        q_arg=names[s.q.name], k_arg=names[s.k.name], v_arg=names[s.v.name],
        mask_arg=names[s.mask.name] if s.mask is not None else "None",
        causal=repr(bool(s.causal)),
        mask_kind=mask_kind,
        tiles=repr(tiles.as_dict()),
        tune_configs="[\n    " + ",\n    ".join(repr(t.as_dict()) for t in attention_tune_configs(max(s.d, s.dv), s.dtype, s.m, s.n)) + ",\n]",
        m=s.m, n=s.n, d=s.d, dv=s.dv, b=s.b, h=s.h,
        scale=_float(s.scale), post_scale=_float(s.post_scale), fill=_float(s.fill),
        q_rep=s.q_map.rep, k_rep=s.k_map.rep, v_rep=s.v_map.rep,
        zero_empty=bool(s.zero_empty_rows),
        block_d=max(16, triton_next_pow2(s.d)), block_dv=max(16, triton_next_pow2(s.dv)),
        ieee=s.dtype == torch.float32,
    )  # fmt: skip
