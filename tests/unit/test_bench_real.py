"""bench/real_models.py without running the optimizer: every model file in
bench/models/real loads with the project's loader at its tiny size and runs
forward (the torchvision and timm files are skipped, with the reason, where
those libraries do not import), tiny.json names only existing files and
constants, the library a file needs is read from its imports, a missing
library makes a skipped row, and rows are read from a report.json, merged
with timings, printed and written as JSON."""
import json
import sys
from pathlib import Path

import pytest
import torch

from lego_core.load.problem import ProblemSpec, load_problem

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import real_models as rm  # noqa: E402

TINY = json.loads((rm.REAL_DIR / "tiny.json").read_text())
FILES = sorted(p.name for p in rm.REAL_DIR.glob("*.py"))
FAMILIES = ("hf_gpt2", "hf_llama", "hf_bert", "hf_vit", "tv_resnet50", "tv_mobilenet_v3_large", "tv_efficientnet_b0",
            "timm_convnext_tiny", "handwritten_resnet18", "handwritten_mobilenet_v3_small", "handwritten_efficientnet_b0",
            "handwritten_convnext")  # fmt: skip


def test_every_family_has_a_file_with_tiny_sizes_and_a_docstring():
    assert sorted(Path(f).stem for f in FILES) == sorted(FAMILIES) and sorted(TINY) == FILES
    for name in FILES:
        source = (rm.REAL_DIR / name).read_text()
        assert source.startswith('"""') and "class Model(nn.Module)" in source, name
        assert "def get_inputs()" in source and "def get_init_inputs()" in source, name


def test_the_library_a_file_needs_is_read_from_its_imports(tmp_path):
    groups = {e.name: e.group for e in rm.select_models(None, tiny=False)}
    assert {n for n, g in groups.items() if g == "transformers"} == {"hf_gpt2", "hf_llama", "hf_bert", "hf_vit"}
    assert {n for n, g in groups.items() if g == "torchvision"} == {"tv_resnet50", "tv_mobilenet_v3_large", "tv_efficientnet_b0"}
    assert groups["timm_convnext_tiny"] == "timm" and all(groups[n] == rm.HANDWRITTEN for n in FAMILIES if n.startswith("handwritten_"))
    both = tmp_path / "both.py"
    both.write_text("import torch\nimport torchvision.models as tvm\nfrom timm.layers import Mlp\nfrom . import sibling\n")
    assert rm.required_libraries(both) == ["torchvision", "timm"]


def test_select_models_reads_tiny_sizes_and_names_unknown_models():
    entries = rm.select_models(["hf_bert.py", "handwritten_resnet18"], tiny=True)
    assert [e.name for e in entries] == ["handwritten_resnet18", "hf_bert"] and entries[1].overrides == TINY["hf_bert.py"]
    assert rm.select_models(["hf_bert"], tiny=False)[0].overrides == {}
    with pytest.raises(SystemExit, match="no model nope"):
        rm.select_models(["nope"], tiny=True)


def test_a_missing_library_is_a_skipped_row_not_a_crash(monkeypatch, tmp_path):
    monkeypatch.setattr(rm, "_import_checks", {"torchvision": "torchvision not installed"})
    entry = rm.select_models(["tv_resnet50"], tiny=True)[0]
    assert rm.skip_reason(entry) == "skipped: torchvision not installed"
    assert rm.library_problem("surely_no_such_library_here") == "surely_no_such_library_here not installed"

    def no_search(*a, **k):
        raise AssertionError("a skipped model must not be optimized")

    monkeypatch.setattr(rm, "optimize_model", no_search)
    args = rm.parse_args(["--device", "cpu", "--tiny", "--dtypes", "fp32", "--out-dir", str(tmp_path)])
    rows = rm.optimize_all([entry], args)
    assert rows["fp32", "tv_resnet50"]["skipped"] == "skipped: torchvision not installed"
    table = rm.format_table(list(rows.values()), "fp32", {"gpu": "cpu"})
    assert any(line.startswith("tv_resnet50") and line.endswith("skipped: torchvision not installed") for line in table.splitlines())
    assert "skipped 1" in table.splitlines()[-1]


def _can_import(name: str) -> str | None:
    return rm.library_problem(name, "cpu")


