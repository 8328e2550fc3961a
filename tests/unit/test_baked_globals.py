"""A plan bakes in the model file's globals and class attributes its forward
reads; ModelNew notices when one changes after optimizing and runs the
original forward with a warning naming it (``lego_core.compose.baked_globals``,
``lego_runtime.BoundTensors.globals_fit``), as it does for a module's plain
attributes.  Before, each edit below left ModelNew silently computing with
the old value (a fresh-user trial: ``CFG["alpha"] = 5`` gave a difference
of 4.7 from eager, no warning).
"""
import warnings

import pytest
import torch

from faithful_support import fresh_pair, load_optimized, optimize_api, write_model
from lego_core.compose.baked_globals import baked_globals, global_tensors, read_names
from lego_core.load.problem import ProblemSpec, load_problem

pytestmark = pytest.mark.slow

SOURCE = '''
import dataclasses

import torch
import torch.nn as nn


@dataclasses.dataclass
class Settings:
    eps: float = 1e-5
    act: str = "gelu"


SETTINGS = Settings()
batch_size = 2
width = 8
ALPHA = 0.5
CFG = {"shift": 0.25, "act": "relu"}
SCALE = torch.linspace(0.5, 1.5, width)
UNUSED = 3.0


def shifted(y):
    y = torch.relu(y) if CFG["act"] == "relu" else y
    return y + CFG["shift"]


class Model(nn.Module):
    factor = 2.0
    offsets = torch.full((width,), 0.125)

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(width, width)

    def forward(self, x):
        y = shifted(self.fc(x) * ALPHA * SCALE) * self.factor + Model.offsets
        y = torch.nn.functional.gelu(y) if SETTINGS.act == "gelu" else torch.relu(y)
        return y / (y.pow(2).mean(-1, keepdim=True) + SETTINGS.eps).sqrt()


def get_inputs():
    return [torch.randn(batch_size, width)]


def get_init_inputs():
    return []
'''

EDITS = {
    "ALPHA": (lambda ref: setattr(ref, "ALPHA", 5.0), "the global ALPHA of the model file"),
    "CFG item": (lambda ref: ref.CFG.__setitem__("shift", 3.0), "the global CFG of the model file"),
    "CFG branch": (lambda ref: ref.CFG.__setitem__("act", "none"), "the global CFG of the model file"),
    "SCALE in place": (lambda ref: ref.SCALE.mul_(3.0), "the global SCALE of the model file"),
    "SCALE rebound": (lambda ref: setattr(ref, "SCALE", torch.ones(8)), "the global SCALE of the model file"),
    "dataclass field": (lambda ref: setattr(ref.SETTINGS, "eps", 10.0), "the field SETTINGS.eps of a global"),
    "dataclass branch": (lambda ref: setattr(ref.SETTINGS, "act", "relu"), "the field SETTINGS.act of a global"),
    "class value": (lambda ref: setattr(ref.Model, "factor", 7.0), "the class attribute Model.factor"),
    "class tensor": (lambda ref: ref.Model.offsets.add_(1.0), "the class attribute Model.offsets"),
}


@pytest.fixture(scope="module")
def out(tmp_path_factory):
    folder = tmp_path_factory.mktemp("globals")
    report = optimize_api(write_model(folder, "globals_model", SOURCE), folder / "out", mutation=False)
    assert report["end_to_end"]["passed"], report["end_to_end"]
    return folder / "out"


def test_only_what_forward_can_read_is_listed(tmp_path):
    problem = load_problem(ProblemSpec(str(write_model(tmp_path, "globals_model", SOURCE)), {}))
    names = read_names(problem.model, problem.module)
    assert {"ALPHA", "CFG", "SCALE", "shifted"} <= names and not {"UNUSED", "batch_size"} & names
    baked = baked_globals(problem.model, problem.module)
    assert ("global", "", "ALPHA", 0.5) in baked and ("global", "", "CFG", {"shift": 0.25, "act": "relu"}) in baked
    assert ("object", "SETTINGS", "eps", 1e-5) in baked and ("object", "SETTINGS", "act", "gelu") in baked
    assert ("class", "Model", "factor", 2.0) in baked and not any(n in ("UNUSED", "batch_size", "width") for _w, _c, n, _v in baked)
    assert set(global_tensors(problem.model, problem.module)) == {("global", "", "SCALE"), ("class", "Model", "offsets")}


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_a_baked_global_changed_after_optimizing_runs_the_original_forward_naming_it(out, edit):
    change, named = EDITS[edit]
    module = load_optimized(out)  # a fresh import: its own reference module, globals as in the file
    model, new = fresh_pair(module)
    torch.manual_seed(1)
    x = torch.randn(2, 8)
    with torch.no_grad(), warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        torch.testing.assert_close(new(x), model(x), atol=1e-5, rtol=1e-5)  # the plan, unchanged globals
        assert not [w for w in seen if "LEGO" in str(w.message)]
        change(module.reference_model)
        after = new(x)
    torch.testing.assert_close(after, model(x), atol=1e-5, rtol=1e-5)  # eager's new values, not the baked ones
    said = [str(w.message) for w in seen if "LEGO" in str(w.message)]
    assert said and named in said[0] and "running the original forward" in said[0], said
