"""A model split over several files (issue 24): ``lego_core.load.local_modules``.

In-process: loading a model that imports a sibling module and a sibling
package lists what the output must ship; a failed import names the missing
module, what the import path holds and the fix (not "fix the code at that
line"); what the jail shows of the user's files.  Jailed, as a user runs
it (marker ``sandbox``): a two-file model optimizes from the command line
and its output folder, copied elsewhere alone, runs ModelNew as the
original; a missing module gets the message inside the jail too; and the
jail shows the model's folder but neither its parent nor its sibling
folders.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest

from lego_core import OptimizeConfig, ProblemSpec, optimize
from lego_core.runtime import jail
from lego_core.load import local_modules
from lego_core.load.overrides import load_reference
from lego_core.load.problem import FIX_THE_LINE, load_problem
from lego_core.load.spec import ProblemError

REPO = Path(__file__).resolve().parents[2]

MODEL = """\
import torch
import torch.nn as nn

from mylayers import Scale
from blocks import Block
{extra}

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = Scale(2.0)
        self.block = Block(16)

    def forward(self, x):
        return self.block(self.scale(torch.relu(x))){offset}


def get_inputs():
    return [torch.randn(4, 16)]


def get_init_inputs():
    return []
"""

MYLAYERS = """\
import torch.nn as nn


class Scale(nn.Module):
    def __init__(self, factor):
        super().__init__()
        self.factor = factor

    def forward(self, x):
        return x * self.factor
"""

BLOCKS_INIT = "from blocks.inner import Block\n"

BLOCKS_INNER = """\
import torch
import torch.nn as nn


