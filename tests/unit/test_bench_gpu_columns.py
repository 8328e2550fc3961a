"""bench/gpu_models.py without a GPU and without the optimizer: the search
columns read from report.json (bench/bench_columns.py), ``--sets``,
``--jobs`` (searches at once, timing after them) and the ``--sidebyside``
pass (bench/sidebyside_pass.py) against a fake sidebyside.py that prints
what the real one prints."""
import json
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import bench_columns  # noqa: E402
import gpu_models as gm  # noqa: E402
import sidebyside_pass  # noqa: E402


def fake_report(**metrics_extra) -> dict:
    """A report.json as the optimizer writes it now (the keys the bench reads)."""
    metrics = {
        "signatures": {"distinct": 41, "attempted": 30, "won": 12, "above_1pct": 20, "above_1pct_attempted": 19,
                       "not_attempted": [{"label": "layer3 · conv", "share": 0.02, "why": "budget"}]},
        "mutations_tried": 9, "mutations_accepted": 2, "time_to_first_plan_s": 3.25, "time_to_first_agent_call_s": 3.5,
        "wall_time_s": 118.4, "agent_calls": 27,
    }  # fmt: skip
    metrics.update(metrics_extra)
    return {
        "metrics": metrics,
        "phases_s": {"load": 1.0, "capture": 2.0, "search": 80.0, "_wall": 118.4},
        "timing": {"speedup_vs_eager": 2.5, "host": {"load_avg_1m": 3.2, "cpus": 16, "busy": 0.2}},
        "summary": {"triton": 5, "library": 7},
        "end_to_end": {"passed": True},
    }


def write_folder(folder: Path, report: dict | None, delivered: bool = True) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    if delivered:
        (folder / "optimized_model.py").write_text("# ModelNew\n")
    if report is not None:
        (folder / "report.json").write_text(json.dumps(report))


# ---------------------------------------------------------------- report columns


def test_report_fields_read_every_new_key():
    f = bench_columns.report_fields(fake_report())
    assert (f["signatures_distinct"], f["signatures_attempted"], f["signatures_won"]) == (41, 30, 12)
    assert (f["signatures_above_1pct"], f["signatures_above_1pct_attempted"]) == (20, 19)
    assert f["signatures_not_attempted"] == [{"label": "layer3 · conv", "share": 0.02, "why": "budget"}]
    assert (f["mutations_tried"], f["mutations_accepted"], f["agent_calls"]) == (9, 2, 27)
    assert (f["time_to_first_plan_s"], f["time_to_first_agent_call_s"], f["optimizer_wall_s"]) == (3.25, 3.5, 118.4)
    assert f["phases_s"] == {"load": 1.0, "capture": 2.0, "search": 80.0, "_wall": 118.4}
    assert f["reported_vs_eager"] == 2.5 and f["reported_host_busy"] == 0.2
    assert set(f) == set(bench_columns.REPORT_KEYS)


def test_report_fields_of_an_old_or_missing_report_are_none():
    old = {"metrics": {"mutations_tried": 3, "mutations_accepted": 0, "time_to_first_plan_s": 137.7, "wall_time_s": 200.0, "agent_calls": 0},
           "timing": None, "summary": {}}  # fmt: skip
    f = bench_columns.report_fields(old)
    assert f["signatures_distinct"] is None and f["signatures_not_attempted"] is None and f["phases_s"] is None
    assert f["time_to_first_agent_call_s"] is None and f["reported_vs_eager"] is None
    assert (f["mutations_tried"], f["agent_calls"], f["optimizer_wall_s"]) == (3, 0, 200.0)
    assert all(v is None for v in bench_columns.report_fields(None).values())
    # junk where numbers belong is not a number
    junk = bench_columns.report_fields({"metrics": {"signatures": "n/a", "agent_calls": True, "wall_time_s": float("nan")}})
    assert junk["signatures_won"] is None and junk["agent_calls"] is None and junk["optimizer_wall_s"] is None


def _row(model: str, group: str, report: dict | None, **timed) -> dict:
    row = {k: None for k in gm.ROW_KEYS}
    row.update(model=model, group=group, e2e_passed=True, lego_err=0.0, **timed)
    row.update(bench_columns.report_fields(report))
    gm._derive(row, 1e-4)
    return row


