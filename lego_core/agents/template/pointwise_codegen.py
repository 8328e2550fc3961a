"""The pointwise and row-reduction templates: a kernel file for a chain of elementwise ops, or for one with row reductions.

In the style of the Triton tutorials 01-vector-add and 02-fused-softmax; the
kernel bodies are ``templates/pointwise_kernel_file.py.j2`` and
``templates/row_reduction_kernel_file.py.j2`` (both extend
``kernel_file.py.j2``, which holds the header and ``launch``).  This module
decides how each tensor is addressed and hands the templates the names,
addresses, sizes and the compute statements (``kernel_source.pointwise_lines``).

- *pointwise*: one program per ``BLOCK_SIZE`` elements of the iteration
  shape S; every input is read through its own strides broadcast to S, so
  broadcasting, permuted and expanded inputs need no copies.  Inputs that
  were contiguous with shape S when captured are read with the flat offset
  (the launcher makes them contiguous on purpose if they are not).
  *Dense in memory order* (the fast path): when every full-size input and
  every output is dense in one permutation of S (NCHW, channels-last NHWC,
  any permuted-dense layout; see ``dense_order``), the flat index runs over
  that dense storage, so neighbouring lanes touch neighbouring addresses and
  full-size operands need no index arithmetic at all; broadcast operands
  (a [C] BatchNorm statistic, an [N, C, 1, 1] squeeze-excite gate) get only
  the dimension indices they vary along, by division and modulo with
  constant sizes (for NHWC: channel = offs % C).  Other layouts take the
  general strided path (every dimension's index, every operand's strides).
- *row reduction*: one program per row of S (all dimensions but the last);
  the whole row of N elements sits in one ``BLOCK_N = next_power_of_2(N)``
  vector with a mask (triton issue 8898); per-row scalars (reduction results)
  are scalars in the program.  Masked lanes are replaced by the reduction's
  neutral element before every reduction.

All arithmetic is fp32 (bool for masks); stores cast to the output dtype.
``generate(sp)`` returns the file's source (without the bf16 rounding helper:
``rounding.with_helper`` adds it) or raises Unsupported;
``launch_config(group)`` one line for transcripts.
"""
from __future__ import annotations

import dataclasses
import math

import torch.fx as fx

from lego_core.agents.template.expressions import TUPLE_POINTWISE, Unsupported
from lego_core.agents.template.kernel_source import (
    is_contiguous,
    kernel_name,
    operand_names,
    output_names,
    outputs_decl,
    pointwise_lines,
    render,
    triton_next_pow2,
)
from lego_core.agents.template.rounding import round_store
from lego_core.load.capture import ValueInfo, dense_order, op_name
from lego_core.tree.fusion import policy
from lego_core.tree.fusion.groups import Role, broadcasts_to
from lego_core.tree.subproblem import SubProblem

POINTWISE_BLOCK = 1024
# False: pointwise kernels always take the flat-or-strided paths (an ablation)
DENSE_FAST_PATH = True
INT32_LIMIT = 2**31 - 1


@dataclasses.dataclass
class _Operand:
    """How the kernel addresses one boundary tensor."""

    name: str  # the tensor's identifier: pointer name_ptr, strides name_stride_<d>
    tensor: str  # the tensor in ``launch``: the input's name, or out[k]
    node: fx.Node
    spec: ValueInfo
    access: str  # flat | row | col | rowscalar | strided | rowstrided | bcast
    role: Role
    channel: bool = False  # a [C] operand read along dim 1 (eval BatchNorm statistics)
    dims: tuple = ()  # access "bcast": the iteration dimensions it varies along


def generate(sp: SubProblem) -> str:
    """Triton source (one importable file with ``launch``) for a ``pointwise``
    or ``row_reduction`` leaf, before ``rounding.with_helper``.

    Raises Unsupported when the group is not fusable, an output or input is
    not a single tensor, an output is smaller than the iteration shape, or an
    op uses an option the templates lack."""
    group = sp.group
    if group is None or group.kind not in ("pointwise", "row_reduction") or not group.fusable:
        raise Unsupported(group.reason if group is not None and group.reason else f"{sp.kind} region")
    for spec, what in [(s, "input") for s in sp.input_specs] + [(s, "output") for s in sp.output_specs]:
        if spec is None:
            raise Unsupported(f"an {what} is not a single tensor")
    if group.kind == "pointwise" and any(s.shape != group.shape for s in sp.output_specs):
        raise Unsupported("an output is smaller than the iteration shape")
    is_row = group.kind == "row_reduction"
    taken = {f"v_{n.name}" for n in sp.nodes}
    names = operand_names(sp.inputs, taken)
    operands = [_operand(name, name, n, spec, group, is_row) for name, n, spec in zip(names, sp.inputs, sp.input_specs)]
    _mark_channel_operands(sp, operands)
    outs = output_names(len(sp.outputs))
    results = [_operand(name, f"out[{k}]", n, spec, group, is_row) for k, (name, n, spec) in enumerate(zip(outs, sp.outputs, sp.output_specs))]
    if is_row and any(r.role.kind == "vec" and r.spec.shape != group.shape for r in results):
        raise Unsupported("a row-shaped output is smaller than the iteration shape")
    order = None if is_row or not DENSE_FAST_PATH else _use_dense_order(group.shape, operands, results)
    return _render(sp, operands, results, is_row, order)


