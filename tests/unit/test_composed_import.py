"""The composed model's import: the user's model file is theirs, LEGO's generated files are judged.

Issue 24: the guard that refuses a kernel file whose import writes files,
starts processes, loads libraries or changes torch state was applied to the
whole ``optimized_model.py``, whose import also imports the user's model
file and what *it* imports (``transformers`` makes temporary folders,
``torchvision`` loads its extension, a model file may set torch flags): every
such model failed at the very end.  Now the judge imports the model file
first, unjudged (``lego_core.judge.end_to_end.shipped``), and judges only what LEGO's files add.

One real run (the command line, as a user runs it, jailed where bubblewrap
works) of a model file that, at import, creates a temporary folder, loads a
shared library with ctypes and sets two torch flags; then, in fresh
processes, its output folder imported as a user imports it, and the same
folder with one hostile line added to a kernel file per refused kind.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# import time: a temporary folder (as transformers makes), a shared library
# loaded (as torchvision loads its extension), torch flags the user wants
MODEL = textwrap.dedent('''
    import ctypes
    import ctypes.util
    import tempfile

    import torch
    from torch import nn

    CACHE = tempfile.mkdtemp(prefix="user-lib-cache-")
    LIBM = ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6")
    torch.backends.cudnn.benchmark = True
    torch.set_float32_matmul_precision("high")

    batch_size = 8
    dim = 32


    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.up = nn.Linear(dim, 2 * dim)
            self.norm = nn.LayerNorm(2 * dim)

        def __repr__(self):  # a method that reads __name__, as every Hugging Face model's does
            return f"{type(self).__name__} from {__name__}"

        def forward(self, x):
            return self.norm(torch.nn.functional.gelu(self.up(x)) * 2.0 + 1.0)


    def get_inputs():
        return [torch.randn(batch_size, dim)]


    def get_init_inputs():
        return []
''')

# one line added to a kernel file per kind the import guard refuses
HOSTILE = {
    "writes": ("open(__file__ + '.log', 'w').write('x')", "importing it wrote files"),
    "process": ("__import__('subprocess').run(['true'])", "importing it started a process or loaded a library"),
    "library": ("__import__('ctypes').CDLL(None)", "importing it started a process or loaded a library"),
    "patches torch": ("import torch\ntorch.softmax = lambda *a, **k: None", "importing it replaced torch.softmax"),
    "torch flag": ("import torch\ntorch.backends.cudnn.deterministic = True", "importing it changed global torch state"),
    # PyTorch's C++ file writer: no open() for the audit hook to see (found by a fresh-user trial)
    "torch.save": ("import torch\ntorch.save(torch.zeros(1), __file__ + '.pt')", "importing it wrote files (torch.save"),
}


def env() -> dict:
    return dict(os.environ, TRITON_INTERPRET="1", COLUMNS="200", PYTHONWARNINGS="ignore")


def python(code: str, cwd: Path, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env(), capture_output=True, text=True, timeout=timeout)


def optimize_cli(model: Path, out: Path, search_s: str) -> subprocess.CompletedProcess:
    """``python -m lego_core optimize`` of ``model`` on the CPU into ``out``, as a user runs it."""
    return subprocess.run(
        [sys.executable, "-m", "lego_core", "optimize", str(model), "--device", "cpu", "--out", str(out),
         "--max-search-time", search_s, "--no-cache"],
        cwd=REPO, env=env(), capture_output=True, text=True, timeout=600,
    )


@pytest.fixture(scope="module")
def delivered(tmp_path_factory):
    """The output folder of one CLI run of MODEL at its file sizes."""
    root = tmp_path_factory.mktemp("composed")
    (root / "flagged.py").write_text(MODEL)
    proc = optimize_cli(root / "flagged.py", root / "out", "10")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return root / "out"


def test_a_model_file_that_writes_loads_a_library_and_sets_torch_flags_at_import_is_delivered(delivered):
    report = json.loads((delivered / "report.json").read_text())
    assert report["end_to_end"]["passed"]
    assert report["summary"]["triton"] >= 1
    # the plan is what the judge ran, not the original forward (__name__ is read by a method: never baked)
    assert report["end_to_end"]["forward"] == {"requested": "plan", "ran": "plan", "why": None}
    settings = report["model_file_torch_settings"]
    assert settings["torch.backends.cudnn.benchmark"] is True
    assert settings["torch.get_float32_matmul_precision()"] == "high"
    assert "__name__" not in (delivered / "optimized_model.py").read_text().split("BAKED_GLOBALS = ")[1].split("\n")[0]


def test_modelnew_runs_its_plan_with_the_users_flags_when_imported_as_a_user_does(delivered, tmp_path):
    """A copy of the folder alone, imported from its own folder: the plan runs (no LEGO warning), its
    Triton kernels launch, the file's flags are in force, and three calls on fresh inputs match Model."""
    folder = tmp_path / "shipped"
    shutil.copytree(delivered, folder)
    proc = python(textwrap.dedent('''
        import warnings
        warnings.simplefilter("error")  # any LEGO fallback warning fails
        import torch
        import triton.runtime.interpreter as interpreter
        launches = []
        original = interpreter.GridExecutor.__call__
        interpreter.GridExecutor.__call__ = lambda self, *a, **k: (launches.append(self.fn.__name__), original(self, *a, **k))[1]
        from optimized_model import Model, ModelNew, get_init_inputs, get_inputs
        assert torch.get_float32_matmul_precision() == "high" and torch.backends.cudnn.benchmark
        torch.manual_seed(0)
        model = Model(*get_init_inputs()).eval()
        new = ModelNew(*get_init_inputs())
        new.load_state_dict(model.state_dict())
        for call in range(3):
            x, = get_inputs()
            with torch.no_grad():
                assert torch.allclose(new(x), model(x), atol=1e-5, rtol=1e-5), call
            assert new.lego_last_forward == "plan" and new.lego_fallback is None
        assert launches, "no Triton kernel ran"
        print("ok", len(launches))
    '''), folder)
    assert proc.returncode == 0 and proc.stdout.startswith("ok"), proc.stdout + proc.stderr


