"""Timing a candidate so that the number can be believed.

``costing.measure_ms`` times whatever callable it gets.  A candidate that
passed verification can still fake its time: it can memoise results and
return them without running (0.001 ms), or put its kernel on a private CUDA
stream that the timing events never see.  :func:`guarded_measure_ms` wraps
the measurement with three defences:

1. the timed calls run on *fresh* inputs, new tensors with values the
   candidate has not seen (every floating input scaled by a random factor per
   element, others copied), each with its own preallocated output;
2. after timing, every set is called again twice (the same tensors: a
   memoising candidate would answer from its memo) with its output
   *poisoned* first, under ``verify_trace.CallTrace``: every call must launch
   a Triton kernel on the caller's stream, the outputs must then match
   the reference (the calls really computed them), and (a candidate in an
   executor) the kernel file's state after the second call must be what it
   was after the first (``verify_trace.module_state_digest``: a call
   counter moves);
3. a time below ``FLOOR_FACTOR`` times the memory roofline of the bytes the
   call must move (``min_bytes`` at the target GPU's bandwidth,
   ``lego_core.cost.costmodel``) is not believed.

:func:`guard_timing` is the mechanism, whatever runs the candidate;
:func:`guarded_remote_time` is how the search times a verified candidate
(``judge.candidate``): the candidate runs only in its executor
(``lego_core.judge``), the fresh inputs, expected outputs and judgement stay
in the optimizer, and a non-empty ``reason`` rejects the candidate.
:func:`guarded_measure_ms` runs a kernel module held in this process (tools,
tests).

usage: ``python bench/gpu_checks/check_hacks.py`` runs the timing hacks on a GPU.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Callable, Sequence

import torch

# A time below this fraction of the roofline floor is not believed: the
# floor counts only bytes the call must move, at the measured peak bandwidth.
FLOOR_FACTOR = 0.5


@dataclasses.dataclass(frozen=True)
class GuardedTiming:
    """``ms``: the measured median (``math.inf`` when the candidate failed
    before it could be timed); ``floor_ms``: the roofline floor of
    ``min_bytes``; ``reason``: "" when the time is believed, else one line."""

    ms: float
    floor_ms: float
    reason: str = ""

    @property
    def believed(self) -> bool:
        return not self.reason


def output_bytes(tensors: Sequence[torch.Tensor]) -> int:
    """Bytes of ``tensors`` counting each element once: a lower bound on what a
    call that writes them moves (inputs are not counted: a region may read
    only part of an input, a slice, and a lower bound must hold for all)."""
    return sum(t.numel() * t.element_size() for t in tensors if isinstance(t, torch.Tensor))


def roofline_floor_ms(min_bytes: int, target: str = "H200") -> float:
    """Milliseconds that moving ``min_bytes`` takes at ``target``'s bandwidth."""
    from lego_core.cost.costmodel import get_target

    return min_bytes / get_target(target).bandwidth * 1e3


def fresh_inputs(input_sets: Sequence[Sequence[object]], seed: int | None = None) -> list[list]:
    """Copies of ``input_sets`` (new tensors) with new values: floating tensors
    multiplied elementwise by U(0.75, 1.25) (signs, zeros, NaN and the rough
    scale stay, so the region means the same thing), others copied.  The
    factors are drawn on each tensor's own device (a 4 GiB score matrix is
    not drawn on the host)."""
    base = seed if seed is not None else int(torch.randint(2**31 - 1, ()).item())
    generators: dict[torch.device, torch.Generator] = {}
    fresh = []
    for inputs in input_sets:
        row = []
        for x in inputs:
            if isinstance(x, torch.Tensor) and x.is_floating_point():
                gen = generators.get(x.device)
                if gen is None:
                    gen = generators[x.device] = torch.Generator(device=x.device).manual_seed(base + len(generators))
                y = torch.empty_like(x)  # the same strides for a dense tensor
                y.uniform_(0.75, 1.25, generator=gen).mul_(x.detach())
                row.append(y)
            elif isinstance(x, torch.Tensor):
                row.append(x.clone())
            else:
                row.append(x)
        fresh.append(row)
    return fresh


