"""GPU benchmark (``make bench-gpu``): LEGO against eager, torch.compile and the roofline floor.

Usage:
    python bench/gpu_models.py                                   # every model, bf16 and fp32, cuda
    python bench/gpu_models.py --dtypes bf16 --models gpt_stack,resnet18_style
    python bench/gpu_models.py --gpus 0,1                        # models split over two GPUs
    python bench/gpu_models.py --skip-search                     # re-time existing output folders
    python bench/gpu_models.py --sets reference,bench,breadth --jobs 4 --sidebyside
    python bench/gpu_models.py --device cpu --tiny --rep 3       # the same flow on a CPU, tiny sizes

Models (``--sets``, default ``reference,bench``): ``reference``, the reference
models (../shared/models or $LEGO_MODELS_DIR); ``bench``, the bench's own
(bench/models); ``breadth``, bench/models/breadth (as bench/breadth_models.py
reads it); at their file sizes (``--tiny``: the sizes in each folder's
tiny.json).  For each dtype and model:

1. **search**: ``python -m lego_core optimize MODEL --dtype D --device cuda
   --out OUT/MODEL-D-cuda --no-compile`` in its own process, with a
   per-model ``--timeout``; its wall time is ``search_s``.  ``--jobs N``
   runs up to N of them at once (on one GPU: each timing inside a search
   holds it alone, lego_core.runtime.gpu_lock).  The folder is
   reused: ``--skip-search`` keeps existing folders and times them again.
2. **timing**: once the dtype's searches are over, ONE process per dtype
   (per GPU) measures each model in turn: the roofline floor
   (``lego_core.cost.roofline``), the peak GPU memory of one eager
   forward, then side by side (``lego_core.judge.end_to_end.benchmark``): eager,
   torch.compile ``default`` and ``reduce-overhead``, and LEGO's ModelNew
   loaded from the output folder as a user loads it, on the same inputs
   (seed 1, as ../shared/tools/sidebyside.py draws them), CUDA events, L2
   flushed, median.

``verified``: the optimizer's end-to-end check passed (report.json) and
LEGO's norm-relative error against eager here is within ``--tol`` (default
per dtype: fp32 1e-4, bf16 5e-2, fp16 1e-2).  A model that fails at any step
is a row with an ``error``; the bench goes on.

Search columns, from each folder's report.json (bench/bench_columns.py; ``-``
where the report lacks the key): ``rep/e`` the speedup over eager the run
itself reported, ``won/att/sig`` distinct signatures won by Triton /
attempted by an agent / distinct, ``mut a/t`` mutations accepted / tried,
``calls`` agent calls, ``plan s`` time to the first plan, ``opt s`` the
optimizer's own wall time (``srch s``: its process, as the bench saw it).

3. **sidebyside** (``--sidebyside``): every folder timed again by the
   independent ../shared/tools/sidebyside.py ($LEGO_SIDEBYSIDE), one process
   per dtype after the bench's timing (bench/sidebyside_pass.py); a second
   table sets its numbers beside the run's reported speedup and the bench's.

Prints one table per dtype with a geomean row (and a search line) per group,
and writes ``bench/results/<date>-<gpu>-<dtype>.json``: ``gpu``, ``torch``,
``triton``, ``date``, ``dtype``, ``rows`` (keys in ``ROW_KEYS`` and
``bench_columns.REPORT_KEYS`` and more), ``summary`` per group, and with
``--sidebyside`` ``sidebyside`` (its rows) and ``sidebyside_summary``.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import datetime
import json
import math
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(BENCH))
sys.modules.setdefault("gpu_models", sys.modules[__name__])  # run as a script: the bench modules importing gpu_models get this one

import bench_columns  # noqa: E402  (bench/ is the script's folder)
from reference_models import MODELS_DIR  # noqa: E402

BENCH_MODELS_DIR = BENCH / "models"
BREADTH_DIR = BENCH_MODELS_DIR / "breadth"
RESULTS_DIR = BENCH / "results"
ROW_KEYS = (
    "model", "floor_ms", "eager_ms", "compile_default_ms", "compile_reduce_overhead_ms", "lego_ms",
    "search_s", "verified", "eager_peak_mb", "search_peak_mb",
)  # fmt: skip
MIN_SEARCH_S = 30.0  # a search is not started with less time than this left
SEARCH_GRACE_S = 120.0  # past the optimizer's own --timeout, before its process group is killed
DEADLINE_GRACE_S = 30.0  # past --budget, before the timing process is killed (the model in hand becomes an error row)
DEFAULT_TOL = {"fp32": 1e-4, "bf16": 5e-2, "fp16": 1e-2}
GROUPS = ("reference", "bench", "breadth")  # the sets, in table order
DEFAULT_SETS = ("reference", "bench")


@dataclasses.dataclass(frozen=True)
class Entry:
    """One model to bench: ``name`` (file stem), ``path``, ``group``
    (its set: ``reference``, ``bench`` or ``breadth``) and the constant
    ``overrides`` to apply."""

    name: str
    path: str
    group: str
    overrides: dict


def _tiny(folder: Path) -> dict:
    path = folder / "tiny.json"
    return json.loads(path.read_text()) if path.is_file() else {}


def select_models(selected: list[str] | None, tiny: bool, reference_dir: Path = MODELS_DIR, bench_dir: Path = BENCH_MODELS_DIR,
                  sets: tuple[str, ...] | list[str] = DEFAULT_SETS, breadth_dir: Path = BREADTH_DIR) -> list[Entry]:
    """The models of ``sets`` (of ``GROUPS``), set by set in ``GROUPS``
    order, sorted by name in each; ``selected`` names stems (with or
    without ``.py``) from any of them.  SystemExit naming the folders for an
    unknown name or a name in two sets (their output folders would be one),
    and naming the folder when one holds no model (a reference folder that
    did not travel to a GPU machine once made a whole bench run time only
    the bench's own)."""
    folders = {"reference": Path(reference_dir), "bench": Path(bench_dir), "breadth": Path(breadth_dir)}
    unknown_sets = [s for s in sets if s not in folders]
    if unknown_sets:
        raise SystemExit(f"unknown set {', '.join(unknown_sets)}: use {', '.join(GROUPS)}")
    entries = []
    for group in (g for g in GROUPS if g in sets):
        folder = folders[group]
        if not any(folder.glob("*.py")):  # a missing folder must not shrink the table silently
            raise SystemExit(f"no {group} models in {folder}: set LEGO_MODELS_DIR to the folder of the reference models "
                             f"(../shared/models beside the checkout; on a lent GPU machine carry a copy, bench/gpu_session.sh)")
        table = _tiny(folder) if tiny else {}
        for path in sorted(folder.glob("*.py")):
            entries.append(Entry(path.stem, str(path), group, dict(table.get(path.name, {}))))
    names = [e.name for e in entries]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise SystemExit(f"model {', '.join(twice)} in two of the sets {', '.join(sets)}: bench them in separate runs (--sets)")
    if not selected:
        return entries
    wanted = [Path(s).name.removesuffix(".py") for s in selected]
    known = set(names)
    unknown = [w for w in wanted if w not in known]
    if unknown:
        where = " or ".join(str(folders[g]) for g in GROUPS if g in sets)
        raise SystemExit(f"no model {', '.join(unknown)} in {where} (there: {', '.join(sorted(known))}; --sets picks the folders)")
    return [e for e in entries if e.name in wanted]


def out_folder(out_root: Path, entry: Entry, dtype: str, device: str) -> Path:
    """The optimizer's output folder of one model, dtype and device (reused between runs)."""
    return Path(out_root) / f"{entry.name}-{dtype}-{device}"


def _child_env(device: str = "cuda", timing_cpu: int | None = None) -> dict:
    """The optimizer's and the tools' environment: this one, with the
    checkout on PYTHONPATH; ``timing_cpu``: ``LEGO_TIMING_CPUS`` (the run's
    own timing thread held to that CPU)."""
    env = dict(os.environ)
    if timing_cpu is not None:
        env["LEGO_TIMING_CPUS"] = str(timing_cpu)
    if device == "cpu":
        env.setdefault("TRITON_INTERPRET", "1")  # no GPU: Triton's interpreter (set before triton is imported)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    return env


def run_search(entry: Entry, dtype: str, device: str, out_root: Path, timeout_s: float, extra: list[str], grace_s: float = SEARCH_GRACE_S,
               compile_too: bool = False, timing_cpu: int | None = None) -> dict:
    """Run the optimizer on one model in its own process (``python -m lego_core optimize``).

    Returns and stores beside the folder (``<folder>.search.json``):
    ``search_s`` (wall seconds), ``search_rc`` (exit status, None on
    timeout), ``search_error`` (the last lines of its output when it failed).
    Its full output goes to ``<folder>.search.log``.  The optimizer gets
    ``--timeout timeout_s``; its process group is killed ``grace_s`` later.
    ``compile_too``: let it measure torch.compile too (``--no-compile``
    otherwise: bench-gpu times torch.compile itself); ``timing_cpu``: hold
    the run's own timing thread to that CPU (``LEGO_TIMING_CPUS``).
    """
    folder = out_folder(out_root, entry, dtype, device)
    folder.parent.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "lego_core", "optimize", entry.path, "--dtype", dtype, "--device", device, "--out", str(folder)]
    cmd += [] if compile_too else ["--no-compile"]
    cmd += ["--timeout", str(timeout_s)]  # the optimizer stops itself; the process group is killed only past a grace period
    cmd += [arg for k, v in entry.overrides.items() for arg in ("--set", f"{k}={v}")] + list(extra)
    log = folder.with_name(folder.name + ".search.log")
    started = time.monotonic()
    info: dict = {"search_cmd": " ".join(cmd)}
    with open(log, "w") as out:
        rc = run_group(cmd, timeout_s + grace_s, stdout=out, env=_child_env(device, timing_cpu))
    info["search_rc"] = rc
    if rc is None:
        info["search_error"] = f"search timed out after {timeout_s:g} s"
    info["search_s"] = round(time.monotonic() - started, 1)
    if info["search_rc"] not in (0, None):
        tail = [line.strip() for line in log.read_text(errors="replace").splitlines() if line.strip()][-3:]
        info["search_error"] = f"optimizer exit {info['search_rc']}: " + " | ".join(tail)[-400:]
    folder.with_name(folder.name + ".search.json").write_text(json.dumps(info, indent=2))
    return info


