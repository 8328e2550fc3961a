"""GPU check: the depthwise conv1d and scan (cumsum) templates on gated_conv_mixer.

At the model file's own sizes (B=8, T=1024, C=512; one layer is enough, the
layers are alike), in bf16 and fp32, on one CUDA GPU: the model is captured,
``fusion.sequence.find_sequence_groups`` forms its ``depthwise_conv1d``
group (conv + causal slice + transpose + SiLU) and its ``scan`` group
(decay factor, cumsum, decay back, / T, sigmoid gate), the template agent
writes both kernels, and each is compared with its region's eager reference
(the captured ATen ops: ``F.conv1d`` on the transposed view + slice + SiLU;
``torch.cumsum`` over dim 1 + the pointwise ops around it):

- error: max abs and norm-relative error of the kernel and of eager, each
  against the region's reference run in fp64 on the same fresh boundary
  values (the graph run on a seed never used at capture, 1234);
- time: median GPU ms (``lego_core.runtime.timing.time_gpu``, CUDA events, L2
  flushed, three rotating input sets, replayed as a CUDA graph, as the
  shipped model runs).

The table is printed last.  Usage (repository root, on the GPU machine):

    PYTHONPATH=. python bench/gpu_checks/check_scan.py [--dtypes bf16 fp32]

``--smoke`` runs at tiny sizes on the CPU (TRITON_INTERPRET=1, fp32, no timing).
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import traceback
from pathlib import Path

import torch

from lego_core.agents.template.codegen import generate
from lego_core.load.capture import capture_graph
from lego_core.tree.fusion.sequence import find_sequence_groups
from lego_core.load.problem import ProblemSpec, load_problem
from lego_core.judge.inputs import load_module
from lego_core.tree.subproblem import make_subproblem

_ROOT = Path(__file__).resolve().parents[2]
_PLACES = [os.environ.get("LEGO_MODELS", ""), _ROOT / "shared" / "models", _ROOT.parent / "shared" / "models", "/work/shared/models"]
MODELS = next((Path(p) for p in _PLACES if p and (Path(p) / "tiny.json").exists()), Path("/work/shared/models"))
FILE_SIZES = {"n_layers": 1}  # batch_size=8, seq_len=1024, d_model=512, kernel_size=4 from the file
SMOKE_SIZES = {"batch_size": 2, "seq_len": 37, "d_model": 24, "n_layers": 1}
SEEDS = (1234, 1235, 1236)


def errors(out: torch.Tensor, ref: torch.Tensor) -> tuple[float, float]:
    """(max abs, norm-relative) error of ``out`` against the fp64 ``ref``."""
    diff = out.double() - ref
    return diff.abs().max().item(), (diff.norm() / ref.norm().clamp_min(1e-30)).item()


def run_dtype(dtype: str, smoke: bool, folder: Path) -> list[dict]:
    device = "cpu" if smoke else "cuda"
    spec = ProblemSpec(str(MODELS / "gated_conv_mixer.py"), dict(SMOKE_SIZES if smoke else FILE_SIZES), dtype=dtype, device=device)
    problem = load_problem(spec)
    graph = capture_graph(problem)
    values = [graph.run(problem.model, problem.make_inputs(seed)) for seed in SEEDS]
    rows = []
    for k, group in enumerate(find_sequence_groups(graph.compute_nodes)):
        sub = make_subproblem(f"{group.kind}{k}", group.nodes, graph.output_nodes, group.kind, group=group)
        path = folder / f"{dtype}_{group.kind}{k}.py"
        path.write_text(generate(sub))
        module = load_module(path, f"check_scan_{path.stem}")
        sets = [[v[n.name] for n in sub.inputs] for v in values]
        outs = [[torch.empty_strided(s.shape, s.stride, dtype=s.dtype, device=device) for s in sub.output_specs] for _ in sets]
        got = module.launch(*sets[0], out=outs[0])[0]
        eager = sub.run_reference(sets[0])[0]
        exact = sub.run_reference([t.double() if t.is_floating_point() else t for t in sets[0]])[0]
        row = {"dtype": dtype, "kind": group.kind, "ops": len(sub.ops), "shape": list(group.shape)}
        row["lego_max"], row["lego_rel"] = errors(got, exact)
        row["eager_max"], row["eager_rel"] = errors(eager, exact)
        if not smoke:
            from lego_core.runtime.timing import time_gpu

            row["eager_ms"] = time_gpu(lambda xs: sub.run_reference(xs), sets, cuda_graph=True).median_ms
            row["lego_ms"] = time_gpu(lambda xs: module.launch(*xs), sets, cuda_graph=True).median_ms
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtypes", nargs="+", default=["bf16", "fp32"])
    parser.add_argument("--smoke", action="store_true", help="tiny sizes on the CPU (TRITON_INTERPRET=1), no timing")
    args = parser.parse_args(argv)
    if args.smoke:
        args.dtypes = ["fp32"]
    elif not torch.cuda.is_available():
        print("no CUDA device; use --smoke on a CPU")
        return 2
    rows, failed = [], False
    with tempfile.TemporaryDirectory() as tmp:
        for dtype in args.dtypes:
            try:
                rows += run_dtype(dtype, args.smoke, Path(tmp))
            except Exception:  # noqa: BLE001 - report and go on with the next dtype
                traceback.print_exc()
                failed = True
    tol = {"bf16": 2e-2, "fp16": 5e-3, "fp32": 1e-4}
    print()
    print(f"{'dtype':5} {'kernel':17} {'shape':16} {'lego err (max / rel)':24} {'eager err (max / rel)':24} {'eager ms':>9} {'lego ms':>9} {'speedup':>8}  ok")
    for r in rows:
        ok = r["lego_rel"] <= max(tol[r["dtype"]], 2 * r["eager_rel"])
        failed |= not ok
        times = f"{r.get('eager_ms', float('nan')):9.4f} {r.get('lego_ms', float('nan')):9.4f} {r.get('eager_ms', float('nan')) / r.get('lego_ms', float('nan')):7.2f}x"
        print(
            f"{r['dtype']:5} {r['kind']:17} {str(r['shape']):16} {r['lego_max']:9.2e} / {r['lego_rel']:9.2e}   "
            f"{r['eager_max']:9.2e} / {r['eager_rel']:9.2e}   {times}  {'yes' if ok else 'NO'}"
        )
    return 1 if failed or not rows else 0


if __name__ == "__main__":
    sys.exit(main())
