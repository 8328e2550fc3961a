"""The end-to-end judge: a composed model's outputs measured against the truth.

A whole model in fp32 compounds rounding: eager's own output is off from the
exact result by about as much as any other correct implementation (a fused
kernel that sums in another order, TF32 convolutions on a GPU, torch.compile),
so a fixed tolerance against eager rejects correct plans (issue 14: a Swin-style
MLP whose plan was as accurate as torch.compile, 2.3e-4 norm-relative from
eager, failed an atol/rtol 1e-4 check).  The judge therefore compares both
with an fp64 run of the same model on the same inputs (the *truth*) and asks
whether the plan is within a stated factor of eager's own error:

    plan_error <= MULTIPLIER[dtype] * eager_error + FLOOR[dtype]

for two error measures of the same outputs, both of which must hold:

* ``rmse`` (by norm): root mean square of ``output - truth``;
* ``max_abs`` (elementwise): the largest ``|output - truth|``.

Errors are taken in float64 over the positions where eager and the truth are
both finite; there a non-finite plan value fails.  Elsewhere (eager itself
NaN or inf) the plan must be non-finite in the same way, or match the truth.
Integer and boolean outputs must equal eager's exactly.

Large finite fill values (``masked_fill(scores, mask, -1e9)``, as attention
code writes them; ``verify.fill_values`` finds them in eager's output) are
rounded alike by eager and by any plan, and they dominate both measures: a
plan with every other element zeroed or 10% off passes on the whole outputs
(issue 10).  When eager's outputs hold fill values, the rule is applied once
more to the elements that do not hold them, and both must pass.

Source: PyTorch's accuracy check for its compiler, ``torch._dynamo.utils.same``
(used by ``benchmarks/dynamo/common.py`` with ``fp64_ref``, the model and
inputs cast to float64): it passes a result when ``rmse(fp64_ref, res) <=
multiplier * rmse(fp64_ref, ref) + tol / 10`` with ``multiplier`` 2.0 for
fp32 and 3.0 for fp16/bf16 (3.0 as well for outputs of fewer than 1000
elements, where noise dominates) and ``tol`` 1e-4 (fp32).  LEGO takes the
same multipliers and floor (``tol / 10`` = 1e-5 in fp32; 1e-3 in 16 bits,
``tol`` 1e-2 as the benchmarks use for AMP) and adds the elementwise worst
case, which ``same`` does not check, so one wrong region of an otherwise
good output is caught too.  Unlike ``same``, there is no first ``allclose``
against eager: a plan ten times less accurate than eager would pass it.
"""
from __future__ import annotations

import copy
import dataclasses
import math

import torch

from lego_core.judge.verify import fill_values
from lego_core.load.problem import move_plain_tensor_attributes

MULTIPLIER = {torch.float32: 2.0, torch.float64: 2.0, torch.bfloat16: 3.0, torch.float16: 3.0}
SMALL_OUTPUT = 1000  # elements; below this, the multiplier is at least SMALL_MULTIPLIER (dynamo's rule)
SMALL_MULTIPLIER = 3.0
FLOOR = {torch.float32: 1e-5, torch.float64: 1e-5, torch.bfloat16: 1e-3, torch.float16: 1e-3}
SOURCE = "torch._dynamo.utils.same (fp64_ref, multiplier): benchmarks/dynamo/common.py"


@dataclasses.dataclass
class Errors:
    """One implementation's error against the fp64 truth, over all float outputs:
    ``max_abs`` (largest ``|x - truth|``), ``rmse`` (root mean square of
    ``x - truth``) and ``norm_rel`` (``||x - truth|| / ||truth||``); units of
    the outputs.  ``nonfinite``: positions where eager and the truth are
    finite and this one is not."""

    max_abs: float = 0.0
    rmse: float = 0.0
    norm_rel: float = 0.0
    nonfinite: int = 0

    def to_dict(self) -> dict:
        return {"max_abs": _json(self.max_abs), "rmse": _json(self.rmse), "norm_rel": _json(self.norm_rel),
                "nonfinite": self.nonfinite}


@dataclasses.dataclass
class Verdict:
    """The judge's answer: ``passed``, ``reason`` in words, the errors of eager,
    the plan and (when measured) torch.compile against the truth, and the
    rule's ``multiplier`` and ``floor``."""

    passed: bool
    reason: str
    eager: Errors
    plan: Errors
    compile: Errors | None
    multiplier: float
    floor: float
    fills: tuple = ()
    apart_from_fills: dict | None = None  # {"eager": Errors, "plan": Errors} over the other elements

    def to_dict(self) -> dict:
        apart = None if self.apart_from_fills is None else {
            "fill_values": list(self.fills), **{k: v.to_dict() for k, v in self.apart_from_fills.items()}}
        return {
            "passed": self.passed,
            "errors_vs_fp64_apart_from_fills": apart,
            "reason": self.reason,
            "criterion": f"error against fp64 at most {self.multiplier:g}x eager's + {self.floor:g}, "
                         f"elementwise and by norm ({SOURCE})",
            "errors_vs_fp64": {
                "eager": self.eager.to_dict(),
                "plan": self.plan.to_dict(),
                "compile": self.compile.to_dict() if self.compile is not None else None,
            },
            "multiplier": self.multiplier,
            "floor": self.floor,
        }


