"""Triton expressions for the ATen ops the template agent generates.

Each handler takes the node and the Triton expressions of its arguments
(tensor arguments become variable names; Python scalars become literals) and
returns one expression.  Values are computed in fp32 (bool for masks); the
store casts to the output dtype.  Composite row ops (softmax, log_softmax,
layer_norm) need several statements and live in ``ROW_OPS``.

Formulas that Triton has no single instruction for, written so that the
Triton CPU interpreter can run them too (no libdevice): tanh(x) =
2*sigmoid(2x) - 1; GELU (erf form and tanh form) as in torch.nn.GELU.

Op facts come from the op registry, ``lego_core.ops``: ``POINTWISE`` has one
handler per overload the fusion policy treats as pointwise
(``ops.fusion_overloads("pointwise")``), ``TUPLE_POINTWISE`` one per channel
affine, and the layout sets are ``ops.view_overloads``.
"""
from __future__ import annotations

import math
from typing import Callable

import torch.fx as fx

from lego_core import ops
from lego_core.load.capture import op_name


class Unsupported(Exception):
    """The node uses an option the templates do not generate."""


def literal(value: object) -> str:
    """Triton source for a Python scalar argument."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return f"{float(value)!r}"
    if isinstance(value, float):
        if math.isinf(value):
            return 'float("inf")' if value > 0 else '-float("inf")'
        if math.isnan(value):
            return 'float("nan")'
        return repr(value)
    raise Unsupported(f"argument {value!r} of type {type(value).__name__}")


def _alpha(node: fx.Node, b: str) -> str:
    alpha = node.kwargs.get("alpha", 1)
    return b if alpha == 1 else f"{literal(alpha)} * {b}"


def _tanh(x: str) -> str:
    return f"(2.0 * tl.sigmoid(2.0 * {x}) - 1.0)"


def _gelu(node: fx.Node, a: list[str]) -> str:
    x = a[0]
    if node.kwargs.get("approximate", "none") == "tanh":
        inner = f"0.7978845608028654 * ({x} + 0.044715 * {x} * {x} * {x})"
        return f"(0.5 * {x} * (1.0 + {_tanh(inner)}))"
    return f"(0.5 * {x} * (1.0 + tl.math.erf({x} * 0.7071067811865476)))"


# x ** e as Triton arithmetic, for each exponent of ops.POW_EXPONENTS
POW_FORMS = {
    0: "({x} * 0.0 + 1.0)",
    0.5: "tl.sqrt({x})",
    1: "{x}",
    2: "({x} * {x})",
    3: "({x} * {x} * {x})",
    4: "(({x} * {x}) * ({x} * {x}))",
    -0.5: "tl.math.rsqrt({x})",
    -1: "(1.0 / {x})",
    -2: "(1.0 / ({x} * {x}))",
}


def _pow(node: fx.Node, a: list[str]) -> str:
    x, e = a[0], node.args[1]
    if e not in POW_FORMS:
        raise Unsupported(f"pow exponent {e}")
    return POW_FORMS[e].format(x=x)


# PyTorch's maximum/minimum/relu/clamp propagate NaN; Triton's tl.maximum and
# tl.minimum drop it by default when compiled (maxnumf) while the interpreter
# keeps it (np.maximum), so a test on the CPU would not see the difference.
_NAN = "propagate_nan=tl.PropagateNan.ALL"


def nan_maximum(a: str, b: str) -> str:
    """Elementwise max that is NaN where either operand is (torch.maximum)."""
    return f"tl.maximum({a}, {b}, {_NAN})"


def nan_minimum(a: str, b: str) -> str:
    """Elementwise min that is NaN where either operand is (torch.minimum)."""
    return f"tl.minimum({a}, {b}, {_NAN})"


def _clamp(node: fx.Node, a: list[str]) -> str:
    x = a[0]
    lo = node.args[1] if len(node.args) > 1 else node.kwargs.get("min")
    hi = node.args[2] if len(node.args) > 2 else node.kwargs.get("max")
    if lo is not None:
        x = nan_maximum(x, literal(lo))
    if hi is not None:
        x = nan_minimum(x, literal(hi))
    return x


def _to_copy(node: fx.Node, a: list[str]) -> str:
    dtype = node.kwargs.get("dtype")
    if dtype is not None and not dtype.is_floating_point:
        if str(dtype) == "torch.bool":
            return f"({a[0]} != 0)"
        raise Unsupported(f"cast to {dtype}")
    return a[0]


Handler = Callable[[fx.Node, list[str]], str]

POINTWISE: dict[str, Handler] = {
    "aten.add.Tensor": lambda n, a: f"({a[0]} + {_alpha(n, a[1])})",
    "aten.add.Scalar": lambda n, a: f"({a[0]} + {_alpha(n, a[1])})",
    "aten.sub.Tensor": lambda n, a: f"({a[0]} - {_alpha(n, a[1])})",
    "aten.sub.Scalar": lambda n, a: f"({a[0]} - {_alpha(n, a[1])})",
    "aten.rsub.Scalar": lambda n, a: f"({a[1]} - {_alpha(n, a[0])})",
    "aten.mul.Tensor": lambda n, a: f"({a[0]} * {a[1]})",
    "aten.mul.Scalar": lambda n, a: f"({a[0]} * {a[1]})",
    "aten.div.Tensor": lambda n, a: f"({a[0]} / {a[1]})",
    "aten.div.Scalar": lambda n, a: f"({a[0]} / {a[1]})",
    "aten.neg.default": lambda n, a: f"(-{a[0]})",
    "aten.exp.default": lambda n, a: f"tl.exp({a[0]})",
    "aten.log.default": lambda n, a: f"tl.log({a[0]})",
    "aten.sqrt.default": lambda n, a: f"tl.sqrt({a[0]})",
    "aten.rsqrt.default": lambda n, a: f"tl.math.rsqrt({a[0]})",
    "aten.abs.default": lambda n, a: f"tl.abs({a[0]})",
    "aten.sigmoid.default": lambda n, a: f"tl.sigmoid({a[0]})",
    "aten.tanh.default": lambda n, a: _tanh(a[0]),
    "aten.relu.default": lambda n, a: nan_maximum(a[0], "0.0"),
    "aten.erf.default": lambda n, a: f"tl.math.erf({a[0]})",
    "aten.sin.default": lambda n, a: f"tl.sin({a[0]})",
    "aten.cos.default": lambda n, a: f"tl.cos({a[0]})",
    "aten.reciprocal.default": lambda n, a: f"(1.0 / {a[0]})",
    "aten.pow.Tensor_Scalar": _pow,
    "aten.gelu.default": _gelu,
    "aten.clamp.default": _clamp,
    "aten.clamp_min.default": lambda n, a: nan_maximum(a[0], a[1]),
    "aten.clamp_max.default": lambda n, a: nan_minimum(a[0], a[1]),
    "aten.minimum.default": lambda n, a: nan_minimum(a[0], a[1]),
    "aten.maximum.default": lambda n, a: nan_maximum(a[0], a[1]),
    "aten.where.self": lambda n, a: f"tl.where({a[0]}, {a[1]}, {a[2]})",
    "aten.eq.Scalar": lambda n, a: f"({a[0]} == {a[1]})",
    "aten.ne.Scalar": lambda n, a: f"({a[0]} != {a[1]})",
    "aten.lt.Scalar": lambda n, a: f"({a[0]} < {a[1]})",
    "aten.le.Scalar": lambda n, a: f"({a[0]} <= {a[1]})",
    "aten.gt.Scalar": lambda n, a: f"({a[0]} > {a[1]})",
    "aten.ge.Scalar": lambda n, a: f"({a[0]} >= {a[1]})",
    "aten.eq.Tensor": lambda n, a: f"({a[0]} == {a[1]})",
    "aten.ne.Tensor": lambda n, a: f"({a[0]} != {a[1]})",
    "aten.lt.Tensor": lambda n, a: f"({a[0]} < {a[1]})",
    "aten.le.Tensor": lambda n, a: f"({a[0]} <= {a[1]})",
    "aten.gt.Tensor": lambda n, a: f"({a[0]} > {a[1]})",
    "aten.ge.Tensor": lambda n, a: f"({a[0]} >= {a[1]})",
    "aten.bitwise_not.default": lambda n, a: f"({a[0]} == 0)",
    "aten.logical_not.default": lambda n, a: f"({a[0]} == 0)",
    "aten.logical_and.default": lambda n, a: f"(({a[0]} != 0) & ({a[1]} != 0))",
    "aten.logical_or.default": lambda n, a: f"(({a[0]} != 0) | ({a[1]} != 0))",
    "aten.scalar_tensor.default": lambda n, a: a[0],
    "aten.full_like.default": lambda n, a: a[1],
    "aten.clone.default": lambda n, a: a[0],
    "aten.alias.default": lambda n, a: a[0],
    "aten._to_copy.default": _to_copy,
}

def _batch_norm_eval(node: fx.Node, a: list[str]) -> str:
    """Output 0 of eval BatchNorm: (x - mean) * rsqrt(var + eps) * weight + bias,
    the [C] operands already loaded at each element's channel (dim 1)."""
    x, weight, bias, mean, var = a[:5]
    y = f"(({x} - {mean}) * tl.math.rsqrt({var} + {literal(float(node.args[6]))}))"
    if weight != "None":
        y = f"({y} * {weight})"
    if bias != "None":
        y = f"({y} + {bias})"
    return y


