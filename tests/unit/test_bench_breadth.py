"""bench/breadth_models.py without running the optimizer: every breadth model
loads with the project's loader at its tiny sizes and runs eagerly (one
tensor out, finite, deterministic), tiny.json names only existing files and
constants, and rows are read from a report.json or a refusal and printed.
The stateful models are expected to deliver verified plans: at tiny sizes
each is optimized here and its ModelNew matches eager over five calls,
outputs and state."""
import json
import sys
from pathlib import Path

import pytest
import torch

from lego_core.load.problem import ProblemSpec, load_problem

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import breadth_models as bm  # noqa: E402

TINY = json.loads((bm.BREADTH_DIR / "tiny.json").read_text())
FILES = sorted(p.name for p in bm.BREADTH_DIR.glob("*.py"))


def test_at_least_twenty_models_each_with_tiny_sizes_and_a_docstring():
    assert len(FILES) >= 20 and sorted(TINY) == FILES
    for name in FILES:
        source = (bm.BREADTH_DIR / name).read_text()
        assert source.startswith('"""') and "class Model(nn.Module)" in source, name
    assert set(bm.EXPECTED_REFUSALS) <= {Path(f).stem for f in FILES}
    assert set(bm.STATEFUL) <= {Path(f).stem for f in FILES} and not set(bm.STATEFUL) & set(bm.EXPECTED_REFUSALS)


@pytest.mark.parametrize("name", FILES)
def test_model_loads_at_tiny_sizes_and_runs_eagerly(name):
    problem = load_problem(ProblemSpec(str(bm.BREADTH_DIR / name), TINY[name]))
    assert {k: problem.constants[k] for k in TINY[name]} == TINY[name]  # tiny.json names only the file's constants
    assert all(not m.training for m in problem.model.modules())
    inputs = problem.make_inputs(3)  # one tensor out, or a tuple of them (lstm_seq_tagger: logits, (h, c))
    with torch.no_grad():
        first = problem.model(*inputs)
        second = problem.model(*inputs)
    leaves, again = torch.utils._pytree.tree_leaves(first), torch.utils._pytree.tree_leaves(second)
    assert leaves and all(isinstance(t, torch.Tensor) and torch.isfinite(t).all() for t in leaves)
    if Path(name).stem not in bm.STATEFUL:  # the stateful models' outputs depend on their stored state
        assert all(torch.equal(a, b) for a, b in zip(leaves, again))


def test_select_models_reads_tiny_sizes_and_names_unknown_models():
    entries = bm.select_models(["gpt_block.py", "unet_small"], tiny=True)
    assert [e.name for e in entries] == ["gpt_block", "unet_small"] and entries[0].overrides == TINY["gpt_block.py"]
    assert bm.select_models(None, tiny=False)[0].overrides == {}
    with pytest.raises(SystemExit, match="no model nope"):
        bm.select_models(["nope"], tiny=True)


REPORT = {
    "end_to_end": {"passed": True, "reason": "against fp64: ...", "criterion": "error against fp64 at most 2x eager's",
                   "errors_vs_fp64": {"eager": {"norm_rel": 1.2e-7}, "plan": {"norm_rel": 2.5e-7}, "compile": {"norm_rel": 3.0e-7}},
                   "dropped": [{"node_id": "or12", "label": "softmax", "kernel": "k.py", "reason": "plan failed the judge"}]},
    "summary": {"triton": 5, "library": 7, "dropped_by_judge": 1, "launch": "plan"},
}  # fmt: skip


def test_rows_from_a_report_and_from_refusals_and_the_table(monkeypatch):
    entry, stateful = bm.select_models(["gpt_block", "stateful_rnn_attr"], tiny=True)
    assert bm.row_from_run(stateful, "fp32", {"search_s": 4.0, "search_rc": 0}, REPORT, "")["ok"]  # a verified plan is expected
    # the refusal mechanism, for a model expected to be refused
    monkeypatch.setitem(bm.EXPECTED_REFUSALS, "stateful_rnn_attr", "stores a new tensor in self.hidden on every call")
    row = bm.row_from_run(entry, "fp32", {"search_s": 12.3, "search_rc": 0}, REPORT, "")
    assert row["captured"] and row["verified"] and row["ok"] and row["dropped"] == 1
    assert (row["eager_err"], row["plan_err"], row["compile_err"]) == (1.2e-7, 2.5e-7, 3.0e-7)
    log = "loading ...\nerror: stateful_rnn_attr.py: Model.forward stores a new tensor in self.hidden\non every call (a plain tensor attribute)\n"
    refused = bm.row_from_run(stateful, "fp32", {"search_s": 4.0, "search_rc": 1}, None, log)
    assert refused["captured"] is False and refused["ok"] and "stores a new tensor in self.hidden on every call" in refused["error"]
    failed = bm.row_from_run(entry, "fp32", {"search_s": 300.0, "search_rc": None, "search_error": "search timed out after 300 s"}, None, "")
    assert failed["captured"] is None and not failed["ok"] and "timed out" in failed["error"]

    table = bm.format_table([row, refused, failed], "fp32", {"gpu": "cpu", "torch": "2.x", "triton": "3.x"})
    lines = table.splitlines()
    assert "captured" in lines[1] and "compile err" in lines[1]
    gpt = next(line for line in lines if line.startswith("gpt_block"))
    assert gpt.split()[1:4] == ["yes", "yes", "1"] and "2.5e-07" in gpt and "5/7" in gpt and gpt.endswith("yes")
    assert any(line.strip().startswith("dropped: softmax: plan failed the judge") for line in lines)
    assert any(line.strip().startswith("refused (expected): stateful_rnn_attr.py") for line in lines)
    assert any("n/a" in line and line.startswith("gpt_block") and line.split()[1] == "n/a" for line in lines)
    assert lines[-1] == "as expected 2/3 (verified plans 1, expected refusals 1)"

    broken = dict(REPORT, end_to_end=dict(REPORT["end_to_end"], errors_vs_fp64={"eager": {"norm_rel": 1e-7}, "plan": {"norm_rel": 1e-7}, "compile": None},
                                          compile_error="InductorError: TypeError: list indices\n must be integers"))  # fmt: skip
    no_compile = bm.row_from_run(entry, "fp32", {"search_s": 1.0, "search_rc": 0}, broken, "")
    assert no_compile["ok"] and no_compile["compile_err"] is None
    assert "    torch.compile failed: InductorError: TypeError: list indices must be integers" in bm.format_table([no_compile], "fp32", {}).splitlines()

    doc = bm.result_document([row, refused], "fp32", {"gpu": "NVIDIA H200"}, "cuda", date="2026-12-01")
    assert bm.gm.result_path(Path("r"), doc, bench="breadth") == Path("r/2026-12-01-nvidia-h200-breadth-fp32.json")
    assert doc["as_expected"] == 2 and doc["models"] == 2


