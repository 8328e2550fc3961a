"""Side by side in one process: eager, torch.compile's modes and LEGO's ModelNew.

``side_by_side(candidates, input_sets)`` builds each named candidate in
turn, checks its first output against the first candidate's (the reference,
normally eager) by norm-relative error, and times it with
``lego_core.runtime.timing`` on the same input sets: CUDA events, L2 flushed before
every call, median with 20th/80th percentiles, under ``torch.no_grad``.  The
rules follow ../shared/tools/sidebyside.py (the independent checker), whose
numbers these must agree with: ``sync_each=True`` by default, so every timed
call starts on an idle GPU as there.  Before each candidate
``torch._dynamo.reset()`` clears compiled code, so one torch.compile mode
never reuses another's; a candidate that fails to build, run or time is
recorded with its error, never raised.

``time_models_here`` times eager, torch.compile and a composed model as
shipped, in the composed model's own process (``served``), interleaved
under one hold of the GPU lock (the report's timing: a speedup that holds
when re-measured, with how busy the host was);
``load_model_new(out_dir, problem)`` loads an output folder as a user does;
``eager_peak_mb`` measures the peak GPU memory of one eager forward.

Usage: see bench/gpu_models.py (``make bench-gpu``).
"""
from __future__ import annotations

import contextlib
import dataclasses
import gc
import os
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Sequence

import torch

from lego_core.errors import OptimizeError
from lego_core.judge.end_to_end.shipped import fallback_problem, import_optimized_model, load_composed
from lego_core.load.state import preserved
from lego_core.runtime import gpu_lock, host_load
from lego_core.runtime.timing import (DEFAULT_REP, DEFAULT_WARMUP_CALLS, DEFAULT_WARMUP_MS, Interleaved, TimingResult, time_interleaved,
                                      time_on_device)

COMPILE_MODES = ("default", "reduce-overhead")


@dataclasses.dataclass
class Measured:
    """One candidate's outcome.

    ``timing``: its TimingResult (None when it failed); ``rel_err``:
    ``||out - ref|| / ||ref||`` in fp64 against the reference candidate's
    output on the first input set (None for the reference itself or when
    either failed); ``setup_s``: seconds to build it and run it once (for
    torch.compile: the compile time); ``error``: ``"Type: message"`` when
    building, running or timing raised.
    """

    name: str
    timing: TimingResult | None = None
    rel_err: float | None = None
    setup_s: float | None = None
    error: str | None = None

    @property
    def median_ms(self) -> float | None:
        return self.timing.median_ms if self.timing else None

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "timing": self.timing.to_dict() if self.timing else None,
            "rel_err": self.rel_err,
            "setup_s": self.setup_s,
            "error": self.error,
        }


def norm_rel_error(actual, reference) -> float:
    """``||actual - reference||_2 / max(||reference||_2, 1e-12)`` computed in fp64;
    for a model that returns several tensors (a tuple, list or dict, nested:
    ``torch.utils._pytree``) the norms run over all of them at once.
    ValueError when the structures or shapes differ."""
    got, want = torch.utils._pytree.tree_leaves(actual), torch.utils._pytree.tree_leaves(reference)
    if len(got) != len(want):
        raise ValueError(f"{len(got)} outputs, the reference returns {len(want)}")
    diff_sq, ref_sq = 0.0, 0.0
    for a, r in zip(got, want):
        if tuple(a.shape) != tuple(r.shape):
            raise ValueError(f"output shape {tuple(a.shape)} differs from the reference's {tuple(r.shape)}")
        a, r = a.detach().double(), r.detach().double().to(a.device)
        diff_sq += (a - r).norm().item() ** 2
        ref_sq += r.norm().item() ** 2
    return diff_sq**0.5 / max(ref_sq**0.5, 1e-12)


def _error_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"


