"""Device memory of an optimization run: the eager peak, the run's peak, the bound.

The optimizer must not multiply the model's memory (issue 9): its peak stays
within ``bound_bytes(eager_peak) = max(2 * eager_peak, eager_peak + 4 GiB)``.

On CUDA the numbers are the caching allocator's (``torch.cuda.memory_allocated``
and ``max_memory_allocated``: bytes of live tensors, weights included).  On
the CPU there is no such counter, so :class:`LiveBytes` counts the bytes of
the storages of live tensors that ATen ops create (a ``TorchDispatchMode``),
plus the model's weights counted once at the start: a *cpu-estimate* that
misses memory an op uses internally and frees before it returns.

:class:`MemoryMeter` keeps the run's peak across stages (the eager
measurement resets CUDA's peak statistic, so the meter carries the earlier
maximum forward) and builds ``report["memory"]``.
"""
from __future__ import annotations

import contextlib
import os
import sys
import threading
import weakref
from typing import Callable, Iterable

import torch
from torch.utils._python_dispatch import TorchDispatchMode

GiB = 1 << 30
MiB = 1 << 20
HEADROOM_BYTES = 4 * GiB  # the bound's additive slack


def bound_bytes(eager_peak: int) -> int:
    """``max(2 * eager_peak, eager_peak + 4 GiB)`` in bytes (``eager_peak`` in bytes)."""
    return max(2 * eager_peak, eager_peak + HEADROOM_BYTES)


def storage_bytes(tensors: Iterable) -> int:
    """Bytes of the unique storages behind ``tensors`` (non-tensors are skipped;
    views of one storage count once)."""
    seen: dict[tuple, int] = {}
    for t in tensors:
        if isinstance(t, torch.Tensor) and t.layout == torch.strided:
            storage = t.untyped_storage()
            seen[(t.device.type, t.device.index, storage.data_ptr())] = storage.nbytes()
    return sum(seen.values())


class LiveBytes(TorchDispatchMode):
    """Counts bytes of live tensor storages created by ATen ops while active.

    Enter it (``with counter:``) in every thread whose allocations should
    count; the totals are shared by all threads.  ``current``: bytes now live
    (plus ``base``); ``peak``: the highest ``current`` seen.  A storage is
    counted once however many views of it exist and leaves the count when the
    last tensor seen on it is garbage collected.  Tensors that existed before
    the counter (model weights) belong in ``base``.
    """

    def __init__(self, base: int = 0):
        super().__init__()
        self.base = base
        self._live: dict[int, list] = {}  # storage (its StorageImpl address) -> [nbytes, tensors alive]
        self._lock = threading.Lock()
        self.current = base
        self.peak = base

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in torch.utils._pytree.tree_leaves(out):
            if isinstance(t, torch.Tensor) and t.layout == torch.strided and t.device.type == "cpu":
                self._note(t)
        return out

    def _note(self, t: torch.Tensor) -> None:
        storage = t.untyped_storage()
        # keyed by the storage object, not its address: sharing a tensor with an
        # executor (torch.multiprocessing) moves its data to shared memory in place
        key, nbytes = storage._cdata, storage.nbytes()
        if nbytes == 0:
            return
        with self._lock:
            entry = self._live.get(key)
            if entry is None:
                entry = self._live[key] = [nbytes, 0]
                self.current += nbytes
                self.peak = max(self.peak, self.current)
            entry[1] += 1
        weakref.finalize(t, self._release, key)

    def _release(self, key: int) -> None:
        with self._lock:
            entry = self._live.get(key)
            if entry is None:
                return
            entry[1] -= 1
            if entry[1] <= 0:
                del self._live[key]
                self.current -= entry[0]

    def reset_peak(self) -> None:
        """Start a new peak from the bytes live now."""
        with self._lock:
            self.peak = self.current


