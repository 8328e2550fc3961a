"""lego_core.runtime.timing's interleaved timing: order, medians, preempted calls left out, failures (fake clock and CPU)."""
import pytest
import torch

from lego_core.runtime import timing
from lego_core.runtime.timing import CudaEventClock, measure_interleaved, time_interleaved

from tests.unit.test_timing import FakeClock  # time advances only when a timed function says so; logs flushes and syncs


def _fns(clock, durations: dict, calls: list):
    """One fake callable per name: logs its name and input, advances the clock by its next duration (1.0 once they run out)."""

    def make(name):
        def fn(inputs):
            calls.append((name, int(inputs[0][0])))
            clock.log.append(name)
            queue = durations[name]
            clock.now += queue.pop(0) if queue else 1.0
        return fn

    return [make(name) for name in durations]


def test_two_callables_alternate_which_goes_first_and_get_their_own_medians():
    clock, calls = FakeClock(), []
    # 5 warm-up calls each take 1.0; the timed ones follow
    eager = [1.0] * 5 + [10.0, 12.0, 11.0, 50.0, 9.0, 13.0]
    plan = [1.0] * 5 + [2.0, 3.0, 1.0, 4.0, 2.5, 3.5]
    fns = _fns(clock, {"eager": eager, "plan": plan}, calls)
    result = measure_interleaved(fns, [[torch.zeros(1)]], clock, warmup_calls=5, warmup_ms=0.0, rep=6, preemptions=lambda: 0)

    assert result.warmup_rounds == 5 and result.rounds == 6
    names = [name for name, _ in calls]
    assert len(names) == 2 * (5 + 6)
    # round r: eager first when r is even, the plan first when r is odd, warm-up and timed alike
    assert names == [n for r in range(11) for n in (("eager", "plan") if r % 2 == 0 else ("plan", "eager"))]
    e, p = result.results
    assert e.n == 6 and p.n == 6 and e.method == "fake"
    assert e.median_ms == pytest.approx(11.5)  # median of 9, 10, 11, 12, 13, 50
    assert p.median_ms == pytest.approx(2.75)  # median of 1, 2, 2.5, 3, 3.5, 4
    assert result.errors == (None, None) and result.preempted == (0, 0) and result.kept_preempted == (False, False)
    assert result.preemption_counted is True
    # every call, warm-up included: the flush, the call, then a wait for it (sidebyside.py's per-call sync)
    for k in range(0, len(clock.log) - 1, 3):
        assert clock.log[k] == "flush" and clock.log[k + 1] in ("eager", "plan") and clock.log[k + 2] == "sync"


def test_three_callables_rotate_and_the_rounds_share_input_sets():
    clock, calls = FakeClock(), []
    fns = _fns(clock, {"a": [], "b": [], "c": []}, calls)
    sets = [[torch.full((1,), float(i))] for i in range(2)]
    result = measure_interleaved(fns, sets, clock, warmup_calls=1, warmup_ms=0.0, rep=3, preemptions=lambda: None)
    names = [n for n, _ in calls]
    assert names == ["a", "b", "c", "b", "c", "a", "c", "a", "b", "a", "b", "c"]  # 1 warm-up + 3 timed rounds
    # every callable of round r gets the same set, r % 2
    for r in range(4):
        assert {s for _, s in calls[3 * r:3 * r + 3]} == {r % 2}
    assert [res.median_ms for res in result.results] == [1.0, 1.0, 1.0]
    assert result.preemption_counted is False and result.preempted == (0, 0, 0)


def test_preempted_calls_are_left_out_and_rerun_until_enough_undisturbed_ones():
    clock, calls = FakeClock(), []
    counter = [0]
    eager_times = iter([5.0, 100.0, 5.0, 100.0, 6.0, 4.0, 5.0, 5.0, 5.0, 5.0])

    def eager(inputs):
        calls.append("eager")
        t = next(eager_times, 5.0)
        if t == 100.0:  # a preemption: the thread's involuntary switches rise while this call runs
            counter[0] += 1
        clock.now += t

    def plan(inputs):
        calls.append("plan")
        clock.now += 1.0

    result = measure_interleaved([eager, plan], [[torch.zeros(1)]], clock, warmup_calls=0, warmup_ms=0.0, rep=4,
                                 preemptions=lambda: counter[0])
    # two eager calls were disturbed: rounds went on until eager had 4 undisturbed ones
    assert result.rounds == 6 and result.preempted == (2, 0)
    eager_result, plan_result = result.results
    assert eager_result.n == 4 and eager_result.median_ms == pytest.approx(5.0) and max(eager_result.samples_ms) == 6.0
    assert plan_result.n == 6 and plan_result.median_ms == 1.0
    assert result.kept_preempted == (False, False)


def test_when_few_calls_run_undisturbed_every_call_is_kept_and_flagged():
    clock = FakeClock()
    counter = [0]

    def always_preempted(inputs):
        counter[0] += 1
        clock.now += 7.0

    def quiet(inputs):
        clock.now += 1.0

    result = measure_interleaved([always_preempted, quiet], [[torch.zeros(1)]], clock, warmup_calls=0, warmup_ms=0.0, rep=8,
                                 max_rounds=10, preemptions=lambda: counter[0])
    assert result.rounds == 10  # the cap on rounds
    assert result.results[0].n == 10 and result.results[0].median_ms == 7.0 and result.kept_preempted == (True, False)
    assert result.preempted == (10, 0)