class Block(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.linear = nn.Linear(n, n)

    def forward(self, x):
        return torch.tanh(self.linear(x))
"""

TINY = """\
import torch
import torch.nn as nn
{imports}


class Model(nn.Module):
    def forward(self, x):
        return x * 2.0


def get_inputs():
    return [torch.randn(2, 4)]


def get_init_inputs():
    return []
"""


def write_two_file_model(folder: Path, extra: str = "", offset: str = "") -> Path:
    """``folder/model.py`` importing the sibling module ``mylayers.py`` and
    the sibling package ``blocks/`` (``__init__.py`` and ``inner.py``), plus
    a sibling the model does not import, a data file and a ``__pycache__``
    in the package (none of which ship)."""
    (folder / "blocks" / "__pycache__").mkdir(parents=True)
    (folder / "model.py").write_text(MODEL.format(extra=extra, offset=offset))
    (folder / "mylayers.py").write_text(MYLAYERS)
    (folder / "unused.py").write_text("raise RuntimeError('never imported')\n")
    (folder / "blocks" / "__init__.py").write_text(BLOCKS_INIT)
    (folder / "blocks" / "inner.py").write_text(BLOCKS_INNER)
    (folder / "blocks" / "notes.txt").write_text("not Python\n")
    (folder / "blocks" / "__pycache__" / "inner.cpython-311.pyc").write_bytes(b"\0")
    return folder / "model.py"


@pytest.fixture
def clean_imports(monkeypatch, tmp_path):
    """Loading in this process puts the model's folder on sys.path and its
    modules in sys.modules: the path is restored and the test's own modules
    (under tmp_path, and the model file's) are forgotten afterwards (not
    torch's, which it may have imported meanwhile and cannot import twice)."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.delenv(local_modules.VIEW_ENV, raising=False)
    before = set(sys.modules)
    yield
    for name in set(sys.modules) - before:
        file = getattr(sys.modules[name], "__file__", None) or ""
        if name.startswith("lego_problem_") or file.startswith(str(tmp_path)):
            del sys.modules[name]


def _need_jail() -> None:
    why = jail.available()
    if why is not None:
        pytest.skip(f"bubblewrap cannot jail a process on this machine: {why}")


# --- loading: what the model imported from its folder ---------------------------------


def test_loading_imports_the_sibling_module_and_package_and_lists_what_ships(tmp_path, clean_imports):
    model = write_two_file_model(tmp_path / "models")
    problem = load_problem(ProblemSpec(str(model)))
    found = problem.local_modules
    assert found.folder == str(model.parent.resolve())
    assert found.names == ["blocks", "mylayers"]
    assert sorted(relative for relative, _ in found.files) == ["blocks/__init__.py", "blocks/inner.py", "mylayers.py"]
    assert all(Path(source).is_file() for _, source in found.files)
    assert sys.path[0] == str(model.parent.resolve())  # first, as `python model.py` has it


def test_a_second_load_in_the_same_process_still_finds_the_models_modules(tmp_path, clean_imports):
    """mylayers and blocks are cached in sys.modules by the first load (not
    new the second time): what the model file refers to still counts."""
    model = write_two_file_model(tmp_path / "models")
    first = load_problem(ProblemSpec(str(model))).local_modules
    again = load_problem(ProblemSpec(str(model))).local_modules
    assert again.names == first.names == ["blocks", "mylayers"] and again.files == first.files


def test_the_output_gets_the_modules_and_its_import_finds_them(tmp_path, clean_imports):
    model = write_two_file_model(tmp_path / "models")
    found = load_problem(ProblemSpec(str(model))).local_modules
    out = tmp_path / "out"
    (out / local_modules.FOLDER / "stale").mkdir(parents=True)  # an earlier copy is replaced
    local_modules.copy_into(out, found)
    shipped = sorted(p.relative_to(out / local_modules.FOLDER).as_posix() for p in (out / local_modules.FOLDER).rglob("*") if p.is_file())
    assert shipped == ["blocks/__init__.py", "blocks/inner.py", "mylayers.py"]
    assert (out / local_modules.FOLDER / "mylayers.py").read_text() == MYLAYERS
    # optimized_model.py's import of the model file puts that folder first on sys.path (lego_overrides.load_reference)
    (out / "reference_model.py").write_text("import mylayers\nLAYERS = mylayers\n")
    for name in [n for n in sys.modules if n == "mylayers" or n.split(".")[0] == "blocks"]:
        del sys.modules[name]  # as in a fresh process, where only the shipped copies exist
    loaded = load_reference(out, "lego_reference_test_local_modules", {})
    assert loaded.LAYERS.__file__ == str((out / local_modules.FOLDER / "mylayers.py").resolve())
    assert sys.path[0] == str((out / local_modules.FOLDER).resolve())


def test_a_model_without_sibling_imports_ships_nothing(tmp_path, clean_imports):
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "helpers.py").write_text("X = 1\n")  # beside it, but not imported
    (tmp_path / "m" / "model.py").write_text(TINY.format(imports=""))
    found = load_problem(ProblemSpec(str(tmp_path / "m" / "model.py"))).local_modules
    assert found.names == [] and found.files == []


def test_a_compiled_module_of_the_models_folder_is_refused_at_load(tmp_path, monkeypatch):
    model = tmp_path / "model.py"
    model.write_text("")
    fake = types.ModuleType("fastext")
    fake.__file__ = str(tmp_path / "fastext.cpython-311-x86_64-linux-gnu.so")
    monkeypatch.setitem(sys.modules, "fastext", fake)
    with pytest.raises(ProblemError, match=r"compiled module\(s\) fastext \(fastext\.cpython-311") as info:
        local_modules.imported_modules(str(model), set(sys.modules) - {"fastext"})
    assert "pip install" in info.value.hint


def test_modules_beyond_the_limits_are_refused_at_load(tmp_path, clean_imports, monkeypatch):
    model = write_two_file_model(tmp_path / "models")
    monkeypatch.setattr(local_modules, "MAX_FILES", 2)
    with pytest.raises(ProblemError, match="hold 3 Python files; the optimized model ships at most 2") as info:
        load_problem(ProblemSpec(str(model)))
    assert "folder of their own" in info.value.hint


def test_installed_packages_and_modules_loaded_before_are_not_the_models(tmp_path, monkeypatch):
    """A module of the model's folder already imported before the model
    (LEGO's own, when the model lies in LEGO's folder) and one found under
    the interpreter's prefix are left out."""
    model = tmp_path / "model.py"
    model.write_text("")
    earlier = types.ModuleType("earlier")
    earlier.__file__ = str(tmp_path / "earlier.py")
    (tmp_path / "earlier.py").write_text("")
    monkeypatch.setitem(sys.modules, "earlier", earlier)
    venv = tmp_path / "venv"
    (venv / "lib").mkdir(parents=True)
    (venv / "lib" / "installed.py").write_text("")
    installed = types.ModuleType("installed")
    installed.__file__ = str(venv / "lib" / "installed.py")
    monkeypatch.setitem(sys.modules, "installed", installed)
    monkeypatch.setattr(sys, "prefix", str(venv))
    found = local_modules.imported_modules(str(model), set(sys.modules) - {"installed"})
    assert found.names == []


# --- a failed import, explained -------------------------------------------------------


def test_a_missing_module_is_named_with_the_import_path_and_the_fix(tmp_path, clean_imports):
    (tmp_path / "m").mkdir()
    model = tmp_path / "m" / "model.py"
    model.write_text(TINY.format(imports="from nosuchmodule import Thing  # <-"))
    with pytest.raises(ProblemError) as info:
        load_problem(ProblemSpec(str(model)))
    exc = info.value
    assert exc.line == 3
    assert "ModuleNotFoundError while importing the file: No module named 'nosuchmodule'" in exc.message
    assert f"the model file's folder ({model.parent.resolve()})" in exc.message and "the interpreter's packages" in exc.message
    assert "`nosuchmodule.py` (or the package folder `nosuchmodule/`) beside the model file" in exc.hint
    assert "pip install" in exc.hint and "into LEGO's environment" in exc.hint
    assert FIX_THE_LINE not in str(exc) and "fix the code at that line" not in str(exc)


def test_inside_the_jail_the_message_says_what_the_sandbox_shows(tmp_path, clean_imports, monkeypatch):
    (tmp_path / "m").mkdir()
    model = tmp_path / "m" / "model.py"
    model.write_text(TINY.format(imports="import nosuchmodule"))
    view = local_modules.import_view(str(model), [str(tmp_path)])
    monkeypatch.setenv(local_modules.VIEW_ENV, json.dumps(view))
    with pytest.raises(ProblemError) as info:
        load_problem(ProblemSpec(str(model)))
    message = info.value.message
    assert "inside the sandbox the import path holds only the interpreter's packages" in message
    assert f"the model file's folder ({model.parent.resolve()}, read-only)" in message
    assert f"the PYTHONPATH folders {tmp_path.resolve()} (read-only)" in message

    hidden = dict(view, model_folder=None, model_folder_hidden="it is the home folder")
    monkeypatch.setenv(local_modules.VIEW_ENV, json.dumps(hidden))
    with pytest.raises(ProblemError) as info:
        load_problem(ProblemSpec(str(model)))
    assert "the model file's folder is not shown (it is the home folder), only the file" in info.value.message
    assert info.value.hint.startswith("move the model file and its modules into a folder of their own")


def test_a_missing_module_imported_by_a_sibling_says_where(tmp_path, clean_imports):
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "helpers.py").write_text("import os\nimport alsomissing\n")
    model = tmp_path / "m" / "model.py"
    model.write_text(TINY.format(imports="import helpers"))
    with pytest.raises(ProblemError) as info:
        load_problem(ProblemSpec(str(model)))
    assert "No module named 'alsomissing' (in helpers.py, line 2)" in info.value.message
    assert info.value.line == 3  # the model file's line that imported helpers


