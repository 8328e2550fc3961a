"""ModelNew is called as Model is called, and follows what it baked in.

Found by a fresh tester (issue 10, section 2's kind, "the artifact silently
computes something other than eager"):

* ``ModelNew(...)(x=x)`` raised ``TypeError: unexpected keyword argument``
  where ``Model`` takes the keyword; defaults left out failed the same way;
* a plain attribute set after construction (``new.temperature = 2.0``,
  ``new.norm.eps = 0.1``) was silently ignored: torch.export baked the old
  value into the plan (errors of 0.45);
* importing a CPU-made ``optimized_model.py`` switched the whole process to
  Triton's interpreter, even on a machine with a GPU.
"""
import warnings

import pytest
import torch

from faithful_support import fresh_pair, load_optimized, optimize_api, write_model

pytestmark = pytest.mark.faithful

SCALED = """
import torch
import torch.nn as nn

batch, width = 4, 32


class Model(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.proj = nn.Linear(width, width)
        self.norm = nn.LayerNorm(width)
        self.temperature = 1.0
        self.use_gelu = True

    def forward(self, x, bias=None, scale=1.5):
        y = self.norm(self.proj(x)) / self.temperature * scale
        if bias is not None:
            y = y + bias
        return torch.nn.functional.gelu(y) if self.use_gelu else torch.relu(y)


def get_inputs():
    return [torch.randn(batch, width), torch.randn(batch, width)]


def get_init_inputs():
    return [width]
"""


@pytest.fixture(scope="module")
def scaled(tmp_path_factory):
    folder = tmp_path_factory.mktemp("calls")
    out = folder / "out"
    optimize_api(write_model(folder, "scaled", SCALED), out)
    return load_optimized(out)


def _inputs(seed=3):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(4, 32, generator=g), torch.randn(4, 32, generator=g)


def test_keyword_inputs_and_defaults_match_eager(scaled):
    model, new = fresh_pair(scaled)
    x, b = _inputs()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error")  # the plan runs: no fallback warning
        for args, kwargs in (((x, b), {}), ((x,), {"bias": b}), ((), {"x": x, "bias": b}), ((x, b), {"scale": 1.5})):
            torch.testing.assert_close(new(*args, **kwargs), model(*args, **kwargs), rtol=1e-4, atol=1e-5)


def test_a_call_that_does_not_fit_the_signature_fails_as_eager_does(scaled):
    model, new = fresh_pair(scaled)
    x, b = _inputs()
    with pytest.raises(TypeError):
        model(x, b, wrong=1)
    with pytest.raises(TypeError):
        new(x, b, wrong=1)


def test_a_baked_value_given_otherwise_is_refused_with_a_message(scaled):
    """``scale`` was 1.5 when optimized (a non-tensor argument torch.export baked in)."""
    _, new = fresh_pair(scaled)
    x, b = _inputs()
    with torch.no_grad(), pytest.raises(ValueError, match="baked into its kernels"):
        new(x, b, scale=2.0)


@pytest.mark.parametrize("path, name, value", [("", "temperature", 2.0), ("norm", "eps", 0.5), ("", "use_gelu", False)])
def test_an_attribute_changed_after_construction_is_followed(scaled, path, name, value):
    model, new = fresh_pair(scaled)
    for m in (model, new):
        setattr(m.get_submodule(path) if path else m, name, value)
    x, b = _inputs()
    with torch.no_grad(), pytest.warns(UserWarning, match=f"{(path + '.') if path else ''}{name} changed after the model was optimized"):
        got = new(x, b)
    torch.testing.assert_close(got, model(x, b), rtol=1e-4, atol=1e-5)


def test_setting_an_attribute_back_runs_the_plan_again(scaled):
    model, new = fresh_pair(scaled)
    x, b = _inputs()
    new.temperature = 3.0
    with torch.no_grad(), pytest.warns(UserWarning):
        new(x, b)
    new.temperature = 1.0
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error")
        torch.testing.assert_close(new(x, b), model(x, b), rtol=1e-4, atol=1e-5)


def test_a_cpu_made_file_switches_to_the_interpreter_only_without_a_gpu(scaled):
    source = (scaled.__file__ and open(scaled.__file__).read())
    assert 'if not torch.cuda.is_available():' in source
    assert '    os.environ.setdefault("TRITON_INTERPRET", "1")' in source
    assert "\nos.environ.setdefault" not in source