def test_table_has_the_search_columns_fits_160_and_sums_per_group():
    rows = [
        _row("resnet101_style", "bench", fake_report(), eager_ms=10.0, lego_ms=4.0, search_s=130.0),
        _row("transformer12", "bench", fake_report(agent_calls=0, time_to_first_plan_s=12.5, wall_time_s=290.0), eager_ms=6.0, lego_ms=3.0),
        _row("vgg_style", "breadth", None, eager_ms=2.0, lego_ms=1.0),  # no report.json: "-" in every search column
    ]
    table = gm.format_table(rows, "bf16", {"gpu": "H200"})
    lines = table.splitlines()
    assert max(len(line) for line in lines if not line.startswith("    error")) <= 160
    head = lines[1].split()
    assert head[:6] == ["model", "floor", "eager", "c-dflt", "c-r-o", "LEGO"]
    assert {"rep/e", "won/att/sig", "a/t", "calls", "plan", "opt", "srch"} <= set(head) and head[-1] == "ok"
    cells = next(line for line in lines if line.startswith("resnet101_style")).split()
    assert cells[6] == "2.50" and cells[9] == "2.50"  # L/eager 10/4 measured here, rep/e from the report
    assert cells[12:18] == ["12/30/41", "2/9", "27", "3.2", "118", "130"] and cells[-1] == "yes"
    vgg = next(line for line in lines if line.startswith("vgg_style")).split()
    assert vgg[9] == "-" and vgg[12:17] == ["-"] * 5 and vgg[17] == "n/a"  # no report: rep/e, sig, mut, calls, plan s, opt s
    # a geomean line and a search line per group, breadth after bench
    assert [line.split()[1] for line in lines if line.startswith("geomean")] == ["bench", "breadth"]
    bench_search = lines[lines.index(next(line for line in lines if line.startswith("geomean bench"))) + 1]
    assert "won/att/all 24/60/82" in bench_search and ">=1% att 38/40" in bench_search
    assert "mut acc/tried 4/18" in bench_search and "0-call models 1" in bench_search
    assert "plan s max 12.5" in bench_search and "opt s max 290" in bench_search
    stats = gm.summary(rows)
    assert stats["bench"]["geomean_reported_vs_eager"] == pytest.approx(2.5) and stats["breadth"]["geomean_reported_vs_eager"] is None
    assert stats["bench"]["models_without_agent_calls"] == 1 and stats["bench"]["models_with_unattempted"] == 2
    assert stats["breadth"]["signatures_distinct"] is None and stats["breadth"]["models_with_report"] == 0


def test_a_row_not_timed_still_carries_its_report(tmp_path):
    entry = gm.Entry("resnet101_style", str(BENCH / "models" / "resnet101_style.py"), "bench", {})
    write_folder(gm.out_folder(tmp_path, entry, "bf16", "cuda"), fake_report())
    row = gm._failed_row(entry, "bf16", "the timing process died", tmp_path, "cuda")
    assert row["signatures_won"] == 12 and row["agent_calls"] == 27 and row["error"] == "the timing process died"
    assert row["out_dir"] == str(gm.out_folder(tmp_path, entry, "bf16", "cuda"))
    doc = gm.result_document([row], "bf16", {"gpu": "H200", "sets": ["bench"], "jobs": 4}, "cuda", date="2030-01-01")
    saved = json.loads(json.dumps(doc, default=str))
    assert saved["rows"][0]["phases_s"]["_wall"] == 118.4 and saved["jobs"] == 4 and saved["sets"] == ["bench"]
    assert saved["summary"]["bench"]["signatures_attempted"] == 30


# ---------------------------------------------------------------- --sets