def test_a_missing_submodule_of_a_sibling_package_names_the_package(tmp_path, clean_imports):
    (tmp_path / "m" / "pkg").mkdir(parents=True)
    (tmp_path / "m" / "pkg" / "__init__.py").write_text("")
    model = tmp_path / "m" / "model.py"
    model.write_text(TINY.format(imports="import pkg.nothere"))
    with pytest.raises(ProblemError) as info:
        load_problem(ProblemSpec(str(model)))
    assert "No module named 'pkg.nothere': the package `pkg`" in info.value.message
    assert "has no module `nothere`" in info.value.message and info.value.hint == "check the module's name at that line."


def test_a_name_a_sibling_lacks_and_a_relative_import_get_their_own_fix(tmp_path, clean_imports):
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "helpers.py").write_text("X = 1\n")
    model = tmp_path / "m" / "model.py"
    model.write_text(TINY.format(imports="from helpers import Y"))
    with pytest.raises(ProblemError) as info:
        load_problem(ProblemSpec(str(model)))
    assert "cannot import name 'Y' from 'helpers'" in info.value.message
    assert info.value.hint.startswith("check the name imported at that line: `helpers` came from")

    model.write_text(TINY.format(imports="from .helpers import X"))
    with pytest.raises(ProblemError) as info:
        load_problem(ProblemSpec(str(model)))
    assert "not `from .mylayers import Block`" in info.value.hint


# --- what the jail shows ------------------------------------------------------------------


def test_the_model_folder_is_shown_unless_it_is_too_broad(tmp_path, monkeypatch):
    nested = tmp_path / "project" / "models"
    nested.mkdir(parents=True)
    assert local_modules.import_view(str(nested / "model.py"))["model_folder"] == str(nested.resolve())
    monkeypatch.setenv("HOME", str(nested))
    for path, why in [("/model.py", "root"), ("/tmp/model.py", "top-level"), ("/work/model.py", "top-level"),
                      (str(nested / "model.py"), "home folder"), ("/proc/self/model.py", "system folder")]:
        view = local_modules.import_view(path)
        assert view["model_folder"] is None and why in view["model_folder_hidden"], (path, view)
    off = local_modules.import_view(str(tmp_path / "project" / "model.py"), model_folder=False)
    assert off["model_folder"] is None and "not a folder of this run's own" in off["model_folder_hidden"]


