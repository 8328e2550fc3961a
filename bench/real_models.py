"""Real-library bench (``make bench-real``): Hugging Face, torchvision and timm models as their users write them.

Usage:
    python bench/real_models.py                                     # every model, bf16 and fp32, cuda
    python bench/real_models.py --dtypes bf16 --models hf_gpt2,tv_resnet50 --max-search-time 120
    python bench/real_models.py --jobs 4                            # four optimizer runs at once
    python bench/real_models.py --skip-search                       # re-time the existing output folders
    TRITON_INTERPRET=1 python bench/real_models.py --tiny --device cpu --dtypes fp32 --models hf_llama,handwritten_resnet18

Models: ``bench/models/real`` (``--tiny``: its tiny.json sizes).  The
``hf_*`` files build ``transformers`` models from a config with random
weights (GPT-2 small, a 4-layer Llama-3.2-1B-like GQA decoder, BERT-base
with an attention mask, ViT-B/16); ``tv_*`` call ``torchvision.models``
(ResNet-50, MobileNetV3-Large, EfficientNet-B0) and ``timm_*``
``timm.create_model`` (ConvNeXt-T), each with ``weights=None`` /
``pretrained=False``; ``handwritten_*`` are stand-ins with the same module
types for machines without torchvision (ResNet-18, MobileNetV3-Small,
EfficientNet-B0, ConvNeXt).  A model whose library is not installed (or
does not import) is a row ``skipped: <library> not installed``; the bench
goes on.

For each dtype and model:

1. **optimize**: ``python -m lego_core optimize MODEL --dtype D --device
   DEV --no-compile --max-search-time S --timeout T`` in its own process
   (``gpu_models.run_search``; ``--jobs N`` runs N at once, as
   bench/breadth_models.py does), into a fresh folder
   ``OUT/<model>-<dtype>-<device>``; its wall time is ``search_s`` (load,
   capture, search, compose, end-to-end check).  The persistent kernel cache
   is used as a user's run uses it (``--search-arg=--no-cache`` for a cold
   search).
2. **time**: ONE process per dtype times every model in turn as a user
   calls it: eager, torch.compile ``default`` and
   ``reduce-overhead``, and LEGO's ModelNew loaded from the output folder
   (``lego_core.judge.end_to_end.benchmark.side_by_side``: the rules of
   ../shared/tools/sidebyside.py: weights under seed 0, inputs under seed 1
   (floating ones cast to the dtype, integer ones as they are), CUDA events,
   L2 flushed with a 256 MB buffer, median of ``--rep`` (50) calls), then
   ModelNew against eager on fresh inputs (seed 2); on a CPU nothing is
   timed and ModelNew only runs on those fresh inputs.  Warnings that ModelNew
   gives while it runs ("LEGO: ... running the original forward") are
   recorded: such a row's LEGO time is not the plan's.

Per model the table shows: delivered (an ``optimized_model.py`` was
written), verified (the optimizer's end-to-end check passed, LEGO's error
against eager here is within ``--tol`` and ModelNew gave no warning that it
ran the original forward), how ModelNew runs
(``launch``: plan, plan+graph, original...), Triton/library sub-problems,
eager / compile default / compile reduce-overhead / LEGO median ms,
LEGO/eager and LEGO/best-compile speedups (above 1: LEGO is faster) and the
optimizer's wall time in s.  JSON per dtype: ``<date>-<gpu>-real-<dtype>.json``
under bench/results on cuda (build/bench-real/results on a CPU).
"""
from __future__ import annotations

import argparse
import ast
import concurrent.futures
import datetime
import importlib.metadata
import importlib.util
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import breadth_models as bm  # noqa: E402  (bench/ is the script's folder)
import gpu_models as gm  # noqa: E402

ROOT = gm.ROOT
REAL_DIR = BENCH / "models" / "real"
LIBRARIES = ("transformers", "torchvision", "timm")  # what a model file may need beyond torch
HANDWRITTEN = "handwritten"  # the group of the stand-ins that need torch only
DEFAULT_MAX_SEARCH_S = 60.0
DEFAULT_REP = 50  # timed calls per measurement, as sidebyside.py
TIMING_TIMEOUT_S = 900.0  # per model in the timing process (torch.compile of a 12-layer model included)