def test_sets_pick_the_folders(tmp_path):
    breadth = gm.select_models(None, tiny=True, sets=["breadth"])
    assert breadth and {e.group for e in breadth} == {"breadth"}
    assert all(Path(e.path).parent == gm.BREADTH_DIR for e in breadth)
    tiny = json.loads((gm.BREADTH_DIR / "tiny.json").read_text())
    assert all(e.overrides == tiny[Path(e.path).name] for e in breadth)
    both = gm.select_models(None, tiny=False, sets=["breadth", "bench"])  # table order, whatever the order given
    assert [e.group for e in both] == sorted((e.group for e in both), key=gm.GROUPS.index) and both[0].group == "bench"
    assert {"resnet101_style", "densenet121_style", "efficientnet_b0_style", "transformer12"} <= {e.name for e in both}
    picked = gm.select_models(["vgg_style", "transformer12"], tiny=False, sets=["bench", "breadth"])
    assert [(e.name, e.group) for e in picked] == [("transformer12", "bench"), ("vgg_style", "breadth")]
    with pytest.raises(SystemExit, match="no model vgg_style in .*--sets"):
        gm.select_models(["vgg_style"], tiny=False, sets=["bench"])
    with pytest.raises(SystemExit, match="unknown set nope"):
        gm.parse_args(["--sets", "bench,nope"])
    assert gm.parse_args([]).sets == ["reference", "bench"]
    # one name in two sets would share an output folder
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    (tmp_path / "a" / "same.py").write_text(""), (tmp_path / "b" / "same.py").write_text("")
    with pytest.raises(SystemExit, match="model same in two of the sets"):
        gm.select_models(None, tiny=False, bench_dir=tmp_path / "a", breadth_dir=tmp_path / "b", sets=["bench", "breadth"])


def test_children_get_the_sets_and_jobs(tmp_path, monkeypatch):
    args = gm.parse_args(["--device", "cpu", "--sets", "bench,breadth", "--jobs", "3", "--out-dir", str(tmp_path), "--dtypes", "fp32"])
    forwarded = gm._forwarded_args(args)
    assert forwarded[forwarded.index("--sets") + 1] == "bench,breadth" and forwarded[forwarded.index("--jobs") + 1] == "3"
    seen = []
    monkeypatch.setattr(gm, "run_group", lambda cmd, *a, **k: seen.append(cmd) or 1)
    entry = gm.Entry("vgg_style", str(gm.BREADTH_DIR / "vgg_style.py"), "breadth", {})
    _, rows = gm.time_in_child([entry], "fp32", "cpu", args, 1e-4)
    assert seen[0][seen[0].index("--sets") + 1] == "bench,breadth"
    assert rows[0]["error"].startswith("the timing process died") and rows[0]["group"] == "breadth"


# ---------------------------------------------------------------- --jobs


def test_jobs_run_searches_at_once_and_time_after_all_of_them(tmp_path, monkeypatch):
    with pytest.raises(SystemExit, match="--jobs 0"):
        gm.parse_args(["--jobs", "0"])
    entries = [gm.Entry(f"m{k}", f"/nowhere/m{k}.py", "bench", {}) for k in range(5)]
    lock, state, events = threading.Lock(), {"now": 0, "most": 0}, []

    def search(entry, dtype, *a, **k):
        with lock:
            state["now"] += 1
            state["most"] = max(state["most"], state["now"])
            events.append(("start", entry.name))
        time.sleep(0.15)
        with lock:
            state["now"] -= 1
            events.append(("end", entry.name))
        return {"search_rc": 0, "search_s": 0.15}

    monkeypatch.setattr(gm, "run_search", search)
    monkeypatch.setattr(gm, "time_in_child", lambda es, dtype, *a: events.append(("time", dtype)) or ({}, [{"model": e.name} for e in es]))
    for jobs, most in (("2", 2), ("1", 1)):
        state.update(now=0, most=0)
        events.clear()
        args = gm.parse_args(["--device", "cpu", "--dtypes", "fp32,bf16", "--jobs", jobs, "--out-dir", str(tmp_path)])
        result = gm.run_worker(entries, args)
        assert state["most"] == most
        assert [e for e in events if e[0] == "time"] == [("time", "fp32"), ("time", "bf16")]
        first_time = events.index(("time", "fp32"))
        assert sum(1 for e in events[:first_time] if e[0] == "end") == 5  # every fp32 search over before its timing
        assert [r["model"] for r in result["bf16"]["rows"]] == [e.name for e in entries]


# ---------------------------------------------------------------- --sidebyside

