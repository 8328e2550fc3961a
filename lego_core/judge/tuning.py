"""Per-shape tuning of a kernel file's launch configuration, at search time on a GPU.

A kernel file may offer candidate configurations: a module-level
``TUNE_CONFIGS = [...]`` (dicts of Triton meta-parameters: ``BLOCK_*``
constexprs, ``num_warps``, ``num_stages``) and one line ``CONFIG = {...}``
that its ``launch`` reads at every call.  :func:`tune_source` imports the
file once, sets ``module.CONFIG`` to each candidate in turn, runs it on one
input set (a configuration that fails to compile or run, e.g. out of shared
memory, is skipped), compares its outputs with the default configuration's,
times it (CUDA events, L2 flushed, median of a short run) and returns the
source with the ``CONFIG = ...`` line replaced by the fastest configuration
and a comment with the measured times.  So the shipped file and the kernel
cache hold the tuned configuration and a user's process never tunes (the
same idea as Triton's ``@triton.autotune``, done once ahead of time; the
candidate lists follow Triton's tutorials 03 and 06).

Everything else in the file is left as it is.  A file without
``TUNE_CONFIGS`` or without exactly one ``CONFIG = {...}`` line, or one whose
``CONFIG`` line says it is tuned already, is not tunable (:func:`tunable`).
"""
from __future__ import annotations

import ast
import dataclasses
import math
import re
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Callable, Sequence

import torch
from lego_core.judge.inputs import load_module

MAX_CONFIGS = 8
WARMUP_MS = 5.0
REP = 20
BUDGET_S = 60.0  # stop timing further configurations after this many seconds
TUNED_MARK = "# tuned"
CONFIG_LINE = re.compile(r"^CONFIG = (\{[^\n]*\})[^\n]*$", re.M)
# norm-relative difference allowed between two configurations' outputs (they sum in another order)
SAME_RESULT = {torch.float32: 1e-4, torch.float64: 1e-10, torch.float16: 3e-3, torch.bfloat16: 2e-2}

Timer = Callable[[Callable[[list], object], list[list]], float]


@dataclasses.dataclass
class TuneResult:
    """What tuning gave.

    ``source``: the file with the winner's ``CONFIG`` line (the input source
    when the default won or nothing could be timed); ``default``/``winner``:
    configurations (dicts); ``times``: one ``(config, ms or None, note)``
    per tried configuration, in ``TUNE_CONFIGS`` order (``note`` says why a
    configuration was skipped); ``seconds``: wall time spent."""

    source: str
    default: dict
    winner: dict
    times: list[tuple[dict, float | None, str]]
    seconds: float

    def summary(self) -> str:
        """One paragraph for a transcript: the winner and every configuration's time (ms)."""
        rows = []
        for cfg, ms, note in self.times:
            rows.append(f"{_short(cfg)}: {ms:.4f} ms" if ms is not None else f"{_short(cfg)}: skipped ({note})")
        default_ms = next((ms for cfg, ms, _ in self.times if cfg == self.default), None)
        winner_ms = next((ms for cfg, ms, _ in self.times if cfg == self.winner), None)
        gain = f", {default_ms / winner_ms:.2f}x the default" if default_ms and winner_ms else ""
        head = "kept the default configuration" if self.winner == self.default else "tuned"
        return f"{head} {_short(self.winner)}{gain} ({len(self.times)} configurations in {self.seconds:.1f} s): " + "; ".join(rows)


def _short(cfg: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in cfg.items())


def tunable(source: str) -> bool:
    """Whether ``source`` offers ``TUNE_CONFIGS`` and one untuned ``CONFIG = {...}`` line."""
    lines = CONFIG_LINE.findall(source)
    return "\nTUNE_CONFIGS = " in source and len(lines) == 1 and TUNED_MARK not in CONFIG_LINE.search(source).group(0)


def default_config(source: str) -> dict:
    """The configuration on the ``CONFIG = {...}`` line (a literal dict).  ValueError if there is none."""
    match = CONFIG_LINE.search(source)
    if match is None:
        raise ValueError("the kernel file has no CONFIG = {...} line")
    return ast.literal_eval(match.group(1))


def with_config(source: str, cfg: dict, comment: str = "") -> str:
    """``source`` with its ``CONFIG = ...`` line replaced by ``cfg`` (and ``comment`` after it)."""
    line = f"CONFIG = {cfg!r}" + (f"  {TUNED_MARK}: {comment}" if comment else "")
    return CONFIG_LINE.sub(lambda _: line, source, count=1)


def gpu_timer(fn: Callable[[list], object], input_sets: list[list]) -> float:
    """Median ms of ``fn`` on a CUDA device: ``costing.measure_ms`` with a
    short run (``WARMUP_MS``, ``REP``), replayed as a CUDA graph as the
    shipped model runs it (launched directly when it cannot be captured).
    The search does not time in this process: its timer sends the same
    request to the candidate executor (``RemoteModule.time``)."""
    from lego_core.cost.costing import measure_ms

    return measure_ms(fn, input_sets, WARMUP_MS, REP)


