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
shipped, in the composed model's own process (``served``);
``load_model_new(out_dir, problem)`` loads an output folder as a user does;
``eager_peak_mb`` measures the peak GPU memory of one eager forward.

Usage: see bench/gpu_models.py (``make bench-gpu``).
"""
from __future__ import annotations

import contextlib
import dataclasses
import gc
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Sequence

import torch

from lego_core.errors import OptimizeError
from lego_core.judge.end_to_end.shipped import fallback_problem, import_optimized_model, load_composed
from lego_core.load.state import preserved
from lego_core.runtime.timing import DEFAULT_REP, DEFAULT_WARMUP_MS, TimingResult, time_on_device

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


def time_models_here(out_dir: Path, problem, config) -> dict:
    """Median GPU ms of eager, torch.compile (default mode, when
    ``config.compare_compile``) and the composed model as shipped (its
    ``LAUNCH``, chosen by ``lego_core.judge.end_to_end.launch``), side by side in this one
    process with the bench's harness (:func:`side_by_side`:
    CUDA events, L2 flushed, each call from an idle GPU, median); ratios
    ``speedup_vs_eager`` and ``speedup_vs_compile``; a candidate that fails
    is reported with its error (``compile_error``), never raised.  Raises
    OptimizeError when eager or the composed model cannot be timed, or the
    composed model ran the original forward."""
    input_sets = [problem.make_inputs(seed) for seed in config.verify_seeds]
    built: list = []

    def optimized():
        built.append(load_composed(out_dir, problem))
        return built[-1]

    candidates = [("eager", lambda: problem.model), ("optimized", optimized)]
    if config.compare_compile:
        candidates += [("compile", build) for _, build in compile_candidates(problem.model, ("default",))]
    result: dict = {"measured": True}
    for measured in side_by_side(candidates, input_sets):
        result[f"{measured.name}_ms"] = measured.median_ms
        if measured.error:
            result[f"{measured.name}_error"] = measured.error
    if result.get("eager_ms") is None or result.get("optimized_ms") is None:
        raise OptimizeError(f"timing the composed model failed: {result.get('eager_error') or result.get('optimized_error')}")
    new = built[-1]
    fell_back = fallback_problem({"requested": new.lego_forward, "ran": new.__dict__.get("lego_last_forward"),
                                  "why": new.__dict__.get("lego_fallback")})
    if fell_back:  # the time measured is the original forward's: no speedup is claimed for it
        raise OptimizeError(f"timing the composed model: {fell_back}")
    result["speedup_vs_eager"] = result["eager_ms"] / result["optimized_ms"]
    if result.get("compile_ms"):
        result["speedup_vs_compile"] = result["compile_ms"] / result["optimized_ms"]
    return result
