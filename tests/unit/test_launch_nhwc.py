"""The ``original+nhwc`` launch variants: the user's own forward in
channels-last memory order (lego_core.judge.end_to_end.launch, ``channels_last_forward`` and
``ChannelsLastWeights`` in templates/lego_runtime.py).

One real optimize of a small convolution network (CPU, library plan: this
file is about the shipped runtime, not the kernels); the channels-last
forward runs on the CPU too (oneDNN's NHWC convolutions), so everything but
the CUDA-graph replay is checked here; that runs only on a GPU (``gpu``).
"""
from __future__ import annotations

import uuid
import warnings

import pytest
import torch

from lego_core import ProblemSpec, optimize
from lego_core.compose.folder import set_launch
from lego_core.config import OptimizeConfig
from lego_core.judge.end_to_end.launch import MIN_GAIN, _pick, nhwc_applies, parse_variant, variant_name
from lego_core.judge.inputs import load_module

CONV_NET = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    """conv-BN-ReLU, a depthwise conv, a 1x1 conv with a residual, pooled to a vector."""

    def __init__(self, c=8):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, c, 3, padding=1, bias=False), nn.BatchNorm2d(c), nn.ReLU())
        self.dw = nn.Conv2d(c, c, 3, padding=1, groups=c)
        self.pw = nn.Conv2d(c, c, 1)
        self.head = nn.Linear(c, 5)

    def forward(self, x):
        h = self.stem(x)
        h = h + self.pw(torch.relu(self.dw(h)))
        return self.head(torch.flatten(nn.functional.adaptive_avg_pool2d(h, 1), 1))


class MapModel(Model):
    """The same network returning its 4-D feature map (eager: contiguous NCHW)."""

    def forward(self, x):
        h = self.stem(x)
        return h + self.pw(torch.relu(self.dw(h)))


def get_inputs():
    return [torch.randn(2, 3, 10, 12)]


def get_init_inputs():
    return [8]
