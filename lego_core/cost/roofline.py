"""Roofline floor of a whole model: the least time its work can take on this machine.

``floor_ms = max(flops / flops_per_s, bytes / bytes_per_s)`` (Williams,
Waterman and Patterson, "Roofline: an insightful visual performance model",
CACM 2009), with

* **FLOPs** (:func:`count_work`) from the captured core-ATen graph
  (``lego_core.load.capture.capture_graph``): ``2*M*N*K`` per ``mm``/``addmm``,
  ``2*B*M*N*K`` per ``bmm``/``baddbmm``, ``2 * weight.numel * N * out_spatial``
  per convolution (``in_spatial`` for a transposed one), ``4*B*H*L*S*E``
  per fused attention op (halved when causal), ``2 * tokens * weights`` per
  whole recurrent layer (``aten.lstm``/``gru``/``rnn_*``).  Pointwise and
  reduction FLOPs are not counted: a model made of them is memory-bound
  and its bytes decide.
* **minimal bytes**: the model's inputs, every parameter, buffer and constant
  read once, and the outputs written once: what no implementation can avoid.
* **ceilings** (:func:`measure_ceilings`) measured on the machine once per
  process: bandwidth from a large device-to-device copy (read + write bytes),
  FLOP/s from a large matmul in the run's dtype.  For fp32 two FLOP ceilings
  exist because eager has two precisions: ``torch.matmul`` runs full fp32
  (``torch.backends.cuda.matmul.allow_tf32`` is False by default) while cuDNN
  convolutions and RNNs use TF32 (``torch.backends.cudnn.allow_tf32`` is True
  by default); convolution and recurrent FLOPs are divided by the TF32
  ceiling when cuDNN allows TF32.

Op facts (which ops are matmuls, attention, convolutions, recurrent layers)
and the FLOP formulas come from the op registry, ``lego_core.ops``
(``ops.flops``).

Usage: ``python -m lego_core.cost.roofline MODEL.py [k=v ...] [--dtype bf16] [--device cuda]``
prints the counts, the ceilings and the floor.
"""
from __future__ import annotations

import argparse
import dataclasses
from typing import Callable

import torch
import torch.fx as fx

from lego_core import ops
from lego_core.load.capture import Graph, op_name, value_info

# Sizes of the ceiling measurements: 1 GiB copies (far beyond L2) and a
# square matmul large enough to reach the tensor cores' steady state.
GPU_COPY_BYTES = 1 << 30
GPU_MATMUL_N = 8192
CPU_COPY_BYTES = 64 << 20
CPU_MATMUL_N = 512


@dataclasses.dataclass(frozen=True)
class WorkCount:
    """What a model must do at least.

    ``matmul_flops``: FLOPs of matmul-like and fused attention ops (cuBLAS /
    attention kernels); ``cudnn_flops``: FLOPs of convolutions and whole
    recurrent layers (cuDNN); ``bytes``: minimal bytes moved (inputs,
    parameters, buffers and constants read once, outputs written once);
    ``by_op``: FLOPs per op name.
    """

    matmul_flops: int
    cudnn_flops: int
    bytes: int
    by_op: dict

    @property
    def flops(self) -> int:
        return self.matmul_flops + self.cudnn_flops


@dataclasses.dataclass(frozen=True)
class Ceilings:
    """Machine ceilings measured by :func:`measure_ceilings`.

    ``bytes_per_s``: copy bandwidth, read + write bytes per second;
    ``matmul_flops_per_s``: matmul FLOP/s in ``dtype`` as eager runs it;
    ``cudnn_flops_per_s``: the FLOP/s that cuDNN ops (conv, RNN) reach in
    ``dtype`` (TF32 for fp32 when cuDNN allows it, else equal to the matmul
    ceiling).  ``method``: how they were measured.
    """

    device: str
    dtype: str
    bytes_per_s: float
    matmul_flops_per_s: float
    cudnn_flops_per_s: float
    method: str

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class Floor:
    """A model's roofline floor: ``floor_ms`` and which side bounds it
    (``bound`` is ``compute`` or ``memory``), with the counts and ceilings used."""

    floor_ms: float
    compute_ms: float
    memory_ms: float
    bound: str
    flops: int
    bytes: int

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def _shape(node) -> tuple:
    info = value_info(node) if isinstance(node, fx.Node) else None
    if info is None:
        raise ValueError(f"no tensor shape recorded for {node!r}")
    return info.shape


def _shapes(values) -> list[tuple]:
    """Shapes of the graph values among ``values``, in order."""
    return [_shape(v) for v in values if isinstance(v, fx.Node)]