def test_runs_at_once_keep_rows_in_model_order_per_dtype(monkeypatch, capsys):
    """--jobs N: runs end in any order; each dtype's rows still follow the models' order."""
    import threading
    import time

    entries = bm.select_models(["gpt_block", "unet_small", "vgg_style"], tiny=True)
    delay = {"gpt_block": 0.2, "unet_small": 0.0, "vgg_style": 0.1}
    running, most = [0], [0]
    lock = threading.Lock()

    def fake_bench_model(entry, dtype, args):
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(delay[entry.name])
        with lock:
            running[0] -= 1
        return {"model": entry.name, "dtype": dtype, "captured": True, "verified": True, "search_s": 1.0}

    monkeypatch.setattr(bm, "bench_model", fake_bench_model)
    args = bm.parse_args(["--device", "cpu", "--tiny", "--dtypes", "fp32,bf16", "--jobs", "3"])
    by_dtype = bm.run_all(entries, args)
    assert list(by_dtype) == ["fp32", "bf16"]
    assert all([r["model"] for r in rows] == ["gpt_block", "unet_small", "vgg_style"] for rows in by_dtype.values())
    assert all(r["dtype"] == d for d, rows in by_dtype.items() for r in rows)
    assert most[0] == 3  # three at once, not one after another
    assert capsys.readouterr().out.count("captured True, verified True") == 6
    with pytest.raises(SystemExit, match="--jobs 0"):
        bm.parse_args(["--jobs", "0"])


def test_main_writes_each_dtypes_json_and_prints_its_table(monkeypatch, capsys, tmp_path):
    """main() through gpu_models.write_results (shared with bench-gpu): the JSON
    at ``<date>-<gpu>-breadth-<dtype>.json``, a blank line, the table, then ``written: <path>``."""
    def fake_bench_model(entry, dtype, args):
        return {"model": entry.name, "dtype": dtype, "captured": True, "verified": True, "ok": True, "search_s": 1.0}

    monkeypatch.setattr(bm, "bench_model", fake_bench_model)
    monkeypatch.setattr(bm.gm, "machine_info", lambda device: {"gpu": "cpu", "torch": "2.x", "triton": "3.x"})
    status = bm.main(["--device", "cpu", "--tiny", "--models", "gpt_block", "--dtypes", "fp32,bf16",
                      "--out-dir", str(tmp_path / "out"), "--results-dir", str(tmp_path / "results")])  # fmt: skip
    assert status == 0
    out = capsys.readouterr().out
    for dtype in ("fp32", "bf16"):
        (path,) = (tmp_path / "results").glob(f"*-cpu-breadth-{dtype}.json")
        doc = json.loads(path.read_text())
        assert doc["bench"] == "breadth" and doc["dtype"] == dtype and [r["model"] for r in doc["rows"]] == ["gpt_block"]
        table = bm.format_table(doc["rows"], dtype, {"gpu": "cpu", "torch": "2.x", "triton": "3.x", "jobs": 1})
        assert f"\n\n{table}written: {path}\n" in out


@pytest.mark.slow
@pytest.mark.parametrize("name", ["stateful_kv_decoder", "stateful_rnn_attr", "stateful_running_stats"])
def test_a_stateful_bench_model_delivers_a_verified_plan_carrying_its_state(tmp_path, name):
    from faithful_support import load_optimized
    from lego_core.api import optimize
    from lego_core.config import OptimizeConfig

    spec = ProblemSpec(str(bm.BREADTH_DIR / f"{name}.py"), TINY[f"{name}.py"])
    report = optimize(spec, str(tmp_path / "out"), OptimizeConfig(cache=False, mutation=False))
    assert report["end_to_end"]["passed"], report["end_to_end"]
    module = load_optimized(tmp_path / "out")  # its reference_model.py runs with the tiny overrides
    problem = load_problem(spec)
    model = problem.model
    new = module.ModelNew(*problem.init_inputs)
    new.load_state_dict(model.state_dict())
    state = [n for n in ("hidden", "running_mean", "running_var", "calls") if hasattr(model, n)]
    with torch.no_grad():
        for seed in range(5):
            inputs = problem.make_inputs(10 + seed)
            torch.testing.assert_close(new(*inputs), model(*inputs), atol=1e-4, rtol=1e-4)
            for n in state:
                torch.testing.assert_close(getattr(new, n), getattr(model, n), atol=1e-4, rtol=1e-4)