def test_the_extra_rounds_stop_at_max_rounds_or_after_max_extra_s():
    clock = FakeClock()
    counter = [0]

    def preempted(inputs):
        counter[0] += 1

    def rounds(**limits):
        return measure_interleaved([preempted], [[torch.zeros(1)]], clock, warmup_calls=0, warmup_ms=0.0, rep=3,
                                   preemptions=lambda: counter[0], **limits).rounds

    assert rounds(max_rounds=10_000, max_extra_s=0.0) == 3  # no time for extra rounds: the first ``rep`` only
    assert rounds(max_rounds=7, max_extra_s=60.0) == 7
    assert rounds(max_extra_s=60.0) == timing.MAX_ROUNDS_FACTOR * 3


def test_a_failing_callable_is_dropped_and_the_others_go_on():
    clock, calls = FakeClock(), []
    state = {"n": 0}

    def flaky(inputs):
        calls.append("flaky")
        state["n"] += 1
        if state["n"] == 4:
            raise RuntimeError("illegal\nmemory access")
        clock.now += 2.0

    def steady(inputs):
        calls.append("steady")
        clock.now += 1.0

    result = measure_interleaved([flaky, steady], [[torch.zeros(1)]], clock, warmup_calls=2, warmup_ms=0.0, rep=5, preemptions=lambda: 0)
    assert result.results[0] is None and result.errors[0] == "RuntimeError: illegal memory access"
    assert result.results[1].n == 5 and result.errors[1] is None
    assert calls.count("flaky") == 4 and calls.count("steady") == 2 + 5


def test_argument_errors():
    with pytest.raises(ValueError, match="at least one callable"):
        measure_interleaved([], [[torch.zeros(1)]], FakeClock())
    with pytest.raises(ValueError, match="at least one input set"):
        measure_interleaved([lambda xs: None], [], FakeClock())
    with pytest.raises(ValueError, match="rep"):
        measure_interleaved([lambda xs: None], [[torch.zeros(1)]], FakeClock(), rep=0)


def test_time_interleaved_on_cpu_times_real_work_with_the_host_clock():
    small, large = torch.randn(16, 16), torch.randn(192, 192)
    order = []

    def mm_small(xs):
        order.append("small")
        return small @ small

    def mm_large(xs):
        order.append("large")
        return large @ large @ large

    # the machine running the tests may be busy: few extra rounds for preempted calls
    result = time_interleaved([mm_small, mm_large], [[torch.zeros(1)]], warmup_calls=2, warmup_ms=0.0, rep=20, max_extra_s=0.5)
    fast, slow = result.results
    assert fast.method == slow.method == "perf_counter"
    assert result.rounds >= 20 and order.count("small") == order.count("large") == 2 + result.rounds
    for res, preempted, kept in zip(result.results, result.preempted, result.kept_preempted):
        assert res.n == (result.rounds if kept else result.rounds - preempted) and res.n >= 5
    assert 0 < fast.median_ms < slow.median_ms
    assert order[:4] == ["small", "large", "large", "small"]


def test_involuntary_switches_is_a_growing_count_on_linux():
    first = timing.involuntary_switches()
    if first is None:
        pytest.skip("no per-thread context-switch count on this system")
    assert isinstance(first, int) and first >= 0 and timing.involuntary_switches() >= first


def test_the_cuda_clock_waits_for_an_event_by_yielding(monkeypatch):
    clock = CudaEventClock(torch.device("cuda", 0), flush_bytes=0)  # no buffer: nothing touches a GPU

    class Event:
        polls = 0

        def query(self):
            Event.polls += 1
            return Event.polls >= 3

    yields = []
    monkeypatch.setattr(timing.os, "sched_yield", lambda: yields.append(1))
    clock.wait_for(Event())
    assert Event.polls == 3 and len(yields) == 2


def test_a_clock_with_unrecorded_marks_gets_both_made_before_the_call():
    log = []

    class EventClock(FakeClock):
        made = 0

        def unrecorded(self):
            EventClock.made += 1
            log.append("make")
            return {"id": EventClock.made}

        def mark(self, event=None):
            assert event is not None, "the interleaved loop records events it made first"
            log.append("record")
            event["t"] = self.now
            return event

        def elapsed_ms(self, start, end):
            return end["t"] - start["t"]

    clock = EventClock()

    def fn(inputs):
        log.append("call")
        clock.now += 2.0

    result = measure_interleaved([fn], [[torch.zeros(1)]], clock, warmup_calls=0, warmup_ms=0.0, rep=3, preemptions=lambda: 0)
    assert log == ["make", "make", "record", "call", "record"] * 3 and result.results[0].median_ms == 2.0


def test_min_s_keeps_the_rounds_going_for_a_window_of_time():
    clock = FakeClock()

    def fn(inputs):
        timing.time.sleep(0.001)
        clock.now += 1.0

    started = timing.time.perf_counter()
    result = measure_interleaved([fn, fn], [[torch.zeros(1)]], clock, warmup_calls=0, warmup_ms=0.0, rep=3, min_s=0.05,
                                 preemptions=lambda: 0)
    assert timing.time.perf_counter() - started >= 0.05
    assert 3 < result.rounds <= 25 and result.results[0].n == result.rounds  # two calls of 1 ms or more a round
