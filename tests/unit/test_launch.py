"""The whole-model launch plan: ModelNew's bound tensors, its LAUNCH modes and
the choice between them (lego_core.judge.end_to_end.launch, templates/lego_runtime.py).

One real optimize of mlp_residual at tiny sizes (CPU, Triton interpreter);
the CUDA-graph replay itself runs only on a GPU (``gpu`` marker).
"""
import uuid
from pathlib import Path

import pytest
import torch

from lego_core import ProblemSpec, optimize
from lego_core.compose.folder import set_launch
from lego_core.config import OptimizeConfig
from lego_core.judge.end_to_end.launch import MIN_GAIN, TIMING_ROUNDS, _interleaved_medians, _pick
from lego_core.judge.inputs import load_module  # noqa: E402
from conftest import SHARED_MODELS  # ../shared/models, or $LEGO_MODELS_DIR where they were carried

MLP = SHARED_MODELS / "mlp_residual.py"
TINY = {"batch_size": 8, "d_model": 48, "d_hidden": 96}


def load(folder: Path):
    return load_module(folder / "optimized_model.py", f"opt_{uuid.uuid4().hex[:8]}")


@pytest.fixture(scope="module")
def mlp_out(tmp_path_factory):
    if not MLP.is_file():
        pytest.skip("reference models not found beside the repository")
    out = tmp_path_factory.mktemp("mlp")
    report = optimize(ProblemSpec(str(MLP), TINY), str(out), OptimizeConfig(cache=False))
    return out, report


def fresh_pair(module, seed=0):
    torch.manual_seed(seed)
    model = module.Model(*module.get_init_inputs()).eval()
    new = module.ModelNew(*module.get_init_inputs())
    new.load_state_dict(model.state_dict())
    return model, new


def test_cpu_run_ships_the_plan_launched_directly_and_says_why(mlp_out):
    out, report = mlp_out
    launch = report["launch"]
    assert launch["forward"] == "plan" and launch["cuda_graph"] is False and launch["measured"] is False
    assert "no GPU" in launch["reason"]
    assert report["summary"]["launch"] == "plan"
    assert (out / "lego_runtime.py").is_file()
    assert "LAUNCH = {'forward': 'plan', 'cuda_graph': False, 'channels_last': False}" in (out / "optimized_model.py").read_text()


def test_bound_tensors_follow_new_weights_dtype_and_replaced_parameters(mlp_out):
    out, _ = mlp_out
    module = load(out)
    model, new = fresh_pair(module)
    x = torch.randn(8, 48)
    with torch.no_grad():
        torch.testing.assert_close(new(x), model(x), atol=1e-4, rtol=1e-4)
        # in place: load_state_dict copies into the bound tensors
        torch.manual_seed(7)
        other = module.Model(*module.get_init_inputs()).eval()
        new.load_state_dict(other.state_dict())
        torch.testing.assert_close(new(x), other(x), atol=1e-4, rtol=1e-4)
        # a new Parameter object assigned on a submodule: bound again
        new.down.weight = torch.nn.Parameter(torch.randn_like(new.down.weight))
        other.down.weight = torch.nn.Parameter(new.down.weight.detach().clone())
        torch.testing.assert_close(new(x), other(x), atol=1e-4, rtol=1e-4)
        # load_state_dict(assign=True) replaces the tensors themselves
        torch.manual_seed(8)
        third = module.Model(*module.get_init_inputs()).eval()
        new.load_state_dict({k: v.clone() for k, v in third.state_dict().items()}, assign=True)
        torch.testing.assert_close(new(x), third(x), atol=1e-4, rtol=1e-4)


def test_original_forward_is_exactly_eager_and_skips_the_checks(mlp_out):
    out, _ = mlp_out
    module = load(out)
    model, new = fresh_pair(module)
    new.lego_forward = "original"
    x = torch.randn(8, 48)
    with torch.no_grad():
        assert torch.equal(new(x), model(x))
        # the user's forward takes other batch sizes; the plan does not
        assert new(torch.randn(3, 48)).shape == (3, 48)
        new.lego_forward = "plan"
        with pytest.raises(ValueError, match=r"must be float32\[8, 48\]"):
            new(torch.randn(3, 48))


