"""GPU check of the GEMM + epilogue template with per-shape tuning (run on a CUDA machine).

For each case and dtype (bf16, fp32): a small model holding one Linear and
its pointwise tail is captured on the GPU as LEGO captures models
(torch.export, core ATen), the GEMM's epilogue is grown
(``lego_core.tree.fusion.gemm.grow_epilogue``), the template agent's kernel is
generated, tuned as the search tunes it (``lego_core.judge.tuning``: every
``TUNE_CONFIGS`` entry timed, the fastest baked into ``CONFIG``), imported
and run on fresh random inputs (three seeds), and compared with the model
run in fp64 (norm-relative error ||out - ref|| / ||ref||; eager's own error
is shown next to it).  Then timed with ``lego_core.runtime.timing.time_gpu``
(CUDA-graph replay, L2 flushed, median) against eager PyTorch (cuBLAS
addmm / mm + the epilogue's ATen ops).  The table is last.

Cases: mlp_residual's two GEMMs (up: bias + GELU; down: bias + residual)
and a llama MLP's (gate: SiLU times the up projection; down: residual).

Usage: python bench/gpu_checks/check_gemm.py [--dtype bf16|fp32|both] [--quick]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import traceback
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from lego_core.agents.template.gemm_codegen import generate, launch_config  # noqa: E402
from lego_core.load.capture import Graph, decomposition_table, op_name  # noqa: E402
from lego_core.tree.fusion.gemm import gemm_epilogue_group, grow_epilogue  # noqa: E402
from lego_core.judge import tuning  # noqa: E402
from lego_core.judge.inputs import load_module  # noqa: E402
from lego_core.tree.subproblem import make_subproblem  # noqa: E402
from lego_core.runtime.timing import time_gpu  # noqa: E402

TOLERANCE = {torch.bfloat16: 1e-2, torch.float32: 1e-4}


class UpGelu(nn.Module):
    """mlp_residual's first GEMM: gelu(x W^T + b)."""

    def __init__(self, d_in, d_out):
        super().__init__()
        self.fc = nn.Linear(d_in, d_out)

    def forward(self, x):
        return F.gelu(self.fc(x))


class DownResidual(nn.Module):
    """mlp_residual's second GEMM: r + (h W^T + b) (the LayerNorm after it stays outside)."""

    def __init__(self, d_in, d_out, bias=True):
        super().__init__()
        self.fc = nn.Linear(d_in, d_out, bias=bias)

    def forward(self, h, r):
        return r + self.fc(h)


class GateSilu(nn.Module):
    """A llama MLP's gate: silu(x W_gate^T) * u (u: the up projection, an input here)."""

    def __init__(self, d_in, d_out):
        super().__init__()
        self.fc = nn.Linear(d_in, d_out, bias=False)

    def forward(self, x, u):
        return F.silu(self.fc(x)) * u


# (name, module, input shapes): M rows, K in, N out
CASES = [
    ("mlp_residual up M512 K1024 N4096", lambda: UpGelu(1024, 4096), [(512, 1024)]),
    ("mlp_residual down M512 K4096 N1024", lambda: DownResidual(4096, 1024), [(512, 4096), (512, 1024)]),
    ("llama gate M2048 K2048 N5632", lambda: GateSilu(2048, 5632), [(2048, 2048), (2048, 5632)]),
    ("llama down M2048 K5632 N2048", lambda: DownResidual(5632, 2048, bias=False), [(2048, 5632), (2048, 2048)]),
]


def _inputs(shapes, dtype, seed):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    return [torch.randn(s, device="cuda", dtype=dtype, generator=gen) for s in shapes]


def _boundary(graph: Graph, sub, model, inputs):
    """The kernel's inputs for the model inputs ``inputs``: run the graph's nodes up to the group's boundary."""
    names = {n.name for n in sub.inputs}
    env = graph.placeholder_values(model, inputs)
    values = {}
    inside = {n.name for n in sub.nodes}
    for node in graph.fx_graph.nodes:
        if node.op == "placeholder":
            values[node.name] = env[node.name]
        elif node.op == "call_function" and node.name not in inside:
            if any(a.name not in values for a in node.all_input_nodes):
                continue
            args = torch.fx.node.map_arg(node.args, lambda a: values[a.name])
            kwargs = torch.fx.node.map_arg(node.kwargs, lambda a: values[a.name])
            values[node.name] = node.target(*args, **kwargs)
        if names <= set(values):
            break
    return [values[n.name] for n in sub.inputs]


def _kernel(model, example, workdir: Path, tag: str):
    """Capture, grow the epilogue of the one GEMM, generate, tune on ``example``, import the tuned file."""
    ep = torch.export.export(model, tuple(example)).run_decompositions(decomposition_table())
    graph = Graph(ep)
    gemm = [n for n in graph.compute_nodes if op_name(n) in ("aten.mm.default", "aten.addmm.default")]
    if len(gemm) != 1:
        raise RuntimeError(f"expected one GEMM, found {len(gemm)}")
    nodes = grow_epilogue(gemm[0])
    group, reason = gemm_epilogue_group(nodes)
    if group is None:
        raise RuntimeError(f"no GEMM epilogue group: {reason}")
    sub = make_subproblem("sp_check", nodes, graph.output_nodes, "gemm_epilogue", group=group)
    result = tuning.tune_source(generate(sub), [_boundary(graph, sub, model, example)], device_name=torch.cuda.get_device_name())
    path = workdir / f"gemm_{tag}.py"
    path.write_text(result.source)
    return graph, sub, load_module(path, f"lego_check_gemm_{tag}"), launch_config(group), result


