"""Timing of candidates and plans: GPU (CUDA events) and CPU (perf_counter).

The GPU rules (docs/DESIGN "Correctness and timing rules", device METHOD):

* CUDA events recorded around each call, read once at the end (no host
  synchronisation between calls);
* every input set runs once first (Triton compiles, autotunes, caches), then
  a warm-up of about ``warmup_ms`` of calls;
* the L2 cache is flushed before every timed call by ``.zero_()`` on a
  256 MB buffer (H100/H200 L2 is 50-60 MB), outside the timed interval.
  The flush also keeps the GPU busy while the host enqueues the next call,
  so the events time the kernel and not the host's launch latency: on an
  H200 a 4096-element ``mul_`` measured 4.1 us with the flush and 17.6 us
  without it (back-to-back calls on an idle GPU);
* the input sets rotate (call ``i`` uses set ``i % len(input_sets)``) so a
  kernel never re-reads an input that the previous call left in cache;
* the result is the median of ``rep`` calls, with the 20th/80th percentiles
  to show the spread.

Several callables timed against each other (eager and a plan) are timed
in alternation by :func:`time_interleaved`: rounds of one call each, the
order rotated every round, every call as ../shared/tools/sidebyside.py
makes it (the same flush, events around one call, the GPU idle before it),
calls during which the timing thread was preempted left out (on a busy host
they measure the other processes, and an eager model's many launches are
hit far more often than a CUDA graph's one).

This module imports without CUDA; :func:`time_gpu` then raises
``RuntimeError``.  Every result says how it was measured (``method``), so a
report can tell measured numbers from the cost model's estimates.

Usage: ``python -m lego_core.runtime.timing`` times a 4096x4096 add on the GPU if
there is one, else a small CPU add.
"""
from __future__ import annotations

import dataclasses
import math
import os
import time

try:
    import resource
except ImportError:  # not a Unix: preemption is not counted
    resource = None
from typing import Any, Callable, Protocol, Sequence

import torch

from lego_core.runtime import gpu_lock

L2_FLUSH_BYTES = 256 * 1024 * 1024
DEFAULT_WARMUP_MS = 25.0
DEFAULT_REP = 100
_MAX_WARMUP_CALLS = 1000
_ESTIMATE_CALLS = 5

_flush_buffers: dict[tuple[str, int | None, int], torch.Tensor] = {}


@dataclasses.dataclass(frozen=True)
class TimingResult:
    """Summary of ``n`` timed calls, in milliseconds per call.

    ``median_ms``: the median; ``p20_ms`` / ``p80_ms``: 20th and 80th
    percentiles (linear interpolation, as ``numpy.percentile``); ``method``:
    ``"cuda_events"``, ``"cuda_graph"`` (events around graph replays) or
    ``"perf_counter"``; ``samples_ms``: the per-call times, sorted (to pool
    the samples of several runs, as the launch choice's interleaved rounds do).
    """

    median_ms: float
    p20_ms: float
    p80_ms: float
    n: int
    method: str = "cuda_events"
    samples_ms: tuple[float, ...] = dataclasses.field(default=(), repr=False, compare=False)

    def to_dict(self) -> dict:
        """Plain-data form for events and report.json."""
        return dataclasses.asdict(self)


def gpu_available() -> bool:
    """True when PyTorch sees at least one CUDA device (never raises)."""
    try:
        return bool(torch.cuda.is_available() and torch.cuda.device_count() > 0)
    except Exception:  # a broken driver install is "no GPU", not a crash
        return False


