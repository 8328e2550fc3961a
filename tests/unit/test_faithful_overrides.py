"""Overrides reach what is built from them (issue 10, section 2, first fault).

``--set batch_size=2`` on a file with ``input_shape = (batch_size, 16)``
used to exit 0 with an artifact specialised to [4, 16]: the override was set
on the module after its import, so module-level values derived from it kept
the old value.  Now the file runs with the override in force from the
constant's own assignment on (``lego_core.load.overrides``), in ``load_problem``
and in the shipped ``optimized_model.py`` alike.

Each test here failed before that change (checked by running it against the
stashed tree): the derived values kept the file's numbers, or the shipped
model refused the overridden batch.
"""
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from lego_core.api import optimize
from lego_core.config import OptimizeConfig
from lego_core.load.problem import ProblemError, ProblemSpec, load_problem

pytestmark = pytest.mark.faithful

HEAD = """\
import torch
import torch.nn as nn
"""

# the case: a tuple built from the constant, used by get_inputs
DERIVED_SHAPE = HEAD + """
batch_size = 4
input_shape = (batch_size, 16)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(16, 16)

    def forward(self, x):
        return torch.relu(self.lin(x)) + 1.0


def get_inputs():
    return [torch.randn(*input_shape)]


def get_init_inputs():
    return []
"""

# a derived int, a derived list, a default argument, a class attribute and an
# f-string name, all built from d_model / batch_size
DERIVED_MANY = HEAD + """
batch_size = 3
d_model = 8
hidden = 4 * d_model
sizes = [batch_size, d_model]
tag = f"ffn_{d_model}x{hidden}"


class Model(nn.Module):
    width = d_model  # class attribute

    def __init__(self, d_in, d_hidden):
        super().__init__()
        self.up = nn.Linear(d_in, d_hidden)
        self.down = nn.Linear(d_hidden, self.width)
        self.register_buffer(tag, torch.ones(1))

    def forward(self, x):
        return self.down(torch.relu(self.up(x)))


def get_inputs(shape=tuple(sizes)):
    return [torch.randn(*shape)]


def get_init_inputs(d_in=d_model):  # default argument
    return [d_in, hidden]
"""


def write(tmp_path: Path, name: str, source: str) -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(source))
    return str(path)


def test_derived_input_shape_follows_the_override(tmp_path):
    """Before: make_inputs gave [4, 16] with batch_size=2."""
    problem = load_problem(ProblemSpec(write(tmp_path, "derived.py", DERIVED_SHAPE), {"batch_size": 2}))
    assert problem.module.input_shape == (2, 16)
    assert [tuple(x.shape) for x in problem.make_inputs(0)] == [(2, 16)]


def test_derived_int_list_default_argument_class_attribute_and_fstring_follow(tmp_path):
    """Before: hidden stayed 32, sizes [3, 8], the default d_in 8, Model.width 8 and the buffer ffn_8x32."""
    problem = load_problem(ProblemSpec(write(tmp_path, "many.py", DERIVED_MANY), {"d_model": 6, "batch_size": 2}))
    module, model = problem.module, problem.model
    assert module.hidden == 24 and module.sizes == [2, 6] and module.tag == "ffn_6x24"
    assert problem.constants["hidden"] == 24  # the constants the report lists are the ones in force
    assert model.up.weight.shape == (24, 6)  # get_init_inputs' default d_in and hidden
    assert model.down.weight.shape == (6, 24)  # the class attribute width
    assert "ffn_6x24" in dict(model.named_buffers())
    assert [tuple(x.shape) for x in problem.make_inputs(0)] == [(2, 6)]  # get_inputs' default shape


REBOUND = HEAD + """
n = 4
size = n * 2
n += 1


class Model(nn.Module):
    def forward(self, x):
        return x * 2


def get_inputs():
    return [torch.randn(size, n)]


def get_init_inputs():
    return []
"""


def test_rebinding_after_the_assignment_is_overridden_too(tmp_path):
    """``n = 4; size = n * 2; n += 1`` with n=2: size follows (4) and n stays the override after the
    augmented assignment (before: size 8)."""
    problem = load_problem(ProblemSpec(write(tmp_path, "rebind.py", REBOUND), {"n": 2}))
    assert problem.module.n == 2 and problem.module.size == 4
    assert tuple(problem.make_inputs(0)[0].shape) == (4, 2)


def test_a_constant_set_behind_an_assignment_is_refused_naming_it(tmp_path):
    """A constant the file sets through ``globals()`` cannot be replaced where it is set: refused, not
    silently half-applied (before: set after import, the derived ``input_shape`` kept batch 4)."""
    source = DERIVED_SHAPE.replace("batch_size = 4\n", "batch_size = 4\nglobals()['batch_size'] = 4\n")
    with pytest.raises(ProblemError) as info:
        load_problem(ProblemSpec(write(tmp_path, "globals.py", source), {"batch_size": 2}))
    assert "batch_size" in info.value.message and "rebinds it" in info.value.message
    assert "plain module-level assignment" in info.value.hint


def test_shipped_model_takes_the_overridden_batch(tmp_path):
    """The issue's reproduction end to end: optimize with batch_size=2; the shipped ModelNew, imported in a
    fresh interpreter, accepts a [2, 16] input and matches eager (before: specialised to [4, 16], refusing
    batch 2)."""
    out = tmp_path / "out"
    path = write(tmp_path, "derived.py", DERIVED_SHAPE)
    report = optimize(ProblemSpec(path, {"batch_size": 2}), out, OptimizeConfig(cache=False), isolate=False)
    assert report["end_to_end"]["passed"]
    script = textwrap.dedent(
        """
        import sys, torch
        sys.path.insert(0, sys.argv[1])
        import optimized_model as m
        assert m.reference_model.input_shape == (2, 16), m.reference_model.input_shape
        torch.manual_seed(0)
        ref = m.Model(*m.get_init_inputs()).eval()
        new = m.ModelNew(*m.get_init_inputs())
        new.load_state_dict(ref.state_dict())
        (x,) = m.get_inputs()
        assert tuple(x.shape) == (2, 16), x.shape
        with torch.no_grad():
            torch.testing.assert_close(new(x), ref(x))
        print("ok")
        """
    )
    env = {"TRITON_INTERPRET": "1", "PATH": "/usr/bin:/bin"}
    proc = subprocess.run([sys.executable, "-c", script, str(out)], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0 and "ok" in proc.stdout, proc.stdout + proc.stderr
    for name in ("optimized_model.py", "lego_overrides.py"):  # plain torch: the subprocess has no lego_core either
        text = (out / name).read_text()
        assert "import lego_core" not in text and "from lego_core" not in text