# ---------------------------------------------------------------- models


def required_libraries(path: str | Path) -> list[str]:
    """The libraries of :data:`LIBRARIES` that the model file imports at its
    top level (``import torchvision``, ``from transformers import ...``), in
    that order; read from its source, nothing is imported."""
    tree = ast.parse(Path(path).read_text())
    imported = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            imported.add(node.module.split(".")[0])
    return [lib for lib in LIBRARIES if lib in imported]


def select_models(selected: list[str] | None, tiny: bool, folder: Path = REAL_DIR) -> list[gm.Entry]:
    """The real-library models sorted by name, each an ``Entry`` whose
    ``group`` is the library it needs (``transformers``, ``torchvision``,
    ``timm``; ``handwritten`` for torch only) and whose ``overrides`` are its
    tiny.json sizes under ``tiny``.  ``selected`` names stems (with or
    without ``.py``); SystemExit for an unknown name."""
    table = gm._tiny(folder) if tiny else {}
    entries = []
    for path in sorted(Path(folder).glob("*.py")):
        libraries = required_libraries(path)
        entries.append(gm.Entry(path.stem, str(path), libraries[-1] if libraries else HANDWRITTEN, dict(table.get(path.name, {}))))
    if not selected:
        return entries
    wanted = [Path(s).name.removesuffix(".py") for s in selected]
    unknown = sorted(set(wanted) - {e.name for e in entries})
    if unknown:
        raise SystemExit(f"no model {', '.join(unknown)} in {folder} (there: {', '.join(e.name for e in entries)})")
    return [e for e in entries if e.name in wanted]


_import_checks: dict[str, str | None] = {}


def library_problem(name: str, device: str = "cuda") -> str | None:
    """Why ``name`` cannot be used here (``"<name> not installed"``, or
    ``"<name> cannot be imported: <error>"`` when importing it fails in a
    fresh interpreter, e.g. a torchvision wheel built for another torch), or
    None when it imports.  Checked once per process."""
    if name not in _import_checks:
        if importlib.util.find_spec(name) is None:
            _import_checks[name] = f"{name} not installed"
        else:
            probe = subprocess.run([sys.executable, "-c", f"import {name}"], capture_output=True, text=True, timeout=300,
                                   cwd=str(ROOT), env=gm._child_env(device))  # fmt: skip
            last = [line.strip() for line in probe.stderr.splitlines() if line.strip()][-1:] or [f"exit {probe.returncode}"]
            _import_checks[name] = None if probe.returncode == 0 else f"{name} cannot be imported: {last[0][:200]}"
    return _import_checks[name]


def skip_reason(entry: gm.Entry, device: str = "cuda") -> str | None:
    """``"skipped: <why>"`` for a model whose library is missing or broken here, else None."""
    for library in required_libraries(entry.path):
        problem = library_problem(library, device)
        if problem:
            return f"skipped: {problem}"
    return None


def library_versions() -> dict:
    """The installed versions of :data:`LIBRARIES` (None where one is missing), read without importing them."""
    versions = {}
    for name in LIBRARIES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


# ---------------------------------------------------------------- optimize (one process per model)


def failure_message(log_text: str) -> str | None:
    """Why the optimizer delivered nothing, from its console output: its
    ``error:`` line (a refused model) or its ``optimizer failed:`` message
    (a run that failed later; up to "no output written"), lines joined; None
    when it printed neither."""
    said = bm.refusal(log_text)
    if said:
        return said
    found = re.search(r"^optimizer failed:\s*(.*?)(?:^no output written|\Z)", log_text, re.M | re.S)
    return " ".join(found.group(1).split()) if found else None


