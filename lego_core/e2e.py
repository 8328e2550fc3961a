"""End-to-end checks of a composed model: correctness, and time on a GPU.

``check_end_to_end`` runs eager here and, in a fresh process
(``lego_core.judge.composed``: ``optimized_model.py`` imports every kernel,
so this process never imports it), builds ``ModelNew(*get_init_inputs())``
from the output folder with the original model's weights and runs it on the
same fresh inputs (a seed no sub-problem was checked on); the two outputs
are compared here.  In fp32 the dtype tolerance of ``verify.compare`` decides
(unless eager itself runs convolutions or matmuls in TF32 on CUDA,
``eager_uses_tf32``: then as in 16 bits).  In
bf16/fp16 a whole model compounds rounding, and fused kernels (which keep
fp32 between ops) round *less* than eager; there the composed model also
passes when its error against an fp64 run of the original is at most twice
eager's own error against that fp64 run, over the whole output and apart
from fill values (``fp64_verdict``).

``time_models`` measures eager, torch.compile and the composed model as
shipped (its launch plan: ``lego_core.launch``) side by side in one fresh
process (CUDA events, L2 flushed, median; ``lego_core.timing``).
"""
from __future__ import annotations

import copy
import math
import uuid
from pathlib import Path

import torch

from lego_core.errors import OptimizeError
from lego_core.search import load_module
from lego_core.verify import compare


def load_composed(out_dir: Path, problem) -> torch.nn.Module:
    """``ModelNew`` from ``out_dir`` with the original model's weights, on the problem's device and dtype."""
    module = load_module(Path(out_dir) / "optimized_model.py", f"lego_optimized_{uuid.uuid4().hex[:8]}")
    torch.manual_seed(0)
    new = module.ModelNew(*module.get_init_inputs())
    new = new.to(device=problem.spec.device, dtype=problem.spec.torch_dtype).eval()
    new.load_state_dict(problem.model.state_dict())
    return new


def _norm_rel(a: torch.Tensor, ref: torch.Tensor) -> float:
    a, ref = a.double(), ref.double()
    denom = torch.linalg.vector_norm(ref).item()
    err = torch.linalg.vector_norm(a - ref).item()
    return err / denom if denom > 0 else err


def _to64(x):
    return x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x


def check_end_to_end(out_dir: Path, problem, seed: int, fp64_device: str | None = None, meter=None) -> dict:
    """Compare the composed model with eager (values, and output strides where
    eager returns a dense tensor: ``layout_mismatch``); returns ``passed``,
    errors, ``reason``, ``seed``.

    Eager and the comparison run here; the composed model's forward runs in a
    fresh process (``judge.composed.composed_forward``; ``meter``: told that
    process's peak memory).  ``fp64_device``: where the fp64 copy of the model runs when the bf16/fp16
    check needs it (None: the problem's device; ``"cpu"`` keeps a float64
    forward, 4x a bf16 one, off a GPU that has no room for it)."""
    from lego_core.judge.composed import composed_forward

    inputs = problem.make_inputs(seed)
    with torch.no_grad():
        expected = problem.model(*inputs)
    actual, _ = composed_forward(out_dir, problem, inputs, meter=meter)
    cmp = compare([actual], [expected], problem.spec.torch_dtype)
    result = {
        "passed": cmp.passed,
        "max_abs_error": _finite(cmp.max_abs_error),
        "norm_rel_error": _finite(cmp.norm_rel_error),
        "reason": cmp.reason,
        "seed": seed,
        "criterion": "dtype tolerance against eager",
    }
    layout = layout_mismatch(actual, expected)
    if layout:
        result.update(passed=False, reason=layout, output_strides={"optimized": list(actual.stride()), "eager": list(expected.stride())})
        return result
    if cmp.passed or (problem.spec.dtype == "fp32" and not eager_uses_tf32(problem)) or not torch.isfinite(actual).all():
        return result
    device = fp64_device or problem.spec.device
    model64 = copy.deepcopy(problem.model).to(device=device, dtype=torch.float64)
    with torch.no_grad():
        truth = model64(*[_to64(x.to(device) if isinstance(x, torch.Tensor) else x) for x in inputs])
    del model64
    result.update(fp64_verdict(actual.to(device), expected.to(device), truth))
    return result


