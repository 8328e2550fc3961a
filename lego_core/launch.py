"""The whole-model launch plan: how ``ModelNew``'s forward runs, chosen by measurement.

A composed plan can lose to eager as a whole even when each of its kernels
wins: every generated kernel pays Triton's Python launcher (20-50 us) and
every library segment a Python call, costs that per-kernel GPU times leave
out.  So the last step prices what a user really calls.  On a GPU it times
``ModelNew(*inputs)`` the way a user calls it (``lego_core.timing.time_gpu``:
CUDA events, L2 flushed, median) in four variants:

====================  ==========================================================
``plan``              LEGO's kernels and library calls, launched from Python
``plan+graph``        the same, replayed as one CUDA graph
``original``          the user's own forward (exactly eager)
``original+graph``    the user's own forward replayed as one CUDA graph
====================  ==========================================================

and ships the fastest whose output matches (a graph variant must match its
direct variant).  ``original`` is always a candidate, so the shipped model is
never slower than eager by more than the measurement's noise; a variant only
replaces ``original`` when it is faster by more than ``MIN_GAIN`` (noise on a
shared machine).  When ``original`` wins, ``report.json`` says the plan did
not beat eager.  Without a GPU nothing is measured and the plan ships
launched directly (``measured: false``).

CUDA-graph replay is what torch.compile's ``reduce-overhead`` mode does for
its own kernels (``torch.cuda.graphs``); here it wraps LEGO's plan.
"""
from __future__ import annotations

from pathlib import Path

import torch

from lego_core.compose import DEFAULT_LAUNCH, set_launch
from lego_core.verify import compare

VARIANTS = (("plan", False), ("plan", True), ("original", False), ("original", True))
MIN_GAIN = 0.02  # a variant replaces ``original`` only when at least 2% faster


def variant_name(forward: str, cuda_graph: bool) -> str:
    """``plan``, ``plan+graph``, ``original`` or ``original+graph``."""
    return forward + ("+graph" if cuda_graph else "")


def choose_launch(out_dir: Path, problem, config, meter=None) -> dict:
    """Measure every launch variant of the composed model in ``out_dir``,
    write the fastest into its ``optimized_model.py`` and return the
    ``launch`` entry of report.json: ``forward``, ``cuda_graph``,
    ``measured``, ``variants`` (name -> median ms, or the error that ruled it
    out), ``reason``.

    On a CPU device nothing is timed: the plan ships launched directly.  On
    a GPU :func:`measure_launch` runs in a fresh process
    (``lego_core.judge.composed``: the composed model imports every kernel,
    and this process imports none; ``meter`` is told its peak memory); this
    process writes the choice.  Never raises for a variant that fails (it is
    ruled out); raises OptimizeError when the composed model does not load
    or its process fails.
    """
    if problem.spec.device != "cuda":
        launch = dict(DEFAULT_LAUNCH, measured=False, variants={},
                      reason="no GPU: the plan runs launched directly (launch costs are only measured on a GPU)")
        set_launch(out_dir, launch)
        return launch
    from lego_core.errors import OptimizeError
    from lego_core.judge.composed import ProblemView, run_fresh

    payload = ProblemView.payload(problem, {seed: problem.make_inputs(seed) for seed in config.verify_seeds})
    answer = run_fresh(out_dir, "choose_launch", dict(payload, config=config), meter)
    launch = answer.get("launch")
    if not isinstance(launch, dict) or not {"forward", "cuda_graph", "measured"} <= set(launch):
        raise OptimizeError("measuring the launch variants gave no result")
    set_launch(out_dir, launch)
    return launch


def measure_launch(out_dir: Path, problem, config) -> dict:
    """The GPU part of :func:`choose_launch`, run in the composed model's own
    process: time every variant and return the ``launch`` dict (written by
    the caller).  ``problem``: a ``Problem`` or ``judge.composed.ProblemView``."""
    from lego_core.e2e import load_composed
    from lego_core.timing import time_gpu

    new = load_composed(out_dir, problem)
    input_sets = [problem.make_inputs(seed) for seed in config.verify_seeds]
    times: dict[str, float] = {}
    errors: dict[str, str] = {}
    with torch.no_grad():
        direct = {}
        for forward, graph in VARIANTS:
            name = variant_name(forward, graph)
            new.lego_forward, new.lego_cuda_graph = forward, graph
            new._lego_graph.invalidate()
            new._lego_graph.failure = None
            try:
                out = new(*input_sets[0])
                if graph and new._lego_graph.failure:
                    errors[name] = f"cannot be captured: {new._lego_graph.failure}"
                    continue
                if graph:  # replayed output must equal the direct one, and stay put
                    first = out.clone()
                    new(*input_sets[1])
                    again = new(*input_sets[0])
                    check = compare([again], [direct[forward]], problem.spec.torch_dtype)
                    if not check.passed or not torch.equal(first, out):
                        errors[name] = f"replayed output differs from the direct forward: {check.reason or 'an earlier output changed'}"
                        continue
                else:
                    direct[forward] = out.clone()
                # as a user calls it and as the bench and sidebyside.py time it: each call from an idle GPU
                times[name] = time_gpu(lambda xs: new(*xs), input_sets, sync_each=True).median_ms
            except Exception as exc:  # noqa: BLE001 - a failing variant is ruled out, not fatal
                errors[name] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:300]
            finally:
                if graph:
                    new._lego_graph.invalidate()
                torch.cuda.synchronize()
    launch = _pick(times, errors)
    del new
    torch.cuda.empty_cache()
    return launch


def _pick(times: dict[str, float], errors: dict[str, str]) -> dict:
    """The fastest variant; ``original`` unless another is ``MIN_GAIN`` faster."""
    variants = {name: {"ms": ms} for name, ms in times.items()}
    variants.update({name: {"error": why} for name, why in errors.items()})
    eager = times.get("original")
    best = min(times, key=times.get) if times else "original"
    if eager is not None and times.get(best, eager) > eager * (1.0 - MIN_GAIN):
        best = "original"
    forward, _, graph = best.partition("+")
    if best == "original":
        plan_best = min((ms for name, ms in times.items() if name.startswith("plan")), default=None)
        reason = (
            f"the plan ({plan_best:.4f} ms at best) does not beat eager ({eager:.4f} ms) by {MIN_GAIN:.0%}: ModelNew runs the original forward"
            if plan_best is not None and eager is not None
            else "the plan could not be measured: ModelNew runs the original forward"
        )
    else:
        reason = f"{best} measured fastest: {times[best]:.4f} ms against eager's {eager:.4f} ms" if eager else f"{best} measured fastest"
    return {"forward": forward, "cuda_graph": bool(graph), "measured": True, "variants": variants, "chosen": best, "reason": reason}
