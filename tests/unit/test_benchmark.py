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


# --- time_models_here: the report's timing, interleaved (on the CPU, with a stand-in for the composed model) ---

import contextlib  # noqa: E402
import os  # noqa: E402
import types  # noqa: E402

from lego_core.errors import OptimizeError  # noqa: E402
from lego_core.runtime import timing  # noqa: E402


class _Composed(torch.nn.Module):
    """A stand-in for ModelNew as shipped: the model's own layer, logged, saying which forward ran."""

    def __init__(self, inner, log, ran="plan", fail_at=None):
        super().__init__()
        self.inner, self.log, self.ran, self.fail_at, self.calls = inner, log, ran, fail_at, 0
        self.lego_forward = "plan"

    def forward(self, x):
        self.calls += 1
        if self.fail_at is not None and self.calls >= self.fail_at:
            raise RuntimeError("the plan's kernel failed")
        self.log.append(("plan", id(x)))
        self.__dict__["lego_last_forward"] = self.ran
        self.__dict__["lego_fallback"] = None if self.ran == "plan" else "a baked value differs"
        return self.inner(x)


def _problem(log):
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 4).eval()
    model.register_forward_hook(lambda mod, args, out: log.append(("eager", id(args[0]))))
    inputs = {seed: [torch.randn(3, 8, generator=torch.Generator().manual_seed(seed))] for seed in (11, 12, 13)}
    return types.SimpleNamespace(model=model, make_inputs=lambda seed: inputs[seed]), inputs


def _config(compare_compile=False):
    return types.SimpleNamespace(verify_seeds=(11, 12, 13), compare_compile=compare_compile)


def _composed(monkeypatch, log, **kw):
    made = []

    def load(out_dir, problem):
        made.append(_Composed(problem.model, log, **kw))
        return made[-1]

    monkeypatch.setattr(benchmark, "load_composed", load)
    return made