FAKE_SIDEBYSIDE = textwrap.dedent('''
    """A stand-in for ../shared/tools/sidebyside.py: same command line, same JSON lines, then a table."""
    import argparse, json, os, sys, time
    ap = argparse.ArgumentParser(); ap.add_argument("--dtype"); ap.add_argument("--modes", default="default,reduce-overhead")
    ap.add_argument("--model-timeout", type=int, default=300); ap.add_argument("pairs", nargs="+")
    a = ap.parse_args()
    if os.environ.get("FAKE_SBS_ARGV"):
        open(os.environ["FAKE_SBS_ARGV"], "w").write(json.dumps(sys.argv[1:]))
    times = json.loads(os.environ.get("FAKE_SBS_TIMES", "{}"))
    print("loading models...")
    for k, pair in enumerate(a.pairs):
        path, rest = pair.split("=", 1)
        out, *kv = rest.split(",")
        name = os.path.basename(path)[:-3]
        row = {"model": name, "dtype": a.dtype, "overrides": dict(x.split("=", 1) for x in kv)}
        row.update(times.get(name, {}))
        rep = json.load(open(os.path.join(out, "report.json")))
        row["lego_claims"] = (rep.get("timing") or {}).get("speedup_vs_eager")
        print(json.dumps(row), flush=True)
        if os.environ.get("FAKE_SBS_HANG"):
            time.sleep(30)
    print("\\nmodel    eager   default  reduce-o   LEGO")
    print("{not json either")
''')


@pytest.fixture
def fake_sidebyside(tmp_path, monkeypatch):
    script = tmp_path / "fake_sidebyside.py"
    script.write_text(FAKE_SIDEBYSIDE)
    monkeypatch.setenv("LEGO_SIDEBYSIDE", str(script))
    monkeypatch.setenv("FAKE_SBS_ARGV", str(tmp_path / "argv.json"))
    times = {
        "resnet101_style": {"eager_ms": 10.0, "default_ms": 6.0, "reduce-overhead_ms": 5.0, "lego_ms": 5.0, "lego_err": 1e-3},
        "transformer12": {"eager_ms": 8.0, "default_ms": 4.0, "reduce-overhead_ms": 5.0, "lego_ms": 4.0, "reduce-overhead_error": "RuntimeError: boom"},
    }  # fmt: skip
    monkeypatch.setenv("FAKE_SBS_TIMES", json.dumps(times))
    return script


def _sbs_setup(tmp_path):
    out = tmp_path / "out"
    args = gm.parse_args(["--device", "cpu", "--dtypes", "bf16", "--sets", "bench", "--out-dir", str(out), "--modes", "default,reduce-overhead"])
    entries = [gm.Entry(n, str(BENCH / "models" / f"{n}.py"), "bench", o)
               for n, o in (("resnet101_style", {"batch_size": 2}), ("transformer12", {}), ("gpt2_block", {}))]  # fmt: skip
    write_folder(gm.out_folder(out, entries[0], "bf16", "cpu"), fake_report())  # claims 2.5x; sidebyside 2.0x: off by 25%
    report = fake_report()
    report["timing"]["speedup_vs_eager"] = 2.1  # sidebyside 2.0x: within 10%
    write_folder(gm.out_folder(out, entries[1], "bf16", "cpu"), report)
    write_folder(gm.out_folder(out, entries[2], "bf16", "cpu"), None, delivered=False)  # the search failed: nothing to time
    rows = [_row(e.name, "bench", fake_report(), eager_ms=9.0, lego_ms=4.5) for e in entries]
    for row, entry in zip(rows, entries):
        row["out_dir"] = str(gm.out_folder(out, entry, "bf16", "cpu"))
    return args, entries, rows


