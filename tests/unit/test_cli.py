"""lego_core.cli: ``python -m lego_core optimize ...``.

One real run of scores_chain at tiny sizes as a subprocess (the way a user
runs it), error paths as subprocesses or through ``main()``, and the table
and progress helpers on hand-made data.
"""
import io
import json
import os
import py_compile
import re
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from lego_core.cli import ProgressView, build_parser, main, phases_table, summary_table, triton_table
from lego_core.load.spec import ProblemError
from lego_core.events import Progress, RunFinished, StageStarted

REPO = Path(__file__).resolve().parents[2]
SCORES_CHAIN = "../shared/models/scores_chain.py"  # relative to the repo root, as in CI


def cli_env() -> dict:
    env = dict(os.environ)
    env.update(TRITON_INTERPRET="1", COLUMNS="200", PYTHONWARNINGS="ignore")
    return env


def run_cli(*args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "lego_core", *args],
        cwd=REPO,
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def table_value(text: str, row: str) -> str:
    """The value cell of a summary-table row, whatever box characters rich used."""
    for line in text.splitlines():
        cells = [c.strip() for c in re.split(r"[│┃|]", line) if c.strip()]
        if len(cells) == 2 and cells[0] == row:
            return cells[1]
    raise AssertionError(f"row {row!r} not in output:\n{text}")


# --------------------------------------------------------------------------
# a real run
# --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def scores_chain_run(tmp_path_factory):
    if not (REPO / SCORES_CHAIN).is_file():
        pytest.skip("reference models not found beside the repository")
    out = tmp_path_factory.mktemp("cli") / "scores_out"
    proc = run_cli("optimize", SCORES_CHAIN, "--set", "rows=16", "--set", "d_in=40", "--set", "d_out=30", "--out", str(out))
    return proc, out


def test_optimize_exits_0_and_writes_the_output_folder(scores_chain_run):
    proc, out = scores_chain_run
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (out / "optimized_model.py").is_file()
    assert (out / "report.json").is_file()
    kernels = sorted((out / "kernels").glob("*.py"))
    assert kernels, "no kernel files"
    for kernel in kernels:
        py_compile.compile(str(kernel), doraise=True)
        text = kernel.read_text()
        assert "@triton.jit" in text and "import triton" in text
    model_text = (out / "optimized_model.py").read_text()
    py_compile.compile(str(out / "optimized_model.py"), doraise=True)
    assert "class ModelNew" in model_text
    assert f"output: {out.resolve()}" in proc.stdout
    # the output line lists what is in the folder (overrides were given: lego_overrides.py too)
    listed = " ".join(proc.stdout.split(f"output: {out.resolve()}")[1].split())
    for name in ("optimized_model.py", "lego_runtime.py", "lego_overrides.py", "reference_model.py", "kernels/", "tests/", "report.json"):
        assert name in listed and (out / name.rstrip("/")).exists(), (name, listed)
    assert ("constants.pt" in listed) == (out / "constants.pt").exists()
    assert ".lego_output.json" not in listed
    assert "optimizer wall time" in proc.stdout and "done in " in proc.stdout
    assert "(its pipeline " in proc.stdout  # the whole run as its caller saw it, and the pipeline's share


def test_optimize_report_json(scores_chain_run):
    proc, out = scores_chain_run
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads((out / "report.json").read_text())
    assert report["model"] == "scores_chain"
    assert report["overrides"] == {"rows": 16, "d_in": 40, "d_out": 30}
    assert report["dtype"] == "fp32" and report["device"] == "cpu"
    summary = report["summary"]
    assert summary["triton"] >= 1
    assert summary["subproblems"] == summary["triton"] + summary["library"]
    assert summary["speedup_kind"] == "estimated"
    assert summary["speedup"] > 0
    assert report["end_to_end"]["passed"] is True
    kernel_names = {p.stem for p in (out / "kernels").glob("*.py")}
    triton_rows = [sp for sp in report["subproblems"] if sp["implementation"] == "triton"]
    assert len(triton_rows) == summary["triton"]
    assert len(kernel_names) >= len(triton_rows)
    memory = report["memory"]  # peaks counted on the CPU (lego_core.runtime.memory.LiveBytes)
    assert memory["measured"] == "cpu-estimate"
    assert 0 < memory["eager_peak_mb"] <= memory["search_peak_mb"]
    assert memory["bound_mb"] == pytest.approx(memory["eager_peak_mb"] + 4096, abs=0.01)
    assert memory["within_bound"] is True


