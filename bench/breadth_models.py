"""Breadth bench (``make bench-breadth``): does a run end with a usable result on common models?

Usage:
    python bench/breadth_models.py                                        # every breadth model, fp32 and bf16, cuda
    python bench/breadth_models.py --dtypes bf16 --models swin_window_attention,unet_small
    TRITON_INTERPRET=1 python bench/breadth_models.py --device cpu --tiny --dtypes fp32   # tiny sizes on a CPU

Models: ``bench/models/breadth`` (VGG/AlexNet, ResNet and DenseNet blocks,
Inception, MobileNet/EfficientNet/ShuffleNet, Swin window attention,
MLP-Mixer, ConvNeXt, RNN/GRU/LSTM cells with state passed in and out, U-Net,
Mamba scans, NetVLAD, GPT and Llama blocks) at their file sizes (``--tiny``:
its tiny.json).  For each dtype and model, ``python -m lego_core optimize``
runs in its own process (``gpu_models.run_search``; torch.compile measured
too on a GPU, so its error against fp64 is in the report), then the row is
read from its report.json:

- ``captured``: the model loaded and torch.export captured it (a report was
  written); a refusal (the optimizer's ``error:`` line) is the row's
  ``error``.  ``EXPECTED_REFUSALS`` names the models LEGO is meant to
  refuse and the phrase the refusal must contain; such a row is ``ok`` when
  refused so (none now: the stateful models, ``STATEFUL``, whose forwards
  write module state, are expected to deliver verified plans with the state
  carried by ModelNew, ``lego_core.load.state``).
- ``verified``: the end-to-end judge against fp64 passed (``end_to_end.passed``).
- ``dropped``: the kernels the judge took out (``summary.dropped_by_judge``;
  their labels from ``end_to_end.dropped`` under the row).
- ``eager``/``plan``/``compile``: norm-relative errors against the fp64 run
  (``end_to_end.errors_vs_fp64``, docs/REPORT.md); compile is measured on a
  GPU only.
- ``search s``: the optimizer process's wall time (load, capture, search,
  compose, judge; ``tree_search_s`` in the JSON: the tree search alone).

Prints one table per dtype and writes ``<date>-<gpu>-breadth-<dtype>.json``
(``rows`` with the fields above and more) under bench/results on a GPU,
build/bench-breadth/results on a CPU.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import datetime
import re
import shutil
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import gpu_models as gm  # noqa: E402  (bench/ is the script's folder)

ROOT = gm.ROOT
BREADTH_DIR = BENCH / "models" / "breadth"
# model -> a phrase its refusal must contain (LEGO refuses these on purpose); none at present
EXPECTED_REFUSALS: dict[str, str] = {}
# models whose forward writes module state (their outputs depend on the calls before): verified plans expected
STATEFUL = ("stateful_kv_decoder", "stateful_rnn_attr", "stateful_running_stats")
CPU_SEARCH_S = 15.0  # --max-search-time per model on a CPU unless --search-arg sets one


def select_models(selected: list[str] | None, tiny: bool, folder: Path = BREADTH_DIR) -> list[gm.Entry]:
    """The breadth models sorted by name (group ``breadth``), with their
    tiny.json overrides under ``tiny``; ``selected`` names stems (with or
    without ``.py``); SystemExit for an unknown name."""
    table = gm._tiny(folder) if tiny else {}
    entries = [gm.Entry(p.stem, str(p), "breadth", dict(table.get(p.name, {}))) for p in sorted(Path(folder).glob("*.py"))]
    if not selected:
        return entries
    wanted = [Path(s).name.removesuffix(".py") for s in selected]
    unknown = sorted(set(wanted) - {e.name for e in entries})
    if unknown:
        raise SystemExit(f"no model {', '.join(unknown)} in {folder} (there: {', '.join(e.name for e in entries)})")
    return [e for e in entries if e.name in wanted]


def refusal(log_text: str) -> str | None:
    """The optimizer's ``error:`` message from its console output (rich wraps
    long lines; they are joined), or None when it printed none."""
    found = re.search(r"^error:\s*(.*)", log_text, re.M | re.S)
    return " ".join(found.group(1).split()) if found else None


def row_from_run(entry: gm.Entry, dtype: str, search: dict, report: dict | None, log_text: str) -> dict:
    """One table row from a finished optimizer run: its ``search`` info
    (``gm.run_search``), its report.json (None when none was written) and
    its console output."""
    row = {"model": entry.name, "dtype": dtype, "overrides": entry.overrides, "search_s": search.get("search_s"),
           "search_rc": search.get("search_rc"), "captured": None, "verified": False, "dropped": None, "dropped_kernels": [],
           "eager_err": None, "plan_err": None, "compile_err": None, "triton": None, "library": None, "error": None}  # fmt: skip
    expected = EXPECTED_REFUSALS.get(entry.name)
    row["expected_refusal"] = expected
    if report is None:
        said = refusal(log_text)
        row["captured"] = False if said else None  # no error line: it died or timed out elsewhere
        row["error"] = said or search.get("search_error") or "no report.json"
        row["ok"] = bool(expected and said and expected in said)
        return row
    e2e, summary = report.get("end_to_end") or {}, report.get("summary") or {}
    errors = e2e.get("errors_vs_fp64") or {}
    row.update(captured=True, verified=bool(e2e.get("passed")), dropped=summary.get("dropped_by_judge"),
               triton=summary.get("triton"), library=summary.get("library"), launch=summary.get("launch"),
               criterion=e2e.get("criterion"), reason=e2e.get("reason"), errors_vs_fp64=errors,
               tree_search_s=(report.get("metrics") or {}).get("search_time_s"))  # fmt: skip
    row["dropped_kernels"] = [f"{d.get('label') or d.get('node_id')}: {d.get('reason', '')}" for d in e2e.get("dropped") or []]
    for who in ("eager", "plan", "compile"):
        row[f"{who}_err"] = (errors.get(who) or {}).get("norm_rel")
    compile_error = e2e.get("compile_error") or errors.get("compile_error")  # torch.compile itself failed on the model
    if compile_error:
        row["compile_err_message"] = " ".join(str(compile_error).split())
    row["ok"] = row["verified"] and not expected
    if expected:
        row["error"] = f"expected a refusal containing {expected!r}; it was optimized"
    elif not row["verified"]:
        row["error"] = e2e.get("reason") or "end-to-end check did not pass"
    return row


def bench_model(entry: gm.Entry, dtype: str, args) -> dict:
    """Optimize one model in its own process (a fresh output folder) and read its row."""
    folder = gm.out_folder(args.out_dir, entry, dtype, args.device)
    shutil.rmtree(folder, ignore_errors=True)  # a stale report.json must not stand for this run
    info = gm.run_search(entry, dtype, args.device, args.out_dir, args.timeout, args.search_arg, compile_too=args.device == "cuda")
    log = folder.with_name(folder.name + ".search.log")
    row = row_from_run(entry, dtype, info, gm._read_report(folder), log.read_text(errors="replace") if log.is_file() else "")
    row["out_dir"] = str(folder)
    return row


COLUMNS = (
    ("model", 24, "model", "s"), ("captured", 8, "captured", "t"), ("verified", 8, "verified", "b"), ("dropped", 7, "dropped", "d"),
    ("eager err", 9, "eager_err", ".1e"), ("plan err", 9, "plan_err", ".1e"), ("compile err", 11, "compile_err", ".1e"),
    ("triton/lib", 10, "kernels", "s"), ("search s", 8, "search_s", ".0f"), ("ok", 3, "ok", "b"),
)  # fmt: skip


def _cell(row: dict, key: str, fmt: str) -> str:
    if key == "kernels":
        return "n/a" if row.get("triton") is None else f"{row['triton']}/{row['library']}"
    value = row.get(key)
    if fmt == "t":  # three-valued: yes, no, unknown
        return "n/a" if value is None else ("yes" if value else "no")
    if fmt == "d":
        return "n/a" if value is None else str(value)
    return gm._cell(value, fmt)


def format_table(rows: list[dict], dtype: str, meta: dict) -> str:
    """The printed table of one dtype: a line per model (errors: norm-relative
    against fp64), under it the refusal or failure and the dropped kernels,
    then how many ended as expected."""
    lines = [f"LEGO breadth bench, {dtype}, {meta.get('gpu', '?')} (torch {meta.get('torch', '?')}, triton {meta.get('triton', '?')}); "
             "errors: norm-relative against the fp64 run"
             + (f"; {meta['jobs']} optimizer runs at once, whole bench {meta.get('wall_s', '?')} s" if meta.get("jobs", 1) > 1 else "")]  # fmt: skip
    head = " ".join(f"{t:<{w}}" if k == 0 else f"{t:>{w}}" for k, (t, w, _, _) in enumerate(COLUMNS))
    lines += [head, "-" * len(head)]
    for row in rows:
        cells = [_cell(row, key, fmt) for _, _, key, fmt in COLUMNS]
        lines.append(" ".join(f"{c:<{w}}" if k == 0 else f"{c:>{w}}" for k, (c, (_, w, _, _)) in enumerate(zip(cells, COLUMNS))))
        if row.get("error"):
            prefix = "refused (expected)" if row.get("ok") and row.get("expected_refusal") else "error"
            lines.append(f"    {prefix}: {row['error'][:300]}")
        for dropped in row.get("dropped_kernels") or []:
            lines.append(f"    dropped: {dropped[:200]}")
        if row.get("compile_err_message"):
            lines.append(f"    torch.compile failed: {row['compile_err_message'][:200]}")
    ok = sum(1 for r in rows if r.get("ok"))
    delivered = sum(1 for r in rows if r.get("verified"))
    lines.append(f"as expected {ok}/{len(rows)} (verified plans {delivered}, expected refusals {sum(1 for r in rows if r.get('expected_refusal'))})")
    return "\n".join(lines) + "\n"


def result_document(rows: list[dict], dtype: str, meta: dict, device: str, date: str | None = None) -> dict:
    """The JSON of one dtype: ``gpu``, ``torch``, ``triton``, ``date``, ``dtype``, ``device``, ``rows``."""
    return {"gpu": meta.get("gpu"), "torch": meta.get("torch"), "triton": meta.get("triton"), "bench": "breadth",
            "date": date or datetime.date.today().isoformat(), "dtype": dtype, "device": device,
            "jobs": meta.get("jobs", 1), "bench_wall_s": meta.get("wall_s"),
            "as_expected": sum(1 for r in rows if r.get("ok")), "models": len(rows), "rows": rows}  # fmt: skip


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=None, help="comma-separated model names (default: all)")
    parser.add_argument("--dtypes", default="fp32,bf16", help="comma-separated, of fp32, bf16, fp16")
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--tiny", action="store_true", help="the tiny.json sizes (CPU runs)")
    parser.add_argument("--out-dir", type=Path, default=ROOT / "build" / "bench-breadth", help="optimizer output folders, one per model/dtype")
    parser.add_argument("--results-dir", type=Path, default=None, help="where the JSON goes (default bench/results on cuda, build/bench-breadth/results on cpu)")
    parser.add_argument("--timeout", type=float, default=None, help="seconds per model search (default 1800 on cuda, 300 on cpu)")
    parser.add_argument("--jobs", type=int, default=1,
                        help="optimizer runs at once (all dtypes share the pool; on one GPU each timing inside a search holds it alone, "
                             "lego_core.runtime.gpu_lock); the search s column is then wall time under that load")
    parser.add_argument("--search-arg", action="append", default=[],
                        help=f"extra optimizer option (repeatable), e.g. --search-arg=--max-search-time=600 (cpu default --max-search-time {CPU_SEARCH_S:g})")
    return parser


def check_dtypes_and_jobs(args) -> None:
    """``args.dtypes`` split into a list; SystemExit naming a dtype LEGO does
    not know or a ``--jobs`` below 1 (bench-breadth and bench-real)."""
    args.dtypes = [d for d in args.dtypes.split(",") if d]
    bad = [d for d in args.dtypes if d not in gm.DEFAULT_TOL]
    if bad:
        raise SystemExit(f"unknown dtype {', '.join(bad)}: use fp32, bf16, fp16")
    if args.jobs < 1:
        raise SystemExit(f"--jobs {args.jobs}: give 1 or more optimizer runs at once")


def parse_args(argv: list[str] | None = None):
    args = build_parser().parse_args(argv)
    check_dtypes_and_jobs(args)
    args.timeout = args.timeout or (1800.0 if args.device == "cuda" else 300.0)
    if args.device == "cpu" and not any(a.startswith("--max-search-time") for a in args.search_arg):
        args.search_arg.append(f"--max-search-time={CPU_SEARCH_S:g}")
    args.out_dir = args.out_dir.resolve()
    if args.results_dir is None:  # CPU runs check the flow; GPU runs are results to commit
        args.results_dir = gm.RESULTS_DIR if args.device == "cuda" else args.out_dir / "results"
    return args


def run_all(entries: list[gm.Entry], args) -> dict[str, list[dict]]:
    """Every (dtype, model) optimizer run, ``args.jobs`` at a time (each in
    its own process; threads only wait on them); rows per dtype in
    ``entries`` order.  A progress line is printed as each run ends."""
    tasks = [(dtype, entry) for dtype in args.dtypes for entry in entries]
    done: dict[tuple[str, str], dict] = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = {pool.submit(bench_model, entry, dtype, args): (dtype, entry) for dtype, entry in tasks}
        for future in concurrent.futures.as_completed(futures):
            dtype, entry = futures[future]
            r = done[dtype, entry.name] = future.result()
            print(f"[{time.strftime('%H:%M:%S')}] {entry.name} {dtype}: captured {r['captured']}, verified {r['verified']}, "
                  f"{r['search_s']} s" + (f" ({r['error'][:120]})" if r.get("error") else ""), flush=True)  # fmt: skip
    return {dtype: [done[dtype, e.name] for e in entries] for dtype in args.dtypes}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    entries = select_models(args.models.split(",") if args.models else None, args.tiny)
    args.results_dir.mkdir(parents=True, exist_ok=True)
    meta = gm.machine_info(args.device)
    meta["jobs"] = args.jobs
    started = time.monotonic()
    by_dtype = run_all(entries, args)
    meta["wall_s"] = round(time.monotonic() - started, 1)
    for dtype, rows in by_dtype.items():
        gm.write_results(args.results_dir, result_document(rows, dtype, meta, args.device), format_table(rows, dtype, meta), bench="breadth")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