def test_graph_mode_without_a_gpu_runs_the_forward_directly(mlp_out):
    out, _ = mlp_out
    module = load(out)
    model, new = fresh_pair(module)
    new.lego_cuda_graph = True
    x = torch.randn(8, 48)
    with torch.no_grad():
        torch.testing.assert_close(new(x), model(x), atol=1e-4, rtol=1e-4)
    assert new._lego_graph.failure is None  # CPU inputs are never captured, nothing failed


def test_set_launch_rewrites_only_the_launch_line(mlp_out, tmp_path):
    out, _ = mlp_out
    copy = tmp_path / "copy"
    import shutil

    shutil.copytree(out, copy)
    before = (copy / "optimized_model.py").read_text()
    set_launch(copy, {"forward": "original", "cuda_graph": True})
    after = (copy / "optimized_model.py").read_text()
    changed = [(a, b) for a, b in zip(before.splitlines(), after.splitlines()) if a != b]
    assert changed == [("LAUNCH = {'forward': 'plan', 'cuda_graph': False, 'channels_last': False}", "LAUNCH = {'forward': 'original', 'cuda_graph': True, 'channels_last': False}")]
    module = load(copy)
    assert module.ModelNew.lego_forward == "original" and module.ModelNew.lego_cuda_graph is True
    (copy / "optimized_model.py").write_text("x = 1\n")
    with pytest.raises(ValueError, match="no LAUNCH line"):
        set_launch(copy, {"forward": "plan", "cuda_graph": False})


def test_pick_ships_the_fastest_only_when_it_clearly_beats_eager():
    times = {"plan": 1.3, "plan+graph": 0.5, "original": 1.0, "original+graph": 0.7}
    chosen = _pick(times, {})
    assert (chosen["forward"], chosen["cuda_graph"], chosen["chosen"]) == ("plan", True, "plan+graph")
    # within the noise margin of eager: the original forward ships
    close = {"plan": 1.0 - MIN_GAIN / 2, "original": 1.0}
    chosen = _pick(close, {"plan+graph": "cannot be captured: RuntimeError: x"})
    assert (chosen["forward"], chosen["cuda_graph"]) == ("original", False)
    assert "does not beat eager" in chosen["reason"]
    assert chosen["variants"]["plan+graph"] == {"error": "cannot be captured: RuntimeError: x"}
    # the original forward replayed as a graph is a candidate of its own
    chosen = _pick({"plan": 2.0, "original": 1.0, "original+graph": 0.6}, {})
    assert (chosen["forward"], chosen["cuda_graph"]) == ("original", True)


class _FakeGraph:
    failure = None

    def invalidate(self):
        pass


class _FakeComposed:
    """Stands for ModelNew in the timing rounds: each call's time is its
    variant's own plus whatever load the GPU has at that moment."""

    def __init__(self):
        self.lego_forward, self.lego_cuda_graph, self.lego_channels_last = "plan", False, False
        self._lego_graph = _FakeGraph()


