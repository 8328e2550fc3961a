"""Optimize every reference model and print one table: sizes, plan, error, time.

Usage:
    python bench/e2e_models.py --device cuda --dtype fp32 bf16          # file sizes, GPU
    python bench/e2e_models.py --device cpu --tiny                      # tiny sizes, CPU
    python bench/e2e_models.py --models gpt_stack mlp_residual ...

Models come from ../shared/models, or from $LEGO_MODELS_DIR.

Each model runs through ``lego_core.optimize`` (its own child process), so a
crash in one does not stop the others.  On a GPU the eager, torch.compile and
optimized times are measured in the same child process (CUDA events, L2
flushed, median); on a CPU only the cost model's estimate exists and the
table says so.  "launch" is how the shipped ModelNew runs (plan or the
original forward, launched directly or replayed as a CUDA graph; chosen by
measurement, ``lego_core.judge.end_to_end.launch``).  ``--json FILE`` also writes every
report.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lego_core import OptimizeConfig, ProblemSpec, optimize  # noqa: E402
from reference_models import model_names, model_path, tiny_overrides, tiny_table  # noqa: E402  (bench/ is the script's folder)


def _fmt(x, spec: str = ".3f") -> str:
    return "-" if x is None else format(x, spec)


def run_one(name: str, dtype: str, device: str, tiny: dict | None, out_root: Path, compile_: bool, timeout: float, force_triton: bool = False) -> dict:
    spec = ProblemSpec(str(model_path(name)), tiny_overrides(name, tiny), dtype, device)
    config = OptimizeConfig(compare_compile=compile_, timeout_s=timeout, force_triton=force_triton)
    started = time.time()
    try:
        report = optimize(spec, out_root / f"{name}-{dtype}-{device}", config)
        return {"model": name, "dtype": dtype, "ok": True, "report": report, "wall_s": time.time() - started}
    except Exception as exc:  # noqa: BLE001 - one model's failure is a row in the table
        return {"model": name, "dtype": dtype, "ok": False, "error": f"{type(exc).__name__}: {exc}"[:300], "wall_s": time.time() - started}


def print_table(rows: list[dict]) -> None:
    head = f"{'model':18} {'dtype':5} {'subp':>4} {'triton':>6} {'lib':>4} {'e2e max err':>11} {'ok':>3} {'eager ms':>9} {'compile ms':>10} {'LEGO ms':>9} {'vs eager':>8} {'vs compile':>10} {'launch':>14} {'wall s':>6}"
    print(head)
    print("-" * len(head))
    for row in rows:
        if not row["ok"]:
            print(f"{row['model']:18} {row['dtype']:5} FAILED: {row['error']}")
            continue
        rep = row["report"]
        s, t = rep["summary"], rep.get("timing") or {}
        vs_eager = t.get("speedup_vs_eager") if t else None
        est = "" if t else f"  (estimated speedup {s['speedup']:.2f}x)"
        print(
            f"{row['model']:18} {row['dtype']:5} {s['subproblems']:>4} {s['triton']:>6} {s['library']:>4} "
            f"{_fmt(s['e2e_max_abs_error'], '.2e'):>11} {'yes' if s['e2e_passed'] else 'NO':>3} "
            f"{_fmt(t.get('eager_ms')):>9} {_fmt(t.get('compile_ms')):>10} {_fmt(t.get('optimized_ms')):>9} "
            f"{_fmt(vs_eager, '.2f'):>8} {_fmt(t.get('speedup_vs_compile'), '.2f'):>10} "
            f"{(rep.get('launch') or {}).get('chosen', 'plan'):>14} "
            f"{row['wall_s']:>6.0f}{est}"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--dtype", nargs="+", default=["fp32"])
    parser.add_argument("--tiny", action="store_true", help="use ../shared/models/tiny.json sizes")
    parser.add_argument("--models", nargs="*", default=None)
    parser.add_argument("--out", default="build/bench")
    parser.add_argument("--no-compile", action="store_true")
    parser.add_argument("--timeout", type=float, default=900.0, help="per model, seconds")
    parser.add_argument("--json", default=None)
    parser.add_argument("--force-triton", action="store_true", help="choose every verified Triton kernel (checks them all in the composed model)")
    args = parser.parse_args()
    tiny = tiny_table() if args.tiny else None
    names = model_names(args.models)
    rows = []
    for dtype in args.dtype:
        for name in names:
            row = run_one(name, dtype, args.device, tiny, Path(args.out), not args.no_compile, args.timeout, args.force_triton)
            status = "ok" if row["ok"] else row["error"]
            print(f"[{time.strftime('%H:%M:%S')}] {name} {dtype}: {status} ({row['wall_s']:.0f} s)", flush=True)
            rows.append(row)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2, default=str))
    print()
    print_table(rows)
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
