"""The final user check (issue 27): the composed model run as a user runs it, before the folder ships.

A hand-written output folder (``reference_model.py``, ``optimized_model.py``
loading ``kernels/scale.py``: one real Triton kernel, run by the
interpreter) passes; the same folder with the kernel file edited to behave
only while judged fails, each with its reason: a module-level output buffer
handed out every call, a kernel that writes into what it returned before, a
tensor subclass, a call counter that goes wrong after 40 calls, a kernel
honest only on shared-memory inputs (which the executor and the end-to-end
check's process hand it, and a user's does not), one that skips work unless
its input looks standard-normal.  The runner imports no ``lego_core``, sees
none of LEGO's environment variables and hands the model no shared tensor.
"""
from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import shutil
import textwrap
from pathlib import Path

import pytest
import torch

from lego_core.errors import OptimizeError
from lego_core.judge.end_to_end import user_check
from lego_core.judge.end_to_end.user_check import UserCheck, with_user_check
from lego_core.load.problem import ProblemSpec, load_problem

REFERENCE = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(32))

    def forward(self, x):
        return x * self.scale + 1.0


def get_inputs():
    return [torch.randn(8, 32)]


def get_init_inputs():
    return []
'''

OPTIMIZED = '''
import importlib.util
import os
import sys
from pathlib import Path

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

_HERE = Path(__file__).resolve().parent


