"""End-to-end checks of a composed model: correctness, and time on a GPU.

``check_end_to_end`` runs eager here and, in a fresh process
(``lego_core.judge.end_to_end.composed``: ``optimized_model.py`` imports every kernel,
so this process never imports it), builds ``ModelNew(*get_init_inputs())``
from the output folder with the original model's weights and runs it on the
same fresh inputs (a seed no sub-problem was checked on).  The outputs are
judged here against the truth, the same model and inputs in float64
(``lego_core.judge.end_to_end.e2e_judge``: the plan's error within a stated factor of eager's
own error, elementwise and by norm, the rule of PyTorch's accuracy check for
its compiler), for fp32, bf16 and fp16 alike; eager, the fp64 run (and
torch.compile, when measured) are computed once per run (:func:`reference_run`).
Large finite fill values (``masked_fill(x, mask, -1e9)``) dominate both error
measures, so the judge applies its rule once more to the elements that do not
hold them (``e2e_judge.judge_outputs``).

``composed.time_models`` measures eager, torch.compile and the composed model as
shipped (its launch plan: ``lego_core.judge.end_to_end.launch``) side by side in one fresh
process (CUDA events, L2 flushed, median; ``lego_core.runtime.timing``).
"""
from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import torch

from lego_core.judge.end_to_end import composed
from lego_core.judge.end_to_end.e2e_judge import float64_copy, judge_outputs, to_float64
from lego_core.judge.end_to_end.shipped import fallback_problem
from lego_core.judge.verify import compare
from lego_core.load.capture import ValueInfo, dense_order
from lego_core.load.state import preserved, with_state


@dataclasses.dataclass
class Reference:
    """What a composed model is judged against on one seed: the ``inputs``,
    ``eager``'s outputs at the run's dtype, the ``truth`` (the model and
    inputs in float64 on ``fp64_device``; None with ``truth_error`` when the
    model cannot run so) and, when asked, torch.compile's outputs
    (``compiled``; None with ``compile_error`` when it failed)."""

    seed: int
    inputs: list
    eager: Any
    truth: Any = None
    truth_error: str | None = None
    compiled: Any = None
    compile_error: str | None = None


def reference_run(problem, seed: int, fp64_device: str | None = None, with_compile: bool = False,
                  inputs: list | None = None, model64: torch.nn.Module | None = None) -> Reference:
    """Eager, the fp64 truth and (``with_compile``) torch.compile on the inputs of
    ``seed``, computed once for every check of a run (the fallback's bisection
    re-checks many plans against it).  ``fp64_device``: where the float64 copy
    runs (None: the problem's device; ``"cpu"`` keeps it off a full GPU).
    ``inputs``: other inputs than ``problem.make_inputs(seed)`` (the final user
    check's input sets, ``user_check``); ``model64``: a float64 copy of the
    model already made (``e2e_judge.float64_copy``), reused for several input
    sets (None: one is made here and dropped after).  Raises what eager
    raises on the inputs; a failing fp64 run is ``truth_error``."""
    inputs = problem.make_inputs(seed) if inputs is None else inputs
    known = getattr(problem, "state_targets", None)  # None: not captured yet, every buffer is preserved
    targets = list(known or ())  # a stateful forward: the state after the call is judged too
    with torch.no_grad(), preserved(problem.model, known):  # the candidate starts from the same state (lego_core.load.state)
        eager = with_state(problem.model(*inputs), problem.model, targets)
    ref = Reference(seed, inputs, eager)
    device = fp64_device or problem.spec.device
    try:
        truth_model = model64 if model64 is not None else float64_copy(problem.model, device)
        with torch.no_grad(), preserved(truth_model, known if model64 is not None else []):  # a shared copy starts each set alike
            ref.truth = with_state(truth_model(*to_float64(inputs, device)), truth_model, targets)
        del truth_model
    except Exception as exc:  # noqa: BLE001 - a model that cannot run in float64 (a dtype fixed inside forward)
        ref.truth_error = f"{type(exc).__name__}: {str(exc).strip()[:300]}"
    if with_compile:
        try:
            compiled = torch.compile(problem.model)
            with torch.no_grad(), preserved(problem.model, known):
                ref.compiled = with_state(compiled(*inputs), problem.model, targets)
        except Exception as exc:  # noqa: BLE001 - torch.compile's error is reported, never raised
            ref.compile_error = f"{type(exc).__name__}: {str(exc).strip()[:300]}"
    return ref


def check_end_to_end(out_dir: Path, problem, seed: int, fp64_device: str | None = None, meter=None,
                     reference: Reference | None = None) -> dict:
    """Judge the composed model in ``out_dir`` end to end; returns ``passed``,
    ``reason``, ``criterion``, ``seed``, its difference from eager
    (``max_abs_error``, ``norm_rel_error``) and, from
    ``e2e_judge.judge_outputs``, ``errors_vs_fp64`` (eager, plan, compile),
    ``multiplier`` and ``floor``.  Also fails when the output strides differ
    from eager's dense output (``layout_mismatch``, ``output_strides``).

    ``reference``: from :func:`reference_run` (computed here for ``seed`` when
    None).  The composed model's forward runs in a fresh process
    (``composed.composed_forward``; ``meter``: told that process's peak
    memory), eager, the fp64 truth and the judging here.  When the model
    cannot run in float64, the dtype tolerance against eager decides
    (``verify.compare``), and ``criterion`` says so.  For a stateful forward
    (``problem.state_targets``) the state after the call is judged with the
    outputs: both sides are ``(outputs, (state, ...))`` (``state.with_state``),
    starting from the same state."""
    ref = reference if reference is not None and reference.seed == seed else reference_run(problem, seed, fp64_device)
    answer = composed.composed_forward(out_dir, problem, ref.inputs, meter=meter)
    result = dict(seed=seed, forward=answer.forward, **judge_composed(answer.output, ref, problem))
    fell_back = fallback_problem(answer.forward)
    if fell_back:  # the numbers above are eager's own: the plan was never the thing tested
        result.update(passed=False, reason=fell_back, fell_back=True)
    return result