def _use_dense_order(shape: tuple, operands: list[_Operand], results: list[_Operand]) -> tuple | None:
    """Switch a pointwise kernel to the dense-in-memory-order path when every
    output and every full-size (non-channel) input is dense in one order;
    returns that order (None: the flat / strided paths stay).  Full-size
    operands become ``flat`` (read and written at the flat index), the
    others ``bcast`` (addressed by the dimensions they vary along)."""
    full = [o for o in operands if not o.channel and tuple(o.spec.shape) == tuple(shape)] + results
    orders = {dense_order(o.spec, shape) for o in full}
    if len(orders) != 1 or None in orders:
        return None
    order = orders.pop()
    if order == tuple(d for d, size in enumerate(shape) if size != 1) and all(o.access == "flat" for o in operands):
        return None  # contiguous with nothing broadcast: the flat path already is this
    full_ids = {id(o) for o in full}
    for o in full:
        o.access = "flat"
    for o in operands:
        if id(o) in full_ids:
            continue
        if o.channel:
            dims = (1,) if len(shape) > 1 and shape[1] != 1 else ()
        else:
            aligned = (1,) * (len(shape) - len(o.spec.shape)) + tuple(o.spec.shape)
            dims = tuple(d for d, size in enumerate(aligned) if size != 1 and shape[d] != 1)
        o.access, o.dims = "bcast", dims
    return order


def _dense_indices(shape: tuple, order: tuple, dims: set) -> list[dict]:
    """For each dimension in ``dims``, how ``idx_<d>`` follows from the flat
    index over storage dense in ``order``: ``quotient`` (offs divided by the
    sizes inside it) and ``size`` (the modulo; None for the outermost).  The
    sizes are constants: the compiler turns division and modulo into multiplications."""
    found = []
    for d in sorted(dims):
        inner = math.prod(shape[e] for e in order[order.index(d) + 1:])
        found.append({"dim": d, "quotient": "offs" if inner == 1 else f"(offs // {inner})", "size": None if d == order[0] else shape[d]})
    return found


def _mark_channel_operands(sp: SubProblem, operands: list[_Operand]) -> None:
    """Flag the [C] inputs of eval BatchNorm nodes: the kernel reads them at
    each element's dim-1 index (strides from ``_channel_strides``), not by
    torch's right-aligned broadcasting.  Unsupported when such an input is
    also read by another op of the region (it would need both readings)."""
    channel = {a.name for n in sp.nodes if op_name(n) in TUPLE_POINTWISE for a in policy.channel_operands(n)}
    if not channel:
        return
    for n in sp.nodes:
        if op_name(n) not in TUPLE_POINTWISE and any(a.name in channel for a in n.all_input_nodes):
            raise Unsupported(f"{n.name} reads a BatchNorm statistic by broadcasting")
    for o in operands:
        if o.node.name in channel:
            o.access, o.channel = "strided", True


def _operand(name: str, tensor: str, node: fx.Node, spec: ValueInfo, group, is_row: bool) -> _Operand:
    """How the kernel addresses one input or output."""
    shape = group.shape
    rows = shape[:-1]
    role = group.roles.get(node.name) or _external_role(spec, shape, is_row)
    contiguous = is_contiguous(spec)
    if not is_row:
        access = "flat" if spec.shape == shape and contiguous else "strided"
    elif role.form == "rows":
        access = "rowscalar" if contiguous else "rowstrided"
    elif spec.shape == shape and contiguous:
        access = "row"
    elif spec.shape == shape[-1:] and contiguous and role.kind == "vec":
        access = "col"
    elif role.kind == "scal" and contiguous and spec.numel == math.prod(rows) and spec.shape[-1:] in ((1,), ()):
        access = "rowscalar"
    else:
        access = "strided"
    return _Operand(name, tensor, node, spec, access, role)


def _external_role(spec: ValueInfo, shape: tuple, is_row: bool) -> Role:
    """Role of an input by torch's (right-aligned) broadcasting; a per-row
    value of shape S[:-1] only where that broadcasting does not apply."""
    if is_row and spec.shape == shape[:-1] and not broadcasts_to(spec.shape, shape):
        return Role("scal", "rows")
    varies = bool(spec.shape) and spec.shape[-1] != 1 and shape[-1] != 1
    return Role("vec" if varies or not is_row else "scal")