def run_group(cmd: list[str], timeout_s: float, **popen) -> int | None:
    """Run ``cmd`` in its own session; past ``timeout_s`` kill its whole process
    group (the optimizer's sandbox child too, so nothing keeps running on
    the GPU).  Returns the exit status, None on timeout."""
    proc = subprocess.Popen(cmd, cwd=str(ROOT), start_new_session=True, **popen)
    try:
        return proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        return None


def stored_search(entry: Entry, dtype: str, device: str, out_root: Path) -> dict:
    """What the last :func:`run_search` of this folder stored, or ``{}``."""
    path = out_folder(out_root, entry, dtype, device).with_name(f"{entry.name}-{dtype}-{device}.search.json")
    return json.loads(path.read_text()) if path.is_file() else {}


# ---------------------------------------------------------------- timing (one process per dtype)


def time_entry(entry: Entry, dtype: str, device: str, out_root: Path, rep: int, modes: list[str], tol: float) -> dict:
    """Floor, eager peak memory and side-by-side timings of one model in this process; a row."""
    import torch

    from lego_core.judge.end_to_end import benchmark
    from lego_core.cost import roofline
    from lego_core.load.capture import capture_graph
    from lego_core.load.problem import ProblemSpec, load_problem

    folder = out_folder(out_root, entry, dtype, device)
    row: dict = {"model": entry.name, "group": entry.group, "dtype": dtype, "overrides": entry.overrides, "out_dir": str(folder)}
    row.update({k: None for k in ROW_KEYS if k not in row})
    row["verified"] = False
    search = stored_search(entry, dtype, device, out_root)
    row["search_s"] = search.get("search_s")
    errors = [search["search_error"]] if search.get("search_error") else []
    report = _read_report(folder)
    memory = (report or {}).get("memory") or {}
    row["eager_peak_mb"], row["search_peak_mb"] = memory.get("eager_peak_mb"), memory.get("search_peak_mb")
    row["bound_mb"], row["stage_peaks_mb"] = memory.get("bound_mb"), memory.get("stage_peaks_mb")
    e2e = (report or {}).get("end_to_end") or {}
    row["e2e_passed"] = e2e.get("passed")
    row["launch"] = _launch_mode(report)
    row.update(bench_columns.report_fields(report))
    if report:
        row["triton"], row["library"] = (report.get("summary") or {}).get("triton"), (report.get("summary") or {}).get("library")
    problem = None
    try:
        problem = load_problem(ProblemSpec(entry.path, entry.overrides, dtype, device))
        work = roofline.count_work(capture_graph(problem))
        ceilings = roofline.measure_ceilings(device, dtype)
        floor = roofline.floor(work, ceilings)
        row.update(floor_ms=floor.floor_ms, floor_bound=floor.bound, flops=floor.flops, min_bytes=floor.bytes)
        inputs = problem.make_inputs(1)  # seed 1, as sidebyside.py draws its inputs
        row["bench_eager_peak_mb"] = benchmark.eager_peak_mb(problem.model, inputs)
        candidates = [("eager", lambda: problem.model)] + benchmark.compile_candidates(problem.model, modes)
        candidates.append(("lego", lambda: benchmark.load_model_new(folder, problem)))
        for m in benchmark.side_by_side(candidates, [inputs], rep=rep):
            row[f"{m.name}_ms"] = m.median_ms
            row[f"{m.name}_p20_ms"], row[f"{m.name}_p80_ms"] = (m.timing.p20_ms, m.timing.p80_ms) if m.timing else (None, None)
            if m.name != "eager":
                row[f"{m.name}_err"] = m.rel_err
                row[f"{m.name}_setup_s"] = m.setup_s
            if m.error:
                errors.append(f"{m.name}: {m.error}")
        row["timing_method"] = "cuda_events" if device == "cuda" else "perf_counter"
    except Exception as exc:  # noqa: BLE001 - one model's failure is a row
        errors.append(f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}")
    finally:
        del problem
        _release(torch)
    _derive(row, tol)
    if errors:
        row["error"] = "; ".join(errors)
    return row