def test_optimize_prints_the_summary_table(scores_chain_run):
    proc, out = scores_chain_run
    assert proc.returncode == 0, proc.stdout + proc.stderr
    text = proc.stdout
    report = json.loads((out / "report.json").read_text())
    summary = report["summary"]
    assert "LEGO plan for scores_chain (fp32, cpu)" in text
    assert table_value(text, "sub-problems") == str(summary["subproblems"])
    assert table_value(text, "Triton kernels (generated)") == str(summary["triton"])
    assert table_value(text, "library (ATen) calls") == str(summary["library"])
    assert table_value(text, "end-to-end max abs error") == f"{report['end_to_end']['max_abs_error']:.3g}"
    assert table_value(text, "speedup (estimated)") == f"{summary['speedup']:.2f}x"
    assert "plan cost (estimated)" in text
    # the Triton table lists the generated sub-problems, with their ops
    assert "Sub-problems implemented by generated Triton kernels" in text
    assert "_softmax" in text
    assert "Traceback" not in proc.stdout + proc.stderr


# --------------------------------------------------------------------------
# errors
# --------------------------------------------------------------------------


def test_syntax_error_exits_1_and_names_the_line(tmp_path):
    broken = tmp_path / "broken.py"
    broken.write_text("import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module)\n    pass\n")
    proc = run_cli("optimize", str(broken), "--out", str(tmp_path / "out"))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "broken.py:5:" in proc.stdout
    assert "syntax error" in proc.stdout and "Fix:" in proc.stdout
    assert "Traceback" not in proc.stdout + proc.stderr
    assert not (tmp_path / "out" / "report.json").exists()


@pytest.mark.parametrize("name, data, where", [
    ("latin.py", b"import torch\n# caf\xe9\n", "latin.py:2: the file is not UTF-8 text: byte 0xe9 is not UTF-8"),
    ("wide.py", "import torch\n".encode("utf-16"), "wide.py:1: the file is not UTF-8 text: it is UTF-16"),
])
def test_a_file_that_is_not_utf8_exits_1_saying_so_and_how_to_convert_it(tmp_path, name, data, where):
    model = tmp_path / name
    model.write_bytes(data)
    proc = run_cli("optimize", str(model), "--out", str(tmp_path / "out"))
    said = " ".join(proc.stdout.split())  # rich wraps long lines
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert where in said and "Fix: save the file as UTF-8" in said and "iconv -f LATIN1 -t UTF-8" in said, said
    assert "None" not in said and "Traceback" not in proc.stdout + proc.stderr


def test_unknown_constant_exits_1_and_names_it(capsys, monkeypatch, tmp_path):
    if not (REPO / SCORES_CHAIN).is_file():
        pytest.skip("reference models not found beside the repository")
    monkeypatch.setenv("COLUMNS", "250")
    rc = main(["optimize", str(REPO / SCORES_CHAIN), "--set", "nonexistent=3", "--out", str(tmp_path / "out")])
    out = capsys.readouterr().out
    assert rc == 1, out
    assert "nonexistent" in out and "no module-level constant" in out
    assert "override one of: d_in, d_out, rows." in out


@pytest.mark.parametrize("make, expected", [
    (lambda d: d / "nowhere.py", "nowhere.py: no such file."),
    (lambda d: d, "cannot read the file (Is a directory)"),
])
def test_a_missing_or_unreadable_model_file_exits_1_before_the_optimizer_starts(capsys, monkeypatch, tmp_path, make, expected):
    import lego_core.cli as cli

    monkeypatch.setenv("COLUMNS", "250")
    monkeypatch.setattr(cli, "optimize", lambda *a, **k: pytest.fail("the optimizer was started"))
    rc = main(["optimize", str(make(tmp_path)), "--out", str(tmp_path / "out")])
    out = capsys.readouterr().out
    assert rc == 1 and expected in out, out