def _load_temporary(source: str) -> ModuleType:
    """Import ``source`` from a file of its own (Triton's @jit needs a real file)."""
    folder = Path(tempfile.mkdtemp(prefix="lego-tune-"))
    path = folder / "kernel_tuning.py"
    path.write_text(source)
    return load_module(path, f"lego_tuning_{folder.name.replace('-', '_')}")


def same_result(got: Sequence, want: Sequence) -> str:
    """"" when two configurations' outputs agree (shapes, dtypes, NaN / inf
    positions, norm-relative difference within ``SAME_RESULT``), else why not."""
    if len(got) != len(want):
        return f"{len(got)} outputs, the default gave {len(want)}"
    for k, (g, w) in enumerate(zip(got, want)):
        if g.shape != w.shape or g.dtype != w.dtype:
            return f"output {k} is {tuple(g.shape)} {g.dtype}, the default's {tuple(w.shape)} {w.dtype}"
        g64, w64 = g.double(), w.double()
        if not torch.equal(torch.isnan(g64), torch.isnan(w64)) or not torch.equal(torch.isinf(g64), torch.isinf(w64)):
            return f"output {k} has NaN / inf where the default has none (or the reverse)"
        finite = torch.isfinite(w64)
        diff = (g64[finite] - w64[finite]).norm().item()
        scale = max(w64[finite].norm().item(), 1e-30)
        tol = SAME_RESULT.get(w.dtype, 1e-4)
        if diff > tol * scale:
            return f"output {k} differs from the default's by {diff / scale:.2e} (norm-relative, allowed {tol:.0e})"
    return ""


def tune_source(
    source: str,
    input_sets: list[list],
    *,
    load: Callable[[str], ModuleType] | None = None,
    timer: Timer | None = None,
    max_configs: int = MAX_CONFIGS,
    budget_s: float = BUDGET_S,
    device_name: str = "",
) -> TuneResult:
    """Time the configurations of a kernel file and bake the fastest into it.

    ``source``: a kernel file for which :func:`tunable` holds; ``input_sets``:
    one or more input sets for ``launch`` (CUDA tensors on a GPU run; the
    first is used for the output comparison); ``load``: imports a source
    (default: a temporary file); ``timer(fn, input_sets) -> ms`` (default
    :func:`gpu_timer`; tests inject a fake).  At most ``max_configs``
    configurations, the default first, and no new one after ``budget_s``
    seconds.  A configuration that raises, or whose outputs differ from the
    default's (:func:`same_result`), is skipped.  The default configuration
    must run: its exception propagates (the caller keeps the file as it is).

    Returns a :class:`TuneResult`; its ``source`` differs from ``source``
    only on the ``CONFIG`` line: the winner (the default when no other was
    faster) and a ``# tuned: ...`` comment with the times, which also marks
    the file as tuned.  ValueError when ``source`` is not tunable."""
    if not tunable(source):
        raise ValueError("the kernel file offers no TUNE_CONFIGS or no single untuned CONFIG line")
    started = time.monotonic()
    load = load or _load_temporary
    timer = timer or gpu_timer
    module = load(source)
    default = dict(module.CONFIG)
    configs = [default] + [dict(c) for c in module.TUNE_CONFIGS if dict(c) != default]
    configs = configs[:max_configs]
    sets = [list(s) for s in input_sets]
    times: list[tuple[dict, float | None, str]] = []
    reference = None
    try:
        for cfg in configs:
            if reference is not None and time.monotonic() - started > budget_s:
                times.append((cfg, None, f"tuning budget of {budget_s:.0f} s spent"))
                continue
            module.CONFIG = dict(cfg)
            try:
                outputs = module.launch(*sets[0])
                _sync(outputs)
            except Exception as exc:  # noqa: BLE001 - out of shared memory, too many registers, ...
                if reference is None:
                    raise
                times.append((cfg, None, f"{type(exc).__name__}: {str(exc).splitlines()[0][:120] if str(exc) else ''}"))
                continue
            if reference is None:
                reference = [o.detach().clone() for o in outputs]
            else:
                why = same_result(outputs, reference)
                if why:
                    times.append((cfg, None, why))
                    continue
            del outputs
            ms = timer(lambda xs: module.launch(*xs), sets)
            times.append((cfg, float(ms), ""))
    finally:
        module.CONFIG = dict(default)
    timed = [(ms, k) for k, (_, ms, _) in enumerate(times) if ms is not None and math.isfinite(ms)]
    best = min(timed)[1] if timed else 0
    winner = times[best][0] if timed else default
    default_ms = times[0][1]
    where = f" on {device_name}" if device_name else ""
    if winner == default:
        comment = f"default kept{where}, {default_ms:.4f} ms, fastest of {len(timed)} of {len(configs)} configurations timed"
    else:
        comment = f"{times[best][1]:.4f} ms{where}, default {_short(default)} {default_ms:.4f} ms, {len(timed)} of {len(configs)} configurations timed"
    new_source = with_config(source, winner, comment)
    return TuneResult(new_source, default, winner, times, time.monotonic() - started)


def _sync(outputs) -> None:
    """Wait for the kernel (so a launch failure surfaces here, not later)."""
    if any(isinstance(o, torch.Tensor) and o.is_cuda for o in outputs):
        torch.cuda.synchronize()