def _judged_import(folder: Path) -> subprocess.CompletedProcess:
    """``lego_core.judge.end_to_end.shipped.import_optimized_model`` of ``folder`` in a fresh process: prints ok or the ImportError."""
    return python(textwrap.dedent(f'''
        from lego_core.judge.end_to_end.shipped import import_optimized_model
        try:
            import_optimized_model({str(folder)!r})
        except ImportError as exc:
            print("refused:", exc)
        else:
            print("ok")
    '''), REPO)


def test_the_judge_imports_the_untouched_folder(delivered, tmp_path):
    folder = tmp_path / "honest"
    shutil.copytree(delivered, folder)
    proc = _judged_import(folder)
    assert proc.stdout.strip() == "ok", proc.stdout + proc.stderr


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_a_kernel_file_that_misbehaves_at_import_is_still_refused(delivered, tmp_path, kind):
    """The same folder with one line added to a kernel file: refused by kind, although the model file
    itself writes, loads a library and sets flags at import."""
    folder = tmp_path / "hostile"
    shutil.copytree(delivered, folder)
    kernel = sorted((folder / "kernels").glob("*.py"))[0]
    line, message = HOSTILE[kind]
    kernel.write_text(kernel.read_text() + "\n" + line + "\n")
    proc = _judged_import(folder)
    assert proc.stdout.startswith("refused:") and message in proc.stdout, proc.stdout + proc.stderr
    assert kernel.name in proc.stdout  # the file at fault is named


FALLS_BACK = textwrap.dedent('''
    import torch
    from torch import nn

    batch_size = 4
    dim = 16


    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.kind = type(self).__name__  # ModelNew is another class: this attribute differs in it
            self.proj = nn.Linear(dim, dim)

        def forward(self, x):
            return torch.relu(self.proj(x)) * 3.0


    def get_inputs():
        return [torch.randn(batch_size, dim)]


    def get_init_inputs():
        return []
''')


def test_a_run_whose_modelnew_falls_back_to_the_original_forward_says_so_instead_of_a_speedup(tmp_path):
    """The judge runs ModelNew as a user does; here every call falls back (a baked attribute differs in
    ModelNew), so the plan never runs: the run says why and claims nothing."""
    (tmp_path / "model.py").write_text(FALLS_BACK)
    out = tmp_path / "out"
    proc = optimize_cli(tmp_path / "model.py", out, "5")
    text = " ".join((proc.stdout + proc.stderr).split())
    assert proc.returncode != 0, text
    assert "ModelNew ran the original forward instead of LEGO's plan" in text and "kind" in text, text
    assert "speedup" not in text.lower().replace("no speedup is reported", "")
    assert not (out / "optimized_model.py").exists()


def test_a_data_file_read_beside_the_model_file_is_named_with_the_fix(tmp_path):
    """The model file opens cfg.json from its own folder (os.path.dirname(__file__)); the optimized model runs
    a copy of the file from the output folder, where only Python modules are copied.  Before: LEGO's staging
    path in a bare FileNotFoundError."""
    from lego_core.judge.process.fresh import _file_beside_the_model
    from lego_core.judge.process.wire import raised

    out = tmp_path / ".out.lego-1a2b3c4d"
    out.mkdir()
    exc = raised("FileNotFoundError", f"[Errno 2] No such file or directory: '{out / 'cfg.json'}'", "")
    assert _file_beside_the_model(exc, out) == "cfg.json"
    elsewhere = raised("FileNotFoundError", "[Errno 2] No such file or directory: '/data/weights.bin'", "")
    assert _file_beside_the_model(elsewhere, out) is None
    assert _file_beside_the_model(raised("ValueError", "x", ""), out) is None
