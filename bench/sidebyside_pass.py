"""The ``--sidebyside`` pass of ``make bench-gpu``: the bench's output folders re-timed by the independent tool.

After the bench has timed a dtype, ``../shared/tools/sidebyside.py`` (or
``$LEGO_SIDEBYSIDE``) times every folder that holds an optimized_model.py in
ONE subprocess (``gpu_models.sidebyside_argv``: ``--dtype D
MODEL.py=OUTDIR[,k=v...] ...``, ``--model-timeout`` per model, the bench's
``--modes``), alone on the GPU.  It prints one JSON line per model (``model``,
``eager_ms``, ``<mode>_ms``, ``lego_ms``, ``lego_err``, ``lego_claims``: the
report's ``timing.speedup_vs_eager``, ``error``...) and then its own table;
:func:`parse_lines` keeps the JSON lines.  Its stdout and stderr go to
``OUT/sidebyside-<dtype>.log``.

:func:`merge` makes one row per bench row: sidebyside's times
(``sbs_eager_ms``, ``sbs_default_ms``, ``sbs_reduce_overhead_ms``,
``sbs_lego_ms``), its ``sbs_lego_vs_eager`` and ``sbs_lego_vs_best_compile``,
the run's own claim ``reported_vs_eager`` (sidebyside's ``lego_claims``, else
the bench row's report field), the bench's ``bench_lego_vs_eager``, and
``reported_over_sidebyside`` = reported / sidebyside LEGO-vs-eager with
``off`` true when that is more than ``OFF_BY`` (10%) from 1.
"""
from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import gpu_models as gm  # noqa: E402  (bench/ is the script's folder)

OFF_BY = 0.10  # a reported speedup more than this far from sidebyside's is marked
STARTUP_S = 120.0  # allowed for the tool's process to start (CUDA context, imports) besides the models


def parse_lines(text: str) -> list[dict]:
    """The JSON objects with a ``model`` key among the lines of ``text``
    (sidebyside.py's per-model lines; its table and anything else skipped)."""
    rows = []
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict) and isinstance(row.get("model"), str):
            rows.append(row)
    return rows


