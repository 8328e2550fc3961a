"""Kernel templates for the sequence-mixer groups: depthwise conv1d and scan.

The groups come from ``fusion.sequence`` (rules there).  Both kernels tile
the iteration shape S with a 2-D tile [BLOCK_T, BLOCK_R]: BLOCK_T steps of
the time dimension (rows) and BLOCK_R positions of the flattened other
dimensions (columns, the last dimension innermost, so a tile is contiguous
along C when C is the contiguous dimension).  Every boundary tensor is
read through its own strides (pointwise operands through their strides
broadcast to S), so the transposes around a conv1d and a cumsum over a
strided dim cost no copies; outputs are written through the captured
strides.  Pointwise ops are emitted by ``kernel_source.pointwise_lines``
(``expressions.POINTWISE``); everything is fp32.  The kernel bodies are
``templates/depthwise_conv1d_kernel_file.py.j2`` and
``templates/scan_kernel_file.py.j2`` (both extend ``sequence_kernel_file.py.j2``).

- *depthwise conv1d*: one program per tile, grid (T / BLOCK_T, R / BLOCK_R).
  y[b, c, t] = bias[c] + sum_k w[c, 0, k] * x[b, c, t + start - pad + k]
  (zero outside [0, T_in)), K loads of shifted tiles (served by L1/L2), then
  the pointwise tail on the tile.
- *scan*: one program per BLOCK_R columns walks the time dimension in
  BLOCK_T steps: prologue on the tile, ``tl.cumsum`` along the tile's rows
  plus a running fp32 carry (the sum of all earlier tiles), epilogue, store.
  Eager PyTorch accumulates a bf16/fp16 cumsum in fp32 too (ATen's
  ``acc_type``) but rounds the cumsum's output to bf16 before the epilogue;
  this kernel keeps the fp32 value through the epilogue (at least as
  accurate).  Sequential scan with carry: Blelloch's "scan with block sums"
  (Harris et al., GPU Gems 3, ch. 39) with one program per column block.

``generate(sp)`` returns the kernel file's source or raises Unsupported;
``tiles(kind, shape, ...)`` the tile configuration; ``launch_config`` one line.
"""
from __future__ import annotations

import math

from lego_core.agents.template.kernel_source import kernel_name, operand_names, output_names, outputs_decl, pointwise_lines, render, triton_next_pow2
from lego_core.agents.template.expressions import Unsupported
from lego_core.agents.template.rounding import complete_file, round_store
from lego_core.load.capture import op_name
from lego_core.tree.fusion.sequence import depthwise_conv1d_spec, scan_spec
from lego_core.tree.subproblem import SubProblem

TILE_ELEMENTS = 2048  # elements per [BLOCK_T, BLOCK_R] tile
MIN_PROGRAMS = 264  # scan: at least about two programs per SM of an H100/H200 (132 SMs) where the columns allow


