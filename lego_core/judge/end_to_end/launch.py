"""The whole-model launch plan: how ``ModelNew``'s forward runs, chosen by measurement.

A composed plan can lose to eager as a whole even when each of its kernels
wins: every generated kernel pays Triton's Python launcher (20-50 us) and
every library segment a Python call, costs that per-kernel GPU times leave
out.  So the last step prices what a user really calls.  On a GPU it times
``ModelNew(*inputs)`` the way a user calls it (``lego_core.runtime.timing.time_gpu``:
CUDA events, L2 flushed, median) in these variants:

* ``plan``: LEGO's kernels and library calls, launched from Python;
* ``plan+graph``: the same, replayed as one CUDA graph;
* ``original``: the user's own forward (exactly eager);
* ``original+graph``: the user's own forward replayed as one CUDA graph;
* ``original+nhwc`` and ``original+nhwc+graph`` (models with a 2-D
  convolution and a 4-D input): the user's own forward in channels-last
  memory order, 4-D inputs and convolution weights in NHWC
  (``lego_runtime.channels_last_forward``), as torch.compile's layout
  optimisation runs convolution networks; directly or as one CUDA graph;

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

from lego_core.compose.folder import DEFAULT_LAUNCH, set_launch
from lego_core.judge.end_to_end.shipped import fallback_problem, load_composed
from lego_core.judge.verify import compare
from lego_core.load.capture import has_conv2d
from lego_core.load.state import preserved
from lego_core.runtime import timing
from lego_core.runtime.timing import DEFAULT_REP, DEFAULT_WARMUP_MS, quantile

# (forward, channels_last, cuda_graph); the channels-last ones only for convolution models (``nhwc_applies``)
VARIANTS = (("plan", False, False), ("plan", False, True), ("original", False, False), ("original", False, True))
NHWC_VARIANTS = (("original", True, False), ("original", True, True))
MIN_GAIN = 0.02  # a variant replaces ``original`` only when at least 2% faster


def variant_name(forward: str, cuda_graph: bool, channels_last: bool = False) -> str:
    """``plan``, ``plan+graph``, ``original``, ``original+graph``,
    ``original+nhwc`` or ``original+nhwc+graph``."""
    return forward + ("+nhwc" if channels_last else "") + ("+graph" if cuda_graph else "")


def parse_variant(name: str) -> dict:
    """The ``forward``, ``cuda_graph`` and ``channels_last`` of a variant name
    (:func:`variant_name`'s inverse).  Raises ValueError for another name."""
    forward, *flags = name.split("+")
    if forward not in ("plan", "original") or set(flags) - {"nhwc", "graph"} or len(set(flags)) != len(flags):
        raise ValueError(f"not a launch variant: {name!r}")
    return {"forward": forward, "cuda_graph": "graph" in flags, "channels_last": "nhwc" in flags}


def nhwc_applies(problem, example: list) -> bool:
    """Whether the channels-last variants are worth measuring: the model
    holds a 2-D convolution and takes a 4-D tensor input."""
    return has_conv2d(problem) and any(isinstance(x, torch.Tensor) and x.dim() == 4 for x in example)


def measure_launch(out_dir: Path, problem, config) -> dict:
    """The GPU part of ``composed.choose_launch``, run in the composed model's own
    process (``served``): check every variant, time the ones that pass and return the
    ``launch`` dict (written by the caller).  ``problem``: a ``Problem`` or
    ``served.ProblemView``.

    The variants are timed in ``TIMING_ROUNDS`` interleaved rounds (each
    round times every variant for ``DEFAULT_REP / TIMING_ROUNDS`` calls, in
    a rotated order) and each variant's samples are pooled, so a burst of
    load from another process on the GPU lands on all variants alike
    instead of deciding the choice (timed one after the other, a search
    running beside it once made a plan at 0.061 ms look faster than eager's
    0.039 ms)."""
    new = load_composed(out_dir, problem)
    input_sets = [problem.make_inputs(seed) for seed in config.verify_seeds]
    errors: dict[str, str] = {}
    variants = VARIANTS + (NHWC_VARIANTS if nhwc_applies(problem, input_sets[0]) else ())
    if getattr(new, "_lego_state", ()):  # a forward that writes module state runs directly (ModelNew never replays it)
        for forward, nhwc, graph in variants:
            if graph:
                errors[variant_name(forward, graph, nhwc)] = "the forward writes module state (STATE): not replayed as a CUDA graph"
        variants = tuple(v for v in variants if not v[2])
    with torch.no_grad():
        direct: dict[str, torch.Tensor] = {}
        passed = [(forward, nhwc, graph) for forward, nhwc, graph in variants
                  if _check_variant(new, problem, input_sets, forward, nhwc, graph, direct, errors)]
        direct.clear()
        times = _interleaved_medians(new, input_sets, passed, errors)
    launch = _pick(times, errors)
    del new
    torch.cuda.empty_cache()
    return launch


TIMING_ROUNDS = 4  # interleaved rounds of the launch timing


def _use_variant(new, forward: str, nhwc: bool, graph: bool) -> None:
    new.lego_forward, new.lego_cuda_graph, new.lego_channels_last = forward, graph, nhwc
    new._lego_graph.invalidate()
    new._lego_graph.failure = None


def _check_variant(new, problem, input_sets, forward, nhwc, graph, direct: dict, errors: dict) -> bool:
    """Whether the variant runs and (for a graph) replays what its direct
    variant computes and leaves an earlier call's output alone; the reason
    it does not goes into ``errors``.  ``direct`` collects each direct
    variant's output on the first input set."""
    name = variant_name(forward, graph, nhwc)
    _use_variant(new, forward, nhwc, graph)
    try:
        with preserved(new):  # every variant starts from the same module state
            return _check_variant_here(new, problem, input_sets, forward, nhwc, graph, direct, errors, name)
    except Exception as exc:  # noqa: BLE001 - a failing variant is ruled out, not fatal
        errors[name] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:300]
        return False
    finally:
        if graph:
            new._lego_graph.invalidate()
        torch.cuda.synchronize()


