"""The search compared with itself: every reference model × search variant, one table.

Usage:
    TRITON_INTERPRET=1 python bench/search_models.py                      # all models, all variants
    python bench/search_models.py --models scores_chain.py mlp_residual.py
    python bench/search_models.py --variants default no-dedupe --markdown
    python bench/search_models.py --dry-run                               # the planned runs only

    python bench/search_models.py --llm-scripted                          # LLM tokens: default vs monolithic

(``make bench-search BENCH_ARGS="..."`` runs it.)  Models come from
$LEGO_MODELS_DIR or ../shared/models, at the sizes in its tiny.json, on the
CPU in fp32: kernels run in Triton's interpreter and plan costs are the cost
model's estimates.

Variants: ``default`` (OptimizeConfig()), ``monolithic`` (one agent, the
whole model as one sub-problem), ``no-dedupe``, ``no-mutation``,
``agents 1`` and ``agents 4`` (also written ``agents-4``; any count works).
Every run has ``cache=False``, so each variant is measured fresh, and runs
through ``lego_core.optimize`` (its own child process) into a temporary
folder; a run that fails is a row with its error and the bench goes on.

Columns: agent calls; time to the first and to the final plan (seconds from
the start of the search); the final plan's cost (milliseconds, ``est`` or
``meas``); reused nodes; mutations accepted/tried; wall seconds of the whole
``optimize`` call (load, capture, search, compose, end-to-end check); and,
when a run failed, its error.  The
summary under the table compares the variants per model.

``--llm-scripted``: every run uses the LLM agent (``--agent llm``) against a
scripted chat-completions server that this process starts on 127.0.0.1
(``tests/unit/llm_server.py``): the prompts are the real ones, every reply is
the same short scripted text without code, so the second table (LLM calls,
prompt and completion tokens per run, as the server reports them: characters
/ 4) measures how much context each strategy sends.  Its variants default to
``default`` (the hierarchical search) and ``monolithic``.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime
import io
import json
import os
import platform
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCH.parent), str(BENCH)]

from reference_models import model_names, model_path, tiny_overrides, tiny_table  # noqa: E402

from lego_core.cli import seconds_argument  # noqa: E402
from lego_core.config import MAX_AGENTS  # noqa: E402

VARIANTS: dict[str, dict] = {
    "default": {},
    "monolithic": {"strategy": "monolithic"},
    "no-dedupe": {"dedupe": False},
    "no-mutation": {"mutation": False},
    "agents 1": {"agents": 1},
    "agents 4": {"agents": 4},
}
COLUMNS = ("model", "variant", "agent calls", "first plan s", "final plan s", "plan cost ms", "reused", "mutations acc/tried", "wall s")
DEVICE, DTYPE = "cpu", "fp32"
SCRIPTED_REPLY = "The scripted endpoint of bench/search_models.py --llm-scripted writes no kernel."
TOKEN_COLUMNS = ("model", "variant", "LLM calls", "prompt tokens", "completion tokens", "prompt tokens per call")


@dataclasses.dataclass
class RunResult:
    """One model × variant: ``report`` (optimize's dict) when it ran,
    ``error`` (one line) when it failed; ``wall_s``: seconds of the whole
    ``optimize`` call."""

    model: str
    variant: str
    report: dict | None = None
    error: str | None = None
    wall_s: float = 0.0
    llm_requests: int | None = None  # requests the scripted endpoint got during the run (--llm-scripted)

    @property
    def ok(self) -> bool:
        return self.report is not None

    @property
    def metrics(self) -> dict:
        return (self.report or {}).get("metrics") or {}

    @property
    def plan(self) -> dict:
        return (self.report or {}).get("plan") or {}


# --- variants and runs -----------------------------------------------------


def variant_name(text: str) -> str:
    """The canonical name of a variant as typed (``agents-4``, ``agents4``,
    ``agents=4`` -> ``agents 4``); raises ValueError for an unknown one."""
    text = text.strip().lower()
    match = re.fullmatch(r"agents[\s=_-]*(\d+)", text)
    if match:
        count = int(match.group(1))
        if not 1 <= count <= MAX_AGENTS:
            raise ValueError(f"{text!r}: an agent count from 1 to {MAX_AGENTS}")
        return f"agents {count}"
    if text in VARIANTS:
        return text
    raise ValueError(f"unknown variant {text!r}; known: {', '.join(VARIANTS)} (or 'agents N')")


def variant_settings(name: str) -> dict:
    """The OptimizeConfig fields a variant changes."""
    if name in VARIANTS:
        return dict(VARIANTS[name])
    return {"agents": int(name.split()[1])}


def make_config(variant: str, timeout_s: float | None, agent: str = "template"):
    """The variant's OptimizeConfig: no kernel cache, no torch.compile, the run's time limit, ``agent``."""
    from lego_core import OptimizeConfig

    return OptimizeConfig(cache=False, compare_compile=False, timeout_s=timeout_s, agent=agent, **variant_settings(variant))


@contextlib.contextmanager
def scripted_llm():
    """A scripted chat-completions server on 127.0.0.1 (every reply
    ``SCRIPTED_REPLY``, streamed), named in ``LEGO_LLM_*`` of this process
    (the optimizer's parent runs the LLM agent) while the block runs; yields it."""
    sys.path.insert(0, str(BENCH.parent / "tests" / "unit"))
    from llm_server import ScriptedEndpoint

    values = {"LEGO_LLM_MODEL": "scripted", "LEGO_LLM_API_KEY": "bench-scripted", "LEGO_LLM_RETRIES": "0"}
    with ScriptedEndpoint([{"reply": SCRIPTED_REPLY}]) as endpoint:
        values["LEGO_LLM_BASE_URL"] = endpoint.base_url
        saved = {name: os.environ.get(name) for name in values}
        os.environ.update(values)
        try:
            yield endpoint
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value


def run_one(model: str, variant: str, overrides: dict, timeout_s: float | None, agent: str = "template") -> RunResult:
    """Optimize ``model`` with ``variant`` (and ``agent``) into a temporary folder (removed afterwards)."""
    from lego_core import ProblemSpec, optimize

    spec = ProblemSpec(str(model_path(model)), overrides, DTYPE, DEVICE)
    started = time.monotonic()
    try:
        config = make_config(variant, timeout_s, agent)
        with tempfile.TemporaryDirectory(prefix=f"lego-bench-{model}-") as out:
            report = optimize(spec, out, config)
        return RunResult(model, variant, report=report, wall_s=time.monotonic() - started)
    except Exception as exc:  # noqa: BLE001 - one run's failure is a row in the table
        message = " ".join(f"{type(exc).__name__}: {exc}".split())
        return RunResult(model, variant, error=message[:300], wall_s=time.monotonic() - started)


# --- formatting ------------------------------------------------------------


def _num(x, spec: str) -> str:
    return "-" if x is None else format(x, spec)


def _kind(kind: str | None) -> str:
    return {"estimated": "est", "measured": "meas"}.get(kind or "", kind or "?")


def row_cells(result: RunResult) -> list[str]:
    """The table cells of one run, in COLUMNS order; a failed run reads
    ``FAILED`` under agent calls (its error goes in the error column)."""
    head = [result.model, result.variant]
    if not result.ok:
        return head + ["FAILED"] + [""] * (len(COLUMNS) - 4) + [f"{result.wall_s:.1f}"]
    m, plan = result.metrics, result.plan
    cost = "-" if plan.get("cost_ms") is None else f"{plan['cost_ms']:.4f} {_kind(plan.get('cost_kind'))}"
    mutations = "-" if m.get("mutations_accepted") is None else f"{m['mutations_accepted']}/{m.get('mutations_tried', '?')}"
    return head + [
        _num(m.get("agent_calls"), "d"),
        _num(m.get("time_to_first_plan_s"), ".2f"),
        _num(m.get("time_to_final_plan_s"), ".2f"),
        cost,
        _num(m.get("reused_nodes"), "d"),
        mutations,
        f"{result.wall_s:.1f}",
    ]


def table(results: list[RunResult]) -> tuple[list[str], list[list[str]]]:
    """Column names and rows; an ``error`` column is added when a run failed."""
    failed = any(not r.ok for r in results)
    columns = list(COLUMNS) + (["error"] if failed else [])
    rows = [row_cells(r) + ([r.error or ""] if failed else []) for r in results]
    return columns, rows


def render_markdown(results: list[RunResult]) -> str:
    """A GitHub table of the runs."""
    columns, rows = table(results)
    lines = ["| " + " | ".join(columns) + " |", "|" + "|".join(" --- " if c in ("model", "variant", "error") else " ---: " for c in columns) + "|"]
    for cells in rows:
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines)


def render_rich(results: list[RunResult], width: int | None = None) -> str:
    """A rich table of the runs, as text (no colour codes when not a terminal)."""
    from rich.console import Console
    from rich.table import Table

    columns, rows = table(results)
    grid = Table(title="search variants (cache off, CPU, tiny sizes)", title_justify="left")
    for name in columns:
        left = name in ("model", "variant", "error")
        grid.add_column(name, justify="left" if left else "right", overflow="fold", max_width=60 if name == "error" else None)
    previous = None
    for result, cells in zip(results, rows):
        if previous is not None and result.model != previous:
            grid.add_section()
        previous = result.model
        grid.add_row(*cells, style=None if result.ok else "red")
    terminal = sys.stdout.isatty() and width is None
    if width is None:
        width = shutil.get_terminal_size().columns if terminal else 200
    buffer = io.StringIO()
    Console(file=buffer, width=width, force_terminal=terminal).print(grid)
    return "\n".join(line.rstrip() for line in buffer.getvalue().rstrip("\n").splitlines())


def token_rows(results: list[RunResult]) -> list[list[str]]:
    """TOKEN_COLUMNS cells per run: the scripted endpoint's requests and the
    report's prompt and completion tokens (``-`` for a failed run)."""
    rows = []
    for r in results:
        m = r.metrics
        prompt, completion = m.get("prompt_tokens"), m.get("completion_tokens")
        calls = r.llm_requests
        per_call = _ratio(prompt, calls) if r.ok else None
        rows.append([r.model, r.variant, _num(calls, "d"), _num(prompt if r.ok else None, "d"),
                     _num(completion if r.ok else None, "d"), _num(per_call, ".0f")])
    return rows


def render_tokens(results: list[RunResult], markdown: bool) -> str:
    """The LLM token table (--llm-scripted) with a total line per variant."""
    rows = token_rows(results)
    totals: dict[str, list[int]] = {}
    for r in results:
        if r.ok:
            t = totals.setdefault(r.variant, [0, 0, 0])
            t[0] += r.llm_requests or 0
            t[1] += r.metrics.get("prompt_tokens") or 0
            t[2] += r.metrics.get("completion_tokens") or 0
    rows += [["all models", v, str(c), str(p), str(k), _num(_ratio(p, c), ".0f")] for v, (c, p, k) in totals.items()]
    widths = [max(len(str(x)) for x in col) for col in zip(TOKEN_COLUMNS, *rows)]
    if markdown:
        lines = ["| " + " | ".join(TOKEN_COLUMNS) + " |", "|" + "|".join(" --- " if i < 2 else " ---: " for i in range(len(TOKEN_COLUMNS))) + "|"]
        lines += ["| " + " | ".join(cells) + " |" for cells in rows]
    else:
        fmt = lambda cells: "  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))  # noqa: E731
        lines = [fmt(TOKEN_COLUMNS), fmt(["-" * w for w in widths])] + [fmt(cells) for cells in rows]
    head = ("LLM tokens per run (--agent llm against a scripted endpoint: real prompts, scripted replies; "
            "tokens as the server reports them, characters / 4):")
    return "\n".join([head, ""] + lines)


def _ratio(a, b) -> float | None:
    if a is None or b is None or b == 0:
        return None
    return a / b


def _pick(results: list[RunResult], model: str, variant: str) -> RunResult | None:
    for r in results:
        if r.model == model and r.variant == variant and r.ok:
            return r
    return None


def _search_wall(result: RunResult) -> float:
    """The search's own wall seconds when the report has them, else the whole run's."""
    value = result.metrics.get("search_time_s")
    return result.wall_s if value is None else value


def summary_lines(results: list[RunResult]) -> list[str]:
    """Per model: dedupe's agent-call ratio (default / no-dedupe), mutation's
    cost ratio (default / no-mutation), monolithic's cost against default
    (monolithic / default) and the search wall time of agents 4 against
    agents 1 (4 / 1).  A ratio whose runs are missing or failed is ``-``."""
    lines = []
    for model in dict.fromkeys(r.model for r in results):
        d, nd, nm, mono, a1, a4 = (_pick(results, model, v) for v in ("default", "no-dedupe", "no-mutation", "monolithic", "agents 1", "agents 4"))
        parts = []
        if d and nd:
            calls, calls_nd = d.metrics.get("agent_calls"), nd.metrics.get("agent_calls")
            parts.append(f"dedupe calls {_num(_ratio(calls, calls_nd), '.2f')} ({_num(calls, 'd')} vs {_num(calls_nd, 'd')})")
        if d and nm:
            cost, cost_nm = d.plan.get("cost_ms"), nm.plan.get("cost_ms")
            parts.append(f"mutation cost {_num(_ratio(cost, cost_nm), '.3f')} ({_num(cost, '.4f')} vs {_num(cost_nm, '.4f')} ms)")
        if d and mono:
            cost, cost_mono = d.plan.get("cost_ms"), mono.plan.get("cost_ms")
            parts.append(f"monolithic cost {_num(_ratio(cost_mono, cost), '.2f')}x default ({_num(cost_mono, '.4f')} vs {_num(cost, '.4f')} ms)")
        if a1 and a4:
            w1, w4 = _search_wall(a1), _search_wall(a4)
            parts.append(f"agents 4 vs 1 wall {_num(_ratio(w4, w1), '.2f')} ({w4:.1f} vs {w1:.1f} s)")
        lines.append(f"{model}: " + ("; ".join(parts) if parts else "no comparison (runs missing or failed)"))
    return lines


def machine_line() -> str:
    """CPU count, platform, torch/triton/python versions and the date."""
    try:
        import torch
        import triton

        versions = f"torch {torch.__version__}, triton {triton.__version__}"
    except ImportError as exc:
        versions = f"versions unknown ({exc})"
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    date = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    return f"machine: {cpus} CPUs ({platform.machine()}, {platform.system()}), {versions}, python {platform.python_version()}; {date}"


def report_text(results: list[RunResult], markdown: bool) -> str:
    """Table, notes, summary and machine line, as printed."""
    table = render_markdown(results) if markdown else render_rich(results)
    notes = [
        f"Every run: cache=False (each variant measured fresh, no kernel cache), {DEVICE}, {DTYPE}, tiny sizes, "
        "TRITON_INTERPRET=1; times in seconds from the start of the search; plan cost in ms (est: cost model, meas: measured).",
        "",
        "Summary (ratios: dedupe = default / no-dedupe agent calls; mutation = default / no-mutation plan cost; "
        "monolithic = monolithic / default plan cost; agents = agents 4 / agents 1 search wall time):",
    ]
    bullet = "- " if markdown else "  "
    return "\n".join([table, ""] + notes + [bullet + line for line in summary_lines(results)] + ["", machine_line()])


# --- driver ----------------------------------------------------------------


def planned_runs(models: list[str], variants: list[str], tiny: dict) -> list[tuple[str, str, dict]]:
    """(model, variant, overrides) for every run, models outer."""
    return [(m, v, tiny_overrides(m, tiny)) for m in models for v in variants]


def print_plan(runs: list[tuple[str, str, dict]], timeout_s: float | None) -> None:
    print(f"{len(runs)} runs planned ({DEVICE}, {DTYPE}, cache=False, compare_compile=False, timeout {timeout_s} s each):")
    for model, variant, overrides in runs:
        make_config(variant, timeout_s)  # a field OptimizeConfig lacks fails here, before any run
        sizes = " ".join(f"{k}={v}" for k, v in overrides.items()) or "(file sizes)"
        settings = ", ".join(f"{k}={v!r}" for k, v in variant_settings(variant).items()) or "OptimizeConfig()"
        print(f"  {model:18} {variant:12} {settings:22} {sizes}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=None, help="model files or names (default: all)")
    parser.add_argument("--variants", nargs="+", default=None,
                        help=f"default: {', '.join(VARIANTS)} (with --llm-scripted: default monolithic)")
    parser.add_argument("--llm-scripted", action="store_true",
                        help="every run with --agent llm against a scripted endpoint on 127.0.0.1; prints prompt and completion tokens per run")
    parser.add_argument("--markdown", action="store_true", help="a GitHub table instead of a rich one")
    parser.add_argument("--dry-run", action="store_true", help="print the planned runs and stop")
    parser.add_argument("--timeout", type=seconds_argument, default=900.0, help="per run, seconds (default 900)")
    parser.add_argument("--json", default=None, help="also write every run's result and report to this file")
    args = parser.parse_args(argv)
    try:
        chosen = args.variants or (["default", "monolithic"] if args.llm_scripted else list(VARIANTS))
        variants = list(dict.fromkeys(variant_name(v) for v in chosen))
    except ValueError as exc:
        parser.error(str(exc))
    runs = planned_runs(model_names(args.models), variants, tiny_table())
    if args.dry_run:
        print_plan(runs, args.timeout)
        return 0
    os.environ.setdefault("TRITON_INTERPRET", "1")
    started, results = time.monotonic(), []
    with scripted_llm() if args.llm_scripted else contextlib.nullcontext() as endpoint:
        for model, variant, overrides in runs:
            before = len(endpoint.requests) if endpoint else 0
            result = run_one(model, variant, overrides, args.timeout, "llm" if endpoint else "template")
            if endpoint:
                result.llm_requests = len(endpoint.requests) - before
            status = "ok" if result.ok else result.error
            print(f"[{time.strftime('%H:%M:%S')}] {model} / {variant}: {status} ({result.wall_s:.1f} s)", file=sys.stderr, flush=True)
            results.append(result)
    if args.json:
        Path(args.json).write_text(json.dumps([dataclasses.asdict(r) for r in results], indent=2, default=str))
    print(report_text(results, args.markdown))
    if args.llm_scripted:
        print("\n" + render_tokens(results, args.markdown))
    print(f"bench: {len(results)} runs in {time.monotonic() - started:.0f} s")
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