def side_by_side(
    candidates: Sequence[tuple[str, Callable[[], Callable[..., torch.Tensor]]]],
    input_sets: Sequence[Sequence[Any]],
    *,
    warmup_ms: float = DEFAULT_WARMUP_MS,
    rep: int = DEFAULT_REP,
    sync_each: bool = True,
) -> list[Measured]:
    """Build, check and time each ``(name, build)`` in order, in this process.

    ``build()`` returns a callable taking the model's inputs as positional
    arguments (a module, a compiled module...); it runs after
    ``torch._dynamo.reset()``.  The first candidate is the reference for
    ``rel_err``.  ``input_sets``: the inputs (lists), shared by all
    candidates; timing rotates through them (``lego_core.runtime.timing.measure``).
    Returns one :class:`Measured` per candidate, in order; errors are
    recorded in it.
    """
    results: list[Measured] = []
    reference: torch.Tensor | None = None
    with torch.no_grad():
        for k, (name, build) in enumerate(candidates):
            result = Measured(name)
            results.append(result)
            torch._dynamo.reset()
            fn = None
            try:
                started = time.perf_counter()
                fn = build()
                # a stateful forward's writes are undone after each candidate, so every candidate's
                # first call (its rel_err) starts from the same state (lego_core.load.state)
                with preserved(fn) if isinstance(fn, torch.nn.Module) else contextlib.nullcontext():
                    out = fn(*input_sets[0])
                    out = torch.utils._pytree.tree_map(lambda t: t.detach().clone() if isinstance(t, torch.Tensor) else t, out)  # a CUDA-graph output is overwritten by the next replay
                    _sync(out)
                    result.setup_s = time.perf_counter() - started
                    if k == 0:
                        reference = out
                    elif reference is not None:
                        result.rel_err = norm_rel_error(out, reference)
                    del out
                    result.timing = time_on_device(lambda xs, f=fn: f(*xs), input_sets, warmup_ms, rep, sync_each)
            except Exception as exc:  # noqa: BLE001 - one candidate's failure is a result
                result.error = _error_text(exc)
            finally:
                del fn
                _release()
    torch._dynamo.reset()
    return results


def compile_candidates(model: torch.nn.Module, modes: Sequence[str] = COMPILE_MODES) -> list[tuple[str, Callable]]:
    """``("compile_default", build)`` and ``("compile_reduce_overhead", build)``
    (one per mode; names with ``-`` written ``_``), each building
    ``torch.compile(model, mode=...)``."""
    return [(f"compile_{m.replace('-', '_')}", lambda m=m: torch.compile(model, mode=None if m == "default" else m)) for m in modes]


def load_model_new(out_dir: str | Path, problem) -> torch.nn.Module:
    """``ModelNew`` from ``out_dir/optimized_model.py``, built as a user would:
    ``ModelNew(*get_init_inputs())`` under ``torch.manual_seed(0)``, eval, on
    the problem's device and dtype, with the original model's weights loaded
    (``strict=True``).  FileNotFoundError when the folder has no
    optimized_model.py."""
    path = Path(out_dir) / "optimized_model.py"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no optimized_model.py (the search did not finish)")
    module = import_optimized_model(Path(out_dir), f"lego_bench_{uuid.uuid4().hex[:8]}")
    torch.manual_seed(0)
    new = module.ModelNew(*problem.init_inputs).eval().to(device=problem.spec.device, dtype=problem.spec.torch_dtype)
    new.load_state_dict(problem.model.state_dict(), strict=True)
    return new


def eager_peak_mb(model: torch.nn.Module, inputs: Sequence[Any]) -> float | None:
    """Peak GPU memory of one eager forward of ``model`` on ``inputs`` under
    ``torch.no_grad``, in MB (1e6 bytes): the bytes of its parameters and
    buffers, plus the tensor inputs, plus the most the forward allocated
    beyond what was allocated before it (so other objects of this process do
    not count).  None when the inputs are not on a CUDA device."""
    cuda = [x for x in inputs if isinstance(x, torch.Tensor) and x.is_cuda]
    if not cuda:
        return None
    device = cuda[0].device
    _release()
    torch.cuda.synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    before = torch.cuda.memory_allocated(device)
    with torch.no_grad(), preserved(model):  # a stateful forward's writes are undone
        out = model(*inputs)
    torch.cuda.synchronize(device)
    activations = torch.cuda.max_memory_allocated(device) - before
    del out
    state = {id(t): t for t in list(model.parameters()) + list(model.buffers())}
    state_bytes = sum(t.numel() * t.element_size() for t in state.values() if t.is_cuda)
    input_bytes = sum(x.numel() * x.element_size() for x in cuda)
    return (state_bytes + input_bytes + activations) / 1e6