def _read_report(folder: Path) -> dict | None:
    path = folder / "report.json"
    try:
        return json.loads(path.read_text()) if path.is_file() else None
    except (OSError, ValueError):
        return None


def _launch_mode(report: dict | None) -> str | None:
    """How the shipped ModelNew runs: report.json's ``launch.chosen``
    (``plan``, ``plan+graph``, ``original``, ``original+graph``; see
    lego_core/judge/end_to_end/launch.py), or None for a report without one."""
    launch = (report or {}).get("launch") or {}
    return launch.get("chosen") or launch.get("forward")


def _derive(row: dict, tol: float) -> None:
    """Ratios and ``verified`` from the measured fields (None where a part is missing)."""
    lego, eager, floor = row.get("lego_ms"), row.get("eager_ms"), row.get("floor_ms")
    compiles = [row.get(k) for k in ("compile_default_ms", "compile_reduce_overhead_ms") if row.get(k)]
    best = min(compiles) if compiles else None
    row["best_compile_ms"] = best
    row["lego_vs_eager"] = eager / lego if lego and eager else None
    row["lego_vs_best_compile"] = best / lego if lego and best else None
    row["pct_of_floor"] = 100.0 * floor / lego if lego and floor else None
    err = row.get("lego_err")
    row["tol"] = tol
    row["verified"] = bool(row.get("e2e_passed")) and err is not None and err <= tol


def _release(torch) -> None:
    import gc

    gc.collect()
    torch._dynamo.reset()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def machine_info(device: str) -> dict:
    """``gpu`` (device name, or ``cpu``), ``torch`` and ``triton`` versions."""
    import torch

    try:
        import triton

        triton_version = triton.__version__
    except ImportError:
        triton_version = None
    gpu = torch.cuda.get_device_name(0) if device == "cuda" and torch.cuda.is_available() else "cpu"
    return {"gpu": gpu, "torch": torch.__version__, "triton": triton_version}