def test_an_output_folder_under_a_file_exits_1_naming_the_file(capsys, monkeypatch, tmp_path):
    import lego_core.cli as cli

    if not (REPO / SCORES_CHAIN).is_file():
        pytest.skip("reference models not found beside the repository")
    monkeypatch.setenv("COLUMNS", "250")
    monkeypatch.setattr(cli, "optimize", lambda *a, **k: pytest.fail("the optimizer was started"))
    (tmp_path / "afile").write_text("x")
    rc = main(["optimize", str(REPO / SCORES_CHAIN), "--out", str(tmp_path / "afile" / "sub")])
    out = " ".join(capsys.readouterr().out.split())
    assert rc == 1 and f"{tmp_path / 'afile'} is a file, so no folder can be made under it" in out, out


@pytest.mark.parametrize("raised", ["problem", "optimizer", "internal"])
def test_square_brackets_in_a_message_reach_the_terminal_as_written(capsys, monkeypatch, tmp_path, raised):
    """rich reads ``[m]`` or ``[bold]`` as markup: a fix line such as
    ``a[m] = b[m]`` used to print as ``a = b``, and a folder named ``[x]`` lost its name."""
    import lego_core.cli as cli
    from lego_core.errors import OptimizeError

    text = "write through a mask: a[m] = b[m] becomes a.copy_(torch.where(m, b, a)); [bold]x[/bold]"
    error = {"problem": ProblemError(text, None, None), "optimizer": OptimizeError(text), "internal": RuntimeError(text)}[raised]

    def fail(*_a, **_k):
        raise error

    monkeypatch.setenv("COLUMNS", "400")
    monkeypatch.setattr(cli, "optimize", fail)
    model = tmp_path / "[x]model.py"
    model.write_text("import torch\n")
    rc = main(["optimize", str(model), "--out", str(tmp_path / "[x]out")])
    out = " ".join(capsys.readouterr().out.split())
    assert rc in (1, 3)
    assert "a[m] = b[m]" in out and "[bold]x[/bold]" in out, out


def test_an_internal_error_names_its_telling_line_not_torchs_boilerplate():
    from lego_core.cli import telling_line

    dynamo = ("GuardOnDataDependentSymNode: Could not guard on data-dependent expression zuf0 > 0.0\n\n"
              "from user code:\n   File \"m.py\", line 9\n\n"
              "Set TORCHDYNAMO_VERBOSE=1 for the internal stack trace\nFor C++ stack trace, run with TORCHDYNAMO_EXTENDED_DEBUG_CPP=1")
    assert telling_line(dynamo).startswith("GuardOnDataDependentSymNode: Could not guard")
    assert telling_line("") == "" and telling_line("one line") == "one line"
    assert telling_line("For C++ stack trace, run with TORCHDYNAMO_EXTENDED_DEBUG_CPP=1") .startswith("For C++")  # nothing better
    assert len(telling_line("x" * 1000)) == 300


@pytest.mark.parametrize("item, expected", [("rows", "is not of the form name=value"), ("rows=many", "is not a number")])
def test_malformed_set_exits_1_before_anything_runs(capsys, monkeypatch, tmp_path, item, expected):
    monkeypatch.setenv("COLUMNS", "250")
    rc = main(["optimize", str(tmp_path / "never_read.py"), "--set", item])
    out = capsys.readouterr().out
    assert rc == 1
    assert out.startswith("error:") and expected in out


@pytest.mark.parametrize("option, value", [("--dtype", "fp64"), ("--dtype", "float32"), ("--device", "tpu")])
def test_bad_choice_is_rejected_by_argparse(capsys, option, value):
    with pytest.raises(SystemExit) as info:
        main(["optimize", "model.py", option, value])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {option}: invalid choice: '{value}'" in err


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="this machine has a GPU")
def test_cuda_without_a_gpu_is_a_user_error_not_an_internal_one():
    proc = run_cli("optimize", SCORES_CHAIN, "--set", "rows=16", "--set", "d_in=40", "--set", "d_out=30", "--device", "cuda", timeout=120)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "no usable CUDA GPU" in proc.stdout and "choose device cpu" in proc.stdout
    assert "internal error" not in proc.stdout