def search_row(entry: gm.Entry, dtype: str, search: dict, folder: Path, report: dict | None, log_text: str) -> dict:
    """A row from one finished optimizer run: ``delivered`` (optimized_model.py
    written), ``e2e_passed``, ``launch``, ``triton``/``library`` counts, the
    plan's and eager's errors against fp64, ``search_s``, and ``error`` (the
    optimizer's ``error:`` line, its exit, or the end-to-end reason)."""
    row = {"model": entry.name, "package": entry.group, "dtype": dtype, "overrides": entry.overrides, "out_dir": str(folder),
           "skipped": None, "search_s": search.get("search_s"), "search_rc": search.get("search_rc"),
           "delivered": (folder / "optimized_model.py").is_file(), "e2e_passed": None, "verified": False, "launch": None,
           "triton": None, "library": None, "plan_err": None, "eager_err": None, "error": None}  # fmt: skip
    if report is not None:
        e2e, summary = report.get("end_to_end") or {}, report.get("summary") or {}
        errors = e2e.get("errors_vs_fp64") or {}
        row.update(e2e_passed=bool(e2e.get("passed")), launch=gm._launch_mode(report), triton=summary.get("triton"),
                   library=summary.get("library"), plan_err=(errors.get("plan") or {}).get("norm_rel"),
                   eager_err=(errors.get("eager") or {}).get("norm_rel"), tree_search_s=(report.get("metrics") or {}).get("search_time_s"))  # fmt: skip
        if not row["e2e_passed"]:
            row["error"] = e2e.get("reason") or "end-to-end check did not pass"
    if not row["delivered"]:
        row["error"] = failure_message(log_text) or search.get("search_error") or row["error"] or "no optimized_model.py"
    row["verified"] = bool(row["delivered"] and row["e2e_passed"])
    return row


def skipped_row(entry: gm.Entry, dtype: str, reason: str) -> dict:
    """The row of a model that was not run (its library is missing)."""
    return {"model": entry.name, "package": entry.group, "dtype": dtype, "overrides": entry.overrides, "skipped": reason,
            "delivered": False, "verified": False}  # fmt: skip


def optimize_model(entry: gm.Entry, dtype: str, args) -> dict:
    """Optimize one model in its own process into a fresh folder (none with
    ``--skip-search``: the folder and its stored search info are read as they
    are) and return its :func:`search_row`."""
    folder = gm.out_folder(args.out_dir, entry, dtype, args.device)
    if args.skip_search:
        search = gm.stored_search(entry, dtype, args.device, args.out_dir)
    else:
        shutil.rmtree(folder, ignore_errors=True)  # a stale report.json must not stand for this run
        extra = [f"--max-search-time={args.max_search_time:g}"] + list(args.search_arg)
        search = gm.run_search(entry, dtype, args.device, args.out_dir, args.timeout, extra)
    log = folder.with_name(folder.name + ".search.log")
    return search_row(entry, dtype, search, folder, gm._read_report(folder), log.read_text(errors="replace") if log.is_file() else "")


def optimize_all(entries: list[gm.Entry], args) -> dict[tuple[str, str], dict]:
    """Every (dtype, model) optimizer run, ``args.jobs`` at a time (each in its
    own process; threads only wait on them), skipped models excepted; rows
    keyed by ``(dtype, model)``.  A progress line is printed as each ends."""
    rows: dict[tuple[str, str], dict] = {}
    tasks = []
    for dtype in args.dtypes:
        for entry in entries:
            reason = skip_reason(entry, args.device)
            if reason:
                rows[dtype, entry.name] = skipped_row(entry, dtype, reason)
            else:
                tasks.append((dtype, entry))
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = {pool.submit(optimize_model, entry, dtype, args): (dtype, entry) for dtype, entry in tasks}
        for future in concurrent.futures.as_completed(futures):
            dtype, entry = futures[future]
            r = rows[dtype, entry.name] = future.result()
            print(f"[{time.strftime('%H:%M:%S')}] optimized {entry.name} {dtype}: delivered {r['delivered']}, verified {r['verified']}, "
                  f"{r['search_s']} s" + (f" ({r['error'][:160]})" if r.get("error") else ""), flush=True)  # fmt: skip
    return rows


# ---------------------------------------------------------------- timing (one process per dtype)