def matmul_flops(node: fx.Node) -> int:
    """FLOPs of one matmul node (``mm``/``addmm``/``bmm``/``baddbmm``...): 2 per
    multiply-add, the bias add of ``addmm``/``baddbmm`` not counted
    (``ops.flops``' tensor-core part)."""
    return ops.flops(node.target, _shapes(node.args), [_shape(node)]).tensor_core


def conv_flops(node: fx.Node) -> int:
    """FLOPs of one convolution node: ``2 * weight.numel * N * prod(out_spatial)``,
    or ``prod(in_spatial)`` for a transposed convolution (weight shape
    ``(C_out, C_in/groups, *k)`` resp. ``(C_in, C_out/groups, *k)``); the
    bias not counted (``ops.flops``' tensor-core part)."""
    x, w = node.args[0], node.args[1]
    return ops.flops(node.target, [_shape(x), _shape(w)], [_shape(node)], node.args).tensor_core


def attention_flops(node: fx.Node) -> int:
    """FLOPs of one fused attention node with q ``(B, H, L, E)``, k ``(B, Hk, S, E)``
    and v ``(B, Hk, S, Ev)``: ``2*B*H*L*S*(E + Ev)``, halved when ``is_causal``
    (the masked half need not be computed; ``ops.flops``)."""
    q, k, v = node.args[0], node.args[1], node.args[2]
    causal = bool(_argument(node, "is_causal"))
    return ops.flops(node.target, [_shape(q), _shape(k), _shape(v)], [], causal=causal).tensor_core


def rnn_flops(node: fx.Node) -> int:
    """FLOPs of one whole recurrent layer op (``aten.lstm.input`` and kin):
    every 2-D weight matrix in its parameter list is applied once per token,
    ``2 * tokens * weight.numel``, tokens = input.numel / input feature size
    (``ops.flops``)."""
    params = _argument(node, "params") or []
    return ops.flops(node.target, [_shape(node.args[0])] + _shapes(params), []).tensor_core


def _argument(node: fx.Node, name: str):
    """The value of the argument called ``name`` (by the op's schema), positional or keyword; None if absent."""
    if name in node.kwargs:
        return node.kwargs[name]
    schema = getattr(node.target, "_schema", None)
    for i, arg in enumerate(schema.arguments if schema is not None else []):
        if arg.name == name and i < len(node.args):
            return node.args[i]
    return None


def node_flops(node: fx.Node) -> tuple[str, int] | None:
    """``("matmul" | "cudnn", flops)`` for a counted node, else None: by the
    op's category in the registry (``lego_core.ops``), matmuls and fused
    attention on cuBLAS / attention kernels, convolutions and whole recurrent
    layers (the ops capture keeps whole) on cuDNN."""
    kind = ops.category(op_name(node))
    if kind == ops.MATMUL:
        return "matmul", matmul_flops(node)
    if kind == ops.ATTENTION:
        return "matmul", attention_flops(node)
    if kind == ops.CONVOLUTION:
        return "cudnn", conv_flops(node)
    if kind == ops.RECURRENT:
        return "cudnn", rnn_flops(node)
    return None


def minimal_bytes(graph: Graph) -> int:
    """Bytes every implementation moves: each placeholder (user input,
    parameter, buffer, constant) read once and each output written once."""
    total = 0
    for node in graph.placeholders:
        info = value_info(node)
        if info is not None:
            total += info.nbytes
    for node in dict.fromkeys(graph.output_nodes):
        info = value_info(node)
        if info is not None:
            total += info.nbytes
    return total


def count_work(graph: Graph) -> WorkCount:
    """FLOPs and minimal bytes of a captured graph (see the module docstring)."""
    mm = cudnn = 0
    by_op: dict[str, int] = {}
    for node in graph.compute_nodes:
        counted = node_flops(node)
        if counted is None:
            continue
        kind, flops = counted
        if kind == "matmul":
            mm += flops
        else:
            cudnn += flops
        by_op[op_name(node)] = by_op.get(op_name(node), 0) + flops
    return WorkCount(mm, cudnn, minimal_bytes(graph), by_op)


def floor(work: WorkCount, ceilings: Ceilings) -> Floor:
    """The roofline floor of ``work`` under ``ceilings``, in ms."""
    compute_s = work.matmul_flops / ceilings.matmul_flops_per_s + work.cudnn_flops / ceilings.cudnn_flops_per_s
    memory_s = work.bytes / ceilings.bytes_per_s
    return Floor(
        floor_ms=max(compute_s, memory_s) * 1e3,
        compute_ms=compute_s * 1e3,
        memory_ms=memory_s * 1e3,
        bound="compute" if compute_s >= memory_s else "memory",
        flops=work.flops,
        bytes=work.bytes,
    )