def timing_worker(entries: list[Entry], dtype: str, device: str, out_root: Path, rep: int, modes: list[str], tol: float, rows_file: Path, deadline: float | None = None) -> None:
    """Time ``entries`` one after another in this process; rewrite ``rows_file``
    (``{"meta": machine_info, "rows": [...]}``) after each model, so a crash
    loses only the model it happened in.  A model not started by ``deadline``
    (``time.time()``) becomes an error row."""
    state = {"meta": machine_info(device), "rows": []}
    if device == "cuda":
        import torch

        from lego_core.cost import roofline

        state["ceilings"] = roofline.measure_ceilings(device, dtype).to_dict()
        torch.cuda.empty_cache()
    for entry in entries:
        left = _left(deadline)
        if left is not None and left <= 0:
            state["rows"].append(_failed_row(entry, dtype, "not timed: --budget spent", out_root, device))
            continue
        state["rows"].append(time_entry(entry, dtype, device, out_root, rep, modes, tol))
        rows_file.write_text(json.dumps(state, indent=2, default=str))
        print(f"[{time.strftime('%H:%M:%S')}] timed {entry.name} {dtype}", flush=True)
    rows_file.write_text(json.dumps(state, indent=2, default=str))


def time_in_child(entries: list[Entry], dtype: str, device: str, args, tol: float) -> tuple[dict, list[dict]]:
    """Run :func:`timing_worker` in one child process for all ``entries``; when
    the child dies, the model it was on becomes an error row and a new child
    takes the rest.  Returns ``(meta, rows)``, rows in ``entries`` order."""
    rows: dict[str, dict] = {}
    meta: dict = {}
    remaining = list(entries)
    while remaining:
        with tempfile.TemporaryDirectory(prefix="lego-bench-") as tmp:
            rows_file = Path(tmp) / "rows.json"
            cmd = [sys.executable, str(Path(__file__).resolve()), "--timing-worker", str(rows_file), "--dtypes", dtype, "--device", device,
                   "--models", ",".join(e.name for e in remaining), "--out-dir", str(args.out_dir), "--rep", str(args.rep),
                   "--modes", ",".join(args.modes), "--tol", str(tol), "--sets", ",".join(args.sets)] + (["--tiny"] if args.tiny else [])  # fmt: skip
            cmd += ["--deadline", str(args.deadline)] if args.deadline else []
            limit = args.timing_timeout * len(remaining)
            left = _left(args.deadline)
            if left is not None:  # past the deadline the child only writes "not timed" rows; let the model in hand finish
                limit = min(limit, max(left, 0.0) + DEADLINE_GRACE_S)
            rc = run_group(cmd, limit, env=_child_env(device))
            status = f"exit {rc}" if rc is not None else f"timed out after {limit:g} s"
            state = json.loads(rows_file.read_text()) if rows_file.is_file() else {}
        meta = meta or state.get("meta", {})
        meta.setdefault("ceilings", state.get("ceilings"))
        for row in state.get("rows", []):
            rows[row["model"]] = row
        remaining = [e for e in remaining if e.name not in rows]
        if remaining:  # the child died on remaining[0]
            dead = remaining.pop(0)
            rows[dead.name] = _failed_row(dead, dtype, f"the timing process died ({status}) while timing it", args.out_dir, device)
    return meta, [rows[e.name] for e in entries]


def untimed_row(entry: Entry, dtype: str, out_root: Path, device: str) -> dict:
    """The row of a searched model that the bench does not time itself
    (``--no-bench-timing``): its search info and its report.json's columns;
    ``verified`` is the run's own end-to-end check."""
    row = _failed_row(entry, dtype, None, out_root, device)
    report = _read_report(out_folder(out_root, entry, dtype, device)) or {}
    row["verified"] = bool((report.get("end_to_end") or {}).get("passed"))
    if not (out_folder(out_root, entry, dtype, device) / "optimized_model.py").is_file():
        row["error"] = "no output folder"
    return row


def _failed_row(entry: Entry, dtype: str, error: str, out_root: Path, device: str) -> dict:
    """The row of a model that was not timed: its search info and whatever its report.json says."""
    row = {k: None for k in ROW_KEYS}
    search = stored_search(entry, dtype, device, out_root)
    folder = out_folder(out_root, entry, dtype, device)
    row.update(bench_columns.report_fields(_read_report(folder)))
    row.update(model=entry.name, group=entry.group, dtype=dtype, verified=False, search_s=search.get("search_s"), error=error, out_dir=str(folder))
    return row


# ---------------------------------------------------------------- one worker: its share of the models, all dtypes


def search_all(entries: list[Entry], dtype: str, args) -> dict[str, str]:
    """Search every entry of one dtype (unless ``--skip-search`` finds its
    folder), ``args.jobs`` optimizer processes at a time (threads only wait
    on them; entries start in order); returns ``{model: why}`` for those not
    searched.  A search not started by the ``--search-budget`` deadline is
    skipped, and each one's timeout is cut to what is left when it starts."""

    def one(entry: Entry) -> str | None:
        left = _left(args.search_deadline)
        if left is not None and left < MIN_SEARCH_S:
            return "not searched: --search-budget spent"
        cut = left is not None and left < args.timeout
        timeout = left if cut else args.timeout
        info = run_search(entry, dtype, args.device, args.out_dir, timeout, args.search_arg, DEADLINE_GRACE_S if cut else SEARCH_GRACE_S,
                          compile_too=args.no_bench_timing, timing_cpu=args.timing_cpu)  # the run then times torch.compile itself, as by default
        status = "ok" if info.get("search_rc") == 0 else info.get("search_error", "")
        print(f"[{time.strftime('%H:%M:%S')}] searched {entry.name} {dtype}: {status} ({info.get('search_s', 0):.0f} s)", flush=True)
        return None

    todo = [e for e in entries if not (args.skip_search and (out_folder(args.out_dir, e, dtype, args.device) / "optimized_model.py").is_file())]
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, getattr(args, "jobs", 1))) as pool:
        reasons = list(pool.map(one, todo))
    return {e.name: why for e, why in zip(todo, reasons) if why}