def time_model(entry: gm.Entry, dtype: str, device: str, folder: Path, rep: int, modes: list[str], timed: bool | None = None) -> dict:
    """The measured fields of a row, in this process.  ``timed`` (default:
    on cuda): eager, the torch.compile modes and LEGO's ModelNew (when
    ``folder`` holds one) side by side (times in ms, errors norm-relative
    against eager), then ModelNew against eager on fresh inputs
    (``lego_err_fresh``).  Else nothing is timed: ModelNew runs once on
    fresh inputs as a user runs it (``lego_err``).  ModelNew's ``LEGO:`` warnings are kept
    (``lego_warnings``; ``lego_fallback`` when one says it ran the original
    forward); ``timing_error`` when loading or running failed."""
    import torch

    from lego_core.judge.end_to_end import benchmark
    from lego_core.judge.end_to_end.e2e import eager_uses_tf32
    from lego_core.load.problem import ProblemSpec, load_problem

    timed = device == "cuda" if timed is None else timed
    out: dict = {"timing_method": ("cuda_events" if device == "cuda" else "perf_counter") if timed else None, "rep": rep if timed else None}
    problem, kept = None, {}
    try:
        problem = load_problem(ProblemSpec(entry.path, entry.overrides, dtype, device))
        delivered = (folder / "optimized_model.py").is_file()
        out["eager_tf32"] = eager_uses_tf32(problem)  # cuDNN's TF32 convolutions (PyTorch's default): eager's own error is ~1e-3

        def build_lego():
            kept["lego"] = benchmark.load_model_new(folder, problem)
            return kept["lego"]

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            if timed:
                candidates = [("eager", lambda: problem.model)] + benchmark.compile_candidates(problem.model, modes)
                candidates += [("lego", build_lego)] if delivered else []
                for m in benchmark.side_by_side(candidates, [problem.make_inputs(1)], rep=rep):  # seed 1, as sidebyside.py
                    out[f"{m.name}_ms"] = m.median_ms
                    if m.name != "eager":
                        out[f"{m.name}_err"], out[f"{m.name}_setup_s"] = m.rel_err, m.setup_s
                    if m.error:
                        out[f"{m.name}_error"] = m.error
            elif delivered:
                build_lego()
            if "lego" in kept:
                fresh = problem.make_inputs(2)  # after timing, fresh inputs: a plan must not replay an old answer
                with torch.no_grad():
                    error = benchmark.norm_rel_error(kept["lego"](*fresh), problem.model(*fresh))
                out["lego_err_fresh" if timed else "lego_err"] = error
        said = sorted({str(w.message)[:300] for w in caught if str(w.message).startswith("LEGO:")})
        out["lego_warnings"] = said
        out["lego_fallback"] = any("running the original forward" in s for s in said)
    except Exception as exc:  # noqa: BLE001 - one model's failure is its row's
        out["timing_error"] = f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
    finally:
        kept.clear()
        del problem
        gm._release(torch)
    return out


def timing_worker(entries: list[gm.Entry], dtype: str, device: str, out_root: Path, rep: int, modes: list[str], rows_file: Path) -> None:
    """Time ``entries`` one after another in this process; rewrite ``rows_file``
    (``{"meta": ..., "rows": {model: fields}}``) after each model, so a crash
    loses only the model it happened in."""
    state = {"meta": gm.machine_info(device), "rows": {}}
    for entry in entries:
        state["rows"][entry.name] = time_model(entry, dtype, device, gm.out_folder(out_root, entry, dtype, device), rep, modes)
        rows_file.write_text(json.dumps(state, indent=2, default=str))
        print(f"[{time.strftime('%H:%M:%S')}] {'timed' if device == 'cuda' else 'ran ModelNew of'} {entry.name} {dtype}", flush=True)
    rows_file.write_text(json.dumps(state, indent=2, default=str))