def guard_timing(
    time_sets: Callable[[list[list], list[list]], float],
    traced_call: Callable[[list, list], dict],
    input_sets: Sequence[Sequence[object]],
    reference: Callable[[list], list],
    *,
    min_bytes: int | None = None,
    target: str = "H200",
    dtype=None,
    seed: int | None = None,
    library_ops: Sequence[str] | None = None,
    fresh: bool = True,
    precise_limit_bytes: int | None = None,
) -> GuardedTiming:
    """The three defences (module docstring) around any way of running a candidate.

    ``time_sets(sets, outs) -> ms``: the candidate's median time over
    ``launch(*sets[k], out=outs[k])`` (in this process, or in its executor);
    ``traced_call(inputs, out) -> summary``: one call under
    ``verify_trace.CallTrace``, its ``summary()`` (plain data).  The fresh
    inputs, the reference's outputs, the poisoned output buffers and every
    judgement stay with the caller: only ``time_sets`` and ``traced_call``
    run candidate code.  ``input_sets``: the sets to derive fresh inputs
    from (:func:`fresh_inputs`); ``reference(inputs)``: expected outputs
    (list of tensors).  ``min_bytes``: bytes one call must move (default
    :func:`output_bytes` of the expected outputs); ``target``: the GPU whose
    bandwidth sets the floor; ``dtype``: the problem's dtype (tolerances);
    ``library_ops``: ATen ops the candidate may run outside its kernels
    (None: those of the sub-problem whose ``run_reference`` is ``reference``).
    ``fresh=False``: time on ``input_sets`` themselves (a set too large to
    copy within the memory bound; the calls after timing still run on the
    timed tensors, so a memo is still caught).  The outputs of the calls
    after timing are judged as the verifier judges them
    (``verify.judge_values``): a 16-bit output that differs from eager only
    by eager's own rounding or overflow passes against the float64 result,
    computed when a call fails the plain comparison and its float64 run fits
    in ``precise_limit_bytes`` (None: no limit).  Never raises for a bad candidate: a failure is a :class:`GuardedTiming`
    with a reason (an executor that died raises, as ``time_sets`` does).
    """
    from lego_core.judge.verify import poison_value, precise_reference, state_kept, compare, float64_working_bytes, judge_values, ops_of_reference, poisoned_outputs
    from lego_core.judge.verify_policy import trace_problem

    library_ops, region_ops = ops_of_reference(reference, library_ops, None)
    fresh = fresh_inputs(input_sets, seed) if fresh else [list(xs) for xs in input_sets]
    with torch.no_grad():
        expected = [[t.detach() for t in reference(list(xs))] for xs in fresh]
    outs = [poisoned_outputs(exp) for exp in expected]
    min_bytes = min_bytes if min_bytes is not None else output_bytes(expected[0])
    floor = roofline_floor_ms(min_bytes, target)
    ms = time_sets(fresh, outs)
    state = None  # the kernel file's state after the previous traced call (verify_trace.module_state_digest; None: not known)
    for k, (xs, exp, out) in enumerate(zip(fresh, expected, outs)):
        for repeat in range(2):
            for buf in out:  # poisoned again in place (no second copy of a large output)
                buf.fill_(poison_value(buf.dtype, repeat))
            summary = traced_call(xs, out)
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            problem = trace_problem(summary, library_ops=library_ops, region_ops=region_ops)
            if not problem and repeat == 1:  # the same inputs again, not refilled: a cache keyed by them stays as it was
                problem = state_kept(state, summary.get("module_state"))
            state = summary.get("module_state")
            if problem:
                return GuardedTiming(ms, floor, f"after timing, call {2 * k + repeat + 1} on the timed inputs: {problem}")
            result = compare(out, exp, dtype)
            if not result.passed and (precise_limit_bytes is None or float64_working_bytes(reference, xs, exp) <= precise_limit_bytes):
                # judged as the verifier judged it: eager's own 16-bit rounding or overflow is not held against the candidate
                result = judge_values(out, exp, dtype, precise_reference(reference, xs, exp))
            if not result.passed:
                return GuardedTiming(ms, floor, f"after timing, call {2 * k + repeat + 1} on the timed inputs did not compute its output: {result.reason}")
    if ms < FLOOR_FACTOR * floor:
        return GuardedTiming(ms, floor, (f"faster than the memory roofline allows: {ms:.4g} ms for at least {min_bytes} bytes "
                                         f"(floor {floor:.4g} ms at {target}'s bandwidth; below {FLOOR_FACTOR:g}x the floor is not believed)"))
    return GuardedTiming(ms, floor)