def run_worker(entries: list[Entry], args, on_dtype=None) -> dict:
    """Search (unless ``--skip-search``; :func:`search_all`, ``--jobs`` at
    once) then, once all searches of the dtype are over, time every entry in
    one process, per dtype; returns ``{dtype: {"meta": ..., "rows": [...]}}``
    and hands each dtype's part to ``on_dtype(dtype, part)`` as soon as it is
    done.  Models not searched for ``--search-budget`` become error rows."""
    results = {}
    for dtype in args.dtypes:
        tol = args.tol if args.tol is not None else DEFAULT_TOL[dtype]
        unsearched = search_all(entries, dtype, args)
        if args.search_only:
            continue
        to_time = [e for e in entries if e.name not in unsearched]
        if args.no_bench_timing:  # the rows from the reports alone; --sidebyside times the folders
            meta, rows = machine_info(args.device), [untimed_row(e, dtype, args.out_dir, args.device) for e in to_time]
        else:
            meta, rows = time_in_child(to_time, dtype, args.device, args, tol) if to_time else ({}, [])
        by_name = {r["model"]: r for r in rows}
        for entry in entries:
            if entry.name in unsearched:
                by_name[entry.name] = _failed_row(entry, dtype, unsearched[entry.name], args.out_dir, args.device)
        results[dtype] = {"meta": meta, "rows": [by_name[e.name] for e in entries]}
        if on_dtype:
            on_dtype(dtype, results[dtype])
    return results


def _left(deadline: float | None) -> float | None:
    """Seconds until ``deadline`` (a ``time.time()`` value), None without one."""
    return None if deadline is None else deadline - time.time()


def run_on_gpus(entries: list[Entry], args, gpus: list[str]) -> dict:
    """One worker process per entry of ``gpus`` (``CUDA_VISIBLE_DEVICES``),
    each with its share of the models (dealt in turn); rows merged back into
    ``entries`` order.  A GPU named more than once (``--gpus 0,0,0``) runs
    that many searches at once on it, and so does ``--jobs``, which each
    worker gets (each timing of a search holds the GPU
    alone: ``lego_core.runtime.gpu_lock``; the reported timings below never share it).  Two phases: the searches run on all GPUs at once; then the
    timing workers run one after another, so no timed call shares the host
    CPU with another GPU's search or torch.compile (eager and torch.compile
    default are launch-bound: host load changes their numbers)."""
    shares = [(gpu, entries[k :: len(gpus)]) for k, gpu in enumerate(gpus)]
    shares = [(gpu, share) for gpu, share in shares if share]
    merged: dict = {d: {"meta": {}, "rows": {}} for d in args.dtypes}
    with tempfile.TemporaryDirectory(prefix="lego-bench-gpus-") as tmp:
        phases = []
        if args.search_only or not args.skip_search:
            phases.append(("search", ["--search-only"] + (["--skip-search"] if args.skip_search else [])))
        if not args.search_only:
            phases.append(("time", ["--skip-search"]))
        for phase, flags in phases:
            running = []
            for lane, (gpu, share) in enumerate(shares):
                result_file = Path(tmp) / f"{phase}-lane{lane}-gpu{gpu}.json"  # a GPU named twice runs two lanes
                cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", str(result_file), "--models", ",".join(e.name for e in share)]
                cmd += [a for a in _forwarded_args(args) if a not in ("--search-only", "--skip-search")] + flags
                env = _child_env(args.device)
                env["CUDA_VISIBLE_DEVICES"] = gpu
                proc = subprocess.Popen(cmd, env=env, cwd=str(ROOT))
                if phase == "time":
                    proc.wait()  # timing: one GPU at a time
                running.append((gpu, share, result_file, proc))
            for gpu, share, result_file, proc in running:
                rc = proc.wait()
                if phase != "time":
                    continue
                done = json.loads(result_file.read_text()) if result_file.is_file() else {}
                for dtype in args.dtypes:
                    part = done.get(dtype, {})
                    merged[dtype]["meta"] = merged[dtype]["meta"] or part.get("meta", {})
                    got = {r["model"]: dict(r, gpu_index=gpu) for r in part.get("rows", [])}
                    for entry in share:
                        merged[dtype]["rows"][entry.name] = got.get(entry.name) or _failed_row(entry, dtype, f"GPU {gpu} worker exited {rc}", args.out_dir, args.device)
    if args.search_only:
        return {}
    return {d: {"meta": m["meta"], "rows": [m["rows"][e.name] for e in entries]} for d, m in merged.items()}


def _forwarded_args(args) -> list[str]:
    out = ["--dtypes", ",".join(args.dtypes), "--device", args.device, "--out-dir", str(args.out_dir), "--rep", str(args.rep),
           "--modes", ",".join(args.modes), "--timeout", str(args.timeout), "--timing-timeout", str(args.timing_timeout)]  # fmt: skip
    out += ["--sets", ",".join(args.sets), "--jobs", str(args.jobs)]
    out += ["--tiny"] if args.tiny else []
    out += ["--skip-search"] if args.skip_search else []
    out += ["--search-only"] if args.search_only else []
    out += ["--no-bench-timing"] if args.no_bench_timing else []
    out += ["--timing-cpu", str(args.timing_cpu)] if args.timing_cpu is not None else []
    out += ["--tol", str(args.tol)] if args.tol is not None else []
    out += [f"--search-arg={a}" for a in args.search_arg]
    out += ["--deadline", str(args.deadline)] if args.deadline else []
    out += ["--search-deadline", str(args.search_deadline)] if args.search_deadline else []
    return out