def tiles(kind: str, shape: tuple, time_dim: int, time_contiguous: bool) -> tuple[int, int, int]:
    """(BLOCK_T, BLOCK_R, num_warps) for a ``depthwise_conv1d`` or ``scan`` tile over ``shape``.

    depthwise conv1d: 64 columns x 32 steps when the columns are contiguous
    (C last), 32 x 64 when time is; scan: the widest column block in 64, 32,
    16 that still gives ``MIN_PROGRAMS`` programs, and ``TILE_ELEMENTS`` per tile.
    Both shrink to the problem (powers of two, >= 16 rows for ``tl.cumsum``)."""
    n_t = shape[time_dim]
    n_r = math.prod(shape) // max(1, n_t)
    if kind == "scan":
        block_r = 64
        while block_r > 16 and -(-n_r // block_r) < MIN_PROGRAMS:
            block_r //= 2
    else:
        block_r = 32 if time_contiguous else 64
    block_r = min(block_r, max(16, triton_next_pow2(n_r)))
    block_t = min(TILE_ELEMENTS // block_r, max(16, triton_next_pow2(n_t)))
    return block_t, block_r, 4


def _columns(shape: tuple, time_dim: int) -> list[dict]:
    """How ``i<d>`` ([BLOCK_R] vectors) follows for every dim but time from the
    flat column index ``r``, innermost first: ``size`` for ``rest % size``
    (None for the outermost, which takes what is left)."""
    cols = [d for d in range(len(shape)) if d != time_dim]
    return [{"dim": d, "size": None if pos == len(cols) - 1 else shape[d]} for pos, d in enumerate(reversed(cols))]


def _index(shape: tuple, time_dim: int) -> dict[int, str]:
    return {d: ("t[:, None]" if d == time_dim else f"i{d}[None, :]") for d in range(len(shape))}


def _address(name: str, ix: dict[int, str]) -> str:
    return f"{name}_ptr + " + " + ".join(f"{ix[d]} * {name}_stride_{d}" for d in sorted(ix))


class _Kernel:
    """Operands, stride parameters and launch arguments of one kernel file."""

    def __init__(self, sp: SubProblem, shape: tuple):
        for spec, what in [(s, "input") for s in sp.input_specs] + [(s, "output") for s in sp.output_specs]:
            if spec is None:
                raise Unsupported(f"an {what} is not a single tensor")
        if any(tuple(s.shape) != tuple(shape) for s in sp.output_specs):
            raise Unsupported("an output is not of the iteration shape")
        self.sp, self.shape = sp, tuple(shape)
        self.names = operand_names(sp.inputs, {f"v_{n.name}" for n in sp.nodes})
        self.local = dict(zip((n.name for n in sp.inputs), self.names))
        self.outputs = output_names(len(sp.outputs))
        self.pointers = [f"{name}_ptr" for name in self.names + self.outputs]
        self.call = self.names + [f"out[{k}]" for k in range(len(sp.outputs))]
        self.strides: list[list[str]] = []
        self.stride_calls: list[str] = []

    def stride_params(self, params: list[str], call: str) -> None:
        """Stride parameters ``params`` of the kernel, passed as ``call`` (one expression per parameter, or a ``*`` unpacking)."""
        self.strides.append(params)
        self.stride_calls.append(call)

    def operand_loads(self, names: set[str], ix: dict[int, str], env: dict[str, str]) -> list[dict]:
        """Loads of the boundary inputs in ``names`` over the tile, through their strides broadcast to S."""
        loads = []
        for node, spec, name in zip(self.sp.inputs, self.sp.input_specs, self.names):
            if node.name not in names:
                continue
            self.stride_params([f"{name}_stride_{d}" for d in range(len(self.shape))], f"*_strides({name}, ITERATION_SHAPE)")
            loads.append({"name": name, "address": _address(name, ix), "bool": str(spec.dtype) == "torch.bool"})
            env[node.name] = name
        return loads

    def stores(self, ix: dict[int, str], env: dict[str, str]) -> list[dict]:
        stores = []
        for k, (node, name) in enumerate(zip(self.sp.outputs, self.outputs)):
            self.stride_params([f"{name}_stride_{d}" for d in range(len(self.shape))], f"*out[{k}].stride()")
            if node.name not in env:
                raise Unsupported(f"output {node.name} is not computed in the kernel")
            stores.append({"address": _address(name, ix), "value": round_store(env[node.name], f"{name}_ptr", self.sp.output_specs[k].dtype)})
        return stores

    def render(self, template: str, how: str, block: tuple, shape_text: str, **body) -> str:
        """The kernel file from ``templates/<template>``; ``body``: the values its kernel body reads."""
        sp = self.sp
        return render(
            template,
            title=f"Triton kernel for sub-problem {sp.id}: {sp.label}",
            how=how,
            label=sp.label,
            module_path=sp.module_path,
            ops=sp.ops,
            shape_text=shape_text,
            shape_tuple=repr(self.shape),
            inputs_text=", ".join(f"{name} {s.describe()}" for name, s in zip(self.names, sp.input_specs)),
            outputs_text=", ".join(f"{name} {s.describe()}" for name, s in zip(self.outputs, sp.output_specs)),
            outputs_decl=outputs_decl(sp.output_specs),
            block_t=block[0],
            block_r=block[1],
            num_warps=block[2],
            kernel_name=kernel_name(sp) + "_kernel",
            pointers=self.pointers,
            strides=self.strides,
            launch_args=self.names,
            call_args=self.call + self.stride_calls,
            broadcast_strides=any(call.startswith("*_strides(") for call in self.stride_calls),
            **body,
        )


@complete_file
def generate(sp: SubProblem) -> str:
    """Source of the kernel file of a ``depthwise_conv1d`` or ``scan`` sub-problem."""
    kind = getattr(sp.group, "kind", None)
    if kind == "depthwise_conv1d":
        return _generate_conv(sp)
    if kind == "scan":
        return _generate_scan(sp)
    raise Unsupported(f"{kind} is not a sequence group")


def _time_contiguous(spec, time_dim: int) -> bool:
    return spec.stride[time_dim] == 1 and spec.shape[time_dim] > 1


def _generate_conv(sp: SubProblem) -> str:
    spec, reason = depthwise_conv1d_spec(list(sp.nodes))
    if spec is None:
        raise Unsupported(reason)
    shape = tuple(sp.group.shape)
    time_dim, chan_dim = (1, 2) if spec.permuted else (2, 1)
    kern = _Kernel(sp, shape)
    conv = spec.conv
    x, weight, bias = conv.args[0], conv.args[1], conv.args[2]
    for a in (x, weight, bias):
        if a is not None and a.name not in kern.local:
            raise Unsupported(f"{a.name} is computed inside the group")
    x_spec = sp.input_specs[sp.inputs.index(x)]
    n_t, n_r = shape[time_dim], math.prod(shape) // shape[time_dim]
    block = tiles("depthwise_conv1d", shape, time_dim, _time_contiguous(x_spec, 2))
    ix = _index(shape, time_dim)
    xs, ws = kern.local[x.name], kern.local[weight.name]
    bs = kern.local[bias.name] if bias is not None else None
    # the convolution's operands through their own strides: x [B, C, T_in], weight [C, 1, K], bias [C]
    kern.stride_params([f"{xs}_stride_b", f"{xs}_stride_c", f"{xs}_stride_t"], f"*{xs}.stride()")
    kern.stride_params([f"{ws}_stride_c", f"{ws}_stride_k"], f"{ws}.stride(0), {ws}.stride(2)")
    if bs is not None:
        kern.stride_params([f"{bs}_stride_c"], f"{bs}.stride(0)")
    env = {spec.view.name: "acc"}
    tail_reads = {a.name for n in spec.tail for a in n.all_input_nodes} & set(kern.local)
    loads = kern.operand_loads(tail_reads, ix, env)
    tail = pointwise_lines(list(spec.tail), env)
    stores = kern.stores(ix, env)
    how = (
        f"Depthwise conv1d (kernel {spec.kernel_size}, padding {spec.padding}, time steps "
        f"[{spec.start}, {spec.start + spec.length}) of the conv output"
        f"{', transposed to [B, T, C]' if spec.permuted else ''}) with its pointwise tail, one tile"
        f" [BLOCK_T, BLOCK_R] of (time, the other dims flattened) per program."
    )
    return kern.render(
        "depthwise_conv1d_kernel_file.py.j2", how, block, f"output {list(shape)}, time dim {time_dim}",
        n_t=n_t, n_r=n_r, t_in=x_spec.shape[2], columns=_columns(shape, time_dim), chan_dim=chan_dim,
        x=xs, weight=ws, bias=bs, taps=[spec.start - spec.padding + k for k in range(spec.kernel_size)],
        loads=loads, compute=tail, stores=stores, grid=f"(triton.cdiv({n_t}, BLOCK_T), triton.cdiv({n_r}, BLOCK_R))",
    )  # fmt: skip


def _generate_scan(sp: SubProblem) -> str:
    spec, reason = scan_spec(list(sp.nodes))
    if spec is None:
        raise Unsupported(reason)
    shape = tuple(sp.group.shape)
    time_dim = spec.dim
    kern = _Kernel(sp, shape)
    n_t, n_r = shape[time_dim], math.prod(shape) // shape[time_dim]
    src = spec.cumsum.args[0]
    block = tiles("scan", shape, time_dim, False)
    ix = _index(shape, time_dim)
    reads = {a.name for n in sp.nodes for a in n.all_input_nodes} & set(kern.local)
    env: dict[str, str] = {}
    loads = kern.operand_loads(reads, ix, env)
    prologue = pointwise_lines(list(spec.prologue), env)
    if src.name not in env:
        raise Unsupported(f"the cumsum input {src.name} is not available in the kernel")
    scanned, var = env[src.name], f"v_{spec.cumsum.name}"
    env[spec.cumsum.name] = var
    epilogue = pointwise_lines(list(spec.epilogue), env)
    stores = kern.stores(ix, env)
    how = (
        f"cumsum over dim {time_dim} ({n_t} steps) with {len(spec.prologue)} prologue and {len(spec.epilogue)} epilogue "
        f"pointwise ops: one program per BLOCK_R of the {n_r} other positions walks time in BLOCK_T steps with an fp32 carry."
    )
    return kern.render(
        "scan_kernel_file.py.j2", how, block, f"iteration space {list(shape)}, scanned over dim {time_dim}",
        n_t=n_t, n_r=n_r, columns=_columns(shape, time_dim), time_dim=time_dim, cumsum_op=op_name(spec.cumsum),
        loads=loads, prologue=prologue, scanned=scanned, scan_var=var, epilogue=epilogue, stores=stores,
        grid=f"(triton.cdiv({n_r}, BLOCK_R),)",
    )  # fmt: skip


def launch_config(group) -> str:
    """One line saying how a ``depthwise_conv1d`` / ``scan`` kernel runs (for transcripts)."""
    shape = tuple(group.shape)
    if group.kind == "scan":
        spec, _ = scan_spec(list(group.nodes))
        dim = spec.dim if spec else len(shape) - 1
        bt, br, warps = tiles("scan", shape, dim, False)
        programs = -(-(math.prod(shape) // shape[dim]) // br)
        return f"scan over dim {dim}: {programs} programs of BLOCK_R={br}, BLOCK_T={bt} steps per iteration, num_warps={warps}"
    spec, _ = depthwise_conv1d_spec(list(group.nodes))
    dim = 1 if spec is not None and spec.permuted else 2
    bt, br, warps = tiles("depthwise_conv1d", shape, dim, False)
    return f"depthwise conv1d tiles BLOCK_T={bt} x BLOCK_R={br}, num_warps={warps}"