@pytest.mark.parametrize("name", FILES)
def test_model_loads_at_tiny_size_and_runs_forward(name):
    for library in rm.required_libraries(rm.REAL_DIR / name):
        if _can_import(library):
            pytest.skip(f"{name}: {_can_import(library)}")
    problem = load_problem(ProblemSpec(str(rm.REAL_DIR / name), TINY[name]))
    assert {k: problem.constants[k] for k in TINY[name]} == TINY[name]  # tiny.json names only the file's constants
    assert all(not m.training for m in problem.model.modules())
    inputs = problem.make_inputs(1)
    with torch.no_grad():
        first, second = problem.model(*inputs), problem.model(*inputs)
    assert isinstance(first, torch.Tensor) and first.is_floating_point() and torch.isfinite(first).all()
    assert torch.equal(first, second)
    if name == "hf_bert.py":  # what a tokenizer hands over: integer ids and a 0/1 padding mask
        ids, mask = inputs
        assert ids.dtype == mask.dtype == torch.int64 and set(mask.unique().tolist()) <= {0, 1} and mask[:, 0].all()


REPORT = {
    "end_to_end": {"passed": True, "reason": "against fp64: ...",
                   "errors_vs_fp64": {"eager": {"norm_rel": 1.2e-7}, "plan": {"norm_rel": 2.5e-7}}},
    "summary": {"triton": 5, "library": 7}, "launch": {"chosen": "plan+graph"}, "metrics": {"search_time_s": 41.0},
}  # fmt: skip


def _folder(tmp_path, delivered: bool) -> Path:
    folder = tmp_path / "hf_llama-bf16-cuda"
    folder.mkdir(parents=True)
    if delivered:
        (folder / "optimized_model.py").write_text("# ModelNew\n")
    return folder


def test_rows_from_a_delivered_run_and_from_a_failed_one(tmp_path):
    entry = rm.select_models(["hf_llama"], tiny=True)[0]
    row = rm.search_row(entry, "bf16", {"search_s": 73.5, "search_rc": 0}, _folder(tmp_path / "a", True), REPORT, "")
    assert row["delivered"] and row["verified"] and row["launch"] == "plan+graph" and (row["triton"], row["library"]) == (5, 7)
    assert row["plan_err"] == 2.5e-7 and row["package"] == "transformers" and row["error"] is None
    log = "searching ...\nerror: the composed model failed in its process: ImportError: optimized_model.py:\nimporting it wrote files\n"
    failed = rm.search_row(entry, "bf16", {"search_s": 98.0, "search_rc": 1, "search_error": "optimizer exit 1: ..."},
                           _folder(tmp_path / "b", False), None, log)  # fmt: skip
    assert not failed["delivered"] and not failed["verified"]
    assert failed["error"] == "the composed model failed in its process: ImportError: optimized_model.py: importing it wrote files"
    composed = "verify   0/227 0:01:45\noptimizer failed: the composed model failed in its process: ImportError: \noptimized_model.py: importing it started a process or loaded a library \n(ctypes.dlopen)\nno output written\n"
    assert rm.search_row(entry, "fp32", {"search_s": 108.0, "search_rc": 3}, _folder(tmp_path / "d", False), None, composed)["error"] == (
        "the composed model failed in its process: ImportError: optimized_model.py: importing it started a process or loaded a library (ctypes.dlopen)")
    timed_out = rm.search_row(entry, "bf16", {"search_s": 1320.0, "search_rc": None, "search_error": "search timed out after 1200 s"},
                              _folder(tmp_path / "c", False), None, "")  # fmt: skip
    assert timed_out["error"] == "search timed out after 1200 s"


FALLING_BACK = """import importlib.util
import warnings

spec = importlib.util.spec_from_file_location("reference_for_test", {path!r})
reference = importlib.util.module_from_spec(spec)
spec.loader.exec_module(reference)


class ModelNew(reference.Model):
    def forward(self, x):
        warnings.warn("LEGO: __name__ changed after the model was optimized ...: running the original forward (...)")
        return super().forward(x)
"""