_ceilings_cache: dict[tuple[str, str], Ceilings] = {}


def measure_ceilings(device: str | torch.device, dtype: torch.dtype | str) -> Ceilings:
    """Copy bandwidth and matmul FLOP/s of ``device`` in ``dtype``, measured
    once per process (cached by device and dtype).

    On CUDA: ``lego_core.runtime.timing.time_gpu`` (median, CUDA events) of a 1 GiB
    ``copy_`` (counted as 2 GiB moved) and of an 8192^3 matmul; the fp32
    matmul with ``allow_tf32`` off (as eager runs ``torch.matmul``) and, when
    ``torch.backends.cudnn.allow_tf32`` is on, once more with TF32 for the
    cuDNN ceiling.  On CPU the same with 64 MiB and 512^3 through
    ``time_cpu``.  Raises RuntimeError for CUDA without a GPU.
    """
    from lego_core.dtypes import as_dtype
    from lego_core.runtime.timing import time_cpu, time_gpu

    device = torch.device(device)
    dtype = as_dtype(dtype)
    key = (str(device), str(dtype))
    if key in _ceilings_cache:
        return _ceilings_cache[key]
    cuda = device.type == "cuda"
    timer: Callable = time_gpu if cuda else time_cpu
    copy_bytes, n = (GPU_COPY_BYTES, GPU_MATMUL_N) if cuda else (CPU_COPY_BYTES, CPU_MATMUL_N)
    src = torch.empty(copy_bytes, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    copy_ms = timer(lambda xs: xs[1].copy_(xs[0]), [[src, dst]], rep=20).median_ms
    del src, dst
    a = torch.randn(n, n, device=device).to(dtype)
    b = torch.randn(n, n, device=device).to(dtype)
    out = torch.empty(n, n, device=device, dtype=dtype)
    mm_flops = 2 * n**3

    def matmul_ms(tf32: bool) -> float:
        previous = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = tf32
        try:
            return timer(lambda xs: torch.mm(xs[0], xs[1], out=out), [[a, b]], rep=20).median_ms
        finally:
            torch.backends.cuda.matmul.allow_tf32 = previous

    mm_ms = matmul_ms(False)
    cudnn_ms = matmul_ms(True) if cuda and dtype == torch.float32 and torch.backends.cudnn.allow_tf32 else mm_ms
    result = Ceilings(
        device=str(device),
        dtype=str(dtype).removeprefix("torch."),
        bytes_per_s=2 * copy_bytes / (copy_ms * 1e-3),
        matmul_flops_per_s=mm_flops / (mm_ms * 1e-3),
        cudnn_flops_per_s=mm_flops / (cudnn_ms * 1e-3),
        method=f"{'cuda_events' if cuda else 'perf_counter'}: copy of {copy_bytes >> 20} MiB, {n}^3 matmul",
    )
    _ceilings_cache[key] = result
    return result


def main(argv: list[str] | None = None) -> int:
    from lego_core.load.capture import capture_graph
    from lego_core.load.problem import ProblemSpec, load_problem, parse_overrides

    parser = argparse.ArgumentParser(prog="python -m lego_core.cost.roofline", description="roofline floor of a model")
    parser.add_argument("model")
    parser.add_argument("overrides", nargs="*")
    parser.add_argument("--dtype", default="fp32")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args(argv)
    problem = load_problem(ProblemSpec(args.model, parse_overrides(args.overrides), args.dtype, args.device))
    work = count_work(capture_graph(problem))
    ceilings = measure_ceilings(args.device, args.dtype)
    result = floor(work, ceilings)
    for op, flops in sorted(work.by_op.items()):
        print(f"{op:50} {flops / 1e9:12.3f} GFLOP")
    print(f"bytes {work.bytes / 1e6:.3f} MB; ceilings {ceilings.bytes_per_s / 1e9:.1f} GB/s, {ceilings.matmul_flops_per_s / 1e12:.2f} TFLOP/s matmul, {ceilings.cudnn_flops_per_s / 1e12:.2f} TFLOP/s cuDNN")
    print(f"floor {result.floor_ms:.4f} ms ({result.bound}-bound; compute {result.compute_ms:.4f} ms, memory {result.memory_ms:.4f} ms)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