'''


def _optimize(tmp_path_factory, entry: str):
    folder = tmp_path_factory.mktemp("convnet")
    source = folder / "convnet.py"
    text = CONV_NET if entry == "Model" else CONV_NET + "\n\nModel = MapModel\n"
    source.write_text(text)
    out = folder / "out"
    optimize(ProblemSpec(str(source), {}), str(out), OptimizeConfig(cache=False, use_triton=False, compare_compile=False))
    return load_module(out / "optimized_model.py", f"opt_{uuid.uuid4().hex[:8]}"), out


@pytest.fixture(scope="module")
def vector_net(tmp_path_factory):
    return _optimize(tmp_path_factory, "Model")


@pytest.fixture(scope="module")
def map_net(tmp_path_factory):
    return _optimize(tmp_path_factory, "MapModel")


def _pair(module, seed=0):
    torch.manual_seed(seed)
    model = module.Model(*module.get_init_inputs()).eval()
    with torch.no_grad():  # BatchNorm statistics that do something
        model.stem[1].running_mean.uniform_(-0.5, 0.5)
        model.stem[1].running_var.uniform_(0.5, 2.0)
    new = module.ModelNew(*module.get_init_inputs())
    new.load_state_dict(model.state_dict())
    new.lego_forward, new.lego_channels_last = "original", True
    return model, new


def _conv_weights(model):
    return [m.weight for m in model.modules() if isinstance(m, torch.nn.Conv2d)]


def test_channels_last_forward_matches_eager_and_leaves_the_parameters_alone(vector_net):
    module, _ = vector_net
    model, new = _pair(module)
    weights = _conv_weights(new)
    strides = [w.stride() for w in weights]
    seen = []
    hook = new.dw.register_forward_pre_hook(lambda m, args: seen.append((m.weight.is_contiguous(memory_format=torch.channels_last), args[0].is_contiguous(memory_format=torch.channels_last))))
    x = torch.randn(2, 3, 10, 12)
    with torch.no_grad():
        torch.testing.assert_close(new(x), model(x), atol=1e-5, rtol=1e-5)
        copies = new._lego_nhwc._copies
        new(torch.randn(2, 3, 10, 12))
        assert new._lego_nhwc._copies is copies, "the NHWC weights are copied once, not per call"
    hook.remove()
    assert seen and all(w and a for w, a in seen), "the convolution did not read NHWC weights and activations"
    # the user's Parameters are back in place, unchanged in identity and layout
    assert [m.weight for m in new.modules() if isinstance(m, torch.nn.Conv2d)] == weights
    assert all(isinstance(w, torch.nn.Parameter) for w in _conv_weights(new))
    assert [w.stride() for w in _conv_weights(new)] == strides
    assert set(new.state_dict()) == set(model.state_dict())


def test_a_feature_map_comes_back_in_eagers_layout(map_net):
    module, _ = map_net
    model, new = _pair(module)
    assert module.EAGER_OUTPUT_STRIDES == tuple(torch.empty(2, 8, 10, 12).stride())
    x = torch.randn(2, 3, 10, 12)
    with torch.no_grad():
        out, want = new(x), model(x)
    torch.testing.assert_close(out, want, atol=1e-5, rtol=1e-5)
    assert out.stride() == want.stride() and out.is_contiguous()


def test_weights_changed_in_place_or_replaced_are_seen(vector_net):
    module, _ = vector_net
    model, new = _pair(module)
    x = torch.randn(2, 3, 10, 12)
    with torch.no_grad():
        new(x)
        fresh = {k: torch.randn_like(v) if v.is_floating_point() else v for k, v in model.state_dict().items()}
        fresh["stem.1.running_var"] = fresh["stem.1.running_var"].abs() + 0.5
        new.load_state_dict(fresh)  # copies in place: the Parameters' versions move
        model.load_state_dict(fresh)
        torch.testing.assert_close(new(x), model(x), atol=1e-5, rtol=1e-5)
        new.dw.weight.mul_(2.0)  # an in-place update by hand
        model.dw.weight.mul_(2.0)
        torch.testing.assert_close(new(x), model(x), atol=1e-5, rtol=1e-5)
        new.pw.weight = torch.nn.Parameter(torch.randn_like(new.pw.weight))  # replaced: GENERATION moves
        model.pw.weight = torch.nn.Parameter(new.pw.weight.detach().clone())
        torch.testing.assert_close(new(x), model(x), atol=1e-5, rtol=1e-5)
        new.double()
        model.double()
        torch.testing.assert_close(new(x.double()), model(x.double()))


def test_train_mode_and_gradients_run_the_plain_forward(vector_net):
    module, _ = vector_net
    model, new = _pair(module)
    layouts = []
    new.dw.register_forward_pre_hook(lambda m, args: layouts.append(m.weight.is_contiguous()))
    x = torch.randn(2, 3, 10, 12)
    new.train()
    model.train()
    torch.testing.assert_close(new(x), model(x))  # batch statistics: exactly eager's training forward
    new.eval()
    model.eval()
    out = new(x)  # gradients wanted (parameters require grad, grad mode on)
    out.sum().backward()
    assert new.dw.weight.grad is not None, "the gradient must reach the user's own Parameter"
    assert layouts and all(layouts), "train mode or gradients must not read NHWC copies"


def test_an_exception_inside_the_forward_puts_the_parameters_back(vector_net):
    module, _ = vector_net
    _, new = _pair(module)
    weights = _conv_weights(new)
    with torch.no_grad(), pytest.raises(RuntimeError):
        new(torch.randn(2, 4, 10, 12))  # 4 channels where the stem takes 3
    assert _conv_weights(new) == weights and all(isinstance(w, torch.nn.Parameter) for w in weights)


def test_launch_line_and_variant_names(vector_net, tmp_path):
    module, out = vector_net
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    set_launch(copy, {"forward": "original", "cuda_graph": True, "channels_last": True})
    loaded = load_module(copy / "optimized_model.py", f"opt_{uuid.uuid4().hex[:8]}")
    assert (loaded.ModelNew.lego_forward, loaded.ModelNew.lego_cuda_graph, loaded.ModelNew.lego_channels_last) == ("original", True, True)
    for forward, graph, nhwc in [("plan", False, False), ("original", True, True), ("original", False, True)]:
        name = variant_name(forward, graph, nhwc)
        assert parse_variant(name) == {"forward": forward, "cuda_graph": graph, "channels_last": nhwc}
    for bad in ("plan+nhwc+nhwc", "fast", "original+fast"):
        with pytest.raises(ValueError, match="not a launch variant"):
            parse_variant(bad)
    chosen = _pick({"plan+graph": 0.9, "original": 1.0, "original+graph": 0.8, "original+nhwc+graph": 0.5}, {})
    assert (chosen["chosen"], chosen["forward"], chosen["cuda_graph"], chosen["channels_last"]) == ("original+nhwc+graph", "original", True, True)
    chosen = _pick({"original": 1.0, "original+nhwc": 1.0 - MIN_GAIN / 2}, {})
    assert chosen["chosen"] == "original" and chosen["channels_last"] is False


def test_nhwc_variants_only_for_convolution_models_with_4d_inputs(vector_net):
    module, _ = vector_net

    class P:  # what nhwc_applies reads of a Problem
        model = module.Model(*module.get_init_inputs())

    assert nhwc_applies(P, [torch.randn(2, 3, 10, 12)])
    assert not nhwc_applies(P, [torch.randn(2, 3, 10)])
    P.model = torch.nn.Linear(4, 4)
    assert not nhwc_applies(P, [torch.randn(2, 3, 10, 12)])


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_channels_last_graph_replay_follows_in_place_weight_updates(map_net):
    module, _ = map_net
    model, new = _pair(module)
    model, new = model.cuda(), new.cuda()
    new.lego_cuda_graph = True
    xs = [torch.randn(2, 3, 10, 12, device="cuda") for _ in range(3)]
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error")  # no fallback to the direct forward
        first = new(xs[0])
        keep = first.clone()
        for x in xs:
            torch.testing.assert_close(new(x), model(x), atol=1e-4, rtol=1e-4)
        assert torch.equal(first, keep), "a returned tensor changed on a later call"
        assert new._lego_graph.failure is None and new._lego_graph._state is not None
        new.dw.weight.mul_(3.0)
        model.dw.weight.mul_(3.0)
        torch.testing.assert_close(new(xs[1]), model(xs[1]), atol=1e-4, rtol=1e-4)  # captured again on new copies
        assert new(xs[2]).stride() == model(xs[2]).stride()


def test_the_composed_models_process_knows_whether_the_model_holds_a_convolution(vector_net):
    """The launch variants are measured in a fresh process that gets the
    weights, not the modules (``judge.end_to_end.served.ProblemView``): it must still
    know whether the channels-last variants apply (on the H200 it once failed
    with "'SimpleNamespace' object has no attribute 'modules'")."""
    import types

    from lego_core.judge.end_to_end.served import ProblemView

    module, _ = vector_net
    for model, expected in ((module.Model(*module.get_init_inputs()), True), (torch.nn.Linear(4, 4), False)):
        problem = types.SimpleNamespace(model=model, spec=types.SimpleNamespace(device="cpu", torch_dtype=torch.float32, dtype="fp32"))
        view = ProblemView.from_payload(ProblemView.payload(problem, {1: [torch.randn(2, 3, 10, 12)]}))
        assert nhwc_applies(view, view.make_inputs(1)) is expected
        assert not nhwc_applies(view, [torch.randn(2, 3, 10)])