def test_launch_timing_interleaves_rounds_so_a_burst_of_load_does_not_decide(monkeypatch):
    """A burst of load from another process while one variant is timed must
    not make a slower variant win: the variants are timed in interleaved
    rounds and the samples pooled (measured once, one after the other, a
    search beside it made a 0.061 ms plan look faster than 0.039 ms eager)."""
    import lego_core.runtime.timing as timing
    from lego_core.runtime.timing import summarize

    own_ms = {("plan", False): 1.10, ("original", False): 1.00, ("plan", True): 1.05, ("original", True): 1.20}
    calls = []

    def fake_time_gpu(fn, input_sets, warmup_ms, rep, sync_each=False):
        assert sync_each, "a user's call starts from an idle GPU"
        new = fake
        burst = 5.0 if not calls else 0.0  # the first variant timed meets another process's kernels
        calls.append((new.lego_forward, new.lego_cuda_graph))
        new.lego_last_forward = new.lego_forward  # what ModelNew's forward records (lego_runtime.note_forward): no fallback
        return summarize([own_ms[(new.lego_forward, new.lego_cuda_graph)] + burst] * rep, "cuda_events")

    fake = _FakeComposed()
    monkeypatch.setattr(timing, "time_gpu", fake_time_gpu)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)
    variants = [("original", False, False), ("plan", False, False), ("plan", False, True), ("original", False, True)]
    errors = {}
    times = _interleaved_medians(fake, [[torch.zeros(1)]], variants, errors)
    assert errors == {}
    assert len(calls) == TIMING_ROUNDS * len(variants)
    assert [c for c in calls[: len(variants)]] != [c for c in calls[len(variants): 2 * len(variants)]], "rounds rotate the order"
    # eager met the burst in round 0 only: its pooled median is its own time, and it stays the choice
    assert times["original"] == pytest.approx(1.00)
    assert _pick(times, errors)["chosen"] == "original"


def test_launch_timing_rules_out_a_variant_that_fails_while_timed(monkeypatch):
    import lego_core.runtime.timing as timing
    from lego_core.runtime.timing import summarize

    def fake_time_gpu(fn, input_sets, warmup_ms, rep, sync_each=False):
        if fake.lego_cuda_graph:
            raise RuntimeError("CUDA error: operation not permitted when stream is capturing")
        return summarize([1.0] * rep, "cuda_events")

    fake = _FakeComposed()
    monkeypatch.setattr(timing, "time_gpu", fake_time_gpu)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)
    errors = {}
    times = _interleaved_medians(fake, [[torch.zeros(1)]], [("original", False, False), ("plan", False, True)], errors)
    assert set(times) == {"original"}
    assert "stream is capturing" in errors["plan+graph"]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_graph_replay_matches_direct_and_outputs_stay_put(mlp_out):
    out, _ = mlp_out
    module = load(out)
    model, new = fresh_pair(module)
    model, new = model.cuda(), new.cuda()
    new.lego_forward, new.lego_cuda_graph = "original", True  # the CPU-made plan's kernels are interpreter-bound
    xs = [torch.randn(8, 48, device="cuda") for _ in range(3)]
    with torch.no_grad():
        first = new(xs[0])
        keep = first.clone()
        for x in xs:
            torch.testing.assert_close(new(x), model(x))
        assert torch.equal(first, keep), "a returned tensor changed on a later call"
        assert new._lego_graph.failure is None and new._lego_graph._state is not None
        new.load_state_dict({k: torch.randn_like(v) for k, v in model.state_dict().items()})
        model.load_state_dict(new.state_dict())
        torch.testing.assert_close(new(xs[1]), model(xs[1]))  # in-place weights: same graph, new values
        new.double()
        model.double()
        x64 = xs[2].double()
        torch.testing.assert_close(new(x64), model(x64))  # moved: captured again


# ---------------------------------------------------------------- faithful to eager as a user calls it (found by a fresh-user test)


def test_an_input_in_another_layout_is_copied_into_the_plans(mlp_out):
    out, _ = mlp_out
    module = load(out)
    model, new = fresh_pair(module)
    x = torch.randn(48, 8).t()  # [8, 48], not contiguous: the plan's views need the captured layout
    assert not x.is_contiguous()
    with torch.no_grad():
        torch.testing.assert_close(new(x), model(x), atol=1e-4, rtol=1e-4)
        expanded = torch.randn(1, 48).expand(8, 48)  # stride 0
        torch.testing.assert_close(new(expanded), model(expanded), atol=1e-4, rtol=1e-4)


def test_gradients_wanted_run_the_original_forward_with_a_warning(mlp_out):
    out, _ = mlp_out
    module = load(out)
    model, new = fresh_pair(module)
    x = torch.randn(8, 48)
    with pytest.warns(UserWarning, match="inference-only"):
        y = new(x)
    y.sum().backward()
    model(x).sum().backward()
    for (name, p), q in zip(new.named_parameters(), model.parameters()):
        assert p.grad is not None, f"{name} got no gradient"
        torch.testing.assert_close(p.grad, q.grad, atol=1e-4, rtol=1e-4)