def test_time_models_here_times_eager_and_the_plan_interleaved_on_the_same_inputs(monkeypatch, tmp_path):
    log = []
    problem, inputs = _problem(log)
    _composed(monkeypatch, log)
    result = benchmark.time_models_here(tmp_path, problem, _config(), rep=8, warmup_calls=2, warmup_ms=0.0, min_s=0.05)

    # the check calls first (eager, then the plan: the plan's own call logs eager's hook too, it runs the model's layer)
    names = [name for name, _ in log if name in ("eager", "plan")]
    plan_calls = [k for k, (name, _) in enumerate(log) if name == "plan"]
    # every plan call is followed by the hook of its inner layer: keep the plan's entries and eager's own ones
    own = [name for k, (name, _) in enumerate(log) if name == "plan" or (k - 1) not in plan_calls]
    assert own[:2] == ["eager", "plan"] and len(names) > 2
    rounds = result["rounds"]
    assert rounds["warmup"] == 2 and rounds["timed"] >= 8
    timed = own[2:]
    assert len(timed) == 2 * (rounds["warmup"] + rounds["timed"])
    assert timed == [n for r in range(len(timed) // 2) for n in (("eager", "plan") if r % 2 == 0 else ("plan", "eager"))]
    # every call on the first verification seed's inputs, as sidebyside.py times one input set
    assert {i for _, i in log} == {id(inputs[11][0])}

    assert result["measured"] is True and result["interleaved"] is True
    assert result["eager_ms"] > 0 and result["optimized_ms"] > 0
    assert result["speedup_vs_eager"] == pytest.approx(result["eager_ms"] / result["optimized_ms"])
    assert "compile_ms" not in result and "speedup_vs_compile" not in result
    assert set(result["candidates"]) == {"eager", "optimized"}
    for name in ("eager", "optimized"):
        entry = result["candidates"][name]
        assert entry["median_ms"] == result[f"{name}_ms"] and entry["p20_ms"] <= entry["median_ms"] <= entry["p80_ms"]
        assert entry["n"] >= 5 and entry["n"] + entry["preempted_calls"] >= 8 and entry["setup_s"] >= 0
    assert result["candidates"]["eager"]["rel_err"] is None and result["candidates"]["optimized"]["rel_err"] == 0.0
    host = result["host"]
    assert {"load_avg_1m", "cpus", "busy", "cpu_busy_fraction", "others_cpu_busy_fraction", "window_s"} <= set(host)
    assert host["cpus"] >= 1 and host["load_avg_1m"] >= 0
    assert host["window_s"] >= 0.05 or rounds["timed"] == timing.MAX_TIMED_ROUNDS  # the timed rounds lasted min_s
    assert "interleaved" in result["method"] and "perf_counter" in result["method"] and "eager, optimized" in result["method"]
    assert f"{rounds['timed']} timed rounds over" in result["method"]


def test_time_models_here_times_torch_compile_in_the_same_rounds(monkeypatch, tmp_path):
    log = []
    problem, _ = _problem(log)
    _composed(monkeypatch, log)

    def compiled(x):
        log.append(("compile", id(x)))
        return problem.model(x)

    monkeypatch.setattr(benchmark, "compile_candidates", lambda model, modes: [("compile_default", lambda: compiled)])
    result = benchmark.time_models_here(tmp_path, problem, _config(compare_compile=True), rep=6, warmup_calls=1, warmup_ms=0.0, min_s=0.0)
    assert result["compile_ms"] > 0 and result["speedup_vs_compile"] == pytest.approx(result["compile_ms"] / result["optimized_ms"])
    assert result["candidates"]["compile"]["rel_err"] == 0.0
    firsts = [name for name, _ in log if name in ("plan", "compile")]
    assert firsts.count("compile") == firsts.count("plan")  # one compile call per round, as many as the plan's


def test_a_failing_torch_compile_is_reported_and_eager_and_the_plan_still_timed(monkeypatch, tmp_path):
    log = []
    problem, _ = _problem(log)
    _composed(monkeypatch, log)

    def broken():
        raise RuntimeError("inductor\nfailed")

    monkeypatch.setattr(benchmark, "compile_candidates", lambda model, modes: [("compile_default", broken)])
    result = benchmark.time_models_here(tmp_path, problem, _config(compare_compile=True), rep=5, warmup_calls=1, warmup_ms=0.0, min_s=0.0)
    assert result["compile_error"] == "RuntimeError: inductor failed" and result["compile_ms"] is None
    assert "speedup_vs_compile" not in result and result["speedup_vs_eager"] > 0


def test_a_plan_that_ran_the_original_forward_is_not_timed(monkeypatch, tmp_path):
    log = []
    problem, _ = _problem(log)
    _composed(monkeypatch, log, ran="original")
    with pytest.raises(OptimizeError, match="ran the original forward"):
        benchmark.time_models_here(tmp_path, problem, _config(), rep=5, warmup_calls=1, warmup_ms=0.0, min_s=0.0)
    assert [name for name, _ in log].count("plan") == 1  # the check's call only


def test_a_plan_that_fails_while_timed_raises(monkeypatch, tmp_path):
    log = []
    problem, _ = _problem(log)
    _composed(monkeypatch, log, fail_at=4)
    with pytest.raises(OptimizeError, match="the plan's kernel failed"):
        benchmark.time_models_here(tmp_path, problem, _config(), rep=5, warmup_calls=1, warmup_ms=0.0, min_s=0.0)


def test_the_whole_timing_runs_inside_one_exclusive_hold_of_the_gpu_lock(monkeypatch, tmp_path):
    log = []
    problem, _ = _problem(log)
    _composed(monkeypatch, log)
    holds = []

    @contextlib.contextmanager
    def exclusive(device=None, path=None):
        holds.append(device)
        log.append(("lock", "in"))
        yield
        log.append(("lock", "out"))

    monkeypatch.setattr(benchmark, "gpu_lock", types.SimpleNamespace(exclusive=exclusive))
    monkeypatch.setattr(benchmark, "_cuda_device", lambda inputs: torch.device("cuda", 0))  # as if the inputs were on a GPU
    result = benchmark.time_models_here(tmp_path, problem, _config(), rep=5, warmup_calls=1, warmup_ms=0.0, min_s=0.0)
    assert holds == [torch.device("cuda", 0)]
    start, end = log.index(("lock", "in")), log.index(("lock", "out"))
    calls = [k for k, (name, _) in enumerate(log) if name in ("eager", "plan")]
    # the builds' first calls before the hold, every warm-up and timed call inside it
    before = [k for k in calls if k < start]
    assert len(before) == 3 and all(start < k < end for k in calls[3:]) and end == len(log) - 1
    assert "one exclusive hold of the GPU lock" in result["method"]


def test_lego_timing_cpus_holds_the_timing_thread_to_those_cpus(monkeypatch, tmp_path):
    log = []
    problem, _ = _problem(log)
    _composed(monkeypatch, log)
    allowed = sorted(os.sched_getaffinity(0))
    seen = []
    real = benchmark.time_interleaved

    def spying(*args, **kwargs):
        seen.append(os.sched_getaffinity(0))
        return real(*args, **kwargs)

    monkeypatch.setattr(benchmark, "time_interleaved", spying)
    monkeypatch.setenv("LEGO_TIMING_CPUS", str(allowed[-1]))
    result = benchmark.time_models_here(tmp_path, problem, _config(), rep=5, warmup_calls=1, warmup_ms=0.0, min_s=0.0)
    assert seen == [{allowed[-1]}] and result["host"]["pinned_cpus"] == [allowed[-1]]
    assert result["host"]["timing_cpus"] == [allowed[-1]]
    assert sorted(os.sched_getaffinity(0)) == allowed  # given back after

    monkeypatch.setenv("LEGO_TIMING_CPUS", "not a cpu")
    result = benchmark.time_models_here(tmp_path, problem, _config(), rep=5, warmup_calls=1, warmup_ms=0.0, min_s=0.0)
    assert result["host"]["pinned_cpus"] is None and "LEGO_TIMING_CPUS='not a cpu'" in result["host"]["pinned_error"]
    monkeypatch.delenv("LEGO_TIMING_CPUS")
    result = benchmark.time_models_here(tmp_path, problem, _config(), rep=5, warmup_calls=1, warmup_ms=0.0, min_s=0.0)
    assert result["host"]["pinned_cpus"] is None and "pinned_error" not in result["host"]