class MemoryMeter:
    """Peak memory of one run on ``device`` (``"cuda"`` or ``"cpu"``).

    ``bound``: ``max(2 * eager_peak, eager_peak + headroom)`` bytes once the
    eager peak is measured (``headroom``: 4 GiB; tests pass less).
    ``tracking()``: a context every thread that allocates for the run enters
    (a no-op on CUDA, where the allocator counts every thread).
    ``allocated()`` / ``peak()``: bytes now and the highest so far since the
    meter started, counting what candidate executors and the composed model's
    process held (``note_external``: this process's bytes at the time plus
    theirs at their peak; ``lego_core.judge``); ``enter_stage(name)`` starts a
    pipeline stage and ``stage_peaks`` keeps each stage's peak
    (``report()["stage_peaks_mb"]``).  ``measure_eager(fn)``: the peak bytes while ``fn()`` runs,
    counting everything alive when it starts (weights, inputs).
    """

    def __init__(self, device: str, base_tensors: Iterable = (), headroom: int = HEADROOM_BYTES):
        self.device = device
        self.headroom = headroom
        self.eager_base = 0  # bytes alive when the eager forward started (weights, ...)
        self.kind = "cuda" if device == "cuda" else "cpu-estimate"
        self.eager_peak: int | None = None
        self._earlier_peak = 0
        self.stage: str | None = None
        self.stage_peaks: dict[str, int] = {}  # stage -> peak bytes while it ran
        self._external_peak = 0  # this process's bytes plus another process's peak, at its highest
        self.counter: LiveBytes | None = None
        if device == "cuda":
            if torch.cuda.is_available():  # else loading the problem says there is no GPU
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
        else:
            self.counter = LiveBytes(storage_bytes(base_tensors))

    def add_base(self, tensors: Iterable) -> None:
        """Count tensors made outside the counter (the model's weights, on the CPU)."""
        if self.counter is not None:
            extra = storage_bytes(tensors)
            with self.counter._lock:
                self.counter.base += extra
                self.counter.current += extra
                self.counter.peak = max(self.counter.peak, self.counter.current)

    def tracking(self):
        """Context under which this thread's allocations count (CPU only)."""
        return self.counter if self.counter is not None else contextlib.nullcontext()

    def allocated(self) -> int:
        if self.device == "cuda":
            return torch.cuda.memory_allocated()
        return self.counter.current

    def peak(self) -> int:
        if self.device == "cuda":
            return max(self._earlier_peak, self._external_peak, torch.cuda.max_memory_allocated())
        return max(self._earlier_peak, self._external_peak, self.counter.peak)

    def note_external(self, nbytes: int) -> None:
        """Another process of the run (a candidate executor, the composed
        model's process) held ``nbytes`` at its peak while this one held what
        it holds now: their sum counts toward the run's peak."""
        self._external_peak = max(self._external_peak, self.allocated() + int(nbytes))
        if self.stage is not None:
            self.stage_peaks[self.stage] = max(self.stage_peaks.get(self.stage, 0), self.allocated() + int(nbytes))

    def enter_stage(self, name: str) -> None:
        """Close the current stage (its peak goes to ``stage_peaks``) and start
        ``name``: on CUDA the allocator's peak statistic is reset (the run's
        peak so far is carried), so each stage's own peak is known, which
        says where a broken bound comes from."""
        self._close_stage()
        self.stage = name
        if self.device == "cuda":
            if not torch.cuda.is_available():  # loading the problem says there is no GPU
                return
            self._earlier_peak = self.peak()
            torch.cuda.reset_peak_memory_stats()
        elif self.counter is not None:
            self._earlier_peak = self.peak()
            self.counter.reset_peak()

    def _close_stage(self) -> None:
        if self.stage is None:
            return
        if self.device == "cuda" and not torch.cuda.is_available():
            return
        now = torch.cuda.max_memory_allocated() if self.device == "cuda" else (self.counter.peak if self.counter else 0)
        if os.environ.get("LEGO_DEBUG_MEMORY_MB"):
            print(f"[lego memory] stage {self.stage}: {now / MiB:.0f} MiB at this process's peak, "
                  f"{self.stage_peaks.get(self.stage, 0) / MiB:.0f} MiB with other processes", file=sys.stderr, flush=True)
        self.stage_peaks[self.stage] = max(self.stage_peaks.get(self.stage, 0), now)

    def measure_eager(self, fn: Callable[[], object]) -> int:
        """Peak bytes while ``fn()`` runs (everything alive counts); kept as ``eager_peak``."""
        self._earlier_peak = self.peak()
        self.eager_base = self.allocated()
        if self.device == "cuda":
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            fn()
            torch.cuda.synchronize()
            self.eager_peak = torch.cuda.max_memory_allocated()
        else:
            with self.counter:
                self.counter.reset_peak()
                fn()
                self.eager_peak = self.counter.peak
        return self.eager_peak

    @property
    def activation_bytes(self) -> int:
        """Bytes the eager forward allocated beyond what was alive before it (0 before measuring)."""
        return max(0, (self.eager_peak or 0) - self.eager_base)

    @property
    def bound(self) -> int | None:
        if self.eager_peak is None:
            return None
        return max(2 * self.eager_peak, self.eager_peak + self.headroom)

    def report(self) -> dict:
        """``report["memory"]``: peaks and bound in MiB, whether the bound held, how measured."""
        if self.eager_peak is None:
            return {"eager_peak_mb": None, "search_peak_mb": None, "bound_mb": None, "within_bound": None, "measured": self.kind}
        self._close_stage()
        peak = self.peak()
        data = {
            "eager_peak_mb": round(self.eager_peak / MiB, 3),
            "search_peak_mb": round(peak / MiB, 3),
            "bound_mb": round(self.bound / MiB, 3),
            "within_bound": peak <= self.bound,
            "measured": self.kind,
            "stage_peaks_mb": {name: round(b / MiB, 3) for name, b in self.stage_peaks.items()},
        }
        if self.device == "cuda":
            data["search_reserved_peak_mb"] = round(torch.cuda.max_memory_reserved() / MiB, 1)
        return data