# Ops returning a tuple whose output 0 is pointwise: the handler gives output
# 0's expression (``v_<node>_0``, which ``getitem(node, 0)`` reads).
TUPLE_POINTWISE: dict[str, Handler] = {
    "aten._native_batch_norm_legit_no_training.default": _batch_norm_eval,
}

# Layout ops that are the identity on a per-row scalar inside a row program.
ROW_IDENTITY = ops.view_overloads("reshape", "unit_dim")  # view, reshape, (un)squeeze


# The row softmaxes (x, dim, half_to_float): _softmax, _log_softmax.
SOFTMAX_OPS = ops.softmax_overloads()

NEG_INF = '-float("inf")'
POS_INF = 'float("inf")'


def masked(x: str, neutral: str) -> str:
    return f"tl.where(mask, {x}, {neutral})"


def nan_of_row(x: str) -> str:
    """A per-row scalar that is NaN when the row (a masked [BLOCK_N] vector)
    holds a NaN and 0.0 otherwise: the sum of its NaN lanes."""
    return f"tl.sum(tl.where(mask & ({x} != {x}), {x}, 0.0), axis=0)"


def row_max(x: str) -> str:
    """Row maximum that is NaN when the row holds a NaN, as torch.amax.

    ``tl.max`` has no ``propagate_nan`` (triton 3.6) and skips NaN both
    compiled (maxnumf) and in the interpreter (np.nanmax); adding
    :func:`nan_of_row` (0.0 or NaN) restores it.  An all-masked row stays -inf."""
    return f"(tl.max({masked(x, NEG_INF)}, axis=0) + {nan_of_row(x)})"