def time_in_child(entries: list[gm.Entry], dtype: str, args) -> tuple[dict, dict[str, dict]]:
    """Run :func:`timing_worker` for ``entries`` in one child process; when it
    dies, the model it was on gets a ``timing_error`` and a new child takes
    the rest.  Returns ``(meta, {model: fields})``."""
    timed: dict[str, dict] = {}
    meta: dict = {}
    remaining = list(entries)
    while remaining:
        with tempfile.TemporaryDirectory(prefix="lego-bench-real-") as tmp:
            rows_file = Path(tmp) / "rows.json"
            cmd = [sys.executable, str(Path(__file__).resolve()), "--timing-worker", str(rows_file), "--dtypes", dtype,
                   "--device", args.device, "--models", ",".join(e.name for e in remaining), "--out-dir", str(args.out_dir),
                   "--rep", str(args.rep), "--modes", ",".join(args.modes)] + (["--tiny"] if args.tiny else [])  # fmt: skip
            limit = args.timing_timeout * len(remaining)
            rc = gm.run_group(cmd, limit, env=gm._child_env(args.device))
            state = json.loads(rows_file.read_text()) if rows_file.is_file() else {}
        meta = meta or state.get("meta", {})
        timed.update(state.get("rows", {}))
        remaining = [e for e in remaining if e.name not in timed]
        if remaining:  # the child died on remaining[0]
            status = f"exit {rc}" if rc is not None else f"timed out after {limit:g} s"
            timed[remaining.pop(0).name] = {"timing_error": f"the timing process died ({status}) while timing it"}
    return meta, timed


# LEGO's fp32 error against eager allowed where eager itself runs in TF32 (lego_core.judge.end_to_end.e2e.eager_uses_tf32: cuDNN
# convolutions by PyTorch's default): two TF32 convolution algorithms (NCHW and channels-last) differ by 1e-4 to 1e-3
TF32_TOL = 2e-3


def merge_timing(row: dict, timed: dict, tol: float) -> dict:
    """``row`` (from :func:`search_row`) with its measured fields, the
    speedups (``gm._derive``: LEGO/eager, LEGO/best compile) and
    ``verified``: delivered, end-to-end check passed, LEGO's error against
    eager within ``tol`` (at least :data:`TF32_TOL` where eager computes in
    TF32: ``eager_tf32``) and ModelNew ran its plan (no warning that it ran
    the original forward: then its time is not the plan's); errors of timing
    joined into ``error``."""
    row = dict(row, **timed)
    if row.get("eager_tf32"):  # fp32 with TF32 convolutions or matmuls in eager: another conv algorithm differs by ~1e-3
        tol = max(tol, TF32_TOL)
    gm._derive(row, tol)
    row["verified"] = bool(row["delivered"] and row["verified"] and not row.get("lego_fallback"))
    problems = [row["error"]] if row.get("error") else []
    problems += [timed[k] for k in ("timing_error", "lego_error") if timed.get(k)]
    if row["delivered"] and row.get("lego_err") is not None and row["lego_err"] > tol:
        problems.append(f"LEGO's error against eager {row['lego_err']:.2e} is above {tol:g}")
    if row.get("lego_fallback"):
        problems.append("ModelNew ran the original forward (its warning below): its output and time are not the plan's")
    row["error"] = "; ".join(problems) or None
    return row


# ---------------------------------------------------------------- table and JSON


COLUMNS = (
    ("model", 32, "model", "s"), ("delivered", 9, "delivered", "b"), ("verified", 8, "verified", "b"), ("launch", 14, "launch", "s"),
    ("triton/lib", 10, "kernels", "s"), ("eager", 8, "eager_ms", ".3f"), ("c-dflt", 8, "compile_default_ms", ".3f"),
    ("c-r-o", 8, "compile_reduce_overhead_ms", ".3f"), ("LEGO", 8, "lego_ms", ".3f"), ("L/eager", 7, "lego_vs_eager", ".2f"),
    ("L/best", 6, "lego_vs_best_compile", ".2f"), ("LEGO err", 8, "lego_err", ".1e"), ("search s", 8, "search_s", ".0f"),
)  # fmt: skip


def _cell(row: dict, key: str, fmt: str) -> str:
    if key == "kernels":
        return "n/a" if row.get("triton") is None else f"{row['triton']}/{row['library']}"
    if fmt == "b":
        return "yes" if row.get(key) else "no"
    return gm._cell(row.get(key), fmt)