def _sync(x) -> None:
    """Wait for the GPU work behind ``x`` (a tensor, or a pytree of them)."""
    for t in torch.utils._pytree.tree_leaves(x):
        if isinstance(t, torch.Tensor) and t.is_cuda:
            torch.cuda.synchronize(t.device)
            return


def _release() -> None:
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def _cuda_device(inputs: Sequence[Any]) -> torch.device | None:
    """The device of the first CUDA tensor among ``inputs``, else None."""
    for x in inputs:
        if isinstance(x, torch.Tensor) and x.is_cuda:
            return x.device
    return None


def _timing_hold(device: torch.device | None):
    """The GPU lock held exclusively on ``device`` (nothing off the GPU)."""
    return gpu_lock.exclusive(device) if device is not None else contextlib.nullcontext()


def _build_checked(name: str, build: Callable, inputs: list, reference) -> tuple[Any, Measured, Any]:
    """Build one candidate and run it once on ``inputs`` (its compile and
    first-call costs stay out of the timing), with its error against
    ``reference`` (None: this is the reference).  Returns ``(fn, measured,
    output)``; ``fn`` None when building or running raised (the error is in
    ``measured``)."""
    measured = Measured(name)
    try:
        started = time.perf_counter()
        fn = build()
        # a stateful forward's writes are undone, so every candidate's first call starts from the same state
        with preserved(fn) if isinstance(fn, torch.nn.Module) else contextlib.nullcontext():
            out = fn(*inputs)
            out = torch.utils._pytree.tree_map(lambda t: t.detach().clone() if isinstance(t, torch.Tensor) else t, out)  # a CUDA-graph output is overwritten by the next replay
            _sync(out)
        measured.setup_s = time.perf_counter() - started
        if reference is not None:
            measured.rel_err = norm_rel_error(out, reference)
        return fn, measured, out
    except Exception as exc:  # noqa: BLE001 - one candidate's failure is a result
        measured.error = _error_text(exc)
        return None, measured, None


def _fell_back(new) -> str:
    """Why the composed model's last call was not LEGO's plan (``shipped.fallback_problem``), else ``""``."""
    return fallback_problem({"requested": new.lego_forward, "ran": new.__dict__.get("lego_last_forward"),
                             "why": new.__dict__.get("lego_fallback")})


def _method_text(names: list[str], timed: Interleaved, on_gpu: bool, window_s: float | None = None) -> str:
    """How :func:`time_models_here` timed, in a sentence, with the counts it ran."""
    clock = ("under one exclusive hold of the GPU lock; L2 flushed (256 MB zeroed) before every call, CUDA events around it, "
             "the GPU idle before it (each call waited for)") if on_gpu else "host clock (perf_counter), no lock, no flush"
    left_out = ", ".join(f"{n} {p}" for n, p in zip(names, timed.preempted)) if timed.preemption_counted else "not counted here"
    span = f" over {window_s:.1f} s" if window_s is not None else ""
    return (f"interleaved: {timed.warmup_rounds} warm-up rounds, then {timed.rounds} timed rounds{span} of one call each of "
            f"{', '.join(names)}, the order rotated every round, every call on the same inputs (the first verification seed's); "
            f"{clock}; calls during which the timing thread was preempted left out ({left_out}); median per candidate, in ms")


MIN_TIMED_S = 1.0  # the report's timed rounds last at least this long (seconds)
TIMING_CPUS_ENV = "LEGO_TIMING_CPUS"  # "3" or "2,3": the CPUs the timing thread is held to (off when unset)