# ---------------------------------------------------------------- table and JSON


def geomean(values: list[float | None]) -> float | None:
    """Geometric mean of the positive values (None and missing are skipped); None if none."""
    kept = [v for v in values if v is not None and v > 0 and math.isfinite(v)]
    return math.exp(sum(math.log(v) for v in kept) / len(kept)) if kept else None


def summary(rows: list[dict]) -> dict:
    """Per group (``reference``, ``bench``, ``breadth``): geomeans of
    LEGO/eager, LEGO/best compile, percent of floor and the runs' reported
    LEGO/eager, the worst LEGO/eager, how many rows verified, and the search
    counts of ``bench_columns.group_stats``."""
    out = {}
    for group in GROUPS:
        part = [r for r in rows if r.get("group") == group]
        if not part:
            continue
        vs_eager = [r.get("lego_vs_eager") for r in part]
        out[group] = {
            "models": len(part),
            "verified": sum(1 for r in part if r.get("verified")),
            "geomean_lego_vs_eager": geomean(vs_eager),
            "geomean_lego_vs_best_compile": geomean([r.get("lego_vs_best_compile") for r in part]),
            "geomean_pct_of_floor": geomean([r.get("pct_of_floor") for r in part]),
            "geomean_reported_vs_eager": geomean([r.get("reported_vs_eager") for r in part]),
            "min_lego_vs_eager": min((v for v in vs_eager if v is not None), default=None),
            **bench_columns.group_stats(part),
        }
    return out


# title, width, row key (a tuple: its values joined by "/"), format ("~": "-" when absent, the report's columns)
COLUMNS = (
    ("model", 22, "model", "s"), ("floor", 7, "floor_ms", ".3f"), ("eager", 8, "eager_ms", ".3f"),
    ("c-dflt", 8, "compile_default_ms", ".3f"), ("c-r-o", 8, "compile_reduce_overhead_ms", ".3f"), ("LEGO", 8, "lego_ms", ".3f"),
    ("L/eager", 7, "lego_vs_eager", ".2f"), ("L/best", 6, "lego_vs_best_compile", ".2f"), ("%floor", 6, "pct_of_floor", ".1f"),
    ("rep/e", 6, "reported_vs_eager", "~.2f"), ("eagMB", 6, "eager_peak_mb", ".0f"), ("srchMB", 6, "search_peak_mb", ".0f"),
    ("won/att/sig", 11, ("signatures_won", "signatures_attempted", "signatures_distinct"), "~d"),
    ("mut a/t", 7, ("mutations_accepted", "mutations_tried"), "~d"), ("calls", 5, "agent_calls", "~d"),
    ("plan s", 6, "time_to_first_plan_s", "~.1f"), ("opt s", 6, "optimizer_wall_s", "~.0f"), ("srch s", 6, "search_s", ".0f"),
    ("ok", 3, "verified", "b"),
)  # fmt: skip


def _row_cell(row: dict, key, fmt: str) -> str:
    """One table cell of ``row``: ``key`` a row key, or a tuple of keys whose cells are joined by ``/``."""
    if isinstance(key, tuple):
        parts = [_cell(row.get(k), fmt) for k in key]
        return "-" if all(p == "-" for p in parts) else "/".join(parts)
    return _cell(row.get(key), fmt)


def _cell(value, fmt: str) -> str:
    if fmt.startswith("~"):  # a report column: "-" when the report lacks it; 0.02 s to the first plan is "0.0"
        if value is None:
            return "-"
        return _cell(value, "d") if fmt == "~d" else format(value, fmt[1:])
    if fmt == "b":
        return "yes" if value else "NO"
    if value is None:
        return "n/a"
    if fmt == "s":
        return value
    if fmt == "d":
        return str(int(round(value))) if isinstance(value, (int, float)) and not isinstance(value, bool) else str(value)
    if fmt.endswith("f") and isinstance(value, float) and 0 < abs(value) < 0.5 * 10 ** -int(fmt[1:-1] or 0):
        return format(value, ".1e")  # a ratio or time too small for the fixed format: say how small
    return format(value, fmt)


def _ratio(value) -> str:
    """A geomean ratio with its ``x``, or ``n/a``."""
    return "n/a" if value is None else _cell(value, ".2f") + "x"


