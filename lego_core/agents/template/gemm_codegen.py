"""The GEMM + epilogue template: ``aten.mm`` / ``aten.addmm`` with its pointwise tail.

Source: the Triton tutorial 03-matrix-multiplication.  One program per
[BLOCK_M, BLOCK_N] tile of C = A @ B (A [M, K], B [K, N], any strides: a
Linear's transposed weight is read as it lies), programs ordered in groups of
GROUP_M tile rows so that neighbouring programs share B tiles in L2.  The K
loop steps BLOCK_K at a time with a mask on k (block sizes are powers of two,
at least 16 for ``tl.dot``; triton issue 8898), rows and columns past M / N
wrap around (``% M``) as in the tutorial, so the loop's loads need only the
k mask.  The accumulator is fp32; fp32 inputs use
``tl.dot(..., input_precision="ieee")`` (TF32 would miss fp32 tolerances on a
GPU), bf16 / fp16 inputs the default tensor-core path.

The epilogue (``lego_core.tree.fusion.gemm`` says what may be in it) runs on the
accumulator tile in fp32 with the pointwise template's expressions
(``expressions.POINTWISE``): the addmm bias, then each op.  A view of the
result is the identity on the tile (a row-major reshape keeps element (m, n)
at flat index m*N + n).  Outside tensors are read per tile through their
strides broadcast to the view they are read in (a bias [N] as a row vector,
a per-row scale [..., 1] as a column vector); contiguous ones of the full
shape with the flat offset.  An op on outside values of a smaller shape
(``scale * 2``, [N]) is computed on those broadcast tiles.  Every output is stored under the tile mask,
through its captured strides; ``tl.store`` casts to its dtype.

``generate(sp)`` returns the kernel file's source; ``launch_config(group)``
one line for transcripts; ``gemm_tiles(m, n, k, dtype)`` the default
configuration (the file's ``CONFIG``), ``gemm_tune_configs`` the candidates
the file offers as ``TUNE_CONFIGS`` (timed at search time on a GPU by
``lego_core.judge.tuning``, which rewrites ``CONFIG`` with the fastest).
Unsupported is raised for a group that is not a legal GEMM epilogue.
"""
from __future__ import annotations

import dataclasses
import math

import torch
import torch.fx as fx

from lego_core.agents.template.expressions import POINTWISE, Unsupported
from lego_core.agents.template.kernel_source import call_arguments, is_contiguous, kernel_name, operand_names, output_names, outputs_decl, render, triton_next_pow2
from lego_core.agents.template.rounding import complete_file, round_store
from lego_core.load.capture import ValueInfo, op_name, value_info
from lego_core.tree.fusion.gemm import VIEW_OPS, gemm_epilogue_group, gemm_operands, value_forms
from lego_core.tree.subproblem import SubProblem

GROUP_M = 8


@dataclasses.dataclass(frozen=True)
class Tiles:
    """A launch configuration: tile sizes (powers of two, >= 16) and warps / stages."""

    block_m: int
    block_n: int
    block_k: int
    num_warps: int
    num_stages: int


def gemm_tiles(m: int, n: int, k: int, dtype: torch.dtype) -> Tiles:
    """Tiles for an [m, k] @ [k, n] product: as large as the problem up to
    128 x 128 (BLOCK_K 64 for 16-bit inputs, 32 for fp32, so three pipeline
    stages of A and B tiles take 96 KB of shared memory either way)."""
    block_m = min(128, max(16, triton_next_pow2(m)))
    block_n = min(128, max(16, triton_next_pow2(n)))
    block_k = min(64 if dtype.itemsize == 2 else 32, max(16, triton_next_pow2(k)))
    num_warps = 8 if block_m * block_n >= 128 * 128 else 4
    return Tiles(block_m, block_n, block_k, num_warps, num_stages=3)


# Candidates timed at search time on a GPU (``lego_core.judge.tuning``): (BLOCK_M,
# BLOCK_N, BLOCK_K, num_warps, num_stages), after the Hopper configurations of Triton's
# tutorial 03 and Inductor's mm configs.  16-bit: 128 x 128 and 128 x 256 tiles for large
# problems, 64-row / 64-column tiles for small M or N (more programs on the 132 SMs);
# fp32 (IEEE products, no tensor cores, twice the bytes per element): BLOCK_K 32 / 16.
TUNE_TABLE = {
    True: [(128, 128, 64, 8, 3), (128, 128, 64, 8, 4), (128, 256, 64, 8, 3), (64, 128, 64, 4, 4), (128, 64, 64, 4, 4), (64, 64, 64, 4, 4), (64, 256, 32, 4, 4), (128, 128, 32, 4, 4)],
    False: [(128, 128, 32, 8, 3), (128, 64, 32, 4, 4), (64, 128, 32, 4, 4), (64, 64, 32, 4, 4), (128, 128, 16, 8, 4), (64, 64, 16, 4, 5), (32, 64, 32, 4, 4), (128, 256, 16, 8, 3)],
}