def test_import_paths_are_shown_when_they_are_folders(tmp_path):
    lib, missing, file = tmp_path / "lib", tmp_path / "missing", tmp_path / "file.py"
    lib.mkdir()
    file.write_text("")
    view = local_modules.import_view(str(tmp_path / "m" / "model.py"), [str(lib), str(missing), str(file), "/", ""])
    assert view["import_paths"] == [str(lib.resolve())]
    assert dict(map(tuple, view["import_paths_hidden"])) == {
        str(missing): "it does not exist", str(file): "it is not a folder", "/": "it is the file system's root"}


def test_the_jail_mounts_the_model_folder_and_import_paths_read_only_but_not_the_parent(tmp_path):
    folder, lib, stage, scratch = tmp_path / "models", tmp_path / "lib", tmp_path / "stage", tmp_path / "scratch"
    for made in (folder, lib, stage, scratch):
        made.mkdir()
    (folder / "model.py").write_text("")
    made = jail.for_run(str(folder / "model.py"), str(stage), str(scratch), None, import_paths=(str(lib),))
    cmd = made.command(["/bin/true"])
    pairs = {(cmd[i], cmd[i + 1]) for i in range(len(cmd) - 1) if cmd[i] in ("--ro-bind", "--bind")}
    assert ("--ro-bind", str(folder.resolve())) in pairs and ("--ro-bind", str(lib.resolve())) in pairs
    assert {p for kind, p in pairs if kind == "--bind"} == {str(stage), str(scratch)}  # still the only writable folders
    assert str(tmp_path) not in {p for _, p in pairs} and str(tmp_path.resolve()) not in {p for _, p in pairs}
    assert made.env["PYTHONPATH"].split(os.pathsep)[1:] == [str(lib.resolve())]
    assert json.loads(made.env[local_modules.VIEW_ENV])["model_folder"] == str(folder.resolve())

    hidden = jail.for_run(str(folder / "model.py"), str(stage), str(scratch), None, model_folder=False)
    cmd = hidden.command(["/bin/true"])
    shown = {cmd[i + 1] for i in range(len(cmd) - 1) if cmd[i] == "--ro-bind"}
    assert str((folder / "model.py").resolve()) in shown and str(folder.resolve()) not in shown


# --- jailed runs, as a user runs them -----------------------------------------------------


def _cli(*args: str, env_extra: dict | None = None, timeout: float = 400) -> subprocess.CompletedProcess:
    env = dict(os.environ, TRITON_INTERPRET="1", COLUMNS="200", PYTHONWARNINGS="ignore", **(env_extra or {}))
    env.pop("LEGO_SANDBOX", None)  # the default: jailed where bubblewrap works
    return subprocess.run([sys.executable, "-m", "lego_core", *args], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=timeout)


RUN_ALONE = """\
import sys
import torch
sys.path.insert(0, "alone")
import optimized_model as om

torch.manual_seed(0)
model = om.Model(*om.get_init_inputs()).eval()
new = om.ModelNew(*om.get_init_inputs())
new.load_state_dict(model.state_dict())
with torch.no_grad():
    for seed in range(3):
        torch.manual_seed(seed)
        x = om.get_inputs()
        torch.testing.assert_close(new(*x), model(*x), rtol=1e-4, atol=1e-5)
print("SAME", sys.modules["mylayers"].__file__, sys.modules["blocks"].__file__)
"""


