"""A failed run leaves no unverified file (issue 10, section 2: atomic output).

Before: a run that failed at the end-to-end check left its optimized_model.py
and kernels/ in the output folder, next to an earlier run's report.json that
said e2e passed; a child that died did the same; and a user's own ``tests/``
folder in ``--out`` was deleted.  Now a run composes and verifies in a
staging folder and moves its files in by rename only when it passed
(``lego_core.runtime.output``): the target is left as it was, an earlier run's output
there is marked by ``FAILED.json``, and files LEGO did not write are never
touched.

Each test states what it saw on the code before the change (run against the
parent commit's tree).  Models are tiny; one successful run is shared by
copying its folder.
"""
import json
import shutil
import textwrap
from pathlib import Path

import pytest

from lego_core.api import optimize
from lego_core.config import OptimizeConfig
from lego_core.errors import OptimizeError
from lego_core.runtime.output import FAILED, RECORD
from lego_core.load.problem import ProblemError, ProblemSpec

pytestmark = pytest.mark.faithful

MODEL = """\
import os
import torch
import torch.nn as nn

batch_size = 4


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(16, 16)
        {init}

    def forward(self, x):
        return torch.relu(self.lin(x)) + 1.0


def get_inputs():
    return [torch.randn(batch_size, 16)]


def get_init_inputs():
    return []
"""

# ModelNew (the composed model) gets another non-persistent buffer than eager:
# load_state_dict does not carry it, so the end-to-end check fails, genuinely
E2E_MISMATCH = MODEL.replace("{init}", "").replace(
    "return torch.relu(self.lin(x)) + 1.0", "return torch.relu(self.lin(x)) + self.shift"
).replace(
    "self.lin = nn.Linear(16, 16)\n",
    "self.lin = nn.Linear(16, 16)\n"
    "        self.register_buffer('shift', torch.full((16,), 2.0 if type(self).__name__ == 'ModelNew' else 1.0), persistent=False)\n",
)
# the child dies while the end-to-end check builds ModelNew
CRASH_IN_E2E = MODEL.replace("{init}", "if type(self).__name__ == 'ModelNew':\n            os._exit(3)")
GOOD = MODEL.replace("{init}", "")


def write(tmp_path: Path, name: str, source: str) -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(source))
    return str(path)


def snapshot(folder: Path) -> dict:
    """Relative path -> bytes of every file under ``folder``."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def leftovers(parent: Path) -> list:
    return [p.name for p in parent.iterdir() if ".lego-" in p.name]


@pytest.fixture(scope="module")
def first_run(tmp_path_factory):
    """A successful run (batch_size=2, so lego_overrides.py ships) into a folder that also holds a user's files."""
    root = tmp_path_factory.mktemp("first")
    out = root / "out"
    (out / "data").mkdir(parents=True)
    (out / "notes.txt").write_text("the user's notes\n")
    (out / "data" / "x.csv").write_text("1,2\n")
    report = optimize(ProblemSpec(write(root, "good.py", GOOD), {"batch_size": 2}), out, OptimizeConfig(cache=False), isolate=False)
    assert report["end_to_end"]["passed"]
    return out, report


@pytest.fixture
def earlier(first_run, tmp_path):
    """A copy of the first run's folder in this test's tmp_path: (folder, its snapshot, the run's report)."""
    out = tmp_path / "out"
    shutil.copytree(first_run[0], out)
    return out, snapshot(out), first_run[1]


def assert_marked(out: Path, before: dict, report: dict) -> dict:
    """``out`` still holds exactly the earlier files, plus FAILED.json naming the run they came from."""
    after = snapshot(out)
    failed = after.pop(FAILED, None)
    after.pop(RECORD, None)  # it lists FAILED.json now
    assert after == {k: v for k, v in before.items() if k != RECORD}
    assert failed is not None, "no FAILED.json beside the earlier run's output"
    failed = json.loads(failed)
    assert failed["passed"] is False and failed["output_from_run"] == report["run_id"] != failed["run_id"]
    assert json.loads((out / "report.json").read_text())["run_id"] == report["run_id"]
    assert leftovers(out.parent) == []
    return failed


