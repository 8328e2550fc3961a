"""How busy the host is: what a report says beside a timing taken on a shared machine.

An eager model of small ops is launch bound: each op is a Python call and a
dispatcher call on the CPU, so other processes' CPU work (other runs'
searches, Triton compiles) makes its calls slower, while a CUDA graph's one
launch hardly notices.  A timing therefore says how busy the host was while
it ran (``lego_core.judge.end_to_end.benchmark.time_models_here``):

* :func:`sample`: the 1-minute load average against the CPU count, now;
* :func:`watch`: a window (a ``with`` block) that samples the load average
  at its start and end and, where ``/proc/stat`` is readable (Linux), the
  fraction of all CPUs' time that was busy during the window, with and
  without this process's own CPU time.

Nothing here raises on a machine without ``/proc`` or ``getloadavg``: the
values it cannot read are None.

Usage: ``python -m lego_core.runtime.host_load`` prints a one-second window.
"""
from __future__ import annotations

import contextlib
import os
import time
from typing import Iterator

try:
    import resource
except ImportError:  # not a Unix
    resource = None

PROC_STAT = "/proc/stat"


def cpu_count() -> int | None:
    """The host's CPU count (``os.cpu_count()``: the load average counts
    runnable tasks on all of them), None when unknown."""
    return os.cpu_count()


def usable_cpus() -> int | None:
    """CPUs this process may run on (its affinity), None when unknown."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None


def load_avg_1m() -> float | None:
    """The 1-minute load average (runnable and waiting tasks, host wide),
    None where the system has none."""
    try:
        return float(os.getloadavg()[0])
    except (AttributeError, OSError):
        return None


def current_cpu() -> int | None:
    """The CPU the calling thread runs on now (``/proc/thread-self/stat``,
    field 39), None where it cannot be read.  On a virtual machine the CPUs
    need not be equally fast: one whose physical core the host shares with
    other work runs a launch-bound call slower."""
    try:
        with open("/proc/thread-self/stat", encoding="ascii") as handle:
            return int(handle.read().rsplit(")", 1)[1].split()[36])
    except (OSError, ValueError, IndexError):
        return None


def sample() -> dict:
    """``{"load_avg_1m", "cpus", "busy"}`` now: the load average, the CPU
    count and load per CPU (1.0: as many runnable tasks as CPUs; above it
    tasks wait for a CPU); a value not known is None."""
    load, cpus = load_avg_1m(), cpu_count()
    return {"load_avg_1m": load, "cpus": cpus, "busy": load / cpus if load is not None and cpus else None}


def _cpu_fields(path: str) -> list[int] | None:
    """The aggregate ``cpu`` line of ``/proc/stat``: ticks of user, nice,
    system, idle, iowait, irq, softirq, steal (zeros for fields an old
    kernel lacks), None when the file is missing or not in that form."""
    try:
        with open(path, encoding="ascii") as handle:
            first = handle.readline().split()
    except OSError:
        return None
    if len(first) < 5 or first[0] != "cpu":
        return None
    try:
        fields = [int(v) for v in first[1:9]]
    except ValueError:
        return None
    return fields + [0] * (8 - len(fields))


def cpu_jiffies(path: str = PROC_STAT) -> tuple[int, int] | None:
    """``(busy, total)`` clock ticks of all CPUs since boot from the
    aggregate ``cpu`` line of ``/proc/stat``: total = user + nice + system +
    idle + iowait + irq + softirq + steal (guest time is inside user and
    nice), busy = total - idle - iowait.  None when the file is missing or
    not in that form."""
    fields = _cpu_fields(path)
    if fields is None:
        return None
    total = sum(fields)
    return total - fields[3] - fields[4], total


def own_cpu_s() -> float | None:
    """CPU seconds (user + system) this process used so far, all its
    threads; None where it cannot be read."""
    if resource is None:
        return None
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return float(usage.ru_utime + usage.ru_stime)


def _ticks_per_s() -> float | None:
    try:
        return float(os.sysconf("SC_CLK_TCK"))
    except (AttributeError, ValueError, OSError):
        return None


def _fraction(value: float) -> float:
    return min(1.0, max(0.0, value))


@contextlib.contextmanager
def watch(path: str = PROC_STAT) -> Iterator[dict]:
    """A window over the ``with`` block; the dict it yields is filled when
    the block ends (also when it raises):

    * ``load_avg_1m``: the larger of the load averages at start and end
      (``load_avg_1m_before``, ``load_avg_1m_after``); ``cpus`` (host CPUs),
      ``cpus_usable`` (this process's affinity); ``busy``:
      ``load_avg_1m / cpus``.  The load average trails by about a minute;
    * ``window_s``: the window's length in seconds;
    * ``cpu_busy_fraction``: busy share of all CPUs' time during the window
      (0..1, from ``/proc/stat``; this process included), None when
      ``/proc/stat`` cannot be read or no tick passed;
    * ``others_cpu_busy_fraction``: the same without this process's own CPU
      time (what the other processes took), None likewise;
    * ``timing_cpus``: the CPUs the calling thread ran on at the start and
      the end (sorted, distinct; empty when unknown);
    * ``steal_fraction``: the share of all CPUs' time the hypervisor gave to
      other machines (``steal``; 0 on bare metal), None likewise.  A
      virtual machine's CPUs can also run slower, without steal, when the
      host's other work shares their cores.

    ``/proc/stat`` counts in ticks of 10 ms per CPU: a window of a second on
    16 CPUs is 1,600 ticks, a window of 10 ms is too short to say much."""
    info: dict = {}
    before = sample()
    cpu0, stat0, own0, started = current_cpu(), _cpu_fields(path), own_cpu_s(), time.monotonic()
    try:
        yield info
    finally:
        stat1, own1, window = _cpu_fields(path), own_cpu_s(), time.monotonic() - started
        after = sample()
        loads = [v for v in (before["load_avg_1m"], after["load_avg_1m"]) if v is not None]
        load = max(loads) if loads else None
        cpus = after["cpus"] or before["cpus"]
        info.update(
            load_avg_1m=load, load_avg_1m_before=before["load_avg_1m"], load_avg_1m_after=after["load_avg_1m"],
            cpus=cpus, cpus_usable=usable_cpus(), busy=load / cpus if load is not None and cpus else None,
            window_s=window, cpu_busy_fraction=None, others_cpu_busy_fraction=None, steal_fraction=None,
            timing_cpus=sorted({c for c in (cpu0, current_cpu()) if c is not None}),
        )
        delta = [b - a for a, b in zip(stat0, stat1)] if stat0 is not None and stat1 is not None else None
        if delta is not None and sum(delta) > 0:
            total = sum(delta)
            busy = total - delta[3] - delta[4]
            info["cpu_busy_fraction"] = _fraction(busy / total)
            info["steal_fraction"] = _fraction(delta[7] / total)
            ticks = _ticks_per_s()
            if ticks and own0 is not None and own1 is not None:
                info["others_cpu_busy_fraction"] = _fraction((busy / ticks - (own1 - own0)) / (total / ticks))


if __name__ == "__main__":
    with watch() as _window:
        time.sleep(1.0)
    print(_window)