def _time(fn, inputs):
    """Median ms of ``fn(*inputs)``, replayed as a CUDA graph (launched directly when not capturable)."""
    try:
        return time_gpu(lambda xs: fn(*xs), [inputs], cuda_graph=True).median_ms
    except Exception:  # noqa: BLE001 - not capturable
        torch.cuda.synchronize()
        return time_gpu(lambda xs: fn(*xs), [inputs]).median_ms


def _err(out, ref):
    return ((out.double() - ref).norm() / ref.norm()).item()


def _short(cfg: dict) -> str:
    return f"{cfg['BLOCK_M']}x{cfg['BLOCK_N']}x{cfg['BLOCK_K']} w{cfg['num_warps']} s{cfg['num_stages']}"


def run_case(case, dtype, workdir: Path) -> dict:
    name, make, shapes = case
    torch.manual_seed(0)
    model = make().cuda().to(dtype)
    reference = make().cuda().double()
    reference.load_state_dict({k: v.double() for k, v in model.state_dict().items()})
    tag = f"{name.split()[0]}_{name.split()[1]}_{str(dtype)[6:]}"
    graph, sub, module, config, tuned = _kernel(model, _inputs(shapes, dtype, 0), workdir, tag)
    errors, eager_errors = [], []
    for seed in (1, 2, 3):  # fresh random inputs, never the capture's
        inputs = _inputs(shapes, dtype, seed)
        out = module.launch(*_boundary(graph, sub, model, inputs))[0]
        with torch.no_grad():
            ref = reference(*[x.double() for x in inputs])
            eager = model(*inputs)
        errors.append(_err(out, ref))
        eager_errors.append(_err(eager, ref))
    inputs = _inputs(shapes, dtype, 4)
    boundary = _boundary(graph, sub, model, inputs)
    with torch.no_grad():
        lego_ms = _time(lambda *xs: module.launch(*xs), boundary)
        eager_ms = _time(lambda *xs: model(*xs), inputs)
    err, eager_err = max(errors), max(eager_errors)
    return {
        "case": name, "dtype": str(dtype)[6:], "err": err, "eager_err": eager_err,
        "ok": err < max(TOLERANCE[dtype], 2 * eager_err), "winner": _short(tuned.winner), "default_ms": tuned.times[0][1],
        "lego_ms": lego_ms, "eager_ms": eager_ms, "config": f"{config}\n    tuning: {tuned.summary()}",
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtype", choices=["bf16", "fp32", "both"], default="both")
    parser.add_argument("--quick", action="store_true", help="only the mlp_residual cases")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("needs a CUDA GPU")
        return 2
    dtypes = {"bf16": [torch.bfloat16], "fp32": [torch.float32], "both": [torch.bfloat16, torch.float32]}[args.dtype]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for dtype in dtypes:
            for case in CASES[:2] if args.quick else CASES:
                try:
                    row = run_case(case, dtype, Path(tmp))
                except Exception as exc:  # noqa: BLE001 - report every case
                    traceback.print_exc()
                    row = {"case": case[0], "dtype": str(dtype)[6:], "err": float("nan"), "eager_err": float("nan"), "ok": False, "winner": "-",
                           "default_ms": float("nan"), "lego_ms": float("nan"), "eager_ms": float("nan"), "config": f"{type(exc).__name__}: {exc}"[:200]}
                print(f"{row['case']} {row['dtype']}: {row['config']}", flush=True)
                rows.append(row)
                torch.cuda.empty_cache()
    print()
    print(f"GPU: {torch.cuda.get_device_name()}  torch {torch.__version__}  (TF32 for fp32 matmul: {torch.backends.cuda.matmul.allow_tf32})")
    print("times: CUDA-graph replay, L2 flushed, median; 'default ms' is the untuned CONFIG in the tuning run (short timing)")
    head = f"{'case':36} {'dtype':9} {'rel err':>9} {'eager err':>9} {'ok':>3} {'tuned':>20} {'default ms':>10} {'LEGO ms':>9} {'eager ms':>9} {'vs eager':>8}"
    print(head)
    print("-" * len(head))
    for r in rows:
        print(
            f"{r['case']:36} {r['dtype']:9} {r['err']:9.2e} {r['eager_err']:9.2e} {'yes' if r['ok'] else 'NO':>3} {r['winner']:>20} "
            f"{r['default_ms']:10.4f} {r['lego_ms']:9.4f} {r['eager_ms']:9.4f} {r['eager_ms'] / r['lego_ms']:7.2f}x"
        )
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