def test_bad_dtype_subprocess_exit_status():
    proc = run_cli("optimize", "model.py", "--dtype", "fp64", timeout=60)
    assert proc.returncode == 2
    assert "invalid choice: 'fp64'" in proc.stderr and "fp32" in proc.stderr


def test_command_is_required(capsys):
    with pytest.raises(SystemExit) as info:
        main([])
    assert info.value.code == 2
    assert "optimize" in capsys.readouterr().err


def test_parser_defaults():
    args = build_parser().parse_args(["optimize", "m.py"])
    assert (args.model, args.overrides, args.dtype, args.device, args.out) == ("m.py", [], "fp32", "cpu", None)
    assert (args.no_triton, args.no_compile, args.timeout) == (False, False, None)
    args = build_parser().parse_args(["optimize", "m.py", "--set", "a=1", "--set", "b=2", "--timeout", "5", "--no-triton"])
    assert args.overrides == ["a=1", "b=2"] and args.timeout == 5.0 and args.no_triton


SYS_EXIT_MODEL = """\
import sys
import torch
import torch.nn as nn

sys.exit(0)


class Model(nn.Module):
    def forward(self, x):
        return x


def get_inputs():
    return [torch.randn(2)]


def get_init_inputs():
    return []
"""


def test_model_calling_sys_exit_is_reported_as_an_error(tmp_path):
    path = tmp_path / "exits.py"
    path.write_text(SYS_EXIT_MODEL)
    proc = run_cli("optimize", str(path), "--out", str(tmp_path / "out"))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "exits.py" in proc.stdout


INT_ARG_MODEL = """\
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, n, y):
        return x * n + y


def get_inputs():
    return [torch.randn(3, 4), 2, torch.randn(3, 4)]


def get_init_inputs():
    return []
"""


def test_internal_error_exits_3_without_a_traceback(tmp_path):
    path = tmp_path / "intarg.py"
    path.write_text(INT_ARG_MODEL)
    proc = run_cli("optimize", str(path), "--out", str(tmp_path / "out"))
    assert proc.returncode in (0, 3), proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr


# --------------------------------------------------------------------------
# rendering helpers
# --------------------------------------------------------------------------


def fake_report(**changes) -> dict:
    report = {
        "model": "toy",
        "dtype": "fp16",
        "device": "cpu",
        "summary": {"subproblems": 5, "triton": 2, "library": 3, "speedup": 1.5, "speedup_kind": "estimated"},
        "plan": {"cost_kind": "estimated", "cost_ms": 0.02, "baseline_ms": 0.03},
        "metrics": {"agent_calls": 4, "wall_time_s": 1.25, "reused_nodes": 1},
        "end_to_end": {"max_abs_error": 1.5e-3},
        "subproblems": [
            {"id": "sp001", "implementation": "triton", "label": "blk · add", "ops": ["aten.add.Tensor", "aten.add.Tensor", "aten.relu.default"],
             "max_abs_error": 1e-7, "time_ms": 0.001, "time_kind": "estimated", "baseline_ms": 0.002},
            {"id": "sp002", "implementation": "library", "label": "mm", "ops": ["aten.mm.default"],
             "max_abs_error": 0.0, "time_ms": 0.01, "time_kind": "estimated", "baseline_ms": 0.01},
        ],
    }  # fmt: skip
    report.update(changes)
    return report


def render(table) -> str:
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(table)
    return console.export_text()


def test_summary_table_rows():
    text = render(summary_table(fake_report()))
    assert "LEGO plan for toy (fp16, cpu)" in text
    assert table_value(text, "sub-problems") == "5"
    assert table_value(text, "Triton kernels (generated)") == "2"
    assert table_value(text, "library (ATen) calls") == "3"
    assert table_value(text, "reused (same signature)") == "1"
    assert table_value(text, "end-to-end max abs error") == "0.0015"
    assert table_value(text, "speedup (estimated)") == "1.50x"
    assert "0.0200 ms vs 0.0300 ms" in text
    assert "eager (measured)" not in text


