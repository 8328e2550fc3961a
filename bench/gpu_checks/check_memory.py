"""GPU check of issue 9's memory bound: optimize a long-sequence attention layer
whose eager forward holds about 9 GiB, and report the optimizer's peak.

The model is tests/unit/longseq_attention_model.py (softmax(QK^T / sqrt(d)) V,
written by hand) at 16384 tokens, 9 heads of 64, bf16: each score matrix
(1 x 9 x 16384 x 16384) is 4.5 GiB.  The run goes through ``lego_core.optimize``
(its own child process, as a user's run), which checks the composed model
end to end against eager (and an fp64 copy in bf16) on a fresh seed and times
eager, torch.compile and the plan (``lego_core.runtime.timing.time_gpu``).  Printed
from report.json: eager_peak_mb, search_peak_mb, bound_mb =
max(2 x eager, eager + 4096), the end-to-end check, times and wall time;
the last line is a one-row table.  Exit status 1 when the bound is broken
or the end-to-end check fails.

Usage (on a GPU machine, from the repository root):
    python bench/gpu_checks/check_memory.py [--seq 16384] [--heads 9] [--dtype bf16] [--no-compile]
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from lego_core import OptimizeConfig, ProblemSpec, optimize  # noqa: E402

MODEL = ROOT / "tests" / "unit" / "longseq_attention_model.py"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seq", type=int, default=16384)
    parser.add_argument("--heads", type=int, default=9)
    parser.add_argument("--head-dim", type=int, default=64)
    parser.add_argument("--dtype", default="bf16", choices=["bf16", "fp16", "fp32"])
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"], help="cpu: a smoke test of this script at tiny sizes")
    parser.add_argument("--no-compile", action="store_true", help="do not time torch.compile")
    parser.add_argument("--timeout", type=float, default=3000.0, help="seconds for the whole run")
    parser.add_argument("--out", default=None, help="output folder (default: a temporary one)")
    args = parser.parse_args()

    overrides = {"batch_size": 1, "seq_len": args.seq, "n_heads": args.heads, "d_model": args.heads * args.head_dim}
    spec = ProblemSpec(str(MODEL), overrides, args.dtype, args.device)
    config = OptimizeConfig(compare_compile=not args.no_compile, timeout_s=args.timeout, cache=False)
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="lego-memory-check-"))
    started = time.time()
    try:
        report = optimize(spec, out, config)
    except Exception as exc:  # noqa: BLE001 - print the failure as the result row
        wall = time.time() - started
        print(f"optimize failed after {wall:.0f} s: {type(exc).__name__}: {str(exc)[:500]}")
        print(f"{'model':26} {'dtype':5} {'eager_peak_mb':>13} {'search_peak_mb':>14} {'bound_mb':>9} {'within':>6} {'e2e':>4} {'wall_s':>7}")
        print(f"{'longseq_attention ' + str(args.seq):26} {args.dtype:5} {'-':>13} {'-':>14} {'-':>9} {'FAIL':>6} {'-':>4} {wall:7.0f}")
        return 1
    wall = time.time() - started
    memory = report.get("memory") or {}
    e2e = report["end_to_end"]
    timing = report.get("timing") or {}
    print(json.dumps({"memory": memory, "end_to_end": e2e, "timing": timing, "metrics": {k: report["metrics"].get(k) for k in ("search_time_s", "wall_time_s", "stop_reason")}}, indent=2))
    print(f"output folder: {out}")
    ok = bool(memory.get("within_bound")) and bool(e2e.get("passed"))

    def num(x, spec=".1f"):
        return "-" if x is None else format(x, spec)

    head = f"{'model':26} {'dtype':5} {'eager_peak_mb':>13} {'search_peak_mb':>14} {'bound_mb':>9} {'within':>6} {'e2e':>4} {'eager_ms':>9} {'lego_ms':>9} {'compile_ms':>10} {'wall_s':>7}"
    print(head)
    print(
        f"{'longseq_attention ' + str(args.seq):26} {args.dtype:5} {num(memory.get('eager_peak_mb')):>13} {num(memory.get('search_peak_mb')):>14} "
        f"{num(memory.get('bound_mb')):>9} {('yes' if memory.get('within_bound') else 'NO'):>6} {('ok' if e2e.get('passed') else 'FAIL'):>4} "
        f"{num(timing.get('eager_ms'), '.3f'):>9} {num(timing.get('optimized_ms'), '.3f'):>9} {num(timing.get('compile_ms'), '.3f'):>10} {wall:7.0f}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