def _load(name, relative_path):
    spec = importlib.util.spec_from_file_location(name, _HERE / relative_path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


reference_model = _load("user_check_test_reference", "reference_model.py")
Model = reference_model.Model
get_inputs = reference_model.get_inputs
get_init_inputs = reference_model.get_init_inputs
scale = _load("user_check_test_kernel_scale", "kernels/scale.py")


class ModelNew(Model):
    def forward(self, x):
        return scale.launch(x.contiguous(), self.scale)
'''

KERNEL_HEAD = '''
import torch
import triton
import triton.language as tl


@triton.jit
def scale_kernel(x_ptr, s_ptr, out_ptr, n_cols, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    s = tl.load(s_ptr + offs % n_cols, mask=mask)
    tl.store(out_ptr + offs, x * s + 1.0, mask=mask)


def _compute(x, s, out):
    n = x.numel()
    scale_kernel[(triton.cdiv(n, 256),)](x, s, out, x.shape[-1], n, BLOCK=256)
    return out
'''

HONEST = KERNEL_HEAD + '''

def launch(x, s):
    return _compute(x, s, torch.empty_like(x))
'''

# each: (kernel file, the per-call check that fails or None for a wrong value, words of the reason)
CHEATS = {
    "module_level_buffer": (KERNEL_HEAD + '''
_BUFFER = []


def launch(x, s):
    if not _BUFFER:
        _BUFFER.append(torch.empty_like(x))
    return _compute(x, s, _BUFFER[0])
''', "no_memory_shared_across_calls", ["output 0 of call 2", "memory of output 0 of call 1"]),
    "writes_into_earlier_output": (KERNEL_HEAD + '''
_LAST = []


def launch(x, s):
    out = _compute(x, s, torch.empty_like(x))
    if _LAST:
        _LAST[0].zero_()
    _LAST[:] = [out]
    return out
''', "earlier_outputs_unchanged", ["changed between calls 1 and 2", "new seed inputs"]),
    "tensor_subclass": (KERNEL_HEAD + '''
class Deferred(torch.Tensor):
    pass


def launch(x, s):
    return _compute(x, s, torch.empty_like(x)).as_subclass(Deferred)
''', "exact_tensor_type", ["call 1", "Deferred", "not a torch.Tensor"]),
    "wrong_after_40_calls": (KERNEL_HEAD + '''
import functools


@functools.lru_cache(maxsize=None)
def _calls():
    return [0]


def launch(x, s):
    count = _calls()
    count[0] += 1
    out = _compute(x, s, torch.empty_like(x))
    return out + 0.01 if count[0] > 40 else out
''', None, ["call 41", "differs from call 1", "does not match eager"]),
    "honest_only_on_shared_inputs": (KERNEL_HEAD + '''

def launch(x, s):
    out = _compute(x, s, torch.empty_like(x))
    return out if x.is_shared() else out * 1.01
''', None, ["call 1", "does not match eager"]),
    "skips_work_unless_standard_normal": (KERNEL_HEAD + '''

def launch(x, s):
    if abs(float(x.mean())) < 0.5 and 0.5 < float(x.std()) < 2.0:
        return _compute(x, s, torch.empty_like(x))
    return torch.ones_like(x)
''', None, ["call 42", "scaled x1e3", "does not match eager"]),
    "raises_off_the_verified_scale": (KERNEL_HEAD + '''

def launch(x, s):
    if float(x.abs().max()) > 100.0:
        raise ValueError("input out of the verified range")
    return _compute(x, s, torch.empty_like(x))
''', None, ["raised on call 42 (scaled x1e3 inputs)", "ValueError: input out of the verified range"]),
}


def make_folder(root: Path, kernel: str = HONEST, optimized: str = OPTIMIZED) -> Path:
    out = root / "out"
    shutil.rmtree(out, ignore_errors=True)
    (out / "kernels").mkdir(parents=True)
    (out / "reference_model.py").write_text(textwrap.dedent(REFERENCE).lstrip())
    (out / "optimized_model.py").write_text(textwrap.dedent(optimized).lstrip())
    (out / "kernels" / "scale.py").write_text(kernel.lstrip())
    return out


@pytest.fixture(scope="module")
def problem(tmp_path_factory):
    folder = make_folder(tmp_path_factory.mktemp("reference"))
    return load_problem(ProblemSpec(str(folder / "reference_model.py"), {}))


def test_an_honest_folder_passes_every_call_set_and_check(problem, tmp_path):
    out = make_folder(tmp_path)
    entry = UserCheck(problem, seed=99, avoid=(11, 12, 13)).check(out)
    assert entry["passed"], entry["reason"]
    assert entry["calls"] == {"scheduled": user_check.FIRST_SET_CALLS + 4 * user_check.OTHER_SET_CALLS,
                              "made": user_check.FIRST_SET_CALLS + 4 * user_check.OTHER_SET_CALLS}
    assert entry["calls"]["made"] >= 41
    assert [s["name"] for s in entry["sets"]] == user_check.SET_NAMES
    assert all(s["passed"] and s["judged_calls"] for s in entry["sets"]), entry["sets"]
    assert entry["sets"][0]["calls"] == user_check.FIRST_SET_CALLS and entry["sets"][0]["judged_calls"] == [1]
    assert set(entry["checks"].values()) == {"passed"}, entry["checks"]
    assert entry["lego_modules"] == []
    assert entry["runner"]["command"].endswith("-I -B user_runner.py FOLDER")
    assert entry["runner"]["pid"] != os.getpid() and 0 < entry["runner"]["wall_s"] <= entry["wall_s"]
    assert not list(out.rglob("__pycache__"))


@pytest.mark.parametrize("name", sorted(CHEATS))
def test_a_kernel_that_behaves_only_while_judged_fails_with_the_reason(problem, tmp_path, name):
    kernel, check, words = CHEATS[name]
    out = make_folder(tmp_path, kernel)
    verdict = with_user_check({"passed": True, "reason": "within the rule"}, out, UserCheck(problem, seed=99, avoid=(11, 12, 13)))
    entry = verdict["user_check"]
    assert not entry["passed"], entry
    assert not verdict["passed"] and verdict["reason"] == f"the final user check failed: {entry['reason']}"
    for word in words:
        assert word in entry["reason"], (word, entry["reason"])
    if check is not None:
        assert entry["checks"][check] == "failed", entry["checks"]


PROBE = KERNEL_HEAD + '''
import os
import sys

_JUDGE = sorted(n for n in sys.modules if n.split(".")[0] == "lego_core")
_ENV = sorted(n for n in os.environ if n.startswith("LEGO_"))


def launch(x, s):
    loaded = sorted(n for n in sys.modules if n.split(".")[0] == "lego_core")
    if _JUDGE or loaded or _ENV or x.is_shared() or s.is_shared():
        raise RuntimeError(f"the judge shows: modules {_JUDGE + loaded}, environment {_ENV}, shared {x.is_shared()}")
    try:
        import lego_core  # noqa: F401
    except ImportError:
        return _compute(x, s, torch.empty_like(x))
    raise RuntimeError("lego_core is importable")
'''


def test_the_runner_loads_no_lego_module_no_lego_variable_and_no_shared_tensor(problem, tmp_path, monkeypatch):
    monkeypatch.setenv("LEGO_PROBE_SETTING", "1")
    out = make_folder(tmp_path, PROBE)
    entry = UserCheck(problem, seed=99).check(out)
    assert entry["passed"], entry["reason"]
    assert entry["lego_modules"] == []
    assert "LEGO_PROBE_SETTING" not in user_check.runner_environment()
    assert "LEGO_PROBE_SETTING" in os.environ


def test_an_output_folder_that_needs_lego_fails_naming_it(problem, tmp_path):
    out = make_folder(tmp_path, HONEST.replace("import torch\n", "import torch\nimport lego_core\n", 1))
    entry = UserCheck(problem, seed=99).check(out)
    assert not entry["passed"] and "No module named 'lego_core'" in entry["reason"], entry["reason"]
    assert entry["reason"].startswith("importing optimized_model.py as a user does raised ModuleNotFoundError")


def test_a_runner_past_its_time_limit_fails_and_is_stopped(problem, tmp_path, monkeypatch):
    monkeypatch.setattr(user_check, "TIMEOUT_S", 3.0)
    out = make_folder(tmp_path, HONEST.replace("def launch(x, s):\n", "def launch(x, s):\n    import time; time.sleep(60)\n"))
    entry = UserCheck(problem, seed=99).check(out)
    assert not entry["passed"] and "within 3 s" in entry["reason"], entry["reason"]
    assert entry["wall_s"] < 30


def test_a_runner_that_writes_into_the_output_folder_fails_the_run(problem, tmp_path):
    out = make_folder(tmp_path, HONEST + '\n\nfrom pathlib import Path\n(Path(__file__).parent / "planted.py").write_text("")\n')
    with pytest.raises(OptimizeError, match="changed files of the output folder: kernels/planted.py"):
        UserCheck(problem, seed=99).check(out)


def test_a_library_plan_makes_one_call_per_set(problem, tmp_path):
    out = make_folder(tmp_path, optimized=OPTIMIZED.replace('scale = _load("user_check_test_kernel_scale", "kernels/scale.py")', "")
                      .replace("return scale.launch(x.contiguous(), self.scale)", "return x * self.scale + 1.0"))
    shutil.rmtree(out / "kernels")
    entry = UserCheck(problem, seed=99).check(out)
    assert entry["passed"], entry["reason"]
    assert entry["calls"]["made"] == 5 and "no Triton kernel" in entry["schedule"]


def test_input_sets_change_float_inputs_only_and_eager_refusals_are_skipped(tmp_path):
    x, ids = torch.randn(4, 6), torch.randint(0, 5, (4,))
    names = user_check.set_names(torch.float32)
    made = [user_check.make_set([x, ids], t) for t in user_check.transforms(torch.float32)]
    assert all(torch.equal(m[1], ids) for m in made)
    assert torch.equal(made[0][0], x) and torch.allclose(made[1][0], x * 1e3) and torch.allclose(made[2][0], x * 1e-3)
    assert torch.allclose(made[3][0], x + 3.0) and names[1] == "scaled x1e3"
    rows = made[4][0]
    assert all(len(set(r.tolist())) == 1 for r in rows) and len({r[0].item() for r in rows}) > 1
    assert user_check.set_names(torch.float16)[1] == "scaled x1e2"
    assert user_check.set_seeds(10, (11, 13), 3) == [12, 14, 15]

    model = tmp_path / "domain.py"
    model.write_text(textwrap.dedent('''
        import torch
        import torch.nn as nn


        class Model(nn.Module):
            def forward(self, p):
                if (p > 1).any():
                    raise ValueError("p must be a probability")
                return p * 2.0


        def get_inputs():
            return [torch.rand(4, 8)]


        def get_init_inputs():
            return []
    '''))
    sets = UserCheck(load_problem(ProblemSpec(str(model), {})), seed=3).input_sets()
    skipped = {s.name: s.skipped for s in sets if s.skipped}
    assert set(skipped) == {"scaled x1e3", "shifted mean (+3)", "constant rows"} and "p must be a probability" in skipped["scaled x1e3"]


STATEFUL_REFERENCE = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(32))
        self.register_buffer("hidden", torch.zeros(8, 32))

    def forward(self, x):
        self.hidden.copy_(torch.tanh(x * self.scale + self.hidden))
        return self.hidden * 2.0


def get_inputs():
    return [torch.randn(8, 32)]


def get_init_inputs():
    return []
'''

STATEFUL_FORWARD = '''        h = torch.tanh(scale.launch(x.contiguous(), self.scale) - 1.0 + self.hidden)
        self.hidden.copy_(h)
        return h * 2.0'''
STATEFUL_OPTIMIZED = OPTIMIZED.replace("        return scale.launch(x.contiguous(), self.scale)", STATEFUL_FORWARD)


def test_a_stateful_forward_is_judged_from_its_initial_state_on_every_set(tmp_path):
    """Outputs of a stateful forward change from call to call on the same
    inputs: each set's first call (a freshly built model) is judged, with the
    state after it; forgetting to write the state back fails."""
    out = make_folder(tmp_path, HONEST, STATEFUL_OPTIMIZED)
    (out / "reference_model.py").write_text(textwrap.dedent(STATEFUL_REFERENCE).lstrip())
    problem = load_problem(ProblemSpec(str(out / "reference_model.py"), {}))
    problem.state_targets = ["hidden"]
    entry = UserCheck(problem, seed=99).check(out)
    assert entry["passed"], entry["reason"]
    assert all(s["judged_calls"] == [s_first] for s, s_first in zip(entry["sets"], [1, 42, 43, 44, 45])), entry["sets"]

    forgetful = STATEFUL_OPTIMIZED.replace("        self.hidden.copy_(h)\n", "")
    (out / "optimized_model.py").write_text(textwrap.dedent(forgetful).lstrip())
    entry = UserCheck(problem, seed=99).check(out)
    assert not entry["passed"] and "state self.hidden" in entry["reason"], entry["reason"]