def test_summary_table_without_an_error_and_with_measured_timing():
    report = fake_report(end_to_end={"max_abs_error": None}, timing={"eager_ms": 2.0, "compile_ms": 1.5, "optimized_ms": 1.0})
    report["summary"]["speedup_kind"] = "measured"
    text = render(summary_table(report))
    assert table_value(text, "end-to-end max abs error") == "n/a"
    assert table_value(text, "speedup (measured)") == "1.50x"
    assert "eager (measured)" in text and "2.0000 ms" in text
    assert "torch.compile (measured)" in text and "optimized (measured)" in text


def timed_report(**changes) -> dict:
    """``fake_report`` with what a run writes since issue 26: seconds per
    phase, signature counts, first agent call / improved plan, host load."""
    report = fake_report(
        timing={"eager_ms": 2.0, "optimized_ms": 1.0, "speedup_vs_eager": 1.5,
                "host": {"load_avg_1m": 3.24, "cpus": 16, "busy": 0.2025}, "interleaved": True},
        # PostgreSQL's jsonb and older writers may give any key order; the table is in pipeline order
        phases_s={"timing": 1.0, "e2e_check": 0.9, "compose": 0.3, "search": 20.0, "agent_calls": 31.0, "verification": 4.0,
                  "baseline_timing": 2.5, "mutation": 1.5, "construct": 0.4, "capture": 1.6, "load": 2.0, "launch_variants": 0.8,
                  "_wall": 30.0},
    )
    report["summary"]["speedup_kind"] = "measured"
    report["metrics"].update(
        time_to_first_plan_s=0.9, time_to_final_plan_s=18.0, time_to_first_agent_call_s=1.4, time_to_first_improved_plan_s=None,
        signatures={"distinct": 12, "attempted": 10, "won": 4, "above_1pct": 6, "above_1pct_attempted": 5,
                    "not_attempted": [{"label": "layer3 · conv", "share": 0.041, "why": "the search budget ran out"}]},
    )
    report.update(changes)
    return report


def phase_cells(text: str) -> list[list[str]]:
    """The body rows of the phases table, as cell lists (phase, seconds, of wall)."""
    rows = []
    for line in text.splitlines():
        cells = [c.strip() for c in re.split(r"[│┃|]", line)[1:-1]]
        if len(cells) == 3 and cells[0] not in ("phase", ""):
            rows.append(cells)
    return rows


def test_summary_table_counts_signatures_first_times_and_host_load():
    text = render(summary_table(timed_report()))
    assert table_value(text, "signatures: distinct / attempted / Triton won") == "12 / 10 / 4"
    assert table_value(text, ">=1% of library time: attempted") == "5 of 6"
    assert table_value(text, "not attempted: layer3 · conv (4.1%)") == "the search budget ran out"
    assert table_value(text, "time to first / final plan") == "0.9 s / 18.0 s"
    assert table_value(text, "time to first agent call / improved plan") == "1.4 s / none"
    assert table_value(text, "host while timing") == "load 3.2 on 16 CPUs (0.20 per CPU), eager and LEGO interleaved"
    # next to the speedup it qualifies
    lines = [line for line in text.splitlines() if "│" in line]
    speedup = next(i for i, line in enumerate(lines) if "speedup (measured)" in line)
    assert "host while timing" in lines[speedup + 1]


def test_phases_table_has_every_phase_in_pipeline_order_with_the_search_s_inside_marked():
    table = phases_table(timed_report())
    text = render(table)
    assert "Where the time went (wall 30.0 s)" in text
    assert phase_cells(text) == [
        ["load", "2.0", "7%"],
        ["capture", "1.6", "5%"],
        ["construct", "0.4", "1%"],
        ["search", "20.0", "67%"],
        ["baseline timing (busy, in search)", "2.5", ""],
        ["agent calls (busy, in search)", "31.0", ""],  # busy seconds of parallel agents exceed the search's wall
        ["verification (busy, in search)", "4.0", ""],
        ["mutation (in search)", "1.5", ""],
        ["compose", "0.3", "1%"],
        ["end-to-end check", "0.9", "3%"],
        ["launch variants", "0.8", "3%"],
        ["timing", "1.0", "3%"],
        ["other", "3.0", "10%"],  # 30 s of wall minus the stages' 27 s
    ]


