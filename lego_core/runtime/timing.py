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

This module imports without CUDA; :func:`time_gpu` then raises
``RuntimeError``.  Every result says how it was measured (``method``), so a
report can tell measured numbers from the cost model's estimates.

Usage: ``python -m lego_core.runtime.timing`` times a 4096x4096 add on the GPU if
there is one, else a small CPU add.
"""
from __future__ import annotations

import dataclasses
import math
import time
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

    def mark(self) -> torch.cuda.Event:
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def elapsed_ms(self, start: torch.cuda.Event, end: torch.cuda.Event) -> float:
        return float(start.elapsed_time(end))

    def sync(self) -> None:
        torch.cuda.synchronize(self.device)

    def flush(self) -> None:
        if self.flush_buffer is not None:
            self.flush_buffer.zero_()


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