def _line(cells: list[str]) -> str:
    return " ".join(f"{c:<{w}}" if k == 0 else f"{c:>{w}}" for k, (c, (_, w, _, _)) in enumerate(zip(cells, COLUMNS)))


def summary(rows: list[dict]) -> dict:
    """Counts (models, skipped, delivered, verified, LEGO ran its plan
    without a fallback warning) and geomeans of LEGO/eager and LEGO/best
    compile over the timed rows."""
    run = [r for r in rows if not r.get("skipped")]
    return {
        "models": len(rows), "skipped": len(rows) - len(run),
        "delivered": sum(1 for r in run if r.get("delivered")), "verified": sum(1 for r in run if r.get("verified")),
        "fallback": sum(1 for r in run if r.get("lego_fallback")),
        "geomean_lego_vs_eager": gm.geomean([r.get("lego_vs_eager") for r in run]),
        "geomean_lego_vs_best_compile": gm.geomean([r.get("lego_vs_best_compile") for r in run]),
    }  # fmt: skip


def format_table(rows: list[dict], dtype: str, meta: dict) -> str:
    """The printed table of one dtype: a line per model (times: median ms;
    ratios: LEGO's speedup, above 1 is faster; LEGO err: norm-relative
    against eager; search: the optimizer's wall s), under it why it was skipped or failed, ModelNew's warnings and a
    failed torch.compile; then the counts and geomeans."""
    versions = ", ".join(f"{k} {v}" for k, v in (meta.get("libraries") or {}).items() if v)
    methods = {r.get("timing_method") for r in rows if r.get("eager_ms") is not None}
    clock = "CUDA events, L2 flushed with 256 MB" if methods == {"cuda_events"} else "host clock"
    how = (f"median ms of {meta.get('rep', DEFAULT_REP)} calls, {clock}" if methods
           else "not timed (optimized, verified, ModelNew run once as a user runs it)")
    lines = [f"LEGO on real library models, {dtype}, {meta.get('gpu', '?')} (torch {meta.get('torch', '?')}, triton {meta.get('triton', '?')}"
             + (f", {versions}" if versions else "") + f"); {how}"
             + (f"; {meta['jobs']} optimizer runs at once" if meta.get("jobs", 1) > 1 else "")]  # fmt: skip
    head = _line([title for title, _, _, _ in COLUMNS])
    lines += [head, "-" * len(head)]
    for row in rows:
        if row.get("skipped"):
            lines.append(f"{row['model']:<32} {row['skipped']}")
            continue
        lines.append(_line([_cell(row, key, fmt) for _, _, key, fmt in COLUMNS]))
        if row.get("error"):
            lines.append(f"    error: {row['error'][:400]}")
        for said in row.get("lego_warnings") or []:
            lines.append(f"    ModelNew warned: {said[:200]}")
        for mode in ("compile_default", "compile_reduce_overhead"):
            if row.get(f"{mode}_error"):
                lines.append(f"    {mode} failed: {row[f'{mode}_error'][:200]}")
    s = summary(rows)
    lines.append(f"delivered {s['delivered']}/{s['models'] - s['skipped']}, verified {s['verified']}, skipped {s['skipped']}, "
                 f"ModelNew fell back {s['fallback']}; geomean L/eager {gm._ratio(s['geomean_lego_vs_eager'])}, "
                 f"L/best compile {gm._ratio(s['geomean_lego_vs_best_compile'])}")  # fmt: skip
    return "\n".join(lines) + "\n"


def result_document(rows: list[dict], dtype: str, meta: dict, device: str, date: str | None = None) -> dict:
    """The JSON of one dtype: ``bench`` ("real"), ``gpu``, ``torch``,
    ``triton``, ``libraries`` (versions), ``date``, ``dtype``, ``device``,
    the settings (``jobs``, ``max_search_time_s``, ``rep``), ``summary`` and ``rows``."""
    return {"bench": "real", "gpu": meta.get("gpu"), "torch": meta.get("torch"), "triton": meta.get("triton"),
            "libraries": meta.get("libraries"), "date": date or datetime.date.today().isoformat(), "dtype": dtype,
            "device": device, "jobs": meta.get("jobs", 1), "max_search_time_s": meta.get("max_search_time_s"),
            "rep": meta.get("rep"), "bench_wall_s": meta.get("wall_s"), "summary": summary(rows), "rows": rows}  # fmt: skip