@pytest.mark.sandbox
@pytest.mark.slow
def test_a_two_file_model_optimizes_jailed_and_its_output_folder_works_alone(tmp_path):
    """The model imports a sibling module, a sibling package and a module of
    the caller's PYTHONPATH; the CLI run (jailed) passes, ships the first two
    in reference_modules/, and the output folder, copied elsewhere with the
    model's folder gone, builds and runs ModelNew as the original."""
    _need_jail()
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "extlib.py").write_text("OFFSET = 1.0\n")
    model = write_two_file_model(tmp_path / "models", extra="import extlib", offset=" + extlib.OFFSET")
    out = tmp_path / "out"
    proc = _cli("optimize", str(model), "--out", str(out), "--agents", "1", "--max-search-time", "30", "--no-cache",
                env_extra={"PYTHONPATH": str(lib)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "reference_modules/" in proc.stdout
    report = json.loads((out / "report.json").read_text())
    assert report["sandbox"]["jailed"] is True
    assert report["sandbox"]["model_folder"] == str(model.parent.resolve())
    assert report["sandbox"]["import_paths"] == [str(lib.resolve())]
    assert report["sandbox"]["reference_modules"] == ["blocks", "mylayers"]
    shipped = sorted(p.relative_to(out).as_posix() for p in (out / "reference_modules").rglob("*") if p.is_file())
    assert shipped == ["reference_modules/blocks/__init__.py", "reference_modules/blocks/inner.py", "reference_modules/mylayers.py"]

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.copytree(out, elsewhere / "alone")
    shutil.rmtree(tmp_path / "models")  # nothing of the model's folder is left to find
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=str(lib))  # extlib: the user's own environment provides it
    done = subprocess.run([sys.executable, "-c", RUN_ALONE], cwd=elsewhere, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    shipped_copy = (elsewhere / "alone" / "reference_modules").resolve()
    assert f"SAME {shipped_copy / 'mylayers.py'} {shipped_copy / 'blocks' / '__init__.py'}" in done.stdout


@pytest.mark.sandbox
def test_a_missing_module_in_the_jail_is_named_with_the_fix_not_fix_the_line(tmp_path):
    _need_jail()
    (tmp_path / "m").mkdir()
    model = tmp_path / "m" / "model.py"
    model.write_text(TINY.format(imports="from mylayers_missing import Block"))
    proc = _cli("optimize", str(model), "--out", str(tmp_path / "out"))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    text = " ".join(proc.stdout.split())
    assert "model.py:3: ModuleNotFoundError while importing the file: No module named 'mylayers_missing'" in text
    assert "inside the sandbox the import path holds only the interpreter's packages" in text
    assert f"the model file's folder ({model.parent.resolve()}, read-only)" in text
    assert "Fix: put `mylayers_missing.py` (or the package folder `mylayers_missing/`) beside the model file" in text
    assert "fix the code at that line" not in text


PEEK = """\
import json, os
from lego_core.load.spec import ProblemError

HERE = os.path.dirname(os.path.abspath(__file__))
SEEN = {}


def attempt(name, action):
    try:
        SEEN[name] = ["done", str(action())[:200]]
    except BaseException as exc:
        SEEN[name] = ["refused", f"{type(exc).__name__}: {exc}"[:200]]


def write_beside():
    with open(os.path.join(HERE, "planted.py"), "w") as fh:
        fh.write("x = 1")


attempt("own_data", lambda: open(os.path.join(HERE, "data.txt")).read())
attempt("parent_secret", lambda: open(os.path.join(HERE, "..", "secret.txt")).read())
attempt("sibling_folder", lambda: open(os.path.join(HERE, "..", "sibling", "other.txt")).read())
attempt("parent_listing", lambda: sorted(os.listdir(os.path.join(HERE, ".."))))
attempt("parent_module", lambda: __import__("parentmod"))
attempt("write_beside", write_beside)
raise ProblemError("PEEK " + json.dumps(SEEN))
"""


@pytest.mark.sandbox
def test_the_jail_shows_the_model_folder_read_only_but_not_its_parent_nor_sibling_folders(tmp_path):
    _need_jail()
    (tmp_path / "secret.txt").write_text("the parent's secret")
    (tmp_path / "parentmod.py").write_text("SECRET = 1\n")
    (tmp_path / "sibling").mkdir()
    (tmp_path / "sibling" / "other.txt").write_text("another project's file")
    folder = tmp_path / "models"
    folder.mkdir()
    (folder / "data.txt").write_text("the model's own data")
    (folder / "peek.py").write_text(PEEK)
    with pytest.raises(ProblemError) as info:
        optimize(ProblemSpec(str(folder / "peek.py")), tmp_path / "elsewhere" / "out", OptimizeConfig(cache=False))
    assert info.value.message.startswith("PEEK "), info.value
    seen = json.loads(info.value.message.removeprefix("PEEK "))
    assert seen["own_data"] == ["done", "the model's own data"]
    for name in ("parent_secret", "sibling_folder", "parent_module", "write_beside"):
        assert seen[name][0] == "refused", (name, seen[name])
    outcome, listing = seen["parent_listing"]
    assert outcome == "refused" or ("secret.txt" not in listing and "sibling" not in listing and "parentmod.py" not in listing), listing
    assert not (folder / "planted.py").exists()