def _ms(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 else None


def merge(bench_rows: list[dict], sbs_rows: list[dict], note: str | None = None) -> list[dict]:
    """One row per bench row (same order) from sidebyside's JSON line of that
    model; a bench row with no line gets ``error`` (``note`` says why, e.g.
    the tool timed out) unless it already has one."""
    by_name = {r["model"]: r for r in sbs_rows}
    out = []
    for row in bench_rows:
        s = by_name.get(row["model"])
        entry = {"model": row["model"], "group": row.get("group"), "dtype": row.get("dtype"), "bench_lego_vs_eager": row.get("lego_vs_eager")}
        eager, default, reduce, lego = (_ms((s or {}).get(k)) for k in ("eager_ms", "default_ms", "reduce-overhead_ms", "lego_ms"))
        entry.update(sbs_eager_ms=eager, sbs_default_ms=default, sbs_reduce_overhead_ms=reduce, sbs_lego_ms=lego)
        best = min([t for t in (default, reduce) if t], default=None)
        entry["sbs_lego_vs_eager"] = eager / lego if eager and lego else None
        entry["sbs_lego_vs_best_compile"] = best / lego if best and lego else None
        claims = _ms((s or {}).get("lego_claims"))
        entry["reported_vs_eager"] = claims if claims is not None else row.get("reported_vs_eager")
        ratio = entry["reported_vs_eager"] / entry["sbs_lego_vs_eager"] if entry["reported_vs_eager"] and entry["sbs_lego_vs_eager"] else None
        entry["reported_over_sidebyside"] = ratio
        entry["off"] = ratio is not None and abs(ratio - 1.0) > OFF_BY
        entry["sbs_lego_err"] = (s or {}).get("lego_err")
        entry["sbs_triton"], entry["sbs_library"] = (s or {}).get("triton"), (s or {}).get("library")
        errors = [str(s[k]) for k in ("error", "lego") if s and s.get(k)]
        errors += [f"{k[: -len('_error')]}: {s[k]}" for k in sorted(s or {}) if k.endswith("_error")]
        if s is None:
            errors.append(row.get("sidebyside_skip") or note or "sidebyside.py printed no line for it")
        if errors:
            entry["error"] = "; ".join(errors)
        out.append(entry)
    return out


def run_pass(bench_rows: list[dict], entries: list, dtype: str, args, env: dict | None = None) -> list[dict]:
    """Run sidebyside.py once over the rows' folders that hold an
    optimized_model.py and return :func:`merge`'s rows.  Per model it gets
    ``--model-timeout`` = ``--timing-timeout`` (less when ``--budget`` has
    less left); the whole process ``STARTUP_S`` more per model, cut to what
    the budget leaves (plus ``gm.DEADLINE_GRACE_S``): the lines printed by
    then are kept.  A spent budget runs nothing."""
    rows = []
    for row in bench_rows:
        folder = Path(row.get("out_dir") or gm.out_folder(args.out_dir, next(e for e in entries if e.name == row["model"]), dtype, args.device))
        if str(row.get("error") or "").startswith("not searched"):  # a folder there is an older run's
            row = dict(row, sidebyside_skip=f"not timed: {row['error']}")
        elif not (folder / "optimized_model.py").is_file():
            row = dict(row, sidebyside_skip="no optimized_model.py in its folder: not timed")
        rows.append(dict(row, out_dir=str(folder)))
    todo = [r for r in rows if not r.get("sidebyside_skip")]
    left = gm._left(args.deadline)
    if not todo:
        return merge(rows, [])
    if left is not None and left <= 0:
        return merge(rows, [], "not run: --budget spent")
    per_model = args.timing_timeout if left is None else max(1.0, min(args.timing_timeout, left))
    limit = (per_model + STARTUP_S) * len(todo)
    if left is not None:
        limit = min(limit, left + gm.DEADLINE_GRACE_S)
    options = ["--model-timeout", str(int(per_model))] + (["--modes", ",".join(args.modes)] if args.modes else [])
    cmd = gm.sidebyside_argv(todo, entries, dtype, python=sys.executable, options=options)
    cpu = getattr(args, "timing_cpu", None)
    if cpu is not None:  # the same CPU the runs' own timing was held to (LEGO_TIMING_CPUS)
        cmd = ["taskset", "-c", str(cpu)] + cmd
    log = Path(args.out_dir) / f"sidebyside-{dtype}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    runs = max(1, int(getattr(args, "sidebyside_runs", 1) or 1))
    results, statuses = [], []
    for k in range(runs):
        started = time.monotonic()
        print(f"[{time.strftime('%H:%M:%S')}] sidebyside {dtype}: {len(todo)} models (run {k + 1} of {runs})", flush=True)
        with tempfile.TemporaryFile(mode="w+") as out, open(log, "w" if k == 0 else "a") as err:
            rc = gm.run_group(cmd, limit, stdout=out, stderr=err, env=env or gm._child_env(args.device))
            out.seek(0)
            text = out.read()
        with open(log, "a") as keep:
            keep.write(f"\n# stdout of run {k + 1}\n{text}")
        statuses.append(f"exit {rc}" if rc is not None else f"timed out after {limit:g} s")
        print(f"[{time.strftime('%H:%M:%S')}] sidebyside {dtype}: {statuses[-1]} ({time.monotonic() - started:.0f} s)", flush=True)
        results.append(parse_lines(text))
    return merge(rows, median_rows(results), f"sidebyside.py gave no line for it ({'; '.join(dict.fromkeys(statuses))}; {log})")


def median_rows(runs: list[list[dict]]) -> list[dict]:
    """One row per model from several sidebyside.py runs over the same
    folders: each ``*_ms`` field the median of the runs that gave it (with
    ``<field>_runs``, the values, in run order), the other fields from the
    first run that named the model.  Eager of a small model is launch bound
    and its time moves with the CPU the process lands on (2.0-2.7x for one
    folder in three runs a minute apart on the H200 machine): one run is
    one sample."""
    by_model: dict[str, list[dict]] = {}
    for rows in runs:
        for row in rows:
            by_model.setdefault(row["model"], []).append(row)
    out = []
    for model, rows in by_model.items():
        merged = dict(rows[0])
        for key in {k for row in rows for k in row if k.endswith("_ms")}:
            values = [row[key] for row in rows if isinstance(row.get(key), (int, float))]
            if values:
                merged[key] = statistics.median(values)
                if len(rows) > 1:
                    merged[f"{key}_runs"] = values
        out.append(merged)
    return out


def summary(rows: list[dict]) -> dict:
    """Per group: geomeans of sidebyside's LEGO/eager and LEGO/best compile,
    of reported/sidebyside, and how many rows are ``off`` by more than 10%."""
    out = {}
    for group in gm.GROUPS:
        part = [r for r in rows if r.get("group") == group]
        if part:
            out[group] = {
                "models": len(part),
                "timed": sum(1 for r in part if r.get("sbs_lego_ms")),
                "geomean_lego_vs_eager": gm.geomean([r.get("sbs_lego_vs_eager") for r in part]),
                "geomean_lego_vs_best_compile": gm.geomean([r.get("sbs_lego_vs_best_compile") for r in part]),
                "geomean_reported_over_sidebyside": gm.geomean([r.get("reported_over_sidebyside") for r in part]),
                "off_by_more_than_10pct": sum(1 for r in part if r.get("off")),
            }
    return out


COLUMNS = (
    ("model", 22, "sbs:model", "s"), ("eager", 9, "sbs_eager_ms", ".3f"), ("c-dflt", 9, "sbs_default_ms", ".3f"),
    ("c-r-o", 9, "sbs_reduce_overhead_ms", ".3f"), ("LEGO", 9, "sbs_lego_ms", ".3f"), ("L/eager", 7, "sbs_lego_vs_eager", ".2f"),
    ("L/best", 7, "sbs_lego_vs_best_compile", ".2f"), ("reported", 8, "reported_vs_eager", "~.2f"),
    ("bench", 7, "bench_lego_vs_eager", ".2f"), ("rep/sbs", 8, "reported_over_sidebyside", "~.2f"), ("LEGO err", 8, "sbs_lego_err", "~.1e"),
)  # fmt: skip


def format_table(rows: list[dict], dtype: str, meta: dict) -> str:
    """The second table: sidebyside.py's times of the same folders (median ms),
    its LEGO/eager and LEGO/best compile, the run's reported LEGO/eager, the
    bench's, and reported/sidebyside (``!``: off by more than 10%)."""
    lines = [f"the same folders timed by sidebyside.py, {dtype}, {meta.get('gpu', '?')}; median ms"]
    head = " ".join(f"{t:<{w}}" if k == 0 else f"{t:>{w}}" for k, (t, w, _, _) in enumerate(COLUMNS))
    lines += [head, "-" * len(head)]
    for group in gm.GROUPS:
        part = [r for r in rows if r.get("group") == group]
        for row in part:
            cells = [row["model"] if key == "sbs:model" else gm._cell(row.get(key), fmt) for _, _, key, fmt in COLUMNS]
            text = " ".join(f"{c:<{w}}" if k == 0 else f"{c:>{w}}" for k, (c, (_, w, _, _)) in enumerate(zip(cells, COLUMNS)))
            lines.append(text + (" !" if row.get("off") else ""))  # after the last column: a row without the mark is as wide as the head
            if row.get("error"):
                lines.append(f"    error: {row['error'][:300]}")
        stats = summary(part).get(group)
        if stats:
            lines.append(f"{'geomean ' + group:<22} L/eager {gm._ratio(stats['geomean_lego_vs_eager'])}  "
                         f"L/best compile {gm._ratio(stats['geomean_lego_vs_best_compile'])}  "
                         f"reported/sidebyside {gm._ratio(stats['geomean_reported_over_sidebyside'])}  "
                         f"off by >10%: {stats['off_by_more_than_10pct']}/{stats['models']}  timed {stats['timed']}/{stats['models']}")  # fmt: skip
            lines.append("")
    lines.append("L/eager, L/best: sidebyside's; reported: the run's own LEGO/eager (report.json); bench: this bench's")
    lines.append("rep/sbs: reported / sidebyside's L/eager; !: off by more than 10%; LEGO err: sidebyside's norm-relative error vs eager")
    return "\n".join(lines).rstrip() + "\n"


def sidebyside_env(args) -> dict:
    """The tool's environment: the bench's, on the first GPU of ``--gpus`` when given."""
    env = gm._child_env(args.device)
    gpus = [g for g in (getattr(args, "gpus", None) or "").split(",") if g]
    if gpus:
        env["CUDA_VISIBLE_DEVICES"] = gpus[0]
    return env