def test_a_report_from_before_phases_and_signatures_prints_as_before():
    text = render(summary_table(fake_report()))
    for row in ("signatures", ">=1% of library time", "not attempted", "first agent call", "host while timing"):
        assert row not in text, row
    assert phases_table(fake_report()) is None
    # counts a report lacks show as "-", a first agent call that never came as "none"
    report = timed_report()
    report["metrics"]["signatures"] = {"distinct": 3}
    report["metrics"]["time_to_first_agent_call_s"] = None
    report["timing"].pop("host")
    text = render(summary_table(report))
    assert table_value(text, "signatures: distinct / attempted / Triton won") == "3 / - / -"
    assert table_value(text, ">=1% of library time: attempted") == "- of -"
    assert table_value(text, "time to first agent call / improved plan") == "none / none"
    assert "not attempted" not in text and "host while timing" not in text


def test_malformed_phase_and_signature_values_are_left_out_not_fatal():
    report = timed_report(phases_s={"load": "slow", "capture": float("nan"), "search": 2.0, "_wall": None})
    report["metrics"]["signatures"] = {"distinct": float("inf"), "attempted": "7", "won": 1, "not_attempted": ["junk", {"share": "x"}]}
    report["timing"]["host"] = {"load_avg_1m": None, "cpus": 16}
    text = render(summary_table(report))
    assert table_value(text, "signatures: distinct / attempted / Triton won") == "- / - / 1"
    assert table_value(text, "not attempted: ?") == "-" and "host while timing" not in text
    text = render(phases_table(report))
    assert "Where the time went" in text and "(wall" not in text
    assert phase_cells(text) == [["search", "2.0", ""]]  # no wall: no share of it


def test_a_finished_run_prints_where_the_time_went_after_the_summary(capsys, monkeypatch, tmp_path):
    import lego_core.cli as cli

    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setattr(cli, "optimize", lambda *a, **k: timed_report())
    model = tmp_path / "model.py"
    model.write_text("import torch\n")
    assert main(["optimize", str(model), "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert out.index("LEGO plan for toy") < out.index("Where the time went (wall 30.0 s)") < out.index("output:")
    assert ["agent calls (busy, in search)", "31.0", ""] in phase_cells(out)


def test_triton_table_lists_only_triton_subproblems_with_unique_ops():
    text = render(triton_table(fake_report()))
    assert "sp001" in text and "sp002" not in text
    assert "add, relu" in text and "add, add" not in text
    assert "0.0010" in text and "times: estimated by the cost model" in text


def test_progress_view_follows_stage_events():
    view = ProgressView(Console(file=io.StringIO()))
    task = view.progress.tasks[0]
    assert task.description == "starting"
    view(StageStarted(stage="search", total=4))
    assert task.description == "search" and task.total == 4 and task.completed == 0
    view(Progress(stage="search", done=3, total=4))
    assert task.completed == 3
    view(RunFinished(out_dir="/tmp/x", summary={}))
    assert task.description == "done"


def test_an_llm_agent_without_an_endpoint_is_refused_before_the_run(tmp_path, monkeypatch, capsys):
    """``--agent llm`` with neither LEGO_LLM_BASE_URL nor an API key would call
    api.openai.com with no key and retry for seconds: refused at once."""
    from lego_core.cli import main as cli_main

    for name in ("LEGO_LLM_BASE_URL", "LEGO_LLM_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    model = tmp_path / "m.py"
    model.write_text("x = 1\n")
    for agent in ("llm", "both"):
        assert cli_main(["optimize", str(model), "--agent", agent, "--out", str(tmp_path / "out")]) == 1
        said = capsys.readouterr().out
        assert "no LLM endpoint is configured" in said and "--agent template" in said
    assert not (tmp_path / "out").exists()
