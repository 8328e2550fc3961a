"""lego_core.judge.end_to_end.benchmark on the CPU: side-by-side order, reference errors, failures recorded, not raised."""
import pytest
import torch

from lego_core.judge.end_to_end import benchmark


def test_side_by_side_measures_checks_and_records_failures():
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 4).eval()
    inputs = [torch.randn(3, 8)]

    def broken():
        raise RuntimeError("no kernel\nfor this")

    results = benchmark.side_by_side(
        [("eager", lambda: model), ("shifted", lambda: (lambda x: model(x) + 1.0)), ("broken", broken), ("same", lambda: model)],
        [inputs],
        warmup_ms=0.0,
        rep=3,
    )
    assert [r.name for r in results] == ["eager", "shifted", "broken", "same"]
    eager, shifted, broken_result, same = results
    assert eager.rel_err is None and eager.timing.n == 3 and eager.timing.method == "perf_counter" and eager.error is None
    with torch.no_grad():
        ref = model(*inputs)
    assert shifted.rel_err == pytest.approx(((torch.ones_like(ref)).norm() / ref.norm()).item(), rel=1e-5)
    assert broken_result.timing is None and broken_result.error == "RuntimeError: no kernel for this"
    assert same.rel_err == 0.0 and same.median_ms > 0
    assert set(same.to_dict()) == {"name", "timing", "rel_err", "setup_s", "error"}


def test_norm_rel_error_rejects_other_shapes():
    assert benchmark.norm_rel_error(torch.tensor([3.0, 4.0]), torch.tensor([3.0, 4.0])) == 0.0
    assert benchmark.norm_rel_error(torch.tensor([0.0, 0.0]), torch.tensor([3.0, 4.0])) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="differs"):
        benchmark.norm_rel_error(torch.zeros(2), torch.zeros(3))


def test_models_returning_several_tensors_are_checked_and_timed_over_all_of_them():
    """An RNN's ``out, (h, c)``: the error runs over every tensor at once, a lost output is an error."""
    ref = (torch.tensor([3.0, 0.0]), (torch.tensor([0.0, 4.0]), torch.zeros(1)))
    off = (torch.tensor([3.0, 0.0]), (torch.tensor([0.0, 4.0]), torch.ones(1)))
    assert benchmark.norm_rel_error(ref, ref) == 0.0 and benchmark.norm_rel_error(off, ref) == pytest.approx(1 / 5)
    with pytest.raises(ValueError, match="2 outputs, the reference returns 3"):
        benchmark.norm_rel_error(ref[1], ref)

    model = torch.nn.Linear(4, 4).eval()
    results = benchmark.side_by_side(
        [("eager", lambda: (lambda x: (model(x), {"h": x * 2}))), ("shifted", lambda: (lambda x: (model(x), {"h": x * 2 + 1})))],
        [[torch.randn(2, 4)]], warmup_ms=0.0, rep=2,
    )  # fmt: skip
    assert [r.error for r in results] == [None, None] and results[1].rel_err > 0 and results[1].timing.n == 2


def test_compile_candidates_are_named_per_mode():
    names = [name for name, _ in benchmark.compile_candidates(torch.nn.Identity())]
    assert names == ["compile_default", "compile_reduce_overhead"]


def test_eager_peak_is_none_off_the_gpu():
    assert benchmark.eager_peak_mb(torch.nn.Identity(), [torch.zeros(2)]) is None