def judge_composed(actual, ref: Reference, problem) -> dict:
    """The composed model's output ``actual`` (with the state after the call
    for a stateful forward, as ``ref.eager``) judged against ``ref``: eager's
    outputs and the fp64 truth on the same inputs.  Returns ``passed``,
    ``reason``, ``criterion``, ``max_abs_error`` / ``norm_rel_error`` (from
    eager) and ``e2e_judge.Verdict.to_dict``'s entries, or the dtype
    tolerance's verdict when there is no fp64 truth; ``layout_mismatch`` fails
    it too (``output_strides``).  Used by :func:`check_end_to_end` and by the
    final user check (``user_check``) for each of its input sets."""
    result = dict(**_versus_eager(actual, ref.eager))
    if ref.truth is not None:
        verdict = judge_outputs(actual, ref.eager, ref.truth, problem.spec.torch_dtype, ref.compiled, names=_leaf_names(problem, ref.eager))
        result.update(verdict.to_dict())
    else:
        leaves = [x for x in torch.utils._pytree.tree_leaves(actual)]
        cmp = compare(leaves, list(torch.utils._pytree.tree_leaves(ref.eager)), problem.spec.torch_dtype)
        result.update(passed=cmp.passed, reason=cmp.reason, criterion=f"dtype tolerance against eager (no fp64 run: {ref.truth_error})")
    if ref.compile_error:
        result["compile_error"] = ref.compile_error
    user_actual, user_eager = (actual[0], ref.eager[0]) if getattr(problem, "state_targets", None) else (actual, ref.eager)
    layout = layout_mismatch(user_actual, user_eager)
    if layout:
        result.update(passed=False, reason=layout, output_strides={"optimized": list(user_actual.stride()), "eager": list(user_eager.stride())})
    return result


def _leaf_names(problem, eager) -> list[str] | None:
    """What each judged leaf is: ``output k``, then ``state self.NAME`` for a
    stateful forward's state after the call (``state.with_state``); None
    for a stateless one (the judge's default names)."""
    targets = getattr(problem, "state_targets", None)
    if not targets:
        return None
    outputs = len(torch.utils._pytree.tree_leaves(eager[0]))
    return [f"output {k}" for k in range(outputs)] + [f"state self.{t}" for t in targets]


def _versus_eager(actual, expected) -> dict:
    """The composed model's largest and norm-relative difference from eager (float outputs, float64)."""
    worst, sq, ref_sq = 0.0, 0.0, 0.0
    for a, e in zip(torch.utils._pytree.tree_leaves(actual), torch.utils._pytree.tree_leaves(expected)):
        if not (isinstance(a, torch.Tensor) and isinstance(e, torch.Tensor) and e.is_floating_point() and a.shape == e.shape):
            continue
        a, e = a.double().to(e.device), e.double()
        ok = torch.isfinite(a) & torch.isfinite(e)
        diff = torch.where(ok, a - e, 0.0)
        if diff.numel():
            worst = max(worst, diff.abs().max().item())
        sq += diff.square().sum().item()
        ref_sq += torch.where(ok, e, 0.0).square().sum().item()
    norm_rel = math.sqrt(sq / ref_sq) if ref_sq > 0 else math.sqrt(sq)
    return {"max_abs_error": _finite(worst), "norm_rel_error": _finite(norm_rel)}


_CONVS = (torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Conv3d, torch.nn.ConvTranspose1d, torch.nn.ConvTranspose2d, torch.nn.ConvTranspose3d)


def eager_uses_tf32(problem) -> bool:
    """Whether eager computes part of an fp32 model on CUDA in TF32 (10-bit
    mantissa): a convolution while ``torch.backends.cudnn.allow_tf32`` is on
    (PyTorch's default), or matmuls when ``torch.backends.cuda.matmul.allow_tf32``
    or ``torch.set_float32_matmul_precision("high"/"medium")`` allow it.  Then
    eager's own error is about 1e-3, and a composed model that reaches the
    same convolution another way (BatchNorm folded into its weights, NHWC)
    differs from it by as much.  The end-to-end judge needs no switch for it:
    eager's measured error against fp64 is the yardstick (``e2e_judge``)."""
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
    shape = tuple(expected.shape)
    if dense_order(ValueInfo(shape, expected.dtype, tuple(expected.stride())), shape) is None:
        return None
    if all(a == b for n, a, b in zip(shape, actual.stride(), expected.stride()) if n != 1):
        return None
    return f"output strides {tuple(actual.stride())} differ from eager's {tuple(expected.stride())}"


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None
