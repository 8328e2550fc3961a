"""Where a run's time goes: seconds per phase, for ``report.json["phases_s"]``.

The pipeline's stages run one after the other (load, capture, construct,
search, compose, end-to-end check, launch variants, timing), so their
seconds add up to the pipeline's wall time; ``process`` (added by
``lego_core.api`` in the calling process) is the rest of the optimizer's
wall time: starting its jailed process, checking and committing the output.  Inside the search, work runs
in parallel threads (agents write kernels while the judge verifies another
candidate), so the search's own phases (baseline timing, agent calls,
verification, candidate timing, mutation) are *busy* seconds: the sum of the
durations of every piece of that work, which can overlap and can exceed the
search's wall seconds.  ``PhaseClock.as_dict`` gives both, in
:data:`PHASES` order, with a ``"_wall"`` key for the total.
"""
from __future__ import annotations

import contextlib
import threading
import time

# name -> what it covers; the order is the report's
PHASES: dict[str, str] = {
    "process": "starting the optimizer's jailed process, then checking and committing its output (in the calling process)",
    "startup": "the optimizer's process importing torch, triton and the pipeline and starting the judge's fork server",
    "load": "importing the model file, building the model, one eager forward (its memory peak)",
    "capture": "torch.export to core ATen with shapes (channels-last first when asked)",
    "construct": "the FusionTree, top-down, and the boundary value store",
    "search": "the whole search (wall): library plan, agents, judging, mutation",
    "baseline_timing": "timing library (ATen) sub-problems on the GPU, in batches (busy s, inside search)",
    "agent_calls": "agents writing kernels (busy s, summed over parallel agents, inside search)",
    "verification": "checking candidates against the reference on the secret input sets (busy s, inside search)",
    "candidate_timing": "tuning and timing verified candidates on the GPU, a leaf's library time taken in the same hold included (busy s, inside search)",
    "mutation": "bottom-up fusion rounds (wall, inside search)",
    "compose": "writing optimized_model.py and the kernel files",
    "e2e_check": "the end-to-end check against fp64 (and the fallback's bisection when a kernel fails it)",
    "launch_variants": "measuring the launch variants (direct, CUDA graph, original forward) and checking what ships",
    "timing": "eager, torch.compile and the shipped model timed for the report",
}
SEQUENTIAL = ("process", "startup", "load", "capture", "construct", "search", "compose", "e2e_check", "launch_variants", "timing")


class PhaseClock:
    """Seconds spent per phase of one run; thread-safe.

    ``phase(name)`` is a context manager that adds the seconds of its body
    to ``name`` (several threads may be inside the same phase at once: their
    seconds add up); ``add(name, seconds)`` adds directly.  Names outside
    :data:`PHASES` raise ValueError (a typo would otherwise vanish from the
    report)."""

    def __init__(self, started: float | None = None) -> None:
        """``started``: ``time.monotonic()`` the wall time counts from (default: now)."""
        self._seconds: dict[str, float] = {}
        self._lock = threading.Lock()
        self._started = time.monotonic() if started is None else started
        self._stage: tuple[str, float] | None = None  # the running pipeline stage and when it began

    def begin(self, name: str) -> None:
        """End the running stage (if any) and start stage ``name``: the
        pipeline's stages follow each other."""
        self.end()
        if name not in PHASES:
            raise ValueError(f"unknown phase {name!r}; phases are {', '.join(PHASES)}")
        self._stage = (name, time.monotonic())

    def end(self) -> None:
        """End the running stage (nothing when none runs)."""
        if self._stage is not None:
            name, began = self._stage
            self._stage = None
            self.add(name, time.monotonic() - began)

    def add(self, name: str, seconds: float) -> None:
        """Add ``seconds`` (s, >= 0) to phase ``name``."""
        if name not in PHASES:
            raise ValueError(f"unknown phase {name!r}; phases are {', '.join(PHASES)}")
        with self._lock:
            self._seconds[name] = self._seconds.get(name, 0.0) + max(0.0, seconds)

    @contextlib.contextmanager
    def phase(self, name: str):
        """Time the body as phase ``name`` (its seconds are added even when it raises)."""
        started = time.monotonic()
        try:
            yield
        finally:
            self.add(name, time.monotonic() - started)

    def seconds(self, name: str) -> float:
        """Seconds so far in phase ``name`` (0.0 when it never ran)."""
        with self._lock:
            return self._seconds.get(name, 0.0)

    def as_dict(self) -> dict[str, float]:
        """Phase -> seconds (rounded to ms) in :data:`PHASES` order, phases that
        never ran left out, and ``"_wall"``: seconds since the clock was made."""
        with self._lock:
            data = {name: round(self._seconds[name], 3) for name in PHASES if name in self._seconds}
        data["_wall"] = round(time.monotonic() - self._started, 3)
        return data


def phase_or_nothing(clock: PhaseClock | None, name: str):
    """``clock.phase(name)``, or a context that does nothing when ``clock`` is None."""
    return clock.phase(name) if clock is not None else contextlib.nullcontext()