def needs_int64_offsets(shape, specs) -> bool:
    """Whether a kernel over iteration ``shape`` reading/writing tensors
    ``specs`` (``ValueInfo``: shape, stride) can form an element offset above
    int32's range: the iteration space or any tensor's span (the offset of its
    last element) reaches 2**31.  Then the program index is cast to int64,
    so every offset computed from it is 64-bit (Triton's offsets are 32-bit
    otherwise and wrap: an illegal memory access on the GPU)."""
    if math.prod(shape) > INT32_LIMIT:
        return True
    for spec in specs:
        span = sum((size - 1) * abs(stride) for size, stride in zip(spec.shape, spec.stride or ()) if size > 0)
        if max(span, math.prod(spec.shape)) > INT32_LIMIT:
            return True
    return False


def _pointwise_address(o: _Operand, ndim: int) -> str:
    if o.access == "flat":
        return f"{o.name}_ptr + offs"
    if o.access == "bcast":
        terms = " + ".join(f"idx_{d} * {o.name}_stride_{d}" for d in o.dims) or "offs * 0"
        return f"{o.name}_ptr + {terms}"
    terms = " + ".join(f"idx_{d} * {o.name}_stride_{d}" for d in range(ndim)) or "0"
    return f"{o.name}_ptr + {terms}"


def _row_address(o: _Operand, lead: int) -> str:
    lead_terms = " + ".join(f"idx_{d} * {o.name}_stride_{d}" for d in range(lead)) or "0"
    vector = o.role.kind == "vec"
    return {
        "row": f"{o.name}_ptr + row * n_cols + offs_n",
        "col": f"{o.name}_ptr + offs_n",
        "rowscalar": f"{o.name}_ptr + row",
        "rowstrided": f"{o.name}_ptr + {lead_terms}",
        "strided": f"{o.name}_ptr + {lead_terms}" + (f" + offs_n * {o.name}_stride_{lead}" if vector else ""),
    }[o.access]


def _render(sp: SubProblem, operands: list[_Operand], results: list[_Operand], is_row: bool, order: tuple | None) -> str:
    """The kernel file: the values the template needs, then the template."""
    shape = tuple(sp.group.shape)
    ndim = len(shape)
    name = kernel_name(sp) + "_kernel"
    # a tensor of 2**31 elements or more (a long sequence's score matrix) overflows int32 offsets
    program = "tl.program_id(0).to(tl.int64)" if needs_int64_offsets(shape, [o.spec for o in operands + results]) else "tl.program_id(0)"
    env = {o.node.name: o.name for o in operands}
    compute = pointwise_lines(list(sp.nodes), env, is_row)
    strided = [o for o in operands + results if o.access in ("strided", "rowstrided")]
    if is_row:
        lead = ndim - 1
        sizes = ["n_cols"] + ([f"size_{d}" for d in range(1, lead)] if strided else [])
        stride_rows = []
        for o in strided:
            count = lead + (1 if o.access == "strided" and o.role.kind == "vec" else 0)
            stride_rows.append([f"{o.name}_stride_{d}" for d in range(count)])
        address = lambda o: _row_address(o, lead)  # noqa: E731
        vector = lambda o: o.role.kind == "vec"  # noqa: E731  a per-row scalar is one element: no mask
    elif order is not None:
        sizes = ["n_elements"]
        strided = [o for o in operands if o.access == "bcast"]
        stride_rows = [[f"{o.name}_stride_{d}" for d in o.dims] for o in strided if o.dims]
        address = lambda o: _pointwise_address(o, ndim)  # noqa: E731
        vector = lambda o: True  # noqa: E731
    else:
        sizes = ["n_elements"] + ([f"size_{d}" for d in range(1, ndim)] if strided else [])
        stride_rows = [[f"{o.name}_stride_{d}" for d in range(ndim)] for o in strided]
        address = lambda o: _pointwise_address(o, ndim)  # noqa: E731
        vector = lambda o: True  # noqa: E731
    split = ndim - 1 if is_row else ndim  # dimensions the general path indexes (idx_<d>)
    needed = {d for o in operands if o.access == "bcast" for d in o.dims}
    prepare, call = _launch_lines(operands, results, strided, shape, is_row, order)
    loads = [{"name": o.name, "address": address(o), "bool": str(o.spec.dtype) == "torch.bool", "vector": vector(o)} for o in operands]
    stores = [{"address": address(r), "value": round_store(env[r.node.name], f"{r.name}_ptr", r.spec.dtype), "vector": vector(r)} for r in results]
    return render(
        "row_reduction_kernel_file.py.j2" if is_row else "pointwise_kernel_file.py.j2",
        title=f"Triton kernel for sub-problem {sp.id}: {sp.label}",
        label=sp.label,
        module_path=sp.module_path,
        ops=sp.ops,
        shape_text=f"iteration space {list(shape)}" + (", reduced over the last dimension" if is_row else ""),
        shape_tuple=repr(shape),
        inputs_text=", ".join(f"{o.name} {o.spec.describe()}" for o in operands),
        outputs_text=", ".join(f"{r.name} {r.spec.describe()}" for r in results),
        kernel_name=name,
        pointers=[f"{o.name}_ptr" for o in operands + results],
        sizes=sizes,
        strides=stride_rows,
        program_id=program,
        dense_order=list(order) if order is not None else None,
        dense_indices=_dense_indices(shape, order, needed) if order is not None and needed else [],
        split_dims=split if order is None and strided and split > 0 else 0,
        loads=loads,
        compute=compute,
        stores=stores,
        block_name="BLOCK_N" if is_row else "BLOCK_SIZE",
        block_value=f"triton.next_power_of_2({shape[-1]})" if is_row else str(POINTWISE_BLOCK),
        num_warps=_row_warps(shape[-1]) if is_row else 4,
        tune_configs=repr(_row_warp_configs(shape[-1])) if is_row else "",
        outputs_decl=outputs_decl(sp.output_specs),
        launch_args=[o.name for o in operands],
        device_arg=operands[0].name if operands else "out[0]",
        flat_outputs=[] if order is not None else [k for k, r in enumerate(results) if r.access in ("flat", "row", "rowscalar")],
        dense_outputs=list(range(len(results))) if order is not None else [],
        prepare=prepare,
        call_args=call,
    )