def row_min(x: str) -> str:
    """Row minimum that is NaN when the row holds a NaN, as torch.amin."""
    return f"(tl.min({masked(x, POS_INF)}, axis=0) + {nan_of_row(x)})"


def row_reduction_lines(node: fx.Node, a: list[str], var: str) -> list[str]:
    """Statements computing a row reduction of ``a[0]`` (a [BLOCK_N] vector)
    into ``var`` (or ``var_0``, ``var_1``, ``var_2`` for layer_norm)."""
    name, x = op_name(node), a[0]
    if name == "aten.sum.dim_IntList":
        return [f"{var} = tl.sum({masked(x, '0.0')}, axis=0)"]
    if name == "aten.mean.dim":
        return [f"{var} = tl.sum({masked(x, '0.0')}, axis=0) / n_cols"]
    if name == "aten.amax.default":
        return [f"{var} = {row_max(x)}"]
    if name == "aten.amin.default":
        return [f"{var} = {row_min(x)}"]
    if name in SOFTMAX_OPS:
        lines = [
            f"{var}_max = {row_max(x)}",  # NaN in the row: the whole row NaN, as eager
            f"{var}_exp = {masked(f'tl.exp({x} - {var}_max)', '0.0')}",
            f"{var}_sum = tl.sum({var}_exp, axis=0)",
        ]
        if name == "aten._softmax.default":
            return lines + [f"{var} = {var}_exp / {var}_sum"]
        return lines + [f"{var} = {x} - {var}_max - tl.log({var}_sum)"]
    if name == "aten.native_layer_norm.default":
        weight, bias, eps = a[2], a[3], node.args[4]
        # the mean refined once by the mean of the residuals: a constant row then has
        # exactly its value as mean and centres to 0, as eager's Welford mean does
        # (an ulp off, the 1/sqrt(eps) of a zero-variance row magnifies it 300 times)
        lines = [
            f"{var}_1 = tl.sum({masked(x, '0.0')}, axis=0) / n_cols",
            f"{var}_1 = {var}_1 + tl.sum({masked(f'{x} - {var}_1', '0.0')}, axis=0) / n_cols",
            f"{var}_centered = {masked(f'{x} - {var}_1', '0.0')}",
            f"{var}_var = tl.sum({var}_centered * {var}_centered, axis=0) / n_cols",
            f"{var}_2 = tl.math.rsqrt({var}_var + {literal(float(eps))})",
            f"{var}_0 = {var}_centered * {var}_2",
        ]
        if weight != "None":
            lines.append(f"{var}_0 = {var}_0 * {weight}")
        if bias != "None":
            lines.append(f"{var}_0 = {var}_0 + {bias}")
        return lines
    raise Unsupported(name)
