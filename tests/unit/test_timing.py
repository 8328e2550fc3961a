"""lego_core.runtime.timing: the measuring loop on a fake clock, CPU timing, GPU timing."""
import collections

import numpy as np
import pytest
import torch

from lego_core.runtime import timing
from lego_core.runtime.timing import TimingResult, gpu_available, measure, quantile, summarize, time_cpu, time_gpu


class FakeClock:
    """A clock whose time advances only when the timed function says so;
    records the order of flushes and calls."""

    method = "fake"

    def __init__(self):
        self.now = 0.0
        self.log = []

    def mark(self):
        return self.now

    def elapsed_ms(self, start, end):
        return end - start

    def sync(self):
        self.log.append("sync")

    def flush(self):
        self.log.append("flush")


def test_quantile_matches_numpy():
    values = sorted([3.0, 1.0, 4.0, 1.5, 9.0, 2.6, 5.0])
    for q in (0.0, 0.2, 0.5, 0.8, 1.0):
        assert quantile(values, q) == pytest.approx(np.percentile(values, q * 100))
    assert quantile([7.0], 0.5) == 7.0
    with pytest.raises(ValueError):
        quantile([], 0.5)
    with pytest.raises(ValueError):
        quantile([1.0], 1.5)


def test_summarize_median_and_percentiles():
    result = summarize([5.0, 1.0, 3.0, 2.0, 4.0], "perf_counter")
    assert result == TimingResult(median_ms=3.0, p20_ms=1.8, p80_ms=4.2, n=5, method="perf_counter")
    assert summarize([1.0, 2.0, 3.0, 100.0], "x").median_ms == 2.5  # an outlier does not move the median far
    assert result.to_dict()["median_ms"] == 3.0


def test_measure_rotates_inputs_flushes_and_takes_median():
    clock = FakeClock()
    sets = [[torch.full((2,), float(i))] for i in range(3)]
    seen = []
    durations = iter([1.0] * 1000)  # warm-up and estimate calls
    timed = [9.0, 1.0, 2.0, 3.0, 4.0, 5.0]

    def fn(inputs):
        seen.append(int(inputs[0][0]))
        clock.log.append("call")
        clock.now += timed.pop(0) if warmup_done[0] else next(durations)

    warmup_done = [False]
    original_flush = clock.flush

    def flush():  # the first flush marks the start of the timed calls
        warmup_done[0] = True
        original_flush()

    clock.flush = flush
    result = measure(fn, sets, clock, warmup_ms=3.0, rep=6)

    assert result.n == 6 and result.method == "fake"
    assert result.median_ms == pytest.approx(3.5)
    assert result.p20_ms == pytest.approx(2.0) and result.p80_ms == pytest.approx(5.0)
    # every set is used, in strict rotation
    assert seen == [i % 3 for i in range(len(seen))]
    assert set(seen) == {0, 1, 2}
    # each timed call is preceded by exactly one flush
    timed_log = clock.log[clock.log.index("flush"):]
    assert timed_log[:-1] == ["flush", "call"] * 6 and timed_log[-1] == "sync"
    # 3 first calls + 5 estimate calls + ceil(3.0 / 1.0) warm-up calls + 6 timed
    assert len(seen) == 3 + 5 + 3 + 6


def test_measure_sync_each_waits_after_every_timed_call():
    clock = FakeClock()

    def fn(inputs):
        clock.log.append("call")
        clock.now += 1.0

    result = measure(fn, [[torch.zeros(1)]], clock, warmup_ms=1.0, rep=4, sync_each=True)
    timed_log = clock.log[clock.log.index("flush"):]
    assert timed_log == ["flush", "call", "sync"] * 4 + ["sync"]
    assert result.median_ms == pytest.approx(1.0)


def test_time_on_device_picks_the_cpu_clock_for_cpu_tensors():
    result = timing.time_on_device(lambda xs: xs[0] + 1, [[torch.zeros(8)]], warmup_ms=0.0, rep=3, sync_each=True)
    assert result.method == "perf_counter" and result.n == 3


def test_measure_argument_errors():
    with pytest.raises(ValueError, match="at least one input set"):
        measure(lambda xs: None, [], FakeClock())
    with pytest.raises(ValueError, match="rep"):
        measure(lambda xs: None, [[torch.zeros(1)]], FakeClock(), rep=0)


def test_time_cpu_uses_every_input_set_and_times_real_work():
    counts = collections.Counter()
    sets = [[torch.randn(64, 64)] for _ in range(4)]

    def fn(inputs):
        counts[id(inputs[0])] += 1
        return inputs[0] @ inputs[0]

    result = time_cpu(fn, sets, warmup_ms=1.0, rep=20)
    assert result.n == 20 and result.method == "perf_counter"
    assert 0 < result.p20_ms <= result.median_ms <= result.p80_ms
    assert set(counts) == {id(s[0]) for s in sets}
    assert max(counts.values()) - min(counts.values()) <= 1


@pytest.mark.skipif(gpu_available(), reason="checks the error raised without CUDA")
def test_time_gpu_without_cuda_raises_clear_error():
    assert gpu_available() is False
    with pytest.raises(RuntimeError, match="needs a CUDA device"):
        time_gpu(lambda xs: None, [[torch.zeros(1)]])


def test_gpu_available_never_raises(monkeypatch):
    def broken():
        raise RuntimeError("driver exploded")

    monkeypatch.setattr(torch.cuda, "is_available", broken)
    assert timing.gpu_available() is False


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU")
def test_time_gpu_measures_bandwidth_bound_copy():
    n = 64 * 1024 * 1024  # 256 MB of fp32 per tensor: bandwidth bound, far above L2
    sets = [[torch.randn(n, device="cuda")] for _ in range(2)]
    out = torch.empty(n, device="cuda")
    result = time_gpu(lambda xs: out.copy_(xs[0]), sets, warmup_ms=10, rep=30)
    assert result.n == 30 and result.method == "cuda_events"
    assert result.p20_ms <= result.median_ms <= result.p80_ms
    gbps = 2 * n * 4 / (result.median_ms * 1e-3) / 1e9
    assert 500 < gbps < 6000, gbps  # an H100/H200 copies at 3000-4300 GB/s

    small = [[torch.randn(1024, device="cuda")] for _ in range(3)]
    graph = time_gpu(lambda xs: xs[0].mul_(1.0), small, rep=20, cuda_graph=True)
    assert graph.method == "cuda_graph" and 0 < graph.median_ms < 1.0