def test_sidebyside_pass_parses_the_tool_and_compares(tmp_path, fake_sidebyside):
    args, entries, rows = _sbs_setup(tmp_path)
    sbs = sidebyside_pass.run_pass(rows, entries, "bf16", args)
    argv = json.loads((tmp_path / "argv.json").read_text())
    assert argv[:2] == ["--dtype", "bf16"] and argv[argv.index("--model-timeout") + 1] == str(int(args.timing_timeout))
    assert argv[argv.index("--modes") + 1] == "default,reduce-overhead"
    pairs = [a for a in argv if "=" in a]
    assert pairs == [f"{entries[0].path}={rows[0]['out_dir']},batch_size=2", f"{entries[1].path}={rows[1]['out_dir']}"]  # not gpt2_block
    resnet, transformer, gpt2 = sbs
    assert (resnet["sbs_eager_ms"], resnet["sbs_default_ms"], resnet["sbs_reduce_overhead_ms"], resnet["sbs_lego_ms"]) == (10.0, 6.0, 5.0, 5.0)
    assert resnet["sbs_lego_vs_eager"] == pytest.approx(2.0) and resnet["sbs_lego_vs_best_compile"] == pytest.approx(1.0)
    assert resnet["reported_vs_eager"] == 2.5 and resnet["reported_over_sidebyside"] == pytest.approx(1.25) and resnet["off"] is True
    assert resnet["bench_lego_vs_eager"] == pytest.approx(2.0) and "error" not in resnet
    assert transformer["reported_over_sidebyside"] == pytest.approx(1.05) and transformer["off"] is False
    assert transformer["sbs_reduce_overhead_ms"] == 5.0 and "reduce-overhead: RuntimeError: boom" in transformer["error"]
    assert gpt2["sbs_lego_ms"] is None and gpt2["off"] is False and "no optimized_model.py" in gpt2["error"]
    assert (tmp_path / "out" / "sidebyside-bf16.log").is_file()

    table = sidebyside_pass.format_table(sbs, "bf16", {"gpu": "H200"})
    lines = table.splitlines()
    assert max(len(line) for line in lines if not line.startswith("    error")) <= 160
    assert lines[1].split() == ["model", "eager", "c-dflt", "c-r-o", "LEGO", "L/eager", "L/best", "reported", "bench", "rep/sbs", "LEGO", "err"]
    resnet_line = next(line for line in lines if line.startswith("resnet101_style"))
    assert resnet_line.endswith(" !") and resnet_line.split()[-3:] == ["1.25", "1.0e-03", "!"]
    assert next(line for line in lines if line.startswith("transformer12")).split()[-1] == "-"  # no error reported: "-"
    assert not next(line for line in lines if line.startswith("transformer12")).endswith("!")
    summary = sidebyside_pass.summary(sbs)["bench"]
    assert summary["off_by_more_than_10pct"] == 1 and summary["timed"] == 2 and summary["models"] == 3
    assert summary["geomean_lego_vs_eager"] == pytest.approx(2.0)
    assert "off by >10%: 1/3" in table and "timed 2/3" in table

    # a model the bench did not search this time: its folder is an older run's, not timed again
    rows[0]["error"] = "not searched: --search-budget spent"
    again = sidebyside_pass.run_pass(rows, entries, "bf16", args)
    assert [a for a in json.loads((tmp_path / "argv.json").read_text()) if "=" in a] == [f"{entries[1].path}={rows[1]['out_dir']}"]
    assert again[0]["sbs_lego_ms"] is None and again[0]["error"] == "not timed: not searched: --search-budget spent"


def test_sidebyside_pass_keeps_what_came_before_a_timeout_and_respects_a_spent_budget(tmp_path, fake_sidebyside, monkeypatch):
    args, entries, rows = _sbs_setup(tmp_path)
    monkeypatch.setenv("FAKE_SBS_HANG", "1")
    monkeypatch.setattr(gm, "DEADLINE_GRACE_S", 0.5)
    args.deadline = time.time() + 2.0  # the tool gets what is left plus the grace, then its process group is killed
    started = time.monotonic()
    resnet, transformer, _ = sidebyside_pass.run_pass(rows, entries, "bf16", args)
    assert time.monotonic() - started < 15
    assert resnet["sbs_lego_ms"] == 5.0 and "error" not in resnet
    assert transformer["sbs_lego_ms"] is None and "timed out after" in transformer["error"]
    (tmp_path / "argv.json").unlink()
    args.deadline = time.time() - 1
    spent = sidebyside_pass.run_pass(rows, entries, "bf16", args)
    assert not (tmp_path / "argv.json").exists()  # not run at all
    assert spent[0]["error"] == "not run: --budget spent" and "no optimized_model.py" in spent[2]["error"]


def test_parse_lines_skips_everything_but_model_lines():
    text = 'starting\n{"model": "a", "eager_ms": 1.0}\n{"no": "model"}\n{broken\n  {"model": "b"}  \nmodel eager\n'
    assert sidebyside_pass.parse_lines(text) == [{"model": "a", "eager_ms": 1.0}, {"model": "b"}]