def format_table(rows: list[dict], dtype: str, meta: dict) -> str:
    """The printed table of one dtype (at most 160 columns): one line per
    model (times in ms, peaks in MB, seconds), an error line under a failed
    model, then per group a geomean line and a line of search counts."""
    lines = [f"LEGO vs eager and torch.compile, {dtype}, {meta.get('gpu', '?')} (torch {meta.get('torch', '?')}, triton {meta.get('triton', '?')}); median ms"]
    head = " ".join(f"{title:>{width}}" if k else f"{title:<{width}}" for k, (title, width, _, _) in enumerate(COLUMNS))
    lines += [head, "-" * len(head)]
    for group in GROUPS:
        part = [r for r in rows if r.get("group") == group]
        for row in part:
            cells = [_row_cell(row, key, fmt) for _, _, key, fmt in COLUMNS]
            lines.append(" ".join(f"{c:>{w}}" if k else f"{c:<{w}}" for k, (c, (_, w, _, _)) in enumerate(zip(cells, COLUMNS))))
            if row.get("error"):
                lines.append(f"    error: {row['error'][:300]}")
        stats = summary(part).get(group)
        if stats:
            lines.append(
                f"{'geomean ' + group:<22} L/eager {_ratio(stats['geomean_lego_vs_eager'])}  L/best compile {_ratio(stats['geomean_lego_vs_best_compile'])}  "
                f"%floor {_cell(stats['geomean_pct_of_floor'], '.1f')}  worst L/eager {_ratio(stats['min_lego_vs_eager'])}  "
                f"reported L/eager {_ratio(stats['geomean_reported_vs_eager'])}  verified {stats['verified']}/{stats['models']}"
            )
            lines.append(f"{'':<22} {bench_columns.stats_line(stats)}")
            lines.append("")
    lines.append("rep/e: the run's own reported LEGO/eager; won/att/sig: distinct signatures won by Triton/attempted/all; "
                 "mut a/t: mutations accepted/tried")
    lines.append("calls: agent calls; plan s: time to first plan; opt s: the optimizer's wall time; srch s: its process's")
    return "\n".join(lines).rstrip() + "\n"


def result_document(rows: list[dict], dtype: str, meta: dict, device: str, date: str | None = None) -> dict:
    """The JSON written under bench/results: ``gpu``, ``torch``, ``triton``, ``date``, ``dtype``, ``rows``, plus
    ``device``, ``sets``, ``jobs``, ``summary`` (per group) and the measured ``ceilings``."""
    return {
        "gpu": meta.get("gpu"),
        "torch": meta.get("torch"),
        "triton": meta.get("triton"),
        "date": date or datetime.date.today().isoformat(),
        "dtype": dtype,
        "device": device,
        "sets": meta.get("sets"),
        "jobs": meta.get("jobs"),
        "ceilings": meta.get("ceilings"),
        "summary": summary(rows),
        "rows": rows,
    }


def result_path(results_dir: Path, doc: dict, bench: str = "") -> Path:
    """``<results_dir>/<date>-<gpu slug>-<dtype>.json`` (``<date>-<gpu slug>-<bench>-<dtype>.json`` for another bench's JSON)."""
    slug = re.sub(r"[^a-z0-9]+", "-", str(doc.get("gpu") or "unknown").lower()).strip("-")
    return Path(results_dir) / f"{doc['date']}-{slug}-{bench + '-' if bench else ''}{doc['dtype']}.json"


def write_results(results_dir: Path, doc: dict, table_text: str, bench: str = "") -> Path:
    """Write ``doc`` as JSON at ``result_path(results_dir, doc, bench)``, print
    ``table_text`` after a blank line and then ``written: <path>``; returns the path."""
    path = result_path(results_dir, doc, bench)
    path.write_text(json.dumps(doc, indent=2, default=str) + "\n")
    print()
    print(table_text, end="")
    print(f"written: {path}", flush=True)
    return path


def sidebyside_script() -> Path:
    """The independent timing tool: $LEGO_SIDEBYSIDE, else ../shared/tools/sidebyside.py beside the checkout."""
    return Path(os.environ.get("LEGO_SIDEBYSIDE") or ROOT.parent / "shared" / "tools" / "sidebyside.py")


def sidebyside_argv(rows: list[dict], entries: list[Entry], dtype: str, python: str = "python3", options: list[str] | tuple = ()) -> list[str]:
    """The sidebyside.py command line (a list) that re-times the rows' output
    folders independently: ``python SCRIPT --dtype D OPTIONS MODEL.py=OUTDIR[,k=v...] ...``."""
    paths = {e.name: e for e in entries}
    pairs = []
    for row in rows:
        entry = paths.get(row["model"])
        if entry and row.get("out_dir"):
            pairs.append(f"{entry.path}={row['out_dir']}" + "".join(f",{k}={v}" for k, v in entry.overrides.items()))
    return [python, str(sidebyside_script()), "--dtype", dtype, *options, *pairs]


def sidebyside_command(rows: list[dict], entries: list[Entry], dtype: str) -> str:
    """:func:`sidebyside_argv` as one shell line (printed, for a person to run;
    its numbers should agree with these)."""
    return shlex.join(sidebyside_argv(rows, entries, dtype))