@contextlib.contextmanager
def _pinned_cpus(host: dict):
    """Hold this thread to the CPUs ``$LEGO_TIMING_CPUS`` names (a comma
    list) for the block, and say so in ``host["pinned_cpus"]`` (None when
    unset); a list the system refuses is reported in ``host["pinned_error"]``
    and the block runs unpinned.  For comparisons: on a virtual machine the
    same launch-bound eager model ran twice as fast on one CPU as on another,
    so a check that pins its process (``taskset -c 3 sidebyside.py``) agrees
    with a report timed on the same CPU."""
    spec = os.environ.get(TIMING_CPUS_ENV, "").strip()
    host["pinned_cpus"] = None
    if not spec:
        yield
        return
    try:
        before = os.sched_getaffinity(0)
        cpus = {int(c) for c in spec.split(",") if c.strip()}
        os.sched_setaffinity(0, cpus)
    except (AttributeError, ValueError, OSError) as exc:
        host["pinned_error"] = f"{TIMING_CPUS_ENV}={spec!r}: {_error_text(exc)}"
        yield
        return
    host["pinned_cpus"] = sorted(cpus)
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def time_models_here(out_dir: Path, problem, config, *, rep: int = DEFAULT_REP, warmup_calls: int = DEFAULT_WARMUP_CALLS,
                     warmup_ms: float = DEFAULT_WARMUP_MS, min_s: float = MIN_TIMED_S) -> dict:
    """Median ms per call of eager, the composed model as shipped (its
    ``LAUNCH``, chosen by ``lego_core.judge.end_to_end.launch``) and
    torch.compile default mode (when ``config.compare_compile``), timed
    interleaved in this one process (``served``: a fresh process the
    optimizer starts and waits for, holding no GPU lock itself; a forked
    process holds none of its parent's holds).

    First each candidate is built and called once on the inputs of the first
    verification seed (torch.compile compiles there, outside the lock); its
    norm-relative error against eager's output is kept.  Then, under ONE
    exclusive hold of the GPU lock (``gpu_lock``: other runs' verifications
    and timings on the card wait; their CPU work does not), eager, the plan
    and torch.compile are timed in rounds of one call each, the order rotated
    every round (``lego_core.runtime.timing.time_interleaved``): at least
    ``warmup_calls`` warm-up rounds and ``warmup_ms`` of them, then
    ``rep`` timed rounds or more, for at least ``min_s`` seconds (see below);
    medians per candidate.
    torch.compile is timed in the same rounds rather than after them: the
    same hold and the same host conditions for all three, so
    ``speedup_vs_compile`` holds as ``speedup_vs_eager`` does, for one more
    call per round.

    Each call is made as ../shared/tools/sidebyside.py (the independent
    checker these numbers must agree with) makes it: the same inputs every
    call (rotating input sets buys nothing when L2 is flushed before every
    call, and the same inputs are what that tool times), L2 flushed by
    zeroing 256 MB, CUDA events around the one call, and the GPU idle before
    it, so the time includes the host's launches as a user's call does.
    Eager of small ops is launch bound: on a busy host its calls are slowed
    by other processes taking the CPU while a CUDA graph's single launch is
    not, which once made a run report 5.58x over eager that measured 2.61x
    alone.  Interleaving gives every candidate the same conditions, the
    timing thread waits for the GPU by yielding the CPU instead of spinning
    (so it does not use up its CPU share between calls), and calls during
    which the thread was preempted are left out and re-run (up to 4x ``rep``
    rounds); how many were left out is reported.  The rounds last at least
    ``min_s`` (1 s): on the H200 machines (virtual, 16 CPUs) one CPU ran
    this launch-bound eager at 1.1 ms and another at 2.3 ms, and one CPU
    switched between the two for a fraction of a second at a time, busy
    host or not; a median over a second follows the usual state, not one
    moment's (sidebyside.py's 55 calls take one moment).

    Returns the timing dict of report.json: ``eager_ms``, ``optimized_ms``,
    ``compile_ms`` (median ms; None when that candidate failed, with
    ``<name>_error``), ``speedup_vs_eager`` (median eager / median plan),
    ``speedup_vs_compile``, ``measured`` (True), ``interleaved`` (True),
    ``method`` (how, in words), ``host`` (``lego_core.runtime.host_load.watch``
    over the timed section: ``load_avg_1m``, ``cpus``, ``busy``,
    ``cpu_busy_fraction``, ``others_cpu_busy_fraction``, ``steal_fraction``,
    ``timing_cpus``..., and ``pinned_cpus``: ``$LEGO_TIMING_CPUS``, the CPUs
    the timing thread was held to, None when unset), ``rounds``
    (``{"warmup", "timed"}``) and ``candidates`` (per name: ``median_ms``,
    ``p20_ms``, ``p80_ms``, ``n`` calls used, ``preempted_calls`` left out,
    ``kept_preempted``, ``rel_err``, ``setup_s``).

    A candidate that fails is reported with its error, never raised, except:
    raises OptimizeError when eager or the composed model cannot be built,
    run or timed, or the composed model ran the original forward.
    """
    input_sets = [problem.make_inputs(seed) for seed in config.verify_seeds]
    inputs = list(input_sets[0])
    candidates: list[tuple[str, Callable]] = [("eager", lambda: problem.model), ("optimized", lambda: load_composed(out_dir, problem))]
    if config.compare_compile:
        candidates += [("compile", build) for _, build in compile_candidates(problem.model, ("default",))]
    result: dict = {"measured": True, "interleaved": True}
    torch._dynamo.reset()
    try:
        with torch.no_grad():
            built: dict[str, Any] = {}
            measured: dict[str, Measured] = {}
            reference = None
            for name, build in candidates:
                fn, measured[name], out = _build_checked(name, build, inputs, reference)
                if name == "eager":
                    reference = out
                del out
                if fn is not None:
                    built[name] = fn
            for name, m in measured.items():
                if m.error:
                    result[f"{name}_error"] = m.error
            if "eager" not in built or "optimized" not in built:
                raise OptimizeError(f"timing the composed model failed: {result.get('eager_error') or result.get('optimized_error')}")
            fell_back = _fell_back(built["optimized"])
            if fell_back:  # the time would be the original forward's: no speedup is claimed for it
                raise OptimizeError(f"timing the composed model: {fell_back}")
            names = list(built)
            fns = [lambda xs, f=built[n]: f(*xs) for n in names]
            device = _cuda_device(inputs)
            modules = {id(m): m for m in (getattr(f, "_orig_mod", f) for f in built.values()) if isinstance(m, torch.nn.Module)}
            with _timing_hold(device), contextlib.ExitStack() as state:
                for module in modules.values():  # a stateful forward's writes are undone after the timing
                    state.enter_context(preserved(module))
                pinning: dict = {}
                with _pinned_cpus(pinning), host_load.watch() as host:
                    timed = time_interleaved(fns, [inputs], warmup_calls=warmup_calls, warmup_ms=warmup_ms, rep=rep, min_s=min_s)
                host.update(pinning)
    finally:
        torch._dynamo.reset()
    result["host"] = host
    result["rounds"] = {"warmup": timed.warmup_rounds, "timed": timed.rounds}
    result["method"] = _method_text(names, timed, device is not None, host.get("window_s"))
    result["candidates"] = {}
    for name, res, error, preempted, kept in zip(names, timed.results, timed.errors, timed.preempted, timed.kept_preempted):
        if error:
            result[f"{name}_error"] = error
        entry = {"median_ms": None, "p20_ms": None, "p80_ms": None, "n": 0} if res is None else \
            {"median_ms": res.median_ms, "p20_ms": res.p20_ms, "p80_ms": res.p80_ms, "n": res.n}
        entry.update(preempted_calls=preempted, kept_preempted=kept, rel_err=measured[name].rel_err, setup_s=measured[name].setup_s)
        result["candidates"][name] = entry
    for name, _ in candidates:
        result[f"{name}_ms"] = result["candidates"].get(name, {}).get("median_ms")
    if result.get("eager_ms") is None or result.get("optimized_ms") is None:
        raise OptimizeError(f"timing the composed model failed: {result.get('eager_error') or result.get('optimized_error')}")
    fell_back = _fell_back(built["optimized"])
    if fell_back:  # the time measured is the original forward's: no speedup is claimed for it
        raise OptimizeError(f"timing the composed model: {fell_back}")
    result["speedup_vs_eager"] = result["eager_ms"] / result["optimized_ms"]
    if result.get("compile_ms"):
        result["speedup_vs_compile"] = result["compile_ms"] / result["optimized_ms"]
    return result