@pytest.mark.parametrize("timed", [False, True])
def test_model_new_is_run_as_a_user_runs_it_and_its_fallback_warning_is_kept(tmp_path, timed):
    """time_model in this process (no optimizer run: an output folder whose
    ModelNew warns that it runs the original forward, as a plan that was
    never run does); timed (the cuda branch, here on the host clock) or run
    once (a CPU)."""
    entry = rm.select_models(["handwritten_convnext"], tiny=True)[0]
    folder = tmp_path / "out"
    folder.mkdir()
    (folder / "optimized_model.py").write_text(FALLING_BACK.format(path=entry.path))
    fields = rm.time_model(entry, "fp32", "cpu", folder, rep=2, modes=[], timed=timed)
    assert fields.get("timing_error") is None and fields["lego_fallback"]
    assert fields["lego_warnings"] == ["LEGO: __name__ changed after the model was optimized ...: running the original forward (...)"]
    assert fields["lego_err_fresh" if timed else "lego_err"] == 0.0
    assert (fields.get("eager_ms") is not None and fields.get("lego_ms") is not None) == timed
    missing = rm.time_model(entry, "fp32", "cpu", tmp_path / "nothing", rep=2, modes=[], timed=timed)
    assert missing.get("timing_error") is None and "lego_ms" not in missing and not missing["lego_fallback"]


def test_timings_merge_into_ratios_and_verified_and_the_table(tmp_path):
    entry = rm.select_models(["hf_llama"], tiny=True)[0]
    row = rm.search_row(entry, "bf16", {"search_s": 73.5, "search_rc": 0}, _folder(tmp_path, True), REPORT, "")
    timed = {"timing_method": "cuda_events", "eager_ms": 4.0, "compile_default_ms": 2.5, "compile_reduce_overhead_ms": 2.0, "lego_ms": 1.6, "lego_err": 3e-3,
             "lego_err_fresh": 3e-3, "lego_warnings": [], "lego_fallback": False}  # fmt: skip
    merged = rm.merge_timing(row, timed, tol=5e-2)
    assert merged["verified"] and merged["lego_vs_eager"] == pytest.approx(2.5) and merged["lego_vs_best_compile"] == pytest.approx(1.25)
    too_far = rm.merge_timing(row, dict(timed, lego_err=0.2), tol=5e-2)
    assert not too_far["verified"] and "above 0.05" in too_far["error"]
    # fp32 where eager's convolutions run in TF32 (cuDNN's default): channels-last differs by ~5e-4 (H200, 2026-12-03)
    assert rm.merge_timing(row, dict(timed, lego_err=7.1e-4, eager_tf32=True), tol=1e-4)["verified"]
    assert not rm.merge_timing(row, dict(timed, lego_err=7.1e-4, eager_tf32=False), tol=1e-4)["verified"]
    fell_back = rm.merge_timing(row, dict(timed, lego_fallback=True, lego_warnings=["LEGO: __name__ changed ...: running the original forward"]), tol=5e-2)
    broken = rm.merge_timing(row, {"timing_error": "RuntimeError: CUDA out of memory", "compile_reduce_overhead_error": "InductorError: x"}, tol=5e-2)
    assert not broken["verified"] and broken["lego_vs_eager"] is None and "out of memory" in broken["error"]

    meta = {"gpu": "NVIDIA H200", "torch": "2.11.0", "triton": "3.6.0", "libraries": {"transformers": "5.17.0", "timm": None}, "rep": 50}
    lines = rm.format_table([merged, fell_back, broken], "bf16", meta).splitlines()
    assert "transformers 5.17.0" in lines[0] and "timm" not in lines[0] and "median ms of 50 calls, CUDA events, L2 flushed with 256 MB" in lines[0]
    assert lines[1].split() == ["model", "delivered", "verified", "launch", "triton/lib", "eager", "c-dflt", "c-r-o", "LEGO",
                                "L/eager", "L/best", "LEGO", "err", "search", "s"]  # fmt: skip
    first = lines[3].split()
    assert first[:5] == ["hf_llama", "yes", "yes", "plan+graph", "5/7"] and first[5:] == ["4.000", "2.500", "2.000", "1.600", "2.50", "1.25", "3.0e-03", "74"]
    assert "    ModelNew warned: LEGO: __name__ changed ...: running the original forward" in lines
    assert "    compile_reduce_overhead failed: InductorError: x" in lines
    assert not fell_back["verified"] and "are not the plan's" in fell_back["error"]
    assert lines[-1].startswith("delivered 3/3, verified 1, skipped 0, ModelNew fell back 1; geomean L/eager 2.50x")


