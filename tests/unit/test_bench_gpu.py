"""bench/gpu_models.py on the CPU: one tiny model through the whole flow
(search in its own process, the timing process, table, JSON schema), plus
model selection and the table's n/a cells.  Numbers are real but asserted
only to exist: no speed is checked here."""
import json
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import gpu_models as gm  # noqa: E402


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory, shared_models):
    out, results = tmp_path_factory.mktemp("out"), tmp_path_factory.mktemp("results")
    status = gm.main(["--device", "cpu", "--tiny", "--models", "scores_chain", "--dtypes", "fp32", "--rep", "2",
                      "--out-dir", str(out), "--results-dir", str(results)])  # fmt: skip
    files = list(results.glob("*.json"))
    assert status == 0 and len(files) == 1
    return out, files[0], json.loads(files[0].read_text())


def test_json_schema_and_a_real_row(tiny_run):
    out, path, doc = tiny_run
    assert {"gpu", "torch", "triton", "date", "dtype", "rows"} <= set(doc)
    assert doc["dtype"] == "fp32" and doc["gpu"] == "cpu" and path.name == f"{doc['date']}-cpu-fp32.json"
    (row,) = doc["rows"]
    assert set(gm.ROW_KEYS) <= set(row)
    assert row["model"] == "scores_chain" and row["group"] == "reference" and "error" not in row
    # measured here, on the CPU: present and positive; torch.compile is not run on the CPU
    assert row["floor_ms"] > 0 and row["eager_ms"] > 0 and row["lego_ms"] > 0 and row["search_s"] > 0
    assert row["compile_default_ms"] is None and row["compile_reduce_overhead_ms"] is None
    assert row["verified"] is True and row["e2e_passed"] is True and row["lego_err"] <= row["tol"]
    assert row["lego_vs_eager"] == pytest.approx(row["eager_ms"] / row["lego_ms"])
    assert row["pct_of_floor"] == pytest.approx(100 * row["floor_ms"] / row["lego_ms"])
    assert (out / "scores_chain-fp32-cpu" / "optimized_model.py").is_file()
    assert doc["summary"]["reference"]["models"] == 1 and doc["summary"]["reference"]["verified"] == 1


def test_table_of_the_real_row(tiny_run):
    _, _, doc = tiny_run
    table = gm.format_table(doc["rows"], "fp32", {"gpu": "cpu", "torch": doc["torch"], "triton": doc["triton"]})
    lines = table.splitlines()
    assert lines[1].split()[:6] == ["model", "floor", "eager", "c-dflt", "c-r-o", "LEGO"]
    row_line = next(line for line in lines if line.startswith("scores_chain"))
    assert row_line.split()[-1] == "yes" and f"{doc['rows'][0]['lego_ms']:.3f}" in row_line
    assert row_line.count("n/a") >= 2  # compile modes not run on the CPU
    assert any(line.startswith("geomean reference") for line in lines)
    assert not any(line.startswith("geomean bench") for line in lines)


def test_skip_search_searches_only_where_no_output_exists(tmp_path, monkeypatch, shared_models):
    args = gm.parse_args(["--device", "cpu", "--tiny", "--dtypes", "fp32", "--skip-search", "--out-dir", str(tmp_path)])
    entries = gm.select_models(["scores_chain", "mlp_residual"], tiny=True)
    done = gm.out_folder(args.out_dir, entries[0], "fp32", "cpu")
    done.mkdir(parents=True)
    (done / "optimized_model.py").write_text("")
    searched, timed = [], []
    monkeypatch.setattr(gm, "run_search", lambda entry, *a, **k: searched.append(entry.name) or {"search_rc": 0, "search_s": 1.0})
    monkeypatch.setattr(gm, "time_in_child", lambda es, dtype, *a: timed.append([e.name for e in es]) or ({}, [{"model": e.name} for e in es]))
    gm.run_worker(entries, args)
    assert searched == ["scores_chain"] and timed == [["mlp_residual", "scores_chain"]]


def test_spent_search_budget_makes_error_rows_without_searching(tmp_path, monkeypatch, shared_models):
    args = gm.parse_args(["--device", "cpu", "--tiny", "--dtypes", "fp32", "--search-budget", "0", "--out-dir", str(tmp_path)])
    entries = gm.select_models(["scores_chain"], tiny=True)
    monkeypatch.setattr(gm, "run_search", lambda *a, **k: pytest.fail("searched past the budget"))
    monkeypatch.setattr(gm, "time_in_child", lambda *a: pytest.fail("timed an unsearched model"))
    written = []
    result = gm.run_worker(entries, args, on_dtype=lambda dtype, part: written.append(dtype))
    (row,) = result["fp32"]["rows"]
    assert row["error"] == "not searched: --search-budget spent" and row["verified"] is False and written == ["fp32"]


def test_model_selection(shared_models):
    entries = gm.select_models(None, tiny=True)
    groups = {e.group for e in entries}
    assert groups == {"reference", "bench"}
    names = [e.name for e in entries]
    assert {"resnet18_style", "mobilenetv2_style", "lstm2", "llama_decoder", "gpt2_block", "long_seq_attention"} <= set(names)
    with_tiny = {name.removesuffix(".py") for name in json.loads((shared_models / "tiny.json").read_text())}
    assert with_tiny <= {e.name for e in entries if e.group == "reference"}
    assert all(e.overrides for e in entries if e.group == "bench" or e.name in with_tiny)  # tiny sizes applied
    assert [e.name for e in gm.select_models(["lstm2.py", "gpt_stack"], tiny=False)] == ["gpt_stack", "lstm2"]
    assert gm.select_models(["lstm2"], tiny=False)[0].overrides == {}
    with pytest.raises(SystemExit, match="no model nope"):
        gm.select_models(["nope"], tiny=False)


def test_geomean_and_failed_rows():
    assert gm.geomean([2.0, 8.0, None]) == pytest.approx(4.0)
    assert gm.geomean([None]) is None
    row = {k: None for k in gm.ROW_KEYS}
    row.update(model="lstm2", group="bench", error="GPU 1 worker exited 1")
    gm._derive(row, 1e-4)
    assert row["verified"] is False and row["lego_vs_eager"] is None
    table = gm.format_table([row], "bf16", {})
    assert "error: GPU 1 worker exited 1" in table and "verified 0/1" in table


def test_a_missing_reference_folder_is_an_error_not_a_shorter_table(tmp_path):
    """On a GPU machine ../shared/models did not travel with the tree, and a
    whole bench run timed only the bench's own six models without a word."""
    with pytest.raises(SystemExit, match=r"no reference models in .*LEGO_MODELS_DIR"):
        gm.select_models(None, tiny=False, reference_dir=tmp_path / "absent")
    with pytest.raises(SystemExit, match="no bench models in"):
        gm.select_models(["gpt_stack"], tiny=False, bench_dir=tmp_path)