def launch_config(group) -> str:
    """One line saying how the kernel for a ``pointwise`` or ``row_reduction`` group is launched (for transcripts)."""
    shape = list(group.shape)
    if group.kind == "row_reduction":
        rows = math.prod(shape[:-1])
        return f"one program per row ({rows} rows), BLOCK_N={triton_next_pow2(shape[-1])}, num_warps={_row_warps(shape[-1])}"
    programs = -(-math.prod(shape) // POINTWISE_BLOCK)
    return f"BLOCK_SIZE={POINTWISE_BLOCK}, {programs} programs, num_warps=4"


def _row_warps(n: int) -> int:
    if n <= 512:
        return 2
    if n <= 2048:
        return 4
    return 8 if n <= 8192 else 16


def _row_warp_configs(n: int) -> list[dict]:
    """Warps per row the GPU tuner tries for a row of ``n`` elements: 1 to 16,
    at least one element per thread.  Fewer warps make each reduction a
    warp shuffle with no shared-memory round trip and let more rows run at
    once; on the H200 a 4096 x 1000 bf16 chain of five reductions took
    0.020 ms with 4 warps, against about 0.003 ms of memory traffic."""
    block = triton_next_pow2(n)
    return [{"num_warps": w} for w in (1, 2, 4, 8, 16) if 32 * w <= max(block, 32)]


def _launch_lines(operands, results, strided, shape, is_row, order=None) -> tuple[list[str], list[str]]:
    """``launch``'s statements before the kernel call (layouts, strides, the
    grid) and the kernel call's positional arguments."""
    prepare: list[str] = []
    for o in operands:
        if order is not None and o.access == "flat":
            prepare.append(f"{o.name} = _dense({o.name}, {tuple(o.spec.stride)})  # read at the flat index: the captured dense layout")
        elif o.access in ("flat", "row", "col", "rowscalar"):
            prepare.append(f"{o.name} = {o.name}.contiguous()  # read with flat offsets")
    for o in strided:
        fn = "_row_strides" if o.access == "rowstrided" or o.role.form == "rows" else "_strides"
        fn = "_channel_strides" if o.channel else fn
        prepare.append(f"{o.name}_strides = {fn}({o.tensor}, ITERATION_SHAPE)")
    ndim = len(shape)
    call = [o.tensor for o in operands + results]
    if is_row:
        n_rows = math.prod(shape[:-1])
        prepare.append(f"grid = ({n_rows},)  # one program per row")
        call.append(f"{shape[-1]}")
        if strided:
            call += [f"{shape[d]}" for d in range(1, ndim - 1)]
        for o in strided:
            count = ndim - 1 + (1 if o.access == "strided" and o.role.kind == "vec" else 0)
            call += [f"*{o.name}_strides[:{count}]"]
    else:
        n = math.prod(shape)
        prepare.append(f"grid = (triton.cdiv({n}, {POINTWISE_BLOCK}),)")
        call.append(f"{n}")
        if order is not None:
            call += [f"{o.name}_strides[{d}]" for o in strided for d in o.dims]
            return prepare, call
        if strided:
            call += [f"{shape[d]}" for d in range(1, ndim)]
        for o in strided:
            call.append(f"*{o.name}_strides")
    return prepare, call