def test_main_optimizes_then_runs_model_new_once_and_writes_each_dtypes_json_and_table_on_a_cpu(monkeypatch, capsys, tmp_path):
    def fake_optimize(entry, dtype, args):
        assert args.max_search_time == 30 and args.device == "cpu"
        return {"model": entry.name, "package": entry.group, "dtype": dtype, "delivered": True, "e2e_passed": True, "verified": True,
                "search_s": 9.0, "triton": 3, "library": 4, "launch": "plan", "error": None}  # fmt: skip

    checked = []

    def fake_check(entries, dtype, args):  # the child process that runs ModelNew once (a CPU times nothing)
        checked.append((dtype, [e.name for e in entries]))
        fell_back = ["LEGO: __name__ changed after the model was optimized ...: running the original forward (...)"]
        return {}, {"hf_bert": {"lego_err": 1e-7, "lego_warnings": fell_back, "lego_fallback": True},
                    "handwritten_convnext": {"lego_err": 2e-7, "lego_warnings": [], "lego_fallback": False}}  # fmt: skip

    monkeypatch.setattr(rm, "optimize_model", fake_optimize)
    monkeypatch.setattr(rm, "time_in_child", fake_check)
    monkeypatch.setattr(rm.gm, "machine_info", lambda device: {"gpu": "cpu", "torch": "2.x", "triton": "3.x"})
    status = rm.main(["--device", "cpu", "--tiny", "--models", "hf_bert,handwritten_convnext", "--dtypes", "fp32,bf16", "--max-search-time", "30",
                      "--out-dir", str(tmp_path / "out"), "--results-dir", str(tmp_path / "results")])  # fmt: skip
    assert status == 0 and checked == [("fp32", ["handwritten_convnext", "hf_bert"]), ("bf16", ["handwritten_convnext", "hf_bert"])]
    out = capsys.readouterr().out
    for dtype in ("fp32", "bf16"):
        (path,) = (tmp_path / "results").glob(f"*-cpu-real-{dtype}.json")
        doc = json.loads(path.read_text())
        assert doc["bench"] == "real" and doc["dtype"] == dtype and doc["max_search_time_s"] == 30
        assert [r["model"] for r in doc["rows"]] == ["handwritten_convnext", "hf_bert"] and set(doc["libraries"]) == set(rm.LIBRARIES)
        assert [r["verified"] for r in doc["rows"]] == [True, False] and doc["summary"]["fallback"] == 1
        assert all(r.get("eager_ms") is None for r in doc["rows"]) and f"written: {path}" in out
    assert "not timed (optimized, verified, ModelNew run once as a user runs it)" in out
    assert "    error: ModelNew ran the original forward (its warning below): its output and time are not the plan's" in out


def test_optimizer_runs_at_once_keep_rows_keyed_by_dtype_and_model(monkeypatch, capsys, tmp_path):
    """--jobs N: N optimizer runs at once; they end in any order."""
    import threading
    import time

    entries = rm.select_models(["hf_bert", "handwritten_resnet18", "handwritten_convnext"], tiny=True)
    delay = {"hf_bert": 0.2, "handwritten_resnet18": 0.0, "handwritten_convnext": 0.1}
    running, most = [0], [0]
    lock = threading.Lock()

    def fake_optimize(entry, dtype, args):
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(delay[entry.name])
        with lock:
            running[0] -= 1
        return {"model": entry.name, "dtype": dtype, "delivered": True, "verified": True, "search_s": 1.0}

    monkeypatch.setattr(rm, "optimize_model", fake_optimize)
    args = rm.parse_args(["--device", "cpu", "--tiny", "--dtypes", "fp32,bf16", "--jobs", "3", "--out-dir", str(tmp_path)])
    rows = rm.optimize_all(entries, args)
    assert sorted(rows) == sorted((d, e.name) for d in ("fp32", "bf16") for e in entries)
    assert all(r["dtype"] == d and r["model"] == m for (d, m), r in rows.items())
    assert most[0] == 3 and capsys.readouterr().out.count("delivered True, verified True") == 6


def test_parse_args_defaults_and_refusals():
    args = rm.parse_args([])
    assert args.dtypes == ["bf16", "fp32"] and args.device == "cuda" and args.max_search_time == 60 and args.timeout == 1200
    assert args.rep == 50 and args.modes == ["default", "reduce-overhead"] and args.results_dir == rm.gm.RESULTS_DIR
    assert rm.parse_args(["--device", "cpu"]).timeout == 600
    with pytest.raises(SystemExit, match="--jobs 0"):
        rm.parse_args(["--jobs", "0"])
    with pytest.raises(SystemExit, match="unknown dtype int8"):
        rm.parse_args(["--dtypes", "int8"])
