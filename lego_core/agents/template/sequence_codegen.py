"""Kernel templates for the sequence-mixer groups: depthwise conv1d and scan.

The groups come from ``fusion.sequence`` (rules there).  Both kernels tile
the iteration shape S with a 2-D tile [BLOCK_T, BLOCK_R]: BLOCK_T steps of
the time dimension (rows) and BLOCK_R positions of the flattened other
dimensions (columns, the last dimension innermost, so a tile is contiguous
along C when C is the contiguous dimension).  Every boundary tensor is
read through its own strides (pointwise operands through their strides
broadcast to S), so the transposes around a conv1d and a cumsum over a
strided dim cost no copies; outputs are written through the captured
strides.  Pointwise ops are emitted by the pointwise template's emitters
(``codegen._emit_nodes``, ``expressions.POINTWISE``); everything is fp32.

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
import types

from lego_core.agents.template.codegen import _TEMPLATES, _emit_nodes, _load, kernel_name, triton_next_pow2
from lego_core.agents.template.expressions import Unsupported
from lego_core.agents.template.rounding import round_store
from lego_core.load.capture import op_name
from lego_core.tree.fusion.sequence import depthwise_conv1d_spec, scan_spec
from lego_core.tree.subproblem import SubProblem
from lego_core.agents.template.rounding import complete_file

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


def _column_lines(shape: tuple, time_dim: int) -> list[str]:
    """``i<d>`` ([BLOCK_R] vectors) for every dim but time, from the flat column index ``r``."""
    cols = [d for d in range(len(shape)) if d != time_dim]
    lines = ["rest = r"]
    for pos, d in enumerate(reversed(cols)):
        if pos == len(cols) - 1:
            lines.append(f"i{d} = rest")
        else:
            lines += [f"i{d} = rest % {shape[d]}", f"rest = rest // {shape[d]}"]
    return lines


def _index(shape: tuple, time_dim: int) -> dict[int, str]:
    return {d: ("t[:, None]" if d == time_dim else f"i{d}[None, :]") for d in range(len(shape))}


def _address(name: str, ix: dict[int, str]) -> str:
    return f"{name}_ptr + " + " + ".join(f"{ix[d]} * {name}_s{d}" for d in sorted(ix))


class _Kernel:
    """Operands, stride arguments and launch arguments of one kernel file."""

    def __init__(self, sp: SubProblem, shape: tuple):
        for spec, what in [(s, "input") for s in sp.input_specs] + [(s, "output") for s in sp.output_specs]:
            if spec is None:
                raise Unsupported(f"an {what} is not a single tensor")
        if any(tuple(s.shape) != tuple(shape) for s in sp.output_specs):
            raise Unsupported("an output is not of the iteration shape")
        self.sp, self.shape = sp, tuple(shape)
        self.local = {n.name: f"in{k}" for k, n in enumerate(sp.inputs)}
        self.pointers = [f"in{k}_ptr" for k in range(len(sp.inputs))] + [f"out{k}_ptr" for k in range(len(sp.outputs))]
        self.call = [f"in{k}" for k in range(len(sp.inputs))] + [f"out[{k}]" for k in range(len(sp.outputs))]
        self.strides: list[list[str]] = []
        self.stride_calls: list[str] = []

    def stride_args(self, name: str, tensor: str, ndim: int, broadcast: bool) -> None:
        """Stride parameters ``<name>_s0..`` of ``tensor``: its own, or broadcast to S."""
        self.strides.append([f"{name}_s{d}" for d in range(ndim)])
        self.stride_calls.append(f"*_strides({tensor}, ITERATION_SHAPE)" if broadcast else f"*{tensor}.stride()")

    def operand_loads(self, names: set[str], ix: dict[int, str], env: dict[str, str]) -> list[str]:
        """Loads of the boundary inputs in ``names`` over the tile (broadcast strides)."""
        lines = []
        for k, (node, spec) in enumerate(zip(self.sp.inputs, self.sp.input_specs)):
            if node.name not in names:
                continue
            self.stride_args(f"in{k}", f"in{k}", len(self.shape), True)
            lines.append(f"x_in{k} = {_load(_address(f'in{k}', ix), spec, True)}")
            env[node.name] = f"x_in{k}"
        return lines

    def stores(self, ix: dict[int, str], env: dict[str, str]) -> list[str]:
        lines = []
        for k, node in enumerate(self.sp.outputs):
            self.stride_args(f"out{k}", f"out[{k}]", len(self.shape), False)
            if node.name not in env:
                raise Unsupported(f"output {node.name} is not computed in the kernel")
            value = round_store(env[node.name], f"out{k}_ptr", self.sp.output_specs[k].dtype)
            lines.append(f"tl.store({_address(f'out{k}', ix)}, {value}, mask=mask)")
        return lines

    def render(self, template: str, how: str, body: list[str], grid: str, block: tuple, time_dim: int, shape_text: str) -> str:
        sp = self.sp
        outputs_decl = "(" + "".join(f"({tuple(s.shape)}, {tuple(s.stride)}, {s.dtype}), " for s in sp.output_specs) + ")"
        return _TEMPLATES.get_template("sequence_kernel_file.py.j2").render(
            title=f"Triton kernel for sub-problem {sp.id}: {sp.label}",
            template=template,
            how=how,
            label=sp.label,
            module_path=sp.module_path,
            ops=sp.ops,
            shape_text=shape_text,
            shape_tuple=repr(self.shape),
            inputs_text=", ".join(f"in{k} {s.describe()}" for k, s in enumerate(sp.input_specs)),
            outputs_text=", ".join(f"out{k} {s.describe()}" for k, s in enumerate(sp.output_specs)),
            outputs_decl=outputs_decl,
            block_t=block[0],
            block_r=block[1],
            num_warps=block[2],
            kernel_name=kernel_name(sp) + "_kernel",
            pointers=self.pointers,
            strides=self.strides,
            stride_note="per dimension of the iteration space, 0 where broadcast; conv operands their own",
            body=body,
            launch_args=[f"in{k}" for k in range(len(sp.inputs))],
            grid=grid,
            call_args=self.call + self.stride_calls,
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
    t_in = x_spec.shape[2]
    n_t, n_r = shape[time_dim], math.prod(shape) // shape[time_dim]
    block = tiles("depthwise_conv1d", shape, time_dim, _time_contiguous(x_spec, 2))
    ix = _index(shape, time_dim)
    body = [
        "pid_t = tl.program_id(0)",
        "pid_r = tl.program_id(1)",
        "t = pid_t * BLOCK_T + tl.arange(0, BLOCK_T)",
        "r = pid_r * BLOCK_R + tl.arange(0, BLOCK_R)",
        f"mask = (t[:, None] < {n_t}) & (r[None, :] < {n_r})",
        *_column_lines(shape, time_dim),
        f"c = i{chan_dim}",
        "# depthwise convolution over time, fp32 accumulation",
        "acc = tl.zeros([BLOCK_T, BLOCK_R], dtype=tl.float32)",
    ]
    xs, ws = kern.local[x.name], kern.local[weight.name]
    kern.stride_args(f"{xs}c", xs, 3, False)
    kern.stride_args(f"{ws}w", ws, 3, False)
    offset = spec.start - spec.padding
    for k in range(spec.kernel_size):
        body += [
            f"tin = t[:, None] + {offset + k}",
            f"w{k} = tl.load({ws}_ptr + c * {ws}w_s0 + {k} * {ws}w_s2, mask=r < {n_r}, other=0.0).to(tl.float32)",
            f"x{k} = tl.load({xs}_ptr + i0[None, :] * {xs}c_s0 + c[None, :] * {xs}c_s1 + tin * {xs}c_s2,"
            f" mask=mask & (tin >= 0) & (tin < {t_in}), other=0.0).to(tl.float32)",
            f"acc += x{k} * w{k}[None, :]",
        ]
    if bias is not None:
        bs = kern.local[bias.name]
        kern.stride_args(f"{bs}b", bs, 1, False)
        body.append(f"acc += tl.load({bs}_ptr + c * {bs}b_s0, mask=r < {n_r}, other=0.0).to(tl.float32)[None, :]")
    env = {spec.view.name: "acc"}
    tail_reads = {a.name for n in spec.tail for a in n.all_input_nodes} & set(kern.local)
    body.append("# load the tail's operands")
    body += kern.operand_loads(tail_reads, ix, env)
    body.append("# pointwise tail")
    body += _emit_nodes(types.SimpleNamespace(nodes=list(spec.tail)), env, False)
    body.append("# store")
    body += kern.stores(ix, env)
    how = (
        f"Depthwise conv1d (kernel {spec.kernel_size}, padding {spec.padding}, time steps "
        f"[{spec.start}, {spec.start + spec.length}) of the conv output"
        f"{', transposed to [B, T, C]' if spec.permuted else ''}) with its pointwise tail, one tile"
        f" [BLOCK_T, BLOCK_R] of (time, the other dims flattened) per program."
    )
    grid = f"(triton.cdiv({n_t}, BLOCK_T), triton.cdiv({n_r}, BLOCK_R))"
    return kern.render("depthwise conv1d", how, body, grid, block, time_dim, f"output {list(shape)}, time dim {time_dim}")


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
    loop = ["t = t0 + tl.arange(0, BLOCK_T)", f"mask = (t[:, None] < {n_t}) & (r[None, :] < {n_r})", "# load"]
    loop += kern.operand_loads(reads, ix, env)
    loop.append("# prologue")
    loop += _emit_nodes(types.SimpleNamespace(nodes=list(spec.prologue)), env, False)
    if src.name not in env:
        raise Unsupported(f"the cumsum input {src.name} is not available in the kernel")
    var = f"v_{spec.cumsum.name}"
    loop += [
        f"# {op_name(spec.cumsum)} over dim {time_dim}: within the tile, plus the carry of earlier tiles",
        f"scan_in = tl.where(mask, {env[src.name]}, 0.0)",
        f"{var} = tl.cumsum(scan_in, axis=0) + carry[None, :]",
        "carry += tl.sum(scan_in, axis=0)",
    ]
    env[spec.cumsum.name] = var
    loop.append("# epilogue")
    loop += _emit_nodes(types.SimpleNamespace(nodes=list(spec.epilogue)), env, False)
    loop.append("# store")
    loop += kern.stores(ix, env)
    body = [
        "pid_r = tl.program_id(0)",
        "r = pid_r * BLOCK_R + tl.arange(0, BLOCK_R)",
        *_column_lines(shape, time_dim),
        "carry = tl.zeros([BLOCK_R], dtype=tl.float32)",
        f"for t0 in range(0, {n_t}, BLOCK_T):",
    ] + [f"    {line}" for line in loop]
    how = (
        f"cumsum over dim {time_dim} ({n_t} steps) with {len(spec.prologue)} prologue and {len(spec.epilogue)} epilogue "
        f"pointwise ops: one program per BLOCK_R of the {n_r} other positions walks time in BLOCK_T steps with an fp32 carry."
    )
    grid = f"(triton.cdiv({n_r}, BLOCK_R),)"
    return kern.render("scan", how, body, grid, block, time_dim, f"iteration space {list(shape)}, scanned over dim {time_dim}")


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