def _fit(block_m: int, block_n: int, block_k: int, warps: int, stages: int, m: int, n: int, k: int) -> Tiles:
    """A configuration shrunk (to >= 16, powers of two) to the problem's sizes."""
    block_m = min(block_m, max(16, triton_next_pow2(m)))
    block_n = min(block_n, max(16, triton_next_pow2(n)))
    block_k = min(block_k, max(16, triton_next_pow2(k)))
    if block_m * block_n < 128 * 128:
        warps = min(warps, 4)
    return Tiles(block_m, block_n, block_k, warps, stages)


def gemm_tune_configs(m: int, n: int, k: int, dtype: torch.dtype) -> list[Tiles]:
    """The configurations tuning times for an [m, k] @ [k, n] product:
    ``gemm_tiles`` first, then ``TUNE_TABLE``'s fitted to the sizes, without repeats, at most 8."""
    configs = [gemm_tiles(m, n, k, dtype)] + [_fit(*row, m, n, k) for row in TUNE_TABLE[dtype.itemsize == 2]]
    return list(dict.fromkeys(configs))[:8]


def _config(t: Tiles) -> dict:
    return {"BLOCK_M": t.block_m, "BLOCK_N": t.block_n, "BLOCK_K": t.block_k, "num_warps": t.num_warps, "num_stages": t.num_stages}


def _sizes(gemm: fx.Node) -> tuple[int, int, int, torch.dtype]:
    a, _, _ = gemm_operands(gemm)
    m, k = value_info(a).shape
    n = value_info(gemm).shape[1]
    return m, n, k, value_info(a).dtype