def float64_copy(model: torch.nn.Module, device: str | torch.device) -> torch.nn.Module:
    """A deep copy of ``model`` in float64 on ``device`` (the truth's model); ``model`` is untouched."""
    truth = copy.deepcopy(model).to(device=device, dtype=torch.float64)
    move_plain_tensor_attributes(truth, device, torch.float64)  # Module.to leaves plain tensor attributes (a mask) as they were
    return truth


def to_float64(value, device: str | torch.device | None = None):
    """``value`` with floating tensors (in lists, tuples, dicts too) cast to float64 (on ``device``)."""
    def cast(x):
        if isinstance(x, torch.Tensor):
            x = x.to(device) if device is not None else x
            return x.double() if x.is_floating_point() else x
        return x

    return torch.utils._pytree.tree_map(cast, value)


def judge_outputs(plan, eager, truth, dtype: torch.dtype, compiled=None, names: list[str] | None = None) -> Verdict:
    """Judge ``plan`` (the composed model's outputs) against ``truth`` (the same
    model in float64 on the same inputs), with eager's outputs at ``dtype``
    (the run's dtype: fp32, bf16 or fp16) as the yardstick; ``compiled``:
    torch.compile's outputs, reported beside them when given.  Outputs may be
    a tensor or any pytree of tensors (same structure in all three); the
    rule is the module docstring's.  Raises nothing on mismatched outputs:
    a structure or shape mismatch is a failed verdict.  ``names``: what each
    leaf is, for the reason (``"output 0"``, ``"state self.hidden"``; default
    ``output k``); a failed verdict names the leaves that fail the rule on
    their own."""
    label = (lambda k: names[k]) if names else (lambda k: f"output {k}")
    plan_leaves, eager_leaves, truth_leaves = (_leaves(x) for x in (plan, eager, truth))
    multiplier = MULTIPLIER.get(dtype, 2.0)
    floor = FLOOR.get(dtype, 1e-5)
    if not (len(plan_leaves) == len(eager_leaves) == len(truth_leaves)):
        return Verdict(False, f"{len(plan_leaves)} outputs, eager returns {len(eager_leaves)}", Errors(), Errors(), None, multiplier, floor)
    float_numel = sum(t.numel() for t in eager_leaves if isinstance(t, torch.Tensor) and t.is_floating_point())
    if float_numel < SMALL_OUTPUT:
        multiplier = max(multiplier, SMALL_MULTIPLIER)
    for k, (p, e) in enumerate(zip(plan_leaves, eager_leaves)):
        problem = _mismatch(p, e)
        if problem:
            return Verdict(False, f"{label(k)}: {problem}", Errors(), Errors(), None, multiplier, floor)
    eager_err = _errors(eager_leaves, eager_leaves, truth_leaves)
    plan_err = _errors(plan_leaves, eager_leaves, truth_leaves)
    compile_err = _errors(_leaves(compiled), eager_leaves, truth_leaves) if compiled is not None else None
    passed, reason = _rule(plan_err, eager_err, multiplier, floor)
    if not passed and len(eager_leaves) > 1:
        failing = [label(k) for k, (p, e, t) in enumerate(zip(plan_leaves, eager_leaves, truth_leaves))
                   if isinstance(e, torch.Tensor) and e.is_floating_point()
                   and not _rule(_errors([p], [e], [t]), _errors([e], [e], [t]), multiplier, floor)[0]]
        if failing:
            reason = f"{', '.join(failing[:4])}{' and more' if len(failing) > 4 else ''} off: {reason}"
    fills, masks = _apart_from_fills(eager_leaves)
    apart = None
    if masks is not None:
        apart = {"eager": _errors(eager_leaves, eager_leaves, truth_leaves, masks),
                 "plan": _errors(plan_leaves, eager_leaves, truth_leaves, masks)}
        ok, why = _rule(apart["plan"], apart["eager"], multiplier, floor)
        if passed and not ok:
            shown = ", ".join(f"{v:g}" for v in fills)
            passed, reason = False, f"apart from the elements holding the fill value {shown}: {why}"
    if passed:
        for k, (p, e, t) in enumerate(zip(plan_leaves, eager_leaves, truth_leaves)):
            special = _special_values(p, e, t)
            if special:
                passed, reason = False, f"{label(k)}: {special}"
                break
    return Verdict(passed, reason, eager_err, plan_err, compile_err, multiplier, floor, fills, apart)


