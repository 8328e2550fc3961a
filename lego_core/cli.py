"""Command line: ``python -m lego_core optimize MODEL.py [options]``.

Usage: python -m lego_core optimize MODEL.py [--set k=v ...] [--dtype fp32|bf16|fp16] [--device cpu|cuda] [--out DIR]
       [--agent template|llm|both] [--agents N] [--strategy lego|monolithic] [--no-dedupe] [--no-mutation] [--no-cache]
       [--max-agent-calls N] [--max-tokens N] [--max-search-time S] [--patience S] [--stage-limit STAGE=S ...]

Shows a progress bar while the search runs and ends with a summary table.
Exit status: 0 done, 1 the model file or an option is wrong, 3 the optimizer
failed.
"""
from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from lego_core.api import optimize
from lego_core.config import AGENT_CHOICES, DEFAULT_MAX_SEARCH_S, DEFAULT_PATIENCE_S, MAX_AGENTS, STAGES, STRATEGIES, OptimizeConfig, StageLimits
from lego_core.errors import OptimizeError
from lego_core.events import Event
from lego_core.load.override_checks import check_overrides_in_source
from lego_core.load.spec import DEVICES, DTYPE_NAMES, ProblemError, ProblemSpec, format_override, parse_overrides, read_source, syntax_problem
from lego_core.report_view import host_load, phase_breakdown, signature_counts
from lego_core.runtime.sandbox import ChildCrashed


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m lego_core", description="LEGO: fused Triton kernels for a PyTorch model.")
    sub = parser.add_subparsers(dest="command", required=True)
    opt = sub.add_parser("optimize", help="optimize a KernelBench-style model file")
    opt.add_argument("model", help="Python file with Model, get_inputs() and get_init_inputs()")
    opt.add_argument("--set", dest="overrides", action="append", default=[], metavar="NAME=VALUE",
                     help="override a module-level constant (repeatable): a number, true/false, a list [64,32] or a tuple (3,3), "
                     "of the kind the file's value is")
    opt.add_argument("--dtype", choices=DTYPE_NAMES, default="fp32")
    opt.add_argument("--device", choices=DEVICES, default="cpu")
    opt.add_argument("--out", default=None, help="output folder (default: ./lego_out/<model name>)")
    opt.add_argument("--no-triton", action="store_true", help="library calls only (a baseline)")
    opt.add_argument("--no-compile", action="store_true", help="on a GPU, do not time torch.compile")
    opt.add_argument("--channels-last", choices=("off", "on", "auto"), default="off",
                     help="capture 4-D activations in channels-last (NHWC) order; auto: on a GPU for models with a 2-D convolution (default off)")
    opt.add_argument("--timeout", type=seconds_argument, default=None, help="stop the run after this many seconds")
    opt.add_argument("--stage-limit", dest="stage_limits", type=stage_limit_argument, action="append", default=[], metavar="STAGE=S",
                     help="time limit of one stage in seconds, 'none' for no limit (repeatable; on the web server LEGO_STAGE_LIMIT_<STAGE>_S); past it the run stops naming the stage. "
                          f"Stages and defaults: {stage_limit_defaults()}")
    search = opt.add_argument_group("search")
    search.add_argument("--agent", choices=AGENT_CHOICES, default="template",
                        help="who writes kernels: template (offline), llm (a language model at $LEGO_LLM_BASE_URL), both (best verified wins)")
    search.add_argument("--max-attempts", type=_positive_int, default=OptimizeConfig.max_attempts, metavar="N",
                        help=f"agent calls per sub-problem, later ones with the verifier's feedback (default {OptimizeConfig.max_attempts})")
    search.add_argument("--agents", type=_agent_count, default=OptimizeConfig.agents, metavar="N", help=f"agents working on different nodes at once (default {OptimizeConfig.agents})")
    search.add_argument("--strategy", choices=STRATEGIES, default="lego", help="lego: the AND-OR tree search; monolithic: one agent handed the whole model (a baseline)")
    search.add_argument("--no-dedupe", action="store_true", help="solve every sub-problem on its own, even when an equal one was solved (an ablation)")
    search.add_argument("--no-mutation", action="store_true", help="no bottom-up fusion of verified neighbours (an ablation)")
    search.add_argument("--no-cache", action="store_true", help="neither read nor write the persistent kernel cache for this run")
    search.add_argument("--cache-dir", type=_folder, default=None, help="kernel cache folder (default $LEGO_CACHE_DIR or ~/.cache/lego/kernels)")
    search.add_argument("--max-agent-calls", type=_positive_int, default=None, metavar="N", help="stop searching after N agent calls")
    search.add_argument("--max-tokens", type=_positive_int, default=None, metavar="N", help="stop searching after N language-model tokens")
    search.add_argument("--max-search-time", type=optional_seconds, default=DEFAULT_MAX_SEARCH_S, metavar="S",
                        help=f"stop searching after S seconds (default {DEFAULT_MAX_SEARCH_S:g}; 'none': no limit)")
    search.add_argument("--patience", type=optional_seconds, default=DEFAULT_PATIENCE_S, metavar="S",
                        help=f"stop searching after S seconds without a better plan, once every signature worth 1%% of the library time was tried (default {DEFAULT_PATIENCE_S:g}; 'none': no limit)")
    return parser


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _agent_count(text: str) -> int:
    value = _positive_int(text)
    if value > MAX_AGENTS:
        raise argparse.ArgumentTypeError(f"at most {MAX_AGENTS} agents work on one run, got {value}")
    return value