# ---------------------------------------------------------------- command line


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=None, help="comma-separated model names (default: all)")
    parser.add_argument("--dtypes", default="bf16,fp32", help="comma-separated, of fp32, bf16, fp16")
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"), help="cpu: optimize and verify only (ModelNew run once), nothing is timed")
    parser.add_argument("--tiny", action="store_true", help="the tiny.json sizes (CPU runs)")
    parser.add_argument("--max-search-time", type=float, default=DEFAULT_MAX_SEARCH_S, help="seconds of tree search per optimizer run")
    parser.add_argument("--timeout", type=float, default=None, help="seconds per optimizer run in all (default 1200 on cuda, 600 on cpu)")
    parser.add_argument("--jobs", type=int, default=1, help="optimizer runs at once (on one GPU each timing inside a search holds it alone)")
    parser.add_argument("--rep", type=int, default=DEFAULT_REP, help="timed calls per measurement (median)")
    parser.add_argument("--modes", default="default,reduce-overhead", help="torch.compile modes timed beside eager")
    parser.add_argument("--tol", type=float, default=None, help="max norm-relative error of LEGO vs eager (default per dtype)")
    parser.add_argument("--timing-timeout", type=float, default=TIMING_TIMEOUT_S, help="seconds per model in the timing process")
    parser.add_argument("--skip-search", action="store_true", help="no optimizer runs: read and time the existing output folders")
    parser.add_argument("--search-arg", action="append", default=[], help="extra optimizer option (repeatable), e.g. --search-arg=--no-cache")
    parser.add_argument("--out-dir", type=Path, default=ROOT / "build" / "bench-real", help="optimizer output folders, one per model/dtype")
    parser.add_argument("--results-dir", type=Path, default=None, help="where the JSON goes (default bench/results on cuda, OUT/results on cpu)")
    parser.add_argument("--timing-worker", type=Path, default=None, help=argparse.SUPPRESS)
    return parser


def parse_args(argv: list[str] | None = None):
    args = build_parser().parse_args(argv)
    bm.check_dtypes_and_jobs(args)
    args.timeout = args.timeout or (1200.0 if args.device == "cuda" else 600.0)
    args.modes = [m for m in args.modes.split(",") if m]
    args.out_dir = args.out_dir.resolve()
    if args.results_dir is None:  # CPU runs check the flow; GPU runs are results to commit
        args.results_dir = gm.RESULTS_DIR if args.device == "cuda" else args.out_dir / "results"
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    entries = select_models(args.models.split(",") if args.models else None, args.tiny)
    if args.timing_worker:
        timing_worker(entries, args.dtypes[0], args.device, args.out_dir, args.rep, args.modes, args.timing_worker)
        return 0
    args.results_dir.mkdir(parents=True, exist_ok=True)
    meta = dict(gm.machine_info(args.device), libraries=library_versions(), jobs=args.jobs, max_search_time_s=args.max_search_time, rep=args.rep)
    started = time.monotonic()
    searched = optimize_all(entries, args)
    for dtype in args.dtypes:
        rows = [searched[dtype, e.name] for e in entries]
        # the searches are over (the GPU is quiet): time (cuda) or run once (cpu) ModelNew as a user does
        tol = args.tol if args.tol is not None else gm.DEFAULT_TOL[dtype]
        to_time = [e for e, r in zip(entries, rows) if not r.get("skipped")]
        _, timed = time_in_child(to_time, dtype, args) if to_time else ({}, {})
        rows = [r if r.get("skipped") else merge_timing(r, timed.get(r["model"], {}), tol) for r in rows]
        meta["wall_s"] = round(time.monotonic() - started, 1)
        gm.write_results(args.results_dir, result_document(rows, dtype, meta, args.device), format_table(rows, dtype, meta), bench="real")
        if args.device == "cuda":
            print(f"independent check: {gm.sidebyside_command([r for r in rows if r.get('delivered')], entries, dtype)}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