def _check_variant_here(new, problem, input_sets, forward, nhwc, graph, direct: dict, errors: dict, name: str) -> bool:
    """The body of :func:`_check_variant` (which catches its errors)."""
    out = new(*input_sets[0])
    fell_back = _fell_back(new)
    if fell_back:  # its time would be the original forward's, claimed as the plan's
        errors[name] = fell_back
        return False
    if graph and new._lego_graph.failure:
        errors[name] = f"cannot be captured: {new._lego_graph.failure}"
        return False
    if graph:  # replayed output must equal the direct one, and stay put
        first = out.clone()
        new(*input_sets[1 % len(input_sets)])
        again = new(*input_sets[0])
        check = compare([again], [direct[variant_name(forward, False, nhwc)]], problem.spec.torch_dtype)
        if not check.passed or not torch.equal(first, out):
            errors[name] = f"replayed output differs from the direct forward: {check.reason or 'an earlier output changed'}"
            return False
    else:
        direct[name] = out.clone()
    return True


def _fell_back(new) -> str:
    """Why ``new``'s last call is not a measurement of the variant it was set
    to: a plan variant whose call ran the original forward
    (``lego_runtime.note_forward``), else ``""``."""
    return fallback_problem({"requested": new.lego_forward, "ran": new.__dict__.get("lego_last_forward"),
                             "why": new.__dict__.get("lego_fallback")})


def _interleaved_medians(new, input_sets, variants, errors: dict) -> dict[str, float]:
    """Median ms per variant over ``TIMING_ROUNDS`` interleaved rounds, each
    call timed as a user calls it and as the bench and sidebyside.py time
    it (from an idle GPU, L2 flushed).  A variant that fails while timed
    goes into ``errors``."""
    samples: dict[str, list[float]] = {variant_name(f, g, n): [] for f, n, g in variants}
    per_round = max(1, DEFAULT_REP // TIMING_ROUNDS)
    for round_no in range(TIMING_ROUNDS):
        shift = round_no % max(1, len(variants))
        for forward, nhwc, graph in variants[shift:] + variants[:shift]:
            name = variant_name(forward, graph, nhwc)
            if name in errors:
                continue
            _use_variant(new, forward, nhwc, graph)
            try:
                result = timing.time_gpu(lambda xs: new(*xs), input_sets, DEFAULT_WARMUP_MS / TIMING_ROUNDS, per_round, sync_each=True)
                fell_back = _fell_back(new)
                if fell_back:
                    errors[name] = fell_back
                    continue
                samples[name].extend(result.samples_ms)
            except Exception as exc:  # noqa: BLE001 - ruled out, not fatal
                errors[name] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:300]
            finally:
                if graph:
                    new._lego_graph.invalidate()
                torch.cuda.synchronize()
    return {name: quantile(sorted(ms), 0.5) for name, ms in samples.items() if ms and name not in errors}


def rule_out(out_dir: Path, launch: dict, why: str) -> dict:
    """``launch`` with its chosen variant ruled out (``why``: the end-to-end
    check it failed) and the next fastest measured one chosen instead
    (``original``, exactly eager, when nothing else is left); written into
    ``out_dir/optimized_model.py`` like ``composed.choose_launch``'s choice.
    Raises ValueError when ``original`` itself is the one ruled out (eager
    cannot disagree with eager: that is a bug, not a variant to skip)."""
    chosen = launch["chosen"]
    if chosen == "original":
        raise ValueError(f"the original forward failed the end-to-end check: {why}")
    times = {name: v["ms"] for name, v in launch["variants"].items() if "ms" in v and name != chosen}
    errors = {name: v["error"] for name, v in launch["variants"].items() if "error" in v}
    errors[chosen] = f"failed the end-to-end check: {why}"[:300]
    if "original" not in times:  # not measured (it failed to run?): it still ships as the faithful fallback
        picked = dict(DEFAULT_LAUNCH, forward="original", measured=True, chosen="original",
                      variants={**{n: {"ms": ms} for n, ms in times.items()}, **{n: {"error": e} for n, e in errors.items()}},
                      reason=f"{chosen} failed the end-to-end check: ModelNew runs the original forward")
    else:
        picked = _pick(times, errors)
        picked["reason"] = f"{chosen} failed the end-to-end check; " + picked["reason"]
    set_launch(out_dir, picked)
    return picked


def _pick(times: dict[str, float], errors: dict[str, str]) -> dict:
    """The fastest variant; ``original`` unless another is ``MIN_GAIN`` faster."""
    variants = {name: {"ms": ms} for name, ms in times.items()}
    variants.update({name: {"error": why} for name, why in errors.items()})
    eager = times.get("original")
    best = min(times, key=times.get) if times else "original"
    if eager is not None and times.get(best, eager) > eager * (1.0 - MIN_GAIN):
        best = "original"
    if best == "original":
        plan_best = min((ms for name, ms in times.items() if name.startswith("plan")), default=None)
        reason = (
            f"the plan ({plan_best:.4f} ms at best) does not beat eager ({eager:.4f} ms) by {MIN_GAIN:.0%}: ModelNew runs the original forward"
            if plan_best is not None and eager is not None
            else "the plan could not be measured: ModelNew runs the original forward"
        )
    else:
        reason = f"{best} measured fastest: {times[best]:.4f} ms against eager's {eager:.4f} ms" if eager else f"{best} measured fastest"
    return dict(parse_variant(best), measured=True, variants=variants, chosen=best, reason=reason)