def test_failure_at_the_end_to_end_check_leaves_the_earlier_output_marked(earlier, tmp_path):
    """Before: optimized_model.py, kernels/ and tests/ were those of the failed run, beside the earlier
    report.json saying e2e passed."""
    out, before, report = earlier
    with pytest.raises(OptimizeError, match="does not match eager end to end"):
        optimize(ProblemSpec(write(tmp_path, "mismatch.py", E2E_MISMATCH)), out, OptimizeConfig(cache=False), isolate=False)
    failed = assert_marked(out, before, report)
    assert "does not match eager" in failed["error"]


def test_failure_at_the_end_to_end_check_into_a_new_folder_writes_nothing(tmp_path):
    """Before: the folder was created and held the unverified optimized_model.py and kernels/."""
    out = tmp_path / "fresh"
    with pytest.raises(OptimizeError):
        optimize(ProblemSpec(write(tmp_path, "mismatch.py", E2E_MISMATCH)), out, OptimizeConfig(cache=False), isolate=False)
    assert not out.exists()
    assert leftovers(tmp_path) == []


def test_failure_at_load_marks_the_earlier_output(earlier, tmp_path):
    """A model file with a syntax error: the earlier output stays, marked.  Before: nothing said that
    the report.json there was not this run's."""
    out, before, report = earlier
    with pytest.raises(ProblemError):
        optimize(ProblemSpec(write(tmp_path, "broken.py", "def f(:\n")), out, OptimizeConfig(cache=False), isolate=False)
    assert_marked(out, before, report)


def test_child_crash_after_composing_leaves_no_files(tmp_path):
    """The composed model's process dies (os._exit in ModelNew) during the end-to-end check, after
    the run composed.  Before: the folder held the composed, never verified optimized_model.py and
    kernels/.  The composed model runs in a process of its own (lego_core.judge.end_to_end.composed), so the
    optimizer outlives it and fails the run, naming how it died."""
    out = tmp_path / "crash"
    with pytest.raises(OptimizeError, match=r"the composed model's process gave no result: .*\(exit code 3\)"):
        optimize(ProblemSpec(write(tmp_path, "crash.py", CRASH_IN_E2E)), out, OptimizeConfig(cache=False))
    assert not out.exists()
    assert leftovers(tmp_path) == []  # the staging folder was removed


def test_second_successful_run_replaces_the_first_and_keeps_the_users_files(earlier, tmp_path):
    """A failed run, then a successful one without overrides into the same folder: the FAILED.json goes,
    the first run's files are replaced by the second's (its optimized_model.py imports the model file
    with no overrides), the user's notes.txt and data/ stay, report.json and the record are the new run's.
    Before: report.json carried no run id, so nothing told the runs apart."""
    out, before, report = earlier
    with pytest.raises(ProblemError):
        optimize(ProblemSpec(write(tmp_path, "broken.py", "def f(:\n")), out, OptimizeConfig(cache=False), isolate=False)
    assert (out / FAILED).exists()
    second = optimize(ProblemSpec(write(tmp_path, "good.py", GOOD)), out, OptimizeConfig(cache=False), isolate=False)
    assert second["run_id"] != report["run_id"]
    assert not (out / FAILED).exists() and (out / "lego_overrides.py").exists()
    assert (out / "notes.txt").read_text() == "the user's notes\n" and (out / "data" / "x.csv").read_text() == "1,2\n"
    assert json.loads((out / "report.json").read_text())["run_id"] == second["run_id"]
    record = json.loads((out / RECORD).read_text())
    assert record["run_id"] == second["run_id"] and "lego_overrides.py" in record["files"]
    assert "batch_size = 4" in (out / "reference_model.py").read_text() and "OVERRIDES = {}" in (out / "optimized_model.py").read_text()
    assert leftovers(tmp_path) == []


def test_a_users_file_under_a_lego_name_is_refused_not_deleted(tmp_path):
    """``--out`` pointing at a project folder with its own tests/: refused before the run, tests/ intact.
    Before: the run deleted the user's tests/ folder and wrote LEGO's kernel tests there."""
    out = tmp_path / "project"
    (out / "tests").mkdir(parents=True)
    (out / "tests" / "test_mine.py").write_text("def test_mine():\n    pass\n")
    with pytest.raises(ProblemError, match="tests, which LEGO did not write"):
        optimize(ProblemSpec(write(tmp_path, "good.py", GOOD)), out, OptimizeConfig(cache=False), isolate=False)
    assert sorted(p.name for p in (out / "tests").iterdir()) == ["test_mine.py"]
    assert sorted(p.name for p in out.iterdir()) == ["tests"]