# ---------------------------------------------------------------- command line


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=None, help="comma-separated model names (default: all)")
    parser.add_argument("--dtypes", default="bf16,fp32", help="comma-separated, of fp32, bf16, fp16")
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--tiny", action="store_true", help="the tiny.json sizes (CPU runs)")
    parser.add_argument("--out-dir", type=Path, default=ROOT / "build" / "bench-gpu", help="optimizer output folders, one per model/dtype (reused)")
    parser.add_argument("--results-dir", type=Path, default=None,
                        help=f"where the JSON goes (default {RESULTS_DIR.relative_to(ROOT)} for GPU runs, build/bench-gpu/results for CPU runs)")
    parser.add_argument("--sets", default=",".join(DEFAULT_SETS),
                        help=f"comma-separated model sets, of {', '.join(GROUPS)} (reference: ../shared/models, bench: bench/models, breadth: bench/models/breadth)")
    parser.add_argument("--gpus", default=None, help="comma-separated GPU indices; one worker per GPU")
    parser.add_argument("--jobs", type=int, default=1,
                        help="optimizer runs at once (per GPU; each timing inside a search holds the GPU alone); the bench's timing stays one process, after the searches")
    parser.add_argument("--timing-cpu", type=int, default=None, metavar="K",
                        help="hold every timing thread to CPU K: the runs' own (LEGO_TIMING_CPUS) and sidebyside.py's (taskset -c K), so both time on the same CPU")
    parser.add_argument("--sidebyside-runs", type=int, default=1, metavar="N",
                        help="run sidebyside.py N times over the folders; each time is the median of the N (default 1)")
    parser.add_argument("--no-bench-timing", action="store_true",
                        help="skip the bench's own timing pass (rows from report.json only); with --sidebyside the independent tool times the folders")
    parser.add_argument("--sidebyside", action="store_true",
                        help="after the bench's timing, time every output folder again with ../shared/tools/sidebyside.py ($LEGO_SIDEBYSIDE), one process per dtype")
    parser.add_argument("--skip-search", action="store_true", help="re-time existing output folders; search only where none exists")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per model search")
    parser.add_argument("--timing-timeout", type=float, default=900.0, help="seconds per model in the timing process")
    parser.add_argument("--rep", type=int, default=None, help="timed calls per measurement (default 100 on cuda, 5 on cpu)")
    parser.add_argument("--modes", default=None, help="torch.compile modes (default: default,reduce-overhead on cuda, none on cpu)")
    parser.add_argument("--tol", type=float, default=None, help="max norm-relative error of LEGO vs eager (default per dtype)")
    parser.add_argument("--search-arg", action="append", default=[], help="extra optimizer option (repeatable), e.g. --search-arg=--max-search-time=600")
    parser.add_argument("--search-only", action="store_true", help="search (or keep, with --skip-search) the output folders; time nothing (time them later with --skip-search)")
    parser.add_argument("--budget", type=float, default=None, help="seconds for the whole bench: models not timed by then become error rows")
    parser.add_argument("--search-budget", type=float, default=None, help="seconds for all searches (of each GPU's share): later searches are skipped")
    parser.add_argument("--deadline", type=float, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--search-deadline", type=float, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--timing-worker", type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--worker", type=Path, default=None, help=argparse.SUPPRESS)
    return parser


def parse_args(argv: list[str] | None = None):
    args = build_parser().parse_args(argv)
    from breadth_models import check_dtypes_and_jobs  # here: breadth_models imports this module

    check_dtypes_and_jobs(args)  # dtypes split and known, --jobs >= 1
    args.sets = [s for s in args.sets.split(",") if s]
    bad = [s for s in args.sets if s not in GROUPS]
    if bad or not args.sets:
        raise SystemExit(f"unknown set {', '.join(bad) or '(none given)'}: use {', '.join(GROUPS)}")
    args.rep = args.rep or (100 if args.device == "cuda" else 5)
    if args.modes is None:
        args.modes = "default,reduce-overhead" if args.device == "cuda" else ""
    args.modes = [m for m in args.modes.split(",") if m]
    args.out_dir = args.out_dir.resolve()
    if args.results_dir is None:  # CPU runs are checks of the flow, not results to commit
        args.results_dir = RESULTS_DIR if args.device == "cuda" else ROOT / "build" / "bench-gpu" / "results"
    now = time.time()
    if args.budget is not None and args.deadline is None:
        args.deadline = now + args.budget
    if args.search_budget is not None and args.search_deadline is None:
        args.search_deadline = now + args.search_budget
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    entries = select_models(args.models.split(",") if args.models else None, args.tiny, sets=args.sets)
    if args.timing_worker:
        timing_worker(entries, args.dtypes[0], args.device, args.out_dir, args.rep, args.modes, args.tol, args.timing_worker, args.deadline)
        return 0
    if args.worker:
        args.worker.write_text(json.dumps(run_worker(entries, args), default=str))
        return 0
    gpus = [g for g in (args.gpus or "").split(",") if g]
    if args.sidebyside and not args.search_only and not sidebyside_script().is_file():
        raise SystemExit(f"--sidebyside: no {sidebyside_script()} (set LEGO_SIDEBYSIDE to sidebyside.py)")
    args.results_dir.mkdir(parents=True, exist_ok=True)

    def write(dtype: str, part: dict) -> None:
        meta = dict(part["meta"], sets=args.sets, jobs=args.jobs)
        doc = result_document(part["rows"], dtype, meta, args.device)
        path = write_results(args.results_dir, doc, format_table(part["rows"], dtype, meta))
        if args.sidebyside:  # the bench's timing of this dtype is over: the GPU is the tool's alone
            import sidebyside_pass

            sbs = sidebyside_pass.run_pass(part["rows"], entries, dtype, args, env=sidebyside_pass.sidebyside_env(args))
            doc.update(sidebyside=sbs, sidebyside_summary=sidebyside_pass.summary(sbs))
            path.write_text(json.dumps(doc, indent=2, default=str) + "\n")
            print()
            print(sidebyside_pass.format_table(sbs, dtype, meta), end="")
            print(f"written: {path} (with the sidebyside rows)", flush=True)
        elif args.device == "cuda":
            print(f"independent check: {sidebyside_command(part['rows'], entries, dtype)}", flush=True)

    if len(gpus) > 1:
        for dtype, part in run_on_gpus(entries, args, gpus).items():
            write(dtype, part)
    else:
        if gpus:
            os.environ["CUDA_VISIBLE_DEVICES"] = gpus[0]  # inherited by the search and timing processes
        run_worker(entries, args, on_dtype=write)  # each dtype's table and JSON as soon as it is done
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
