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
   a Triton kernel on the caller's stream, and the outputs must then match
   the reference (the calls really computed them);
3. a time below ``FLOOR_FACTOR`` times the memory roofline of the bytes the
   call must move (``min_bytes`` at the target GPU's bandwidth,
   ``lego_core.costmodel``) is not believed.

Callers: the search times verified candidates (``search.engine``, or the
executor process that calls candidates): ``guarded_measure_ms(lambda *xs,
out: module.launch(*xs, out=out), input_sets, sub.run_reference,
min_bytes=output_bytes(...), target=config.target_gpu)`` where today's code
calls ``costing.measure_ms(lambda xs: module.launch(*xs), sets)``; a
non-empty ``reason`` rejects the candidate.  Needs a CUDA device.

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
    from lego_core.costmodel import get_target

    return min_bytes / get_target(target).bandwidth * 1e3


def fresh_inputs(input_sets: Sequence[Sequence[object]], seed: int | None = None) -> list[list]:
    """Copies of ``input_sets`` (new tensors) with new values: floating tensors
    multiplied elementwise by U(0.75, 1.25) (signs, zeros, NaN and the rough
    scale stay, so the region means the same thing), others copied."""
    gen = torch.Generator().manual_seed(seed if seed is not None else int(torch.randint(2**31 - 1, ()).item()))
    fresh = []
    for inputs in input_sets:
        row = []
        for x in inputs:
            if isinstance(x, torch.Tensor) and x.is_floating_point():
                factor = (0.75 + 0.5 * torch.rand(x.shape, generator=gen)).to(device=x.device, dtype=x.dtype)
                y = torch.empty_like(x)  # the same strides for a dense tensor
                y.copy_(x.detach() * factor)
                row.append(y)
            elif isinstance(x, torch.Tensor):
                row.append(x.clone())
            else:
                row.append(x)
        fresh.append(row)
    return fresh


def guarded_measure_ms(
    launch: Callable[..., object],
    input_sets: Sequence[Sequence[object]],
    reference: Callable[[list], list],
    *,
    min_bytes: int | None = None,
    target: str = "H200",
    dtype=None,
    measure: Callable | None = None,
    seed: int | None = None,
    library_ops: Sequence[str] | None = None,
) -> GuardedTiming:
    """Time ``launch(*inputs, out=outs)`` on fresh inputs and check the time.

    ``input_sets``: the verification sets (or those the caller would time
    on); fresh copies are made (:func:`fresh_inputs`).  ``reference(inputs)``
    gives the expected outputs.  ``min_bytes``: bytes one call must move
    (default :func:`output_bytes` of the reference's outputs); ``target``:
    the GPU whose bandwidth sets the floor.  ``measure(fn, sets)``: the
    timer (default ``costing.measure_ms``).  ``library_ops``: ATen ops the
    candidate may run outside its kernels (None: from the sub-problem whose
    ``run_reference`` is ``reference``, as ``verify.verify`` takes them).
    Never raises for a bad candidate: a failure is a :class:`GuardedTiming`
    with a reason.
    """
    from lego_core import costing
    from lego_core.verify import compare, ops_of_reference, poisoned_outputs
    from lego_core.verify_policy import trace_problem
    from lego_core.verify_trace import CallTrace

    measure = measure or costing.measure_ms
    library_ops, region_ops = ops_of_reference(reference, library_ops, None)
    fresh = fresh_inputs(input_sets, seed)
    with torch.no_grad():
        expected = [[t.detach() for t in reference(list(xs))] for xs in fresh]
    outs = {id(xs): poisoned_outputs(exp) for xs, exp in zip(fresh, expected)}
    floor = roofline_floor_ms(min_bytes if min_bytes is not None else output_bytes(expected[0]), target)

    def timed(xs):
        return launch(*xs, out=outs[id(xs)])

    try:
        ms = measure(timed, fresh)
    except Exception as exc:  # noqa: BLE001 - a candidate that cannot be timed is rejected, not a crash
        return GuardedTiming(math.inf, floor, f"the candidate failed while being timed: {type(exc).__name__}: {str(exc)[:200]}")
    for k, (xs, exp) in enumerate(zip(fresh, expected)):
        for repeat in range(2):
            out = outs[id(xs)]
            for buf, poisoned in zip(out, poisoned_outputs(exp)):
                buf.copy_(poisoned)
            with torch.no_grad(), CallTrace() as trace:
                timed(xs)
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            problem = trace_problem(trace.summary(), library_ops=library_ops, region_ops=region_ops)
            if problem:
                return GuardedTiming(ms, floor, f"after timing, call {2 * k + repeat + 1} on the timed inputs: {problem}")
            result = compare(out, exp, dtype)
            if not result.passed:
                return GuardedTiming(ms, floor, f"after timing, call {2 * k + repeat + 1} on the timed inputs did not compute its output: {result.reason}")
    if ms < FLOOR_FACTOR * floor:
        return GuardedTiming(ms, floor, (f"faster than the memory roofline allows: {ms:.4g} ms for at least {min_bytes or output_bytes(expected[0])} bytes "
                                         f"(floor {floor:.4g} ms at {target}'s bandwidth; below {FLOOR_FACTOR:g}x the floor is not believed)"))
    return GuardedTiming(ms, floor)