def _folder(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty path; name a folder (it is created if missing)")
    return text


def seconds_argument(text: str) -> float:
    """argparse type: a number of seconds above 0 (and finite); ArgumentTypeError otherwise."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number of seconds above 0, got {text}")
    return value


def stage_limit_argument(text: str) -> tuple[str, float | None]:
    """argparse type: ``STAGE=SECONDS`` (``capture=600``, ``search=none``) as ``(stage, seconds or None)``."""
    stage, sep, seconds = text.partition("=")
    stage = stage.strip().lower()
    if not sep or stage not in STAGES:
        raise argparse.ArgumentTypeError(f"{text!r} is not STAGE=SECONDS with a stage of {', '.join(STAGES)} (e.g. capture=600)")
    return stage, optional_seconds(seconds)


def stage_limit_defaults() -> str:
    """The stages with their default limits, for --help (the search's: the search budget plus a grace)."""
    defaults = StageLimits()
    text = []
    for stage in STAGES:
        seconds = getattr(defaults, f"{stage}_s")
        if stage == "search" and seconds is None:
            text.append(f"search=the search time plus {defaults.search_grace_s:g}")
        else:
            text.append(f"{stage}={'none' if seconds is None else f'{seconds:g}'}")
    return ", ".join(text) + " (seconds)."


def optional_seconds(text: str) -> float | None:
    """argparse type: :func:`seconds_argument`, or ``none`` (no limit: None)."""
    return None if text.strip().lower() == "none" else seconds_argument(text)


class ProgressView:
    """Renders events as a rich progress bar with the current stage."""

    def __init__(self, console: Console):
        self.progress = Progress(
            TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console, transient=False
        )
        self.task = self.progress.add_task("starting", total=None)

    def __call__(self, event: Event) -> None:
        if event.type == "stage_started":
            self.progress.update(self.task, description=event.stage, total=event.total or None, completed=0)
        elif event.type == "progress":
            self.progress.update(self.task, completed=event.done, total=event.total)
        elif event.type == "run_finished":
            self.progress.update(self.task, description="done", total=1, completed=1)


def summary_table(report: dict) -> Table:
    summary, plan, metrics = report["summary"], report["plan"], report["metrics"]
    table = Table(title=f"LEGO plan for {report['model']} ({report['dtype']}, {report['device']})")
    table.add_column("what")
    table.add_column("value", justify="right")
    if report.get("overrides"):  # as --set takes them: sizes=[64, 32], kernel=(3, 3), flag=true
        table.add_row("overrides", escape(", ".join(f"{name}={format_override(value)}" for name, value in report["overrides"].items())))
    table.add_row("sub-problems", str(summary["subproblems"]))
    table.add_row("Triton kernels (generated)", str(summary["triton"]))
    table.add_row("library (ATen) calls", str(summary["library"]))
    table.add_row("reused (same signature)", str(metrics.get("reused_nodes", 0)))
    err = report["end_to_end"]["max_abs_error"]
    table.add_row("end-to-end max abs error", "n/a" if err is None else f"{err:.3g}")
    table.add_row(f"plan cost ({plan['cost_kind']})", f"{plan['cost_ms']:.4f} ms vs {plan['baseline_ms']:.4f} ms")
    table.add_row(f"speedup ({summary['speedup_kind']})", f"{summary['speedup']:.2f}x")
    timing = report.get("timing")
    host = host_load(timing)
    if host:  # a speedup timed on a busy host overstates: say how busy it was, next to it
        load = f"load {host['load']:.1f}" + (f" on {host['cpus']} CPU{'s' if host['cpus'] != 1 else ''}" if host["cpus"] else "")
        if host["busy"] is not None:
            load += f" ({host['busy']:.2f} per CPU)"
        table.add_row("host while timing", load + (", eager and LEGO interleaved" if host["interleaved"] else ""))
    if timing:
        table.add_row("eager (measured)", f"{timing['eager_ms']:.4f} ms")
        if timing.get("compile_ms"):
            table.add_row("torch.compile (measured)", f"{timing['compile_ms']:.4f} ms")
        table.add_row("optimized (measured)", f"{timing['optimized_ms']:.4f} ms")
    launch = report.get("launch")
    if launch:
        chosen = launch.get("chosen", launch["forward"])
        if launch.get("forward") == "original":  # the plan is not what runs: say so where the speedup is read
            chosen += " (your own forward, not LEGO's plan)"
        table.add_row("launch" + (" (measured)" if launch.get("measured") else ""), escape(chosen))
    failed = [k for k in (report.get("capture") or {}).get("kept_whole", []) if k.get("cause") == "decomposition failed"]
    if failed:  # torch could not decompose these: they run as library calls, whole
        table.add_row("kept whole (decomposition failed)", escape(", ".join(str(k.get("op")) for k in failed[:4])))
    settings = report.get("model_file_torch_settings") or {}
    if settings:  # the user's own flags: kept in force, in LEGO's processes and when ModelNew is imported
        table.add_row("torch settings of the model file", escape(", ".join(f"{k} = {v!r}" for k, v in settings.items())[:200]))
    if metrics.get("strategy") == "monolithic":
        how = "monolithic: one agent, the whole model"
    else:
        agents = metrics.get("agents", 1)
        how = f"{agents} agent{'s' if agents != 1 else ''} at once"
    table.add_row(f"agent calls ({how})", str(metrics["agent_calls"]))
    tokens = f"{metrics.get('tokens', 0)}"
    if metrics.get("prompt_tokens") or metrics.get("completion_tokens"):
        tokens += f" ({metrics['prompt_tokens']} prompt + {metrics['completion_tokens']} completion)"
    if metrics.get("cost_usd"):
        tokens += f", ${metrics['cost_usd']:.4f}"
    table.add_row("tokens", tokens)
    for name, why in metrics.get("agents_retired", {}).items():
        table.add_row(f"agent {escape(str(name))} stopped", escape(why[:120]))
    hits = metrics.get("cache_hits", 0)
    if not metrics.get("cache", True):
        cached = "off"
    else:
        cached = f"{hits} signature(s)" if hits else "none"
        if metrics.get("cache_stale"):
            cached += f"; {metrics['cache_stale']} stale entr{'y' if metrics['cache_stale'] == 1 else 'ies'} failed verification and were replaced"
    table.add_row("from the kernel cache (no agent call)", cached)
    table.add_row("mutations accepted / tried", f"{metrics.get('mutations_accepted', 0)} / {metrics.get('mutations_tried', 0)}")
    table.add_row("time to first / final plan", f"{metrics.get('time_to_first_plan_s', 0):.1f} s / {metrics.get('time_to_final_plan_s', 0):.1f} s")
    if "time_to_first_agent_call_s" in metrics or "time_to_first_improved_plan_s" in metrics:
        table.add_row("time to first agent call / improved plan",
                      f"{_seconds_or_none(metrics.get('time_to_first_agent_call_s'))} / {_seconds_or_none(metrics.get('time_to_first_improved_plan_s'))}")
    table.add_row("search stopped by", escape(str(metrics.get("stop_reason", ""))))
    whole = metrics.get("optimizer_wall_s")
    table.add_row("optimizer wall time", (f"{whole:.1f} s (its pipeline {metrics['wall_time_s']:.1f} s)" if isinstance(whole, (int, float))
                                          else f"{metrics['wall_time_s']:.1f} s (its pipeline)"))
    _add_signature_rows(table, signature_counts(report))
    return table


def _seconds_or_none(value) -> str:
    """``12.3 s``; ``none`` for None (it never happened)."""
    return "none" if value is None else f"{value:.1f} s"


def _count(value) -> str:
    return "-" if value is None else str(value)


def _add_signature_rows(table: Table, sig: dict | None) -> None:
    """Distinct signatures, attempted, won; the ones carrying >= 1% of the
    library time and which of them no agent attempted (nothing for a report
    without ``metrics.signatures``)."""
    if sig is None:
        return
    table.add_section()
    table.add_row("signatures: distinct / attempted / Triton won", f"{_count(sig['distinct'])} / {_count(sig['attempted'])} / {_count(sig['won'])}")
    table.add_row(">=1% of library time: attempted", f"{_count(sig['above_1pct_attempted'])} of {_count(sig['above_1pct'])}")
    for item in sig["not_attempted"][:6]:
        share = "" if item["share"] is None else f" ({item['share'] * 100:.1f}%)"
        table.add_row(f"  not attempted: {escape(item['label'][:48])}{share}", escape(item["why"][:80]) or "-")
    if len(sig["not_attempted"]) > 6:
        table.add_row("  not attempted: ...", f"{len(sig['not_attempted']) - 6} more in report.json")


def phases_table(report: dict) -> Table | None:
    """Where the time went: one row per phase with its seconds and share of
    the optimizer's wall time; the phases inside the search indented and
    marked (busy seconds add up over parallel work and can exceed the
    search's wall).  None for a report without ``phases_s``."""
    phases = phase_breakdown(report)
    if phases is None:
        return None
    wall = phases["wall_s"]
    table = Table(title="Where the time went" + ("" if wall is None else f" (wall {wall:.1f} s)"))
    table.add_column("phase")
    table.add_column("seconds", justify="right")
    table.add_column("of wall", justify="right")
    for row in phases["rows"]:
        share = row["share_of_wall"]
        if row["inside_search"]:
            label = f"  {escape(row['label'])} ({'busy, ' if row['busy'] else ''}in search)"
        else:
            label = escape(row["label"])
        table.add_row(label, f"{row['seconds']:.1f}", "" if share is None else f"{share * 100:.0f}%")
    return table


def triton_table(report: dict) -> Table:
    table = Table(title="Sub-problems implemented by generated Triton kernels")
    for col in ("id", "region", "ops", "max error", "time (ms)", "library (ms)"):
        table.add_column(col, overflow="fold")
    for sp in report["subproblems"]:
        if sp["implementation"] != "triton":
            continue
        ops = ", ".join(dict.fromkeys(o.split(".")[1] for o in sp["ops"]))
        table.add_row(escape(sp["id"]), escape(sp["label"]), escape(ops), f"{sp['max_abs_error']:.2g}", f"{sp['time_ms']:.4f}", f"{sp['baseline_ms']:.4f}")
    kinds = {sp["time_kind"] for sp in report["subproblems"] if sp["implementation"] == "triton"}
    table.caption = "times: " + " and ".join(sorted(kinds)) + (" by the cost model" if kinds == {"estimated"} else "")
    return table


def run_optimize(args: argparse.Namespace, console: Console) -> int:
    try:
        spec = ProblemSpec(args.model, parse_overrides(args.overrides), args.dtype, args.device)
        source = read_source(args.model)  # a missing, unreadable or non-UTF-8 file is said now, before the optimizer's process starts
        check_overrides_in_source(spec.overrides, source, args.model)  # so is an override the file's constants refuse
        broken = syntax_problem(source, args.model)  # and a file that does not compile: the form's and the load's words
        if broken is not None:
            raise broken
    except ProblemError as exc:
        console.print(f"[red]error:[/red] {escape(str(exc))}")
        return 1
    if args.agent in ("llm", "both"):
        from lego_core.agents.llm.settings import endpoint_missing

        missing = endpoint_missing()
        if missing:
            console.print(f"[red]error:[/red] --agent {args.agent}: {escape(str(missing))}. Fix: set one, or use --agent template.")
            return 1
    out = Path(args.out or Path("lego_out") / Path(args.model).stem)
    if out.exists() and not out.is_dir():
        console.print(f"[red]error:[/red] --out {escape(str(out))}: this is a file, not a folder. Fix: name a new or existing folder.")
        return 1
    blocked = next((p for p in out.absolute().parents if p.exists() and not p.is_dir()), None)
    if blocked is not None:
        console.print(f"[red]error:[/red] --out {escape(str(out))}: {escape(str(blocked))} is a file, so no folder can be made under it. "
                      "Fix: name a folder whose parents are folders (or do not exist yet).")
        return 1
    config = OptimizeConfig(
        use_triton=not args.no_triton,
        compare_compile=not args.no_compile,
        channels_last={"off": False, "on": True, "auto": "auto"}[args.channels_last],
        timeout_s=args.timeout,
        agents=args.agents,
        agent=args.agent,
        max_attempts=args.max_attempts,
        strategy=args.strategy,
        dedupe=not args.no_dedupe,
        mutation=not args.no_mutation,
        cache=not args.no_cache,
        cache_dir=args.cache_dir,
        max_agent_calls=args.max_agent_calls,
        max_tokens=args.max_tokens,
        max_search_s=args.max_search_time,
        patience_s=args.patience,
        stage_limits=StageLimits().with_limits(**dict(args.stage_limits)),  # a stage named twice: the last one counts
        import_paths=python_path(),  # the jail shows them read-only, as the model's own folder (lego_core.load.local_modules)
    )
    view = ProgressView(console)
    started = time.monotonic()
    try:
        with view.progress:
            report = optimize(spec, out, config, sink=view)
    except ProblemError as exc:
        console.print(f"[red]error:[/red] {escape(str(exc))}")
        return 1
    except (OptimizeError, ChildCrashed) as exc:
        console.print(f"[red]optimizer failed:[/red] {escape(str(exc))}")
        _say_output_untouched(console, out)
        return 3
    except Exception as exc:  # noqa: BLE001 - an internal error: say what, no traceback
        console.print(f"[red]optimizer failed:[/red] {type(exc).__name__}: {escape(telling_line(str(exc)))} "
                      "(an internal error; please report it with the model file)")
        return 3
    if report["summary"]["triton"]:
        console.print(triton_table(report))
    console.print(summary_table(report))
    phases = phases_table(report)
    if phases is not None:
        console.print(phases)
    console.print(f"output: {escape(str(out.resolve()))} ({', '.join(written_names(out))})")
    console.print(f"done in {time.monotonic() - started:.1f} s (the optimizer's {report['metrics']['wall_time_s']:.1f} s, "
                  "plus starting its process and checking and committing the output)")
    return 0


def python_path() -> tuple[str, ...]:
    """The folders of this process's ``PYTHONPATH``, absolute (relative ones
    are relative to the current folder): the model may import from them, as
    it would run here, so the jail shows them read-only
    (``OptimizeConfig.import_paths``)."""
    return tuple(os.path.abspath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p)


# lines torch appends to its errors that say nothing about what went wrong
_BOILERPLATE = ("for c++ stack trace", "set torchdynamo_verbose", "torchdynamo_extended_debug", "from user code",
                "for more information, run with", "to execute this test, run", "you can suppress this exception")


def telling_line(message: str) -> str:
    """The line of an exception's ``message`` that says what happened: the
    first that is not torch's boilerplate (``For C++ stack trace, run with
    TORCHDYNAMO_EXTENDED_DEBUG_CPP=1``), at most 300 characters; ``""`` for
    an empty message."""
    lines = [line.strip() for line in message.strip().splitlines() if line.strip()]
    telling = [line for line in lines if not any(b in line.lower() for b in _BOILERPLATE)]
    line = (telling or lines or [""])[0]
    return line if len(line) <= 300 else line[:297] + "..."


def written_names(out: Path) -> list[str]:
    """What a finished run put into ``out``, in ``output.LEGO_NAMES`` order,
    folders with a trailing ``/`` (``constants.pt`` and ``lego_overrides.py``
    only when the run wrote them; not the bookkeeping record)."""
    from lego_core.runtime.output import FAILED, LEGO_NAMES, RECORD

    names = []
    for name in LEGO_NAMES:
        path = Path(out) / name
        if name in (RECORD, FAILED) or not path.exists():
            continue
        names.append(f"{name}/" if path.is_dir() else name)
    return names


def _say_output_untouched(console: Console, out: Path) -> None:
    """After a failed run: what the output folder holds (nothing of this run's)."""
    if (out / "FAILED.json").is_file():
        console.print(f"no output written; {escape(str(out))} still holds an earlier run's output, marked by FAILED.json")
    else:
        console.print("no output written")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    console = Console()
    if args.command == "optimize":
        return run_optimize(args, console)
    return 2