def _apart_from_fills(eager_leaves: list) -> tuple[tuple, list | None]:
    """The fill values of eager's float outputs and, per output, a mask of the
    elements that do not hold one (None for an output without fills); masks
    is None when no output holds a fill value."""
    found: list[float] = []
    masks: list = []
    for e in eager_leaves:
        fills = fill_values(e) if isinstance(e, torch.Tensor) and e.is_floating_point() and e.numel() else ()
        if not fills:
            masks.append(None)
            continue
        found += [v for v in fills if v not in found]
        masks.append(~torch.isin(e.double(), torch.tensor(fills, dtype=torch.float64, device=e.device)))
    return tuple(found), (masks if any(m is not None for m in masks) else None)


def _rule(plan: Errors, eager: Errors, multiplier: float, floor: float) -> tuple[bool, str]:
    said = (f"against fp64: plan max abs {plan.max_abs:.3g}, rmse {plan.rmse:.3g} (norm-relative {plan.norm_rel:.3g}); "
            f"eager max abs {eager.max_abs:.3g}, rmse {eager.rmse:.3g} (norm-relative {eager.norm_rel:.3g})")
    if plan.nonfinite:
        return False, f"{plan.nonfinite} NaN/inf values where eager and fp64 are finite; {said}"
    if not math.isfinite(eager.rmse) or not math.isfinite(plan.rmse):
        return False, f"errors not finite; {said}"
    bad = []
    if plan.rmse > multiplier * eager.rmse + floor:
        bad.append(f"rmse {plan.rmse:.3g} > {multiplier:g} x {eager.rmse:.3g} + {floor:g}")
    if plan.max_abs > multiplier * eager.max_abs + floor:
        bad.append(f"max abs {plan.max_abs:.3g} > {multiplier:g} x {eager.max_abs:.3g} + {floor:g}")
    if bad:
        return False, f"{'; '.join(bad)} ({said})"
    return True, said


def _leaves(value) -> list:
    return list(torch.utils._pytree.tree_leaves(value))


def _mismatch(p, e) -> str | None:
    if isinstance(e, torch.Tensor) != isinstance(p, torch.Tensor):
        return f"{type(p).__name__} where eager returns {type(e).__name__}"
    if not isinstance(e, torch.Tensor):
        return None if p == e else f"{p!r} where eager returns {e!r}"
    if p.shape != e.shape:
        return f"shape {list(p.shape)} where eager's is {list(e.shape)}"
    if p.dtype != e.dtype:
        return f"dtype {p.dtype} where eager's is {e.dtype}"
    if not e.is_floating_point():
        diff = (p.cpu() != e.cpu()).nonzero()
        return None if diff.numel() == 0 else f"{diff.shape[0]} values differ from eager's (exact dtype {e.dtype}), first at {tuple(diff[0].tolist())}"
    return None


def _errors(leaves: list, eager_leaves: list, truth_leaves: list, masks: list | None = None) -> Errors:
    """Errors of ``leaves`` against the truth over the float outputs, in float64
    on the truth's device; ``masks`` (one per output, None for all of it):
    only the elements where the mask is True count."""
    sq, ref_sq, count, worst, nonfinite = 0.0, 0.0, 0, 0.0, 0
    for k, (x, e, t) in enumerate(zip(leaves, eager_leaves, truth_leaves)):
        if not isinstance(e, torch.Tensor) or not e.is_floating_point():
            continue
        t = t.double()
        x, e = x.to(t.device).double(), e.to(t.device).double()
        comparable = torch.isfinite(e) & torch.isfinite(t)
        if masks is not None and masks[k] is not None:
            comparable = comparable & masks[k].to(t.device)
        nonfinite += int((comparable & ~torch.isfinite(x)).sum().item())
        ok = comparable & torch.isfinite(x)
        diff = torch.where(ok, x - t, 0.0)
        sq += float(diff.square().sum().item())
        ref_sq += float(torch.where(comparable, t, 0.0).square().sum().item())
        count += int(comparable.sum().item())
        if diff.numel():
            worst = max(worst, float(diff.abs().max().item()))
    rmse = math.sqrt(sq / count) if count else 0.0
    norm_rel = math.sqrt(sq / ref_sq) if ref_sq > 0 else math.sqrt(sq)
    return Errors(max_abs=worst, rmse=rmse, norm_rel=norm_rel, nonfinite=nonfinite)


def _special_values(p, e, t) -> str | None:
    """Where eager is NaN or inf and the plan is neither that nor close to the truth."""
    if not isinstance(e, torch.Tensor) or not e.is_floating_point():
        return None
    t = t.double()
    p, e = p.to(t.device).double(), e.to(t.device).double()
    special = ~torch.isfinite(e) | ~torch.isfinite(t)
    if not special.any():
        return None
    same = (torch.isnan(p) & torch.isnan(e)) | (p == e) | (torch.isfinite(t) & torch.isfinite(p))
    bad = (special & ~same).nonzero()
    if bad.numel() == 0:
        return None
    at = tuple(bad[0].tolist())
    return f"{bad.shape[0]} values where eager gives NaN/inf differ from it, first at {at}: {p[at].item()} vs eager {e[at].item()}"


def _json(x: float) -> float | None:
    return x if math.isfinite(x) else None