def quantile(sorted_values: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0..1) of already sorted values, interpolating
    linearly between neighbours (numpy's default).  ``ValueError`` if empty
    or ``q`` is outside [0, 1]."""
    if not sorted_values:
        raise ValueError("quantile of no values")
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile q must be in [0, 1], got {q}")
    position = q * (len(sorted_values) - 1)
    low = math.floor(position)
    high = min(low + 1, len(sorted_values) - 1)
    frac = position - low
    return sorted_values[low] * (1.0 - frac) + sorted_values[high] * frac


def summarize(times_ms: Sequence[float], method: str) -> TimingResult:
    """Median and 20/80th percentiles of per-call times in ms."""
    ordered = sorted(float(t) for t in times_ms)
    return TimingResult(
        median_ms=quantile(ordered, 0.5),
        p20_ms=quantile(ordered, 0.2),
        p80_ms=quantile(ordered, 0.8),
        n=len(ordered),
        method=method,
        samples_ms=tuple(ordered),
    )


class Clock(Protocol):
    """What the measuring loop needs from a timer.

    ``mark()`` returns an opaque timestamp; ``elapsed_ms(a, b)`` is valid
    after ``sync()``; ``flush()`` evicts caches and is not timed.
    """

    method: str

    def mark(self) -> Any: ...

    def elapsed_ms(self, start: Any, end: Any) -> float: ...

    def sync(self) -> None: ...

    def flush(self) -> None: ...


class CudaEventClock:
    """CUDA events on the current stream of ``device``; flushes L2 by zeroing
    a ``flush_bytes`` buffer (kept per device between calls)."""

    method = "cuda_events"

    def __init__(self, device: torch.device, flush_bytes: int = L2_FLUSH_BYTES):
        self.device = device
        self.flush_buffer = _flush_buffer(device, flush_bytes) if flush_bytes > 0 else None

    def mark(self, event: torch.cuda.Event | None = None) -> torch.cuda.Event:
        """Record ``event`` (made by :meth:`unrecorded`; a new one when None) on the current stream."""
        event = torch.cuda.Event(enable_timing=True) if event is None else event
        event.record()
        return event

    def unrecorded(self) -> torch.cuda.Event:
        """An event to :meth:`mark` later: made before the timed call, so
        that making it is not inside the interval (as sidebyside.py makes
        both of its events first)."""
        return torch.cuda.Event(enable_timing=True)

    def elapsed_ms(self, start: torch.cuda.Event, end: torch.cuda.Event) -> float:
        return float(start.elapsed_time(end))

    def sync(self) -> None:
        torch.cuda.synchronize(self.device)

    def flush(self) -> None:
        if self.flush_buffer is not None:
            self.flush_buffer.zero_()

    def wait_for(self, mark: torch.cuda.Event) -> None:
        """Wait until the GPU reached ``mark``, giving the CPU away
        (``sched_yield``) instead of spinning: a thread that spins in
        ``cudaDeviceSynchronize`` uses up its share of a busy host's CPUs
        and is then preempted in the middle of its next launches.  On an
        idle host nothing else is runnable and this spins as the
        synchronize does."""
        while not mark.query():
            os.sched_yield()


class PerfCounterClock:
    """Host wall clock; ``flush`` does nothing (CPU caches are left alone)."""

    method = "perf_counter"

    def mark(self) -> float:
        return time.perf_counter()

    def elapsed_ms(self, start: float, end: float) -> float:
        return (end - start) * 1e3

    def sync(self) -> None:
        pass

    def flush(self) -> None:
        pass


def _flush_buffer(device: torch.device, nbytes: int) -> torch.Tensor:
    """A cached uint8 buffer of ``nbytes`` on ``device``."""
    key = (device.type, device.index, nbytes)
    if key not in _flush_buffers:
        _flush_buffers[key] = torch.empty(nbytes, dtype=torch.uint8, device=device)
    return _flush_buffers[key]


def measure(
    fn: Callable[[list[torch.Tensor]], Any],
    input_sets: Sequence[Sequence[torch.Tensor]],
    clock: Clock,
    warmup_ms: float = DEFAULT_WARMUP_MS,
    rep: int = DEFAULT_REP,
    sync_each: bool = False,
) -> TimingResult:
    """The measuring loop shared by :func:`time_gpu` and :func:`time_cpu`.

    ``fn(inputs)`` is called on ``input_sets[i % len(input_sets)]``: once per
    set first, then ``_ESTIMATE_CALLS`` calls to estimate its cost, then
    about ``warmup_ms`` of warm-up calls (at least one, at most 1000), then
    ``rep`` timed calls each preceded by ``clock.flush()``; ``sync_each``
    waits for each timed call to finish before the next flush (the rule of
    ../shared/tools/sidebyside.py: every call starts on an idle device).
    ``ValueError`` for no input sets or ``rep < 1``.
    """
    if not input_sets:
        raise ValueError("timing needs at least one input set")
    if rep < 1:
        raise ValueError(f"rep must be at least 1, got {rep}")
    sets = [list(s) for s in input_sets]
    calls = 0

    def call() -> None:
        nonlocal calls
        fn(sets[calls % len(sets)])
        calls += 1

    # 1. first call of every set: compilation and autotuning stay out of the numbers
    for _ in sets:
        call()
    clock.sync()
    # 2. estimate one call's cost, to size the warm-up
    start = clock.mark()
    for _ in range(_ESTIMATE_CALLS):
        call()
    end = clock.mark()
    clock.sync()
    per_call_ms = max(clock.elapsed_ms(start, end) / _ESTIMATE_CALLS, 1e-6)
    # 3. warm-up (clocks, caches of the allocator, lazy initialisation)
    for _ in range(min(max(1, math.ceil(warmup_ms / per_call_ms)), _MAX_WARMUP_CALLS)):
        call()
    # 4. timed calls, cache flushed before each, events read at the end
    marks = []
    for _ in range(rep):
        clock.flush()
        start = clock.mark()
        call()
        marks.append((start, clock.mark()))
        if sync_each:
            clock.sync()
    clock.sync()
    return summarize([clock.elapsed_ms(a, b) for a, b in marks], clock.method)


def time_gpu(
    fn: Callable[[list[torch.Tensor]], Any],
    input_sets: Sequence[Sequence[torch.Tensor]],
    warmup_ms: float = DEFAULT_WARMUP_MS,
    rep: int = DEFAULT_REP,
    *,
    flush_l2: bool = True,
    l2_flush_bytes: int = L2_FLUSH_BYTES,
    cuda_graph: bool = False,
    sync_each: bool = False,
) -> TimingResult:
    """Median GPU time of ``fn(inputs)`` in milliseconds, by CUDA events.

    ``fn``: takes one input set (a list of CUDA tensors); its return value is
    ignored (wrap a candidate as ``lambda xs: run(xs, out)``).  ``input_sets``:
    one or more input sets, rotated call by call; use enough of them that
    together they exceed L2 when they are small.  ``warmup_ms``: warm-up
    length in ms; ``rep``: number of timed calls.  ``flush_l2``: zero a
    ``l2_flush_bytes`` buffer before every timed call.  ``cuda_graph``:
    capture ``fn`` once per input set into a CUDA graph and time the
    replays (removes launch gaps; for whole-model timing); ``fn`` must then
    be capturable (no host sync, no allocation that changes between calls).
    ``sync_each``: synchronize after every timed call (see :func:`measure`).
    Holds the GPU alone while it times (``lego_core.runtime.gpu_lock``: another
    process's verification or timing on the same card waits).

    Raises ``RuntimeError`` when no CUDA device is available, ``ValueError``
    for empty ``input_sets`` or ``rep < 1``.
    """
    if not gpu_available():
        raise RuntimeError("time_gpu needs a CUDA device and none is available; use the cost model (lego_core.cost.costmodel) or time_cpu")
    device = _device_of(input_sets)
    with torch.cuda.device(device), gpu_lock.exclusive(device):  # no other process's kernels beside the timed ones
        clock = CudaEventClock(device, l2_flush_bytes if flush_l2 else 0)
        if cuda_graph:
            fn = _graph_replayer(fn, input_sets)
        result = measure(fn, input_sets, clock, warmup_ms, rep, sync_each)
    return dataclasses.replace(result, method="cuda_graph") if cuda_graph else result


def _graph_replayer(fn: Callable[[list[torch.Tensor]], Any], input_sets: Sequence[Sequence[torch.Tensor]]) -> Callable:
    """Capture ``fn`` on each input set into its own CUDA graph; return a
    function that replays the graph of the set it is given (matched by the
    identity of the set's tensors).

    Timing reads no output, so the graphs share one memory pool and keep no
    output alive: together they hold one call's working memory, not one per
    input set (a 4.5 GiB attention score matrix timed on three input sets
    would otherwise hold 13.5 GiB).  Replays overwrite each other's outputs,
    which nothing reads."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm up off the default stream, as capture requires
        for inputs in input_sets:
            fn(list(inputs))
    torch.cuda.current_stream().wait_stream(side)
    graphs: dict[tuple[int, ...], torch.cuda.CUDAGraph] = {}
    pool = None
    for inputs in input_sets:
        graph = torch.cuda.CUDAGraph()
        # a fresh stream per graph: graphs captured on one stream can share
        # cuBLAS's workspace, and freeing one then breaks another (pytorch issue 193402)
        with torch.cuda.graph(graph, pool=pool, stream=torch.cuda.Stream()):
            fn(list(inputs))  # the output is freed at once: the next capture reuses its memory
        pool = graph.pool() if pool is None else pool
        graphs[tuple(id(x) for x in inputs)] = graph

    def replay(inputs: list[torch.Tensor]) -> None:
        graphs[tuple(id(x) for x in inputs)].replay()

    return replay


def time_cpu(
    fn: Callable[[list[torch.Tensor]], Any],
    input_sets: Sequence[Sequence[torch.Tensor]],
    warmup_ms: float = DEFAULT_WARMUP_MS,
    rep: int = DEFAULT_REP,
) -> TimingResult:
    """Median wall-clock time of ``fn(inputs)`` in ms (``time.perf_counter``),
    with the same rotation and warm-up as :func:`time_gpu` and no cache flush.
    For CPU code only: GPU work is asynchronous and would not be counted."""
    return measure(fn, input_sets, PerfCounterClock(), warmup_ms, rep)


def time_on_device(
    fn: Callable[[list[torch.Tensor]], Any],
    input_sets: Sequence[Sequence[torch.Tensor]],
    warmup_ms: float = DEFAULT_WARMUP_MS,
    rep: int = DEFAULT_REP,
    sync_each: bool = False,
) -> TimingResult:
    """:func:`time_gpu` when any input is a CUDA tensor, else :func:`time_cpu`."""
    if any(isinstance(x, torch.Tensor) and x.is_cuda for s in input_sets for x in s):
        return time_gpu(fn, input_sets, warmup_ms, rep, sync_each=sync_each)
    return time_cpu(fn, input_sets, warmup_ms, rep)


def involuntary_switches() -> int | None:
    """How many times the calling thread was preempted so far (involuntary
    context switches, ``getrusage(RUSAGE_THREAD).ru_nivcsw``); None where
    the system does not count them per thread (not Linux)."""
    who = getattr(resource, "RUSAGE_THREAD", None)
    if who is None:
        return None
    try:
        return int(resource.getrusage(who).ru_nivcsw)
    except (OSError, ValueError):
        return None


@dataclasses.dataclass(frozen=True)
class Interleaved:
    """What :func:`measure_interleaved` measured, one entry per callable, in
    the order the callables were given.

    ``results``: each callable's :class:`TimingResult` (ms per call; None
    when it raised, ``errors`` then says why: ``"Type: message"``);
    ``preempted``: how many of its timed calls ran while the timing thread
    was preempted by another thread or process (left out of ``results``);
    ``kept_preempted``: True where so few calls ran undisturbed that the
    result had to use every call (it then overstates the quiet-host time);
    ``rounds``: timed rounds run; ``warmup_rounds``: warm-up rounds run;
    ``preemption_counted``: whether preemption could be detected (Linux) at
    all."""

    results: tuple[TimingResult | None, ...]
    errors: tuple[str | None, ...]
    preempted: tuple[int, ...]
    kept_preempted: tuple[bool, ...]
    rounds: int
    warmup_rounds: int
    preemption_counted: bool


DEFAULT_WARMUP_CALLS = 5  # as ../shared/tools/sidebyside.py
MAX_ROUNDS_FACTOR = 4  # at most this many times ``rep`` rounds, re-running preempted calls
MAX_TIMED_ROUNDS = 5000  # the most rounds ``min_s`` asks for (tiny calls)
DEFAULT_MAX_EXTRA_S = 10.0  # the extra rounds hold the GPU lock: other runs' verifications wait


def measure_interleaved(
    fns: Sequence[Callable[[list[torch.Tensor]], Any]],
    input_sets: Sequence[Sequence[torch.Tensor]],
    clock: Clock,
    *,
    warmup_calls: int = DEFAULT_WARMUP_CALLS,
    warmup_ms: float = DEFAULT_WARMUP_MS,
    rep: int = DEFAULT_REP,
    max_rounds: int | None = None,
    max_extra_s: float = DEFAULT_MAX_EXTRA_S,
    min_s: float = 0.0,
    preemptions: Callable[[], int | None] = involuntary_switches,
) -> Interleaved:
    """Time several callables in alternation: round after round, each
    callable once, the order rotated by one every round (with two, A B then
    B A), so that whatever changes on the host or the GPU over time lands
    on all of them alike.

    Every call, warm-up and timed, is made as ../shared/tools/sidebyside.py
    makes it: ``clock.flush()`` (the L2 flush) first, then the call between
    two ``clock.mark()`` s (on a clock with ``unrecorded``, CUDA events, both
    made before the call), then a wait until it finished (``clock.wait_for``
    when the clock has it, then ``clock.sync()``), so each call starts on an
    idle GPU and its time includes the host's launches as a user's call
    does.  Round ``r`` gives every callable ``input_sets[r % len]``.

    Warm-up: at least ``warmup_calls`` rounds and at least ``warmup_ms`` of
    wall time (at most 1000 rounds).  Then at least ``rep`` timed rounds,
    and more until the timed rounds took ``min_s`` seconds (at most
    ``MAX_TIMED_ROUNDS`` rounds): a median over a longer window follows the
    host's usual state rather than one moment's (a virtual machine's CPUs
    can run a launch-bound call at half speed for a fraction of a second).  A
    call during which the timing thread was preempted (``preemptions()``, the
    thread's involuntary context switches, rose) was stretched by whatever
    took the CPU from it: on a busy host that is many of an eager model's
    launch-bound calls and almost none of a CUDA graph's one launch.  Such calls are left out, and rounds go on until every callable
    has ``rep`` undisturbed calls, or ``max_rounds`` (default
    ``MAX_ROUNDS_FACTOR * rep``) rounds ran, or the rounds beyond ``rep``
    took ``max_extra_s`` seconds.  A callable left with fewer than
    ``min(rep, max(5, rep // 4))`` undisturbed calls is summarized over all
    of its calls (``kept_preempted``).  ``preemptions`` returning None
    (not counted here) keeps every call.

    A callable that raises is dropped from the rounds from then on, its error
    recorded (the others go on).  Returns :class:`Interleaved` (times in ms).
    Raises ``ValueError`` for no callables, no input sets or ``rep < 1``.
    """
    if not fns:
        raise ValueError("interleaved timing needs at least one callable")
    if not input_sets:
        raise ValueError("timing needs at least one input set")
    if rep < 1:
        raise ValueError(f"rep must be at least 1, got {rep}")
    max_rounds = max(rep, MAX_ROUNDS_FACTOR * rep if max_rounds is None else max_rounds)
    sets = [list(s) for s in input_sets]
    count = len(fns)
    alive = [True] * count
    errors: list[str | None] = [None] * count
    samples: list[list[tuple[float, bool]]] = [[] for _ in range(count)]  # (ms, disturbed) per timed call
    clean = [0] * count
    wait_for = getattr(clock, "wait_for", None)
    unrecorded = getattr(clock, "unrecorded", None)

    def call(k: int, inputs: list, timed: bool) -> None:
        try:
            if unrecorded is not None:  # both events made first: making one is not timed
                pair = (unrecorded(), unrecorded())
                mark_start, mark_end = (lambda: clock.mark(pair[0])), (lambda: clock.mark(pair[1]))
            else:
                mark_start = mark_end = clock.mark
            clock.flush()
            before = preemptions() if timed else None
            start = mark_start()
            fns[k](inputs)
            end = mark_end()
            after = preemptions() if timed else None
            if wait_for is not None:
                wait_for(end)
            clock.sync()
            elapsed = clock.elapsed_ms(start, end) if timed else 0.0  # read now: no events pile up
        except Exception as exc:  # noqa: BLE001 - one callable's failure is its result
            errors[k] = f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
            alive[k] = False
            return
        if timed:
            disturbed = before is not None and after is not None and after > before
            samples[k].append((elapsed, disturbed))
            clean[k] += not disturbed

    def round_(r: int, timed: bool) -> None:
        live = [k for k in range(count) if alive[k]]
        shift = r % max(1, len(live))
        for k in live[shift:] + live[:shift]:
            if alive[k]:
                call(k, sets[r % len(sets)], timed)

    warmup_rounds = 0
    started = time.perf_counter()
    while any(alive) and warmup_rounds < _MAX_WARMUP_CALLS and (
            warmup_rounds < warmup_calls or (time.perf_counter() - started) * 1e3 < warmup_ms):
        round_(warmup_rounds, False)
        warmup_rounds += 1
    rounds = 0
    extra_since = None
    timed_from = time.perf_counter()
    while any(alive):
        round_(warmup_rounds + rounds, True)  # the rotation and the input sets go on from the warm-up
        rounds += 1
        if rounds < rep or (rounds < MAX_TIMED_ROUNDS and time.perf_counter() - timed_from < min_s):
            continue
        if all(clean[k] >= rep for k in range(count) if alive[k]) or rounds >= max_rounds:
            break
        extra_since = time.perf_counter() if extra_since is None else extra_since  # the extra rounds' clock starts after round ``rep``
        if time.perf_counter() - extra_since >= max_extra_s:
            break
    clock.sync()
    enough = min(rep, max(5, rep // 4))
    results: list[TimingResult | None] = []
    kept: list[bool] = []
    for k in range(count):
        times = samples[k]
        undisturbed = [t for t, disturbed in times if not disturbed]
        use_all = len(undisturbed) < enough
        used = [t for t, _ in times] if use_all else undisturbed
        results.append(summarize(used, clock.method) if used and errors[k] is None else None)
        kept.append(use_all and len(undisturbed) < len(times))
    counted = preemptions() is not None
    return Interleaved(
        results=tuple(results), errors=tuple(errors), preempted=tuple(sum(d for _, d in m) for m in samples),
        kept_preempted=tuple(kept), rounds=rounds, warmup_rounds=warmup_rounds, preemption_counted=counted,
    )


def time_interleaved(
    fns: Sequence[Callable[[list[torch.Tensor]], Any]],
    input_sets: Sequence[Sequence[torch.Tensor]],
    *,
    warmup_calls: int = DEFAULT_WARMUP_CALLS,
    warmup_ms: float = DEFAULT_WARMUP_MS,
    rep: int = DEFAULT_REP,
    max_rounds: int | None = None,
    max_extra_s: float = DEFAULT_MAX_EXTRA_S,
    min_s: float = 0.0,
    flush_l2: bool = True,
) -> Interleaved:
    """:func:`measure_interleaved` on the GPU when any input is a CUDA tensor
    (CUDA events, L2 flushed by zeroing a 256 MB buffer, the GPU lock held
    exclusively for the whole of it: one hold, every callable's rounds
    inside it), else on the host clock (``perf_counter``, no flush, no lock).
    Medians in ms.  Raises ``ValueError`` as :func:`measure_interleaved`."""
    cuda = any(isinstance(x, torch.Tensor) and x.is_cuda for s in input_sets for x in s)
    if not cuda:
        return measure_interleaved(fns, input_sets, PerfCounterClock(), warmup_calls=warmup_calls, warmup_ms=warmup_ms, rep=rep,
                                   max_rounds=max_rounds, max_extra_s=max_extra_s, min_s=min_s)
    device = _device_of(input_sets)
    with torch.cuda.device(device), gpu_lock.exclusive(device):
        clock = CudaEventClock(device, L2_FLUSH_BYTES if flush_l2 else 0)
        return measure_interleaved(fns, input_sets, clock, warmup_calls=warmup_calls, warmup_ms=warmup_ms, rep=rep,
                                   max_rounds=max_rounds, max_extra_s=max_extra_s, min_s=min_s)


def _device_of(input_sets: Sequence[Sequence[torch.Tensor]]) -> torch.device:
    """The first CUDA tensor's device, else the current CUDA device."""
    for inputs in input_sets:
        for x in inputs:
            if isinstance(x, torch.Tensor) and x.is_cuda:
                return x.device
    return torch.device("cuda", torch.cuda.current_device())


def _demo() -> None:
    """Time an elementwise add and print achieved bandwidth."""
    if gpu_available():
        sets = [[torch.randn(4096, 4096, device="cuda"), torch.randn(4096, 4096, device="cuda")] for _ in range(3)]
        result = time_gpu(lambda xs: torch.add(xs[0], xs[1]), sets)
    else:
        sets = [[torch.randn(256, 256), torch.randn(256, 256)] for _ in range(3)]
        result = time_cpu(lambda xs: torch.add(xs[0], xs[1]), sets)
    nbytes = 3 * sets[0][0].numel() * sets[0][0].element_size()
    print(f"{result}  ->  {nbytes / (result.median_ms * 1e-3) / 1e9:.1f} GB/s")


if __name__ == "__main__":
    _demo()