def launch_config(group) -> str:
    """One line describing the tiles of ``group``'s kernel (for transcripts)."""
    m, n, k, dtype = _sizes(group.nodes[0])
    t = gemm_tiles(m, n, k, dtype)
    tiles = -(-m // t.block_m) * -(-n // t.block_n)
    steps = -(-k // t.block_k)
    dot = 'tl.dot input_precision="ieee"' if dtype == torch.float32 else "tl.dot on tensor cores"
    return (
        f"[{m}, {k}] @ [{k}, {n}] in BLOCK_M={t.block_m} x BLOCK_N={t.block_n} tiles ({tiles} program{'s' if tiles != 1 else ''}, GROUP_M={GROUP_M}), "
        f"{steps} K steps of BLOCK_K={t.block_k}, fp32 accumulator, {dot}, num_warps={t.num_warps}, num_stages={t.num_stages}; "
        f"{len(gemm_tune_configs(m, n, k, dtype))} configurations to tune on a GPU"
    )


# --------------------------------------------------------------------------
# How a tile of one tensor is addressed
# --------------------------------------------------------------------------


@dataclasses.dataclass
class _Access:
    """One tensor read or written per tile, over ``form`` (a view of [M, N]).

    ``kind``: ``flat`` (contiguous, the full form: ``offs_m * N + offs_n``)
    or ``strided`` (runtime strides broadcast to ``form``; ``dims`` are the
    dimensions it varies along).  ``key`` prefixes its stride arguments.
    """

    name: str  # the tensor's identifier (x, out): the pointer is name_ptr
    key: str  # name, or name_view<k> for a tensor read in several views: its loaded tile and strides
    spec: ValueInfo
    form: tuple
    kind: str
    dims: tuple = ()

    @property
    def rows(self) -> bool:
        return self.kind == "flat" or any(d < len(self.form) - 1 for d in self.dims)

    @property
    def cols(self) -> bool:
        return self.kind == "flat" or len(self.form) - 1 in self.dims

    def address(self) -> str:
        if self.kind == "flat":
            return f"{self.name}_ptr + offs_m[:, None] * N + offs_n[None, :]"
        lead = self.form[:-1]
        rows = " + ".join(f"{_row_index(lead, d)} * {self.key}_stride_{d}" for d in self.dims if d < len(lead))
        col = f"offs_n * {self.key}_stride_{len(lead)}"
        if self.rows and self.cols:
            return f"{self.name}_ptr + ({rows})[:, None] + ({col})[None, :]"
        if self.rows:
            return f"{self.name}_ptr + ({rows})[:, None]"
        if self.cols:
            return f"{self.name}_ptr + ({col})[None, :]"
        return f"{self.name}_ptr"  # a 0-d tensor: one element, always in bounds

    def mask(self) -> str | None:
        if self.rows and self.cols:
            return "mask"
        if self.rows:
            return "mask_m[:, None]"
        return "mask_n[None, :]" if self.cols else None

    def stride_args(self) -> list[str]:
        return [f"{self.key}_stride_{d}" for d in self.dims] if self.kind == "strided" else []


def _row_index(lead: tuple, d: int) -> str:
    """Index along leading dimension ``d`` of a view with leading sizes ``lead``, from the row offs_m."""
    inner = math.prod(lead[d + 1 :])
    index = "offs_m" if inner == 1 else f"(offs_m // {inner})"
    return f"({index} % {lead[d]})" if d > 0 else index


def _access(name: str, key: str, spec: ValueInfo, form: tuple) -> _Access:
    if spec.shape == form and is_contiguous(spec):
        return _Access(name, key, spec, form, "flat")
    padded = (1,) * (len(form) - len(spec.shape)) + tuple(spec.shape)
    dims = tuple(d for d, (size, full) in enumerate(zip(padded, form)) if size != 1 and full != 1)
    return _Access(name, key, spec, form, "strided", dims)


# --------------------------------------------------------------------------
# The kernel file
# --------------------------------------------------------------------------


@complete_file
def generate(sp: SubProblem) -> str:
    """Triton source (one importable file with ``launch``) for a ``gemm_epilogue`` leaf.

    Raises Unsupported when the nodes are not a legal GEMM epilogue
    (``gemm_epilogue_group``) or an input or output is not a single tensor.
    """
    group = sp.group
    _, reason = gemm_epilogue_group(group.nodes)
    if reason:
        raise Unsupported(reason)
    for spec, what in [(s, "input") for s in sp.input_specs] + [(s, "output") for s in sp.output_specs]:
        if spec is None:
            raise Unsupported(f"an {what} is not a single tensor")
    names = dict(zip((node.name for node in sp.inputs), operand_names(sp.inputs, {f"v_{n.name}" for n in sp.nodes})))
    reads = _epilogue_reads(sp, names)
    writes = [_access(name, name, spec, tuple(spec.shape)) for name, spec in zip(output_names(len(sp.outputs)), sp.output_specs)]
    m, n, k, dtype = _sizes(group.nodes[0])
    compute, stored = _epilogue_lines(sp, reads, writes)
    return _render(sp, names, reads, writes, compute, stored, (m, n, k), dtype, gemm_tiles(m, n, k, dtype), gemm_tune_configs(m, n, k, dtype))


def _forms(sp: SubProblem) -> dict[str, tuple]:
    """The view of [M, N] each group node is computed in (``fusion.gemm.value_forms``)."""
    return value_forms(sp.group.nodes)


def _epilogue_reads(sp: SubProblem, names: dict[str, str]) -> dict[tuple, _Access]:
    """Every (input, view) pair the epilogue reads, in first-use order: the
    addmm bias over [M, N], other outside operands over their op's view."""
    inside = {node.name for node in sp.group.nodes}
    forms = _forms(sp)
    pairs: list[tuple[fx.Node, tuple]] = []
    gemm = sp.group.nodes[0]
    _, _, bias = gemm_operands(gemm)
    if bias is not None:
        pairs.append((bias, forms[gemm.name]))
    for node in sp.group.nodes[1:]:
        pairs += [(arg, forms[node.name]) for arg in node.all_input_nodes if arg.name not in inside]
    per_input: dict[str, list[tuple]] = {}
    for arg, form in pairs:
        if form not in per_input.setdefault(arg.name, []):
            per_input[arg.name].append(form)
    reads: dict[tuple, _Access] = {}
    for arg, form in pairs:
        if (arg.name, form) in reads:
            continue
        name = names[arg.name]
        several = len(per_input[arg.name]) > 1
        key = f"{name}_view{per_input[arg.name].index(form)}" if several else name
        reads[(arg.name, form)] = _access(name, key, value_info(arg), form)
    return reads


def _epilogue_lines(sp: SubProblem, reads: dict[tuple, _Access], writes: list[_Access]) -> tuple[list[str], list[str]]:
    """The epilogue's ops on the fp32 tile (the outside tensors loaded as
    their keys), and the value each output stores."""
    forms = _forms(sp)
    variables = {pair: access.key for pair, access in reads.items()}
    gemm = sp.group.nodes[0]
    env: dict[str, str] = {gemm.name: "acc"}
    lines = []
    _, _, bias = gemm_operands(gemm)
    if bias is not None:
        lines.append(f"v_{gemm.name} = acc + {variables[(bias.name, forms[gemm.name])]}  # addmm bias")
        env[gemm.name] = f"v_{gemm.name}"
    for node in sp.group.nodes[1:]:
        name = op_name(node)
        if name in VIEW_OPS:
            env[node.name] = env[node.args[0].name]  # a view is the same tile
            continue
        for arg in node.all_input_nodes:
            if (arg.name, forms[node.name]) in variables:
                env[arg.name] = variables[(arg.name, forms[node.name])]
        if name not in POINTWISE:
            raise Unsupported(name)
        lines.append(f"v_{node.name} = {POINTWISE[name](node, call_arguments(node, env))}  # {name}")
        env[node.name] = f"v_{node.name}"
    stored = [round_store(env[node.name], f"{access.name}_ptr", spec.dtype) for access, node, spec in zip(writes, sp.outputs, sp.output_specs)]
    return lines, stored


def _render(sp: SubProblem, names, reads, writes, compute, stored, sizes, dtype: torch.dtype, tiles: Tiles, configs: list[Tiles]) -> str:
    """The kernel file: the values the template needs, then the template."""
    m, n, k = sizes
    a, b, _ = gemm_operands(sp.group.nodes[0])
    a_name, b_name = names[a.name], names[b.name]
    strided_reads = [r for r in reads.values() if r.kind == "strided" and r.dims]
    strided_writes = [(j, w) for j, w in enumerate(writes) if w.kind == "strided"]
    prepare = [
        f"M, N, K = {m}, {n}, {k}  # A [M, K] @ B [K, N], as captured",
        "cfg = dict(CONFIG)",
    ]
    for flat in dict.fromkeys(access.name for access in reads.values() if access.kind == "flat"):
        prepare.append(f"{flat} = {flat}.contiguous()  # read with flat offsets")
    for access in strided_reads:
        prepare.append(f"{access.key}_strides = _strides({access.name}, {access.form})")
    for j, access in strided_writes:
        prepare.append(f"{access.key}_strides = out[{j}].stride()")
    prepare.append('grid = (triton.cdiv(M, cfg["BLOCK_M"]) * triton.cdiv(N, cfg["BLOCK_N"]),)')
    strided = strided_reads + [w for _, w in strided_writes]
    call = [names[node.name] for node in sp.inputs] + [f"out[{j}]" for j in range(len(writes))]
    call += ["M", "N", "K", f"{a_name}.stride(0)", f"{a_name}.stride(1)", f"{b_name}.stride(0)", f"{b_name}.stride(1)"]
    for access in strided:
        call += [f"{access.key}_strides[{d}]" for d in access.dims]
    loads = [{"name": r.key, "address": r.address(), "mask": r.mask(), "bool": r.spec.dtype == torch.bool} for r in reads.values()]
    stores = [{"address": w.address(), "value": value} for w, value in zip(writes, stored)]
    shape = tuple(sp.group.shape)
    return render(
        "gemm_kernel_file.py.j2",
        title=f"Triton kernel for sub-problem {sp.id}: {sp.label}",
        label=sp.label,
        module_path=sp.module_path,
        ops=sp.ops,
        shape_text=f"[{m}, {k}] @ [{k}, {n}], epilogue over {list(shape)}",
        shape_tuple=repr(shape),
        inputs_text=", ".join(f"{names[node.name]} {spec.describe()}" for node, spec in zip(sp.inputs, sp.input_specs)),
        outputs_text=", ".join(f"{w.name} {s.describe()}" for w, s in zip(writes, sp.output_specs)),
        kernel_name=kernel_name(sp) + "_kernel",
        pointers=[f"{names[node.name]}_ptr" for node in sp.inputs] + [f"{w.name}_ptr" for w in writes],
        strides=[access.stride_args() for access in strided],
        a_name=a_name,
        b_name=b_name,
        ieee=dtype == torch.float32,
        loads=loads,
        compute=compute,
        stores=stores,
        outputs_decl=outputs_decl(sp.output_specs),
        launch_args=[names[node.name] for node in sp.inputs],
        device_arg=names[sp.inputs[0].name],
        flat_outputs=[j for j, w in enumerate(writes) if w.kind == "flat"],
        prepare=prepare,
        call_args=call,
        group_m=GROUP_M,
        config=repr(_config(tiles)),
        tune_configs="[\n    " + ",\n    ".join(repr(_config(t)) for t in configs) + ",\n]",
    )  # fmt: skip