def fp64_verdict(actual: torch.Tensor, expected: torch.Tensor, truth: torch.Tensor) -> dict:
    """The bf16/fp16 criterion: the composed model's ``actual`` output is no
    further from the float64 run ``truth`` than twice eager's ``expected``
    (norm-relative L2 error, all three of one shape on one device), over the
    whole tensor and, when eager's output holds fill values
    (``verify.fill_values``: ``masked_fill(x, mask, -1e9)``), once more over
    the elements that do not hold them: the fills dominate the norm, and an
    output with every other element 10% off would pass on the whole tensor.
    Returns ``passed``, ``criterion``, ``fp64_norm_rel_error`` and ``reason``."""
    from lego_core.verify import PRECISION_FLOOR, fill_values

    err_new, err_eager = _norm_rel(actual, truth), _norm_rel(expected, truth)
    verdict = {
        "passed": err_new <= 2 * err_eager,
        "criterion": "error against fp64 at most twice eager's",
        "fp64_norm_rel_error": {"optimized": err_new, "eager": err_eager},
        "reason": f"norm-relative error against fp64: optimized {err_new:.3g}, eager {err_eager:.3g}",
    }
    fills = fill_values(expected)
    if verdict["passed"] and fills:
        rest = ~torch.isin(expected.double(), torch.tensor(fills, dtype=torch.float64, device=expected.device))
        apart_new, apart_eager = _norm_rel(actual[rest], truth[rest]), _norm_rel(expected[rest], truth[rest])
        verdict["fp64_norm_rel_error"].update(optimized_apart_from_fills=apart_new, eager_apart_from_fills=apart_eager)
        if apart_new > 2 * apart_eager + PRECISION_FLOOR:  # the floor: room where eager is exact there
            shown = ", ".join(f"{v:g}" for v in fills)
            verdict.update(passed=False, reason=(f"norm-relative error against fp64 apart from the elements holding the fill value {shown}: "
                                                 f"optimized {apart_new:.3g}, eager {apart_eager:.3g}"))
    return verdict


_CONVS = (torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Conv3d, torch.nn.ConvTranspose1d, torch.nn.ConvTranspose2d, torch.nn.ConvTranspose3d)


def eager_uses_tf32(problem) -> bool:
    """Whether eager computes part of an fp32 model on CUDA in TF32 (10-bit
    mantissa): a convolution while ``torch.backends.cudnn.allow_tf32`` is on
    (PyTorch's default), or matmuls when ``torch.backends.cuda.matmul.allow_tf32``
    or ``torch.set_float32_matmul_precision("high"/"medium")`` allow it.  Then
    eager's own error is about 1e-3, and a composed model that reaches the
    same convolution another way (BatchNorm folded into its weights, NHWC)
    differs from it by as much: it is judged against fp64 like a 16-bit model."""
    if problem.spec.device != "cuda" or problem.spec.dtype != "fp32":
        return False
    convs = torch.backends.cudnn.allow_tf32 and any(isinstance(m, _CONVS) for m in problem.model.modules())
    matmuls = torch.backends.cuda.matmul.allow_tf32 or torch.get_float32_matmul_precision() != "highest"
    return bool(convs or matmuls)


def layout_mismatch(actual, expected) -> str | None:
    """Why ``actual``'s memory layout differs from eager's ``expected`` (strides
    unequal in a dimension of size > 1, where eager's output is a dense
    tensor: a view's odd strides are not required), else None."""
    if not isinstance(actual, torch.Tensor) or not isinstance(expected, torch.Tensor) or actual.shape != expected.shape:
        return None
    from lego_core.capture import ValueInfo, dense_order

    shape = tuple(expected.shape)
    if dense_order(ValueInfo(shape, expected.dtype, tuple(expected.stride())), shape) is None:
        return None
    if all(a == b for n, a, b in zip(shape, actual.stride(), expected.stride()) if n != 1):
        return None
    return f"output strides {tuple(actual.stride())} differ from eager's {tuple(expected.stride())}"


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def time_models(out_dir: Path, problem, config) -> dict:
    """:func:`time_models_here` in a fresh process (which loads the problem
    from its spec and takes this process's weights): the composed model
    imports every kernel, and this process imports none."""
    from lego_core.judge.composed import run_fresh

    state = {name: value.detach() for name, value in problem.model.state_dict().items()}
    answer = run_fresh(out_dir, "time_models", {"spec": problem.spec, "state_dict": state, "config": config})
    if not isinstance(answer.get("timing"), dict):
        raise OptimizeError("timing the models in their process gave no result")
    return answer["timing"]


def time_models_here(out_dir: Path, problem, config) -> dict:
    """Median GPU ms of eager, torch.compile (default mode, when
    ``config.compare_compile``) and the composed model as shipped (its
    ``LAUNCH``, chosen by ``lego_core.launch``), side by side in this one
    process with the bench's harness (``lego_core.benchmark.side_by_side``:
    CUDA events, L2 flushed, each call from an idle GPU, median); ratios
    ``speedup_vs_eager`` and ``speedup_vs_compile``; a candidate that fails
    is reported with its error (``compile_error``), never raised."""
    from lego_core.benchmark import compile_candidates, side_by_side

    input_sets = [problem.make_inputs(seed) for seed in config.verify_seeds]
    candidates = [("eager", lambda: problem.model), ("optimized", lambda: load_composed(out_dir, problem))]
    if config.compare_compile:
        candidates += [("compile", build) for _, build in compile_candidates(problem.model, ("default",))]
    result: dict = {"measured": True}
    for measured in side_by_side(candidates, input_sets):
        result[f"{measured.name}_ms"] = measured.median_ms
        if measured.error:
            result[f"{measured.name}_error"] = measured.error
    if result.get("eager_ms") is None or result.get("optimized_ms") is None:
        raise OptimizeError(f"timing the composed model failed: {result.get('eager_error') or result.get('optimized_error')}")
    result["speedup_vs_eager"] = result["eager_ms"] / result["optimized_ms"]
    if result.get("compile_ms"):
        result["speedup_vs_compile"] = result["compile_ms"] / result["optimized_ms"]
    return result