def test_main_with_sidebyside_writes_both_tables_and_the_rows(tmp_path, fake_sidebyside, monkeypatch, capsys):
    out, results = tmp_path / "out", tmp_path / "results"

    def search(entry, dtype, device, out_root, *a, **k):
        report = fake_report()
        report["timing"]["speedup_vs_eager"] = 2.0
        write_folder(gm.out_folder(out_root, entry, dtype, device), report)
        return {"search_rc": 0, "search_s": 1.0}

    def timing(es, dtype, device, args, tol):
        rows = [_row(e.name, e.group, fake_report(), eager_ms=10.0, lego_ms=5.0, search_s=1.0) for e in es]
        for row, e in zip(rows, es):
            row.update(dtype=dtype, out_dir=str(gm.out_folder(args.out_dir, e, dtype, device)))
        return {"gpu": "cpu", "torch": "x", "triton": "y"}, rows

    monkeypatch.setattr(gm, "run_search", search)
    monkeypatch.setattr(gm, "time_in_child", timing)
    status = gm.main(["--device", "cpu", "--dtypes", "bf16", "--sets", "bench", "--models", "resnet101_style,transformer12",
                      "--jobs", "2", "--sidebyside", "--out-dir", str(out), "--results-dir", str(results)])  # fmt: skip
    assert status == 0
    printed = capsys.readouterr().out
    assert "LEGO vs eager and torch.compile, bf16" in printed and "the same folders timed by sidebyside.py, bf16" in printed
    (path,) = results.glob("*.json")
    doc = json.loads(path.read_text())
    assert doc["sets"] == ["bench"] and doc["jobs"] == 2
    assert [r["model"] for r in doc["sidebyside"]] == ["resnet101_style", "transformer12"]
    assert doc["sidebyside"][0]["reported_over_sidebyside"] == pytest.approx(1.0) and doc["sidebyside"][0]["off"] is False
    assert doc["rows"][0]["signatures_distinct"] == 41 and doc["summary"]["bench"]["signatures_won"] == 24
    assert doc["sidebyside_summary"]["bench"]["timed"] == 2


def test_sidebyside_without_the_tool_stops_before_any_search(tmp_path, monkeypatch):
    monkeypatch.setenv("LEGO_SIDEBYSIDE", str(tmp_path / "absent.py"))
    monkeypatch.setattr(gm, "run_search", lambda *a, **k: pytest.fail("searched although the pass cannot run"))
    with pytest.raises(SystemExit, match="absent.py"):
        gm.main(["--device", "cpu", "--sets", "bench", "--models", "transformer12", "--sidebyside", "--out-dir", str(tmp_path)])
    assert gm.sidebyside_command([], [], "fp32").split()[1] == str(tmp_path / "absent.py")


def test_several_sidebyside_runs_give_medians():
    runs = [
        [{"model": "a", "eager_ms": 1.0, "lego_ms": 0.5, "lego_claims": 2.0}],
        [{"model": "a", "eager_ms": 3.0, "lego_ms": 0.6}, {"model": "b", "eager_ms": 2.0, "lego_ms": 1.0}],
        [{"model": "a", "eager_ms": 2.0, "lego_ms": 0.4, "default_ms": 0.9}],
    ]
    a, b = sidebyside_pass.median_rows(runs)
    assert a["eager_ms"] == 2.0 and a["eager_ms_runs"] == [1.0, 3.0, 2.0]
    assert a["lego_ms"] == pytest.approx(0.5) and a["default_ms"] == 0.9 and a["lego_claims"] == 2.0
    assert b == {"model": "b", "eager_ms": 2.0, "lego_ms": 1.0}  # one run: its own numbers


def test_timing_cpu_pins_the_tool_and_the_runs(tmp_path, fake_sidebyside, monkeypatch):
    args, entries, rows = _sbs_setup(tmp_path)
    args = gm.parse_args(["--device", "cpu", "--dtypes", "bf16", "--sets", "bench", "--out-dir", str(tmp_path / "out"),
                          "--modes", "default,reduce-overhead", "--timing-cpu", "0", "--sidebyside-runs", "2"])
    commands = []
    real = gm.run_group

    def recording(cmd, timeout_s, **popen):
        commands.append(list(cmd))
        return real(cmd, timeout_s, **popen)

    monkeypatch.setattr(gm, "run_group", recording)
    sbs = sidebyside_pass.run_pass(rows, entries, "bf16", args)
    assert len(commands) == 2 and all(cmd[:3] == ["taskset", "-c", "0"] for cmd in commands)
    assert sbs[0]["sbs_eager_ms"] == 10.0  # the median of two equal runs
    assert gm._child_env("cuda", 0)["LEGO_TIMING_CPUS"] == "0" and "LEGO_TIMING_CPUS" not in gm._child_env("cuda")
    assert ["--timing-cpu", "0"] == gm._forwarded_args(args)[gm._forwarded_args(args).index("--timing-cpu"):][:2]