def guarded_measure_ms(
    launch: Callable[..., object],
    input_sets: Sequence[Sequence[object]],
    reference: Callable[[list], list],
    *,
    measure: Callable | None = None,
    **guard,
) -> GuardedTiming:
    """:func:`guard_timing` of ``launch(*inputs, out=outs)`` called in this
    process (tools and tests that hold the kernel module themselves; the
    search's candidates run in their executor: :func:`guarded_remote_time`).
    ``measure(fn, sets)``: the timer (default ``costing.measure_ms``);
    ``guard``: :func:`guard_timing`'s keywords."""
    from lego_core.cost import costing
    from lego_core.judge.verify_trace import CallTrace

    measure = measure or costing.measure_ms

    def time_sets(sets: list[list], outs: list[list]) -> float:
        by_inputs = {tuple(id(x) for x in xs): out for xs, out in zip(sets, outs)}
        try:
            return measure(lambda xs: launch(*xs, out=by_inputs[tuple(id(x) for x in xs)]), sets)
        except Exception as exc:  # noqa: BLE001 - reported as a failed timing below
            raise _TimingFailed(exc) from exc

    def traced_call(xs: list, out: list) -> dict:
        with torch.no_grad(), CallTrace() as trace:
            launch(*xs, out=out)
        return trace.summary()

    try:
        return guard_timing(time_sets, traced_call, input_sets, reference, **guard)
    except _TimingFailed as failed:
        return GuardedTiming(math.inf, 0.0, f"the candidate failed while being timed: {type(failed.cause).__name__}: {str(failed.cause)[:200]}")
    except Exception as exc:  # noqa: BLE001 - a candidate that raises in a checked call is rejected, not a crash
        return GuardedTiming(math.inf, 0.0, f"the candidate failed in a call after timing: {type(exc).__name__}: {str(exc)[:200]}")


def guarded_remote_time(module, input_sets: Sequence[Sequence[object]], reference: Callable[[list], list], *,
                        clock: str = "gpu", **guard) -> GuardedTiming:
    """:func:`guard_timing` of a candidate imported in its executor
    (``judge.process.executor.RemoteModule``): timed there on the fresh inputs into
    the preallocated outputs (``module.time(sets, outs=outs)``), called there
    under the call trace (``module.candidate.traced``); fresh inputs,
    expected outputs and every judgement stay here.  ``clock="cpu"``: the
    executor times with ``timing.time_cpu`` (tests without a GPU).

    A candidate that raises while timed or called is a :class:`GuardedTiming`
    with the reason; an executor that died, hung or was tampered with raises
    its ``judge.process.wire.JudgeError`` (the caller restarts it)."""
    from lego_core.judge.process.wire import CandidateRaised

    try:
        return guard_timing(lambda sets, outs: module.time(sets, outs=outs, clock=clock),
                            lambda xs, out: module.candidate.traced(xs, out)[1], input_sets, reference, **guard)
    except CandidateRaised as exc:
        return GuardedTiming(math.inf, 0.0, f"the candidate raised while being timed or checked after timing: {type(exc).__name__}: {str(exc)[:200]}")


class _TimingFailed(Exception):
    def __init__(self, cause: BaseException):
        super().__init__(str(cause))
        self.cause = cause