def test_parameters_of_another_dtype_run_the_original_forward(mlp_out):
    out, _ = mlp_out
    module = load(out)
    model, new = fresh_pair(module)
    new.double()
    model.double()
    x = torch.randn(8, 48, dtype=torch.float64)
    with torch.no_grad(), pytest.warns(UserWarning, match="parameters are float64 and the plan was optimized for float32"):
        assert torch.equal(new(x), model(x))
    new.float()
    model.float()
    with torch.no_grad():
        torch.testing.assert_close(new(x.float()), model(x.float()), atol=1e-4, rtol=1e-4)


def test_an_unknown_launch_mode_is_refused(mlp_out):
    out, _ = mlp_out
    module = load(out)
    _, new = fresh_pair(module)
    new.lego_forward = "bogus"
    with torch.no_grad(), pytest.raises(ValueError, match="lego_forward must be 'plan' or 'original'"):
        new(torch.randn(8, 48))


def test_copies_pickles_and_deletion(mlp_out):
    import copy
    import io
    import weakref

    out, _ = mlp_out
    module = load(out)
    model, new = fresh_pair(module)
    x = torch.randn(8, 48)
    with torch.no_grad():
        new(x)
        twin = copy.deepcopy(new)
        torch.testing.assert_close(twin(x), model(x), atol=1e-4, rtol=1e-4)
        buffer = io.BytesIO()
        torch.save(new.state_dict(), buffer)
        torch.save(new, io.BytesIO())  # the whole module pickles too (runtime caches start empty)
    gone = weakref.ref(new)
    del new
    assert gone() is None, "ModelNew is kept alive by a reference cycle: its memory waits for the garbage collector"


def test_a_variant_that_fails_end_to_end_gives_way_to_the_next_fastest(mlp_out, tmp_path):
    import shutil

    from lego_core.judge.end_to_end.launch import rule_out

    out, _ = mlp_out
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    launch = _pick({"plan": 1.5, "plan+graph": 0.5, "original": 1.0, "original+graph": 0.7}, {})
    assert launch["chosen"] == "plan+graph"
    launch = rule_out(copy, launch, "output 0: 12 of 64 elements outside tolerance")
    assert launch["chosen"] == "original+graph" and launch["variants"]["plan+graph"]["error"].startswith("failed the end-to-end check: output 0")
    assert "plan+graph failed the end-to-end check" in launch["reason"]
    assert load(copy).ModelNew.lego_cuda_graph is True and load(copy).ModelNew.lego_forward == "original"
    launch = rule_out(copy, launch, "again")
    assert launch["chosen"] == "original"  # plan (1.5 ms) is slower than eager: eager ships
    assert load(copy).LAUNCH == {"forward": "original", "cuda_graph": False, "channels_last": False}
    with pytest.raises(ValueError, match="original forward failed"):
        rule_out(copy, launch, "eager against eager")


def test_fp32_on_cuda_with_tf32_convolutions_is_judged_against_fp64():
    from types import SimpleNamespace

    from lego_core.judge.end_to_end.e2e import eager_uses_tf32

    conv = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3))
    mlp = torch.nn.Sequential(torch.nn.Linear(3, 4))

    def problem(model, device="cuda", dtype="fp32"):
        return SimpleNamespace(model=model, spec=SimpleNamespace(device=device, dtype=dtype))

    saved = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    try:
        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = True, False
        assert eager_uses_tf32(problem(conv))
        assert not eager_uses_tf32(problem(mlp))  # fp32 matmuls stay IEEE by default
        assert not eager_uses_tf32(problem(conv, device="cpu")) and not eager_uses_tf32(problem(conv, dtype="bf16"))
        torch.backends.cudnn.allow_tf32 = False
        assert not eager_uses_tf32(problem(conv))
        torch.backends.cuda.matmul.allow_tf32 = True
        assert eager_uses_tf32(problem(mlp))
    finally:
        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = saved
