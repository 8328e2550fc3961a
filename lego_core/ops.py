"""The op registry: every fact LEGO keeps about an ATen op, in one table.

Each stage asks the same question of an op in its own words: may it fuse
(``tree.fusion.policy``), what does it cost (``cost.costmodel``,
``cost.roofline``), may a candidate's host code call or run it
(``judge.static_check``, ``judge.verify_policy``), is it kept whole at
capture (``load.capture``).  The answers live here, one :class:`Op` row per
op, the way tinygrad keeps one op table for its scheduler, renderer and cost
model; the stages derive their sets from it (``of_category``,
``fusion_overloads``, ``host_names``...).

Names.  :func:`op_name` is the one normaliser: ``aten.add.Tensor``,
``torch.ops.aten.add.Tensor``, the OpOverload itself and ``aten.add`` all
give ``"add"``; ``operator.getitem`` gives ``"getitem"``; leading
underscores stay (``"_softmax"``).  :func:`public_name` is the same name as
PyTorch's Python API spells it (``"softmax"``, in-place ``add_`` ->
``"add"``), which is what a kernel file's source calls.  Rows are keyed by
:func:`op_name`; an in-place variant (``relu_``) reads its functional row.

Categories (``Op.category``), the classes of work the cost model and the
judge distinguish:

- ``pointwise``: elementwise arithmetic, one FLOP per output element.
- ``reduction``: reductions and scans (sum, amax, cumsum, var), a few FLOPs
  per input element (``Op.per_element``).
- ``normalization``: softmax, log_softmax and the norms, composite row or
  channel ops; ``per_element`` FLOPs per input element.
- ``layout``: metadata only (views, permutes, slices, ``getitem``): no
  kernel, no bytes.
- ``memory``: moves bytes without arithmetic (copies, casts, factories,
  gathers, ``cat``, ``where``).
- ``matmul``, ``convolution``, ``attention``: tensor-core work.
- ``recurrent``: a whole LSTM/GRU/RNN layer (kept whole at capture).
- ``pooling``: a window reduction per output element (adaptive pooling: one
  per input element).
- ``host``: tensor metadata and values handed to the host (``size``,
  ``.item()``, ``record_stream``); no device work of its own.

Some rows are not ATen ops but the Python names of work PyTorch does in one
call (``einsum``, ``softmin``, ``multi_head_attention_forward``): the static
check refuses them in a kernel file, so they are here too.

No stage keeps an op-name table of its own: ``tests/unit/test_ops_registry.py``
greps ``lego_core`` for one (``OP_TABLE_GREP``, a command to run from the
repository root) and checks each stage's sets against this table.

This module imports nothing at module level but the standard library (torch
is imported inside the FLOP counter, which uses ``torch.utils.flop_counter``).
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Sequence

POINTWISE = "pointwise"
REDUCTION = "reduction"
NORMALIZATION = "normalization"
LAYOUT = "layout"
MEMORY = "memory"
MATMUL = "matmul"
CONVOLUTION = "convolution"
ATTENTION = "attention"
RECURRENT = "recurrent"
POOLING = "pooling"
HOST = "host"
CATEGORIES = (POINTWISE, REDUCTION, NORMALIZATION, LAYOUT, MEMORY, MATMUL, CONVOLUTION, ATTENTION, RECURRENT, POOLING, HOST)
# categories whose FLOPs run on tensor cores (the cost model's "matmul" class)
TENSOR_CORE = (MATMUL, CONVOLUTION, ATTENTION)


@dataclasses.dataclass(frozen=True)
class Op:
    """The facts about one op.

    ``name``: as :func:`op_name` gives it (``"_softmax"``).  ``category``: one
    of :data:`CATEGORIES`.  ``per_element``: FLOPs per input element of a
    reduction or normalization (softmax: max, subtract, exp, sum, divide = 5).
    ``fuse``: how the fusion policy treats ``overloads`` (``"pointwise"``,
    ``"reduction"``, ``"layout"``, ``"channel_affine"``, ``"gemm"``, the
    GEMMs that head a GEMM-epilogue group, or ``"attention"``, the SDPA
    entry points the attention matcher reads); ``None``: the op stays a
    library call.  ``view``: how ``overloads`` map input elements to output
    elements, for the template and matcher walks through layout ops:
    ``"reshape"`` a view that may change the whole shape (same elements,
    same order), ``"unit_dim"`` one that adds or drops size-1 dimensions,
    ``"reorder"`` a permutation of the dimensions, ``"broadcast"`` one that
    repeats elements, ``"subset"`` one that keeps some of them (select,
    slice), ``"identity"`` the same values (clone, alias, detach).
    ``host_call``: a kernel file's host code may always call it by name
    (static check).  ``host_run``: host code may run it while judged (call
    trace).  ``mask_test``: a host op that tests a mask's structure, allowed
    only when the region does not compute it.  ``template_call``: the
    template agent's kernel files call ``torch.<name>`` (allocation, the
    attention template's mask test, the conv + BatchNorm template's
    convolution), so a kernel file the kernel cache stores may too
    (``judge.host_allowlist``).  ``aliases``: other public PyTorch names of
    the same computation (``sub``: ``subtract``).
    """

    name: str
    category: str
    per_element: int = 1
    fuse: str | None = None
    overloads: tuple[str, ...] = ()
    view: str | None = None
    host_call: bool = False
    host_run: bool = False
    mask_test: bool = False
    template_call: bool = False
    aliases: tuple[str, ...] = ()

    def qualified(self, overload: str) -> str:
        """``"aten.add.Tensor"`` for overload ``"Tensor"`` (``"getitem"`` for getitem)."""
        return self.name if self.name == "getitem" else f"aten.{self.name}.{overload}"


def _rows(category: str, names: str, **facts) -> list[Op]:
    """One row per whitespace-separated name, all with ``facts``."""
    return [Op(name, category, **facts) for name in names.split()]


def _pointwise(name: str, *overloads: str, **facts) -> Op:
    """A pointwise op the template agent generates for ``overloads``."""
    return Op(name, POINTWISE, fuse="pointwise", overloads=overloads, **facts)


_OPS: list[Op] = [
    # ---- pointwise: generated by the template agent (these overloads only)
    _pointwise("add", "Tensor", "Scalar"),
    _pointwise("sub", "Tensor", "Scalar", aliases=("subtract",)),
    _pointwise("rsub", "Scalar"),
    _pointwise("mul", "Tensor", "Scalar", aliases=("multiply",)),
    _pointwise("div", "Tensor", "Scalar", aliases=("divide", "true_divide")),
    _pointwise("pow", "Tensor_Scalar", aliases=("square", "float_power")),
    _pointwise("neg", "default", aliases=("negative",)),
    _pointwise("abs", "default", aliases=("absolute",)),
    _pointwise("sigmoid", "default", aliases=("expit",)),
    _pointwise("gelu", "default", aliases=("gelu",)),
    _pointwise("erf", "default", aliases=("erf",)),
    _pointwise("rsqrt", "default", aliases=("rsqrt",)),
    _pointwise("clamp", "default", aliases=("clip",)),
    *[_pointwise(name, "default") for name in (
        "exp", "log", "sqrt", "tanh", "relu", "sin", "cos", "reciprocal", "clamp_min", "clamp_max",
        "minimum", "maximum", "bitwise_not", "logical_not", "logical_and", "logical_or",
    )],
    _pointwise("scalar_tensor", "default", host_run=True),
    *[_pointwise(name, "Scalar", "Tensor") for name in ("eq", "ne", "lt", "le", "gt", "ge")],
    # ---- pointwise: library calls
    Op("hardtanh", POINTWISE, aliases=("relu6", "clamp", "clip")),
    Op("native_dropout", POINTWISE, aliases=("dropout",)),
    Op("silu", POINTWISE, aliases=("silu", "swish")),
    Op("mish", POINTWISE, aliases=("mish",)),
    Op("triu", POINTWISE, host_run=True, mask_test=True),
    Op("tril", POINTWISE, host_run=True, mask_test=True),
    # ---- reductions and scans (row reductions over the last dim fuse)
    Op("sum", REDUCTION, fuse="reduction", overloads=("dim_IntList",)),
    Op("mean", REDUCTION, fuse="reduction", overloads=("dim",)),
    Op("amax", REDUCTION, fuse="reduction", overloads=("default",), aliases=("max",)),
    Op("amin", REDUCTION, fuse="reduction", overloads=("default",), aliases=("min",)),
    Op("logsumexp", REDUCTION, aliases=("logsumexp",)),
    Op("var", REDUCTION, per_element=2, aliases=("var", "std", "var_mean", "std_mean")),
    Op("var_mean", REDUCTION, per_element=3),
    Op("std", REDUCTION, per_element=2),
    Op("std_mean", REDUCTION, per_element=3),
    *_rows(REDUCTION, "max min prod argmax argmin any all norm linalg_vector_norm cumsum cumprod"),
    # ---- normalizations: softmax and the norms
    Op("_softmax", NORMALIZATION, per_element=5, fuse="reduction", overloads=("default",)),
    Op("_log_softmax", NORMALIZATION, per_element=5, fuse="reduction", overloads=("default",)),
    Op("native_layer_norm", NORMALIZATION, per_element=8, fuse="reduction", overloads=("default",)),
    # eval BatchNorm: output 0 is a per-channel affine of x (policy.is_channel_affine)
    Op("_native_batch_norm_legit_no_training", NORMALIZATION, per_element=4, fuse="channel_affine", overloads=("default",)),
    *_rows(NORMALIZATION, "softmax log_softmax", per_element=5),
    *_rows(NORMALIZATION, "rms_norm _fused_rms_norm", per_element=5),
    *_rows(NORMALIZATION, "layer_norm native_group_norm group_norm native_batch_norm _native_batch_norm_legit", per_element=8),
    Op("batch_norm", NORMALIZATION, per_element=4),
    # torch.nn.functional names with no core-ATen op of their own (static check)
    *_rows(NORMALIZATION, "softmin", per_element=5),
    *_rows(NORMALIZATION, "instance_norm local_response_norm", per_element=8),
    # ---- layout: metadata only
    Op("view", LAYOUT, fuse="layout", overloads=("default",), view="reshape", host_call=True, host_run=True),
    Op("_unsafe_view", LAYOUT, fuse="layout", overloads=("default",), view="reshape", host_call=True, host_run=True),
    Op("reshape", LAYOUT, fuse="layout", overloads=("default",), view="reshape", host_call=True, host_run=True),
    Op("squeeze", LAYOUT, fuse="layout", overloads=("dim", "dims", "default"), view="unit_dim", host_call=True, host_run=True),
    Op("unsqueeze", LAYOUT, fuse="layout", overloads=("default",), view="unit_dim", host_call=True, host_run=True),
    Op("permute", LAYOUT, fuse="layout", overloads=("default",), view="reorder", host_call=True, host_run=True),
    Op("expand", LAYOUT, fuse="layout", overloads=("default",), view="broadcast", host_call=True, host_run=True),
    Op("slice", LAYOUT, fuse="layout", overloads=("Tensor",), view="subset", host_call=True, host_run=True),
    Op("select", LAYOUT, fuse="layout", overloads=("int",), view="subset", host_call=True, host_run=True),
    Op("split", LAYOUT, fuse="layout", overloads=("Tensor",), host_call=True, host_run=True),
    Op("split_with_sizes", LAYOUT, fuse="layout", overloads=("default",), host_call=True, host_run=True),
    Op("t", LAYOUT, fuse="layout", overloads=("default",), view="reorder", host_call=True, host_run=True),
    Op("transpose", LAYOUT, fuse="layout", overloads=("int",), view="reorder", host_call=True, host_run=True),
    Op("detach", LAYOUT, fuse="layout", overloads=("default",), view="identity", host_call=True, host_run=True),
    Op("chunk", LAYOUT, fuse="layout", overloads=("default",), host_call=True, host_run=True),
    Op("unbind", LAYOUT, fuse="layout", overloads=("int",), host_run=True),
    Op("getitem", LAYOUT, fuse="layout", overloads=("",), host_call=True),
    # alias: a layout op to the cost model, an identity the pointwise template generates
    Op("alias", LAYOUT, fuse="pointwise", overloads=("default",), view="identity", host_call=True, host_run=True),
    *_rows(LAYOUT, "as_strided flatten unflatten narrow lift_fresh_copy", host_call=True, host_run=True),
    *_rows(LAYOUT, "view_as expand_as", host_call=True),
    *_rows(LAYOUT, "sym_size sym_stride sym_numel"),
    # ---- memory: bytes moved, no arithmetic
    Op("clone", MEMORY, fuse="pointwise", overloads=("default",), view="identity", host_call=True, host_run=True),
    Op("_to_copy", MEMORY, fuse="pointwise", overloads=("default",), host_run=True),
    Op("full_like", MEMORY, fuse="pointwise", overloads=("default",), host_call=True, host_run=True, template_call=True),
    Op("where", MEMORY, fuse="pointwise", overloads=("self",), aliases=("where",)),
    Op("copy", MEMORY, host_call=True, host_run=True),
    Op("contiguous", MEMORY, host_call=True, host_run=True),
    Op("to", MEMORY, host_call=True),
    Op("fill", MEMORY, host_run=True),
    *_rows(MEMORY, "empty empty_like empty_strided zeros zeros_like ones ones_like full", host_call=True, host_run=True, template_call=True),
    *_rows(MEMORY, "cat stack constant_pad_nd embedding index index_select gather scatter index_put"),
    *_rows(MEMORY, "slice_scatter select_scatter repeat arange iota masked_fill"),
    # repeat_interleave(x, n, dim): the GQA head broadcast the attention matcher reads in place
    Op("repeat_interleave", MEMORY, overloads=("self_int",), view="broadcast"),
    # ---- matmuls (incl. Python names that run one: einsum, tensordot)
    # mm and addmm head a GEMM-epilogue group (tree.fusion.gemm)
    *_rows(MATMUL, "mm addmm", fuse="gemm", overloads=("default",)),
    *_rows(MATMUL, "bmm baddbmm matmul linear mv addmv dot"),
    *_rows(MATMUL, "addbmm bilinear vdot einsum tensordot inner chain_matmul multi_dot"),
    # ---- convolutions
    Op("convolution", CONVOLUTION, template_call=True),  # the conv + BatchNorm template hands it to cuDNN
    *_rows(CONVOLUTION, "_convolution conv1d conv2d conv3d cudnn_convolution convolution_overrideable"),
    *_rows(CONVOLUTION, "conv_transpose1d conv_transpose2d conv_transpose3d conv_tbc"),
    # ---- attention: the SDPA entry points (q, k, v first), then the kernels below them
    *_rows(ATTENTION, "scaled_dot_product_attention _scaled_dot_product_flash_attention", fuse="attention", overloads=("default",)),
    *_rows(ATTENTION, "_scaled_dot_product_flash_attention_for_cpu _scaled_dot_product_efficient_attention", fuse="attention", overloads=("default",)),
    *_rows(ATTENTION, "_scaled_dot_product_cudnn_attention", fuse="attention", overloads=("default",)),
    *_rows(ATTENTION, "_scaled_dot_product_attention_math _flash_attention_forward _efficient_attention_forward"),
    *_rows(ATTENTION, "_scaled_dot_product_attention_math_for_mps _scaled_dot_product_fused_attention_overrideable"),
    *_rows(ATTENTION, "multi_head_attention_forward"),
    # ---- whole recurrent layers (cells such as lstm_cell decompose)
    *_rows(RECURRENT, "lstm gru rnn_tanh rnn_relu"),
    # ---- pooling
    *_rows(POOLING, "max_pool1d max_pool2d max_pool3d max_pool2d_with_indices max_pool3d_with_indices"),
    *_rows(POOLING, "avg_pool1d avg_pool2d avg_pool3d"),
    *_rows(POOLING, "adaptive_avg_pool1d adaptive_avg_pool2d adaptive_avg_pool3d"),
    *_rows(POOLING, "adaptive_max_pool1d adaptive_max_pool2d adaptive_max_pool3d"),
    # ---- what host code does besides allocating, viewing and copying (allocation
    # and copies of the Python API that core ATen spells otherwise)
    *_rows(MEMORY, "empty_permuted new_empty new_empty_strided new_zeros new_ones new_full resize zero lift_fresh set", host_run=True),
    # views outside the cost model's layout class: priced as a kernel (a launch,
    # the bytes read and written), so in the memory class
    *_rows(MEMORY, "_reshape_alias view_as_real view_as_complex movedim", host_run=True),
    *_rows(HOST, "record_stream _local_scalar_dense is_nonzero", host_run=True),
    Op("equal", HOST, host_run=True, mask_test=True, template_call=True),
    # tensor methods and attributes host code reads (no ATen compute)
    *_rows(HOST, "stride size numel dim is_contiguous data_ptr element_size cuda cpu device dtype item tolist", host_call=True),
]

# the exponents of ``aten.pow.Tensor_Scalar`` the pointwise template writes as Triton
# arithmetic (``agents.template.expressions.POW_FORMS``); other exponents keep pow a library call
POW_EXPONENTS = (0, 0.5, 1, 2, 3, 4, -0.5, -1, -2)

REGISTRY: dict[str, Op] = {}
for _op in _OPS:
    if _op.name in REGISTRY:
        raise AssertionError(f"op {_op.name!r} is registered twice")
    REGISTRY[_op.name] = _op
del _op

_NAMESPACES = ("aten", "prims", "quantized", "_ops")


# --------------------------------------------------------------------------
# Names
# --------------------------------------------------------------------------


def op_name(target: Any) -> str:
    """The op's name without namespace and overload: ``"aten.add.Tensor"``,
    ``"torch.ops.aten.add.Tensor"``, ``"aten.add"``, ``"add.Tensor"``, the
    OpOverload itself -> ``"add"``; ``operator.getitem`` -> ``"getitem"``.
    Leading and trailing underscores stay (``"_softmax"``, ``"add_"``)."""
    text = getattr(target, "__name__", None) if callable(target) and not hasattr(target, "_schema") else None
    text = text or str(target)  # operator.getitem -> "getitem"
    parts = [p for p in text.split(".") if p]
    if parts[:2] == ["torch", "ops"]:
        parts = parts[2:]
    if parts and parts[0] in _NAMESPACES:
        parts = parts[1:]
    return parts[0] if parts else text


def public_name(target: Any) -> str:
    """:func:`op_name` as PyTorch's Python API spells it: leading and trailing
    underscores stripped (``aten._softmax.default`` -> ``"softmax"``,
    in-place ``aten.add_.Tensor`` -> ``"add"``)."""
    return op_name(target).strip("_")


def lookup(target: Any) -> Op | None:
    """The registry row of ``target`` (any form :func:`op_name` takes; an
    in-place ``relu_`` reads ``relu``'s row), or None for an unknown op."""
    name = op_name(target)
    return REGISTRY.get(name) or REGISTRY.get(name.rstrip("_"))


def category(target: Any) -> str | None:
    """The op's category (:data:`CATEGORIES`), or None for an unknown op."""
    found = lookup(target)
    return found.category if found else None


def is_layout(target: Any) -> bool:
    """True for metadata-only ops (views, ``getitem``): no kernel, no bytes."""
    return category(target) == LAYOUT


def is_tensor_core(target: Any) -> bool:
    """True for ops whose FLOPs run on tensor cores: matmuls, convolutions, attention."""
    return category(target) in TENSOR_CORE


# --------------------------------------------------------------------------
# Sets derived from the table
# --------------------------------------------------------------------------


def of_category(*categories: str) -> frozenset[str]:
    """Names (:func:`op_name` form) of the ops in any of ``categories``.
    ``ValueError`` for an unknown category."""
    unknown = set(categories) - set(CATEGORIES)
    if unknown:
        raise ValueError(f"unknown op categories {sorted(unknown)}; known: {', '.join(CATEGORIES)}")
    return frozenset(op.name for op in _OPS if op.category in categories)


def fusion_overloads(fuse: str) -> frozenset[str]:
    """Qualified overloads (``"aten.add.Tensor"``) the fusion policy treats as
    ``fuse`` (``"pointwise"``, ``"reduction"``, ``"layout"``,
    ``"channel_affine"``, ``"gemm"``, ``"attention"``)."""
    return frozenset(op.qualified(o) for op in _OPS if op.fuse == fuse for o in op.overloads)


def view_overloads(*views: str) -> frozenset[str]:
    """Qualified overloads of the ops with ``Op.view`` in ``views``
    (``"reshape"``, ``"unit_dim"``, ``"reorder"``, ``"broadcast"``,
    ``"subset"``, ``"identity"``)."""
    return frozenset(op.qualified(o) for op in _OPS if op.view in views for o in op.overloads)


def softmax_overloads() -> frozenset[str]:
    """Qualified overloads of the row softmaxes the fusion policy generates
    (``aten._softmax.default``, ``aten._log_softmax.default``): arguments
    ``(x, dim, half_to_float)``, a reduction over ``dim``."""
    return frozenset(o for o in fusion_overloads("reduction") if op_name(o).endswith("softmax"))


def qualified(name: str, overload: str = "default") -> str:
    """``"aten.mm.default"`` for a registered ``name``; ``KeyError`` for an unknown one."""
    return REGISTRY[name].qualified(overload)


def host_names(*, call: bool = False, run: bool = False, mask_test: bool = False, template: bool = False) -> frozenset[str]:
    """:func:`public_name` of the ops host code may call by name (``call``),
    run while judged (``run``), that test a mask's structure (``mask_test``),
    or that the template agent's kernel files call as ``torch.<name>``
    (``template``)."""
    return frozenset(
        op.name.strip("_") for op in _OPS
        if (call and op.host_call) or (run and op.host_run) or (mask_test and op.mask_test) or (template and op.template_call)
    )  # fmt: skip


def public_names(*categories: str) -> frozenset[str]:
    """:func:`public_name` of the ops in ``categories``."""
    return frozenset(name.strip("_") for name in of_category(*categories))


def aliases(name: str) -> tuple[str, ...]:
    """Other public PyTorch names of op ``name`` (:func:`public_name` form):
    ``"sub"`` -> ``("subtract",)``; ``()`` when there are none."""
    found = REGISTRY.get(name) or REGISTRY.get(f"_{name}")
    return found.aliases if found else ()


def prefixes(*categories: str) -> tuple[str, ...]:
    """``str(op)`` prefixes of every overload of the ops in ``categories``
    (``"aten.lstm."``), sorted."""
    return tuple(f"aten.{name}." for name in sorted(of_category(*categories)))


def kept_whole_prefixes() -> tuple[str, ...]:
    """``str(op)`` prefixes of the ops capture keeps whole (every overload of
    a whole recurrent layer: ``"aten.lstm."``)."""
    return prefixes(RECURRENT)


# --------------------------------------------------------------------------
# FLOPs: the one counter
# --------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Flops:
    """FLOPs of one op (a multiply-add counts 2), split by the unit that does
    them: ``tensor_core`` (products of matmuls, convolutions, attention and
    whole recurrent layers) and ``vector`` (everything else: bias adds,
    pointwise math, reductions)."""

    tensor_core: int = 0
    vector: int = 0

    @property
    def total(self) -> int:
        return self.tensor_core + self.vector


def _numel(shape: Sequence[int]) -> int:
    return math.prod(int(d) for d in shape)


def flops(
    target: Any,
    input_shapes: Sequence[Sequence[int]],
    output_shapes: Sequence[Sequence[int]],
    args: Sequence[Any] = (),
    *,
    causal: bool = False,
) -> Flops:
    """FLOPs of one op from its shapes.

    ``target``: the op in any form :func:`op_name` takes.  ``input_shapes``
    / ``output_shapes``: shapes of the tensor inputs and outputs in argument
    order (non-tensors left out; a recurrent layer's inputs are its input
    then its parameters).  ``args``: the op's positional arguments, read by
    convolution (``transposed`` at index 6) and pooling (``kernel_size`` at
    index 1).  ``causal``: count only the unmasked half of attention scores.

    Rules by category: matmul ``2*out_numel*K`` (+ one add per output for
    addmm/baddbmm/addmv/addbmm's and linear's bias, as ``vector``); convolution
    through ``torch.utils.flop_counter.conv_flop_count`` (+ the bias per
    output); attention ``2*B*H*L*S*(E + Ev)`` (our own: flop_counter's
    ``sdpa_flop_count`` takes 4-D q/k/v with equal heads only, not GQA);
    recurrent ``2 * tokens * weight.numel`` per 2-D parameter; reduction and
    normalization ``per_element * in_numel``; pooling ``out_numel * window``
    (adaptive: ``in_numel``); layout, memory and host 0; pointwise and
    unknown ops one per output element.  Matmuls use our own formula too:
    flop_counter's ``mm_flop`` needs both operand shapes, and a product of a
    tensor with itself comes with one shape when the caller dedupes inputs
    (fx's ``all_input_nodes``).  ``IndexError`` when a matmul, convolution or
    attention gets fewer shapes than it reads.
    """
    ins = [tuple(int(d) for d in s) for s in input_shapes]
    outs = [tuple(int(d) for d in s) for s in output_shapes]
    out_numel = _numel(outs[0]) if outs else 0
    in_numel = _numel(ins[0]) if ins else out_numel
    op = lookup(target)
    kind = op.category if op else POINTWISE
    if kind in (LAYOUT, MEMORY, HOST):
        return Flops()
    if kind == MATMUL:
        return _matmul_flops(op.name, ins, out_numel)
    if kind == CONVOLUTION:
        return _conv_flops(op.name, ins, outs, args)
    if kind == ATTENTION:
        return _attention_flops(ins, causal)
    if kind == RECURRENT:
        tokens = _numel(ins[0][:-1])
        return Flops(tensor_core=sum(2 * tokens * _numel(s) for s in ins[1:] if len(s) == 2))
    if kind in (REDUCTION, NORMALIZATION):
        return Flops(vector=op.per_element * in_numel)
    if kind == POOLING:
        return Flops(vector=in_numel if op.name.startswith("adaptive_") else out_numel * _pool_window(op.name, args))
    return Flops(vector=out_numel)


def _matmul_flops(name: str, ins: list[tuple[int, ...]], out_numel: int) -> Flops:
    """2*M*N*K from the output's element count and the reduced dimension."""
    if name in ("addmm", "baddbmm", "addmv"):  # bias, a, b
        k = ins[1][-1] if len(ins) > 1 else 0
        return Flops(2 * out_numel * k, out_numel)
    if name == "linear":  # x, weight, [bias]
        return Flops(2 * out_numel * ins[0][-1], out_numel if len(ins) > 2 else 0)
    if name == "addbmm":  # bias [N, P], batch1 [B, N, K], batch2 [B, K, P]: the B products summed
        return Flops(2 * out_numel * ins[1][0] * ins[1][-1], out_numel)
    if name == "dot":
        return Flops(2 * _numel(ins[0]))
    return Flops(2 * out_numel * ins[0][-1])


def _conv_flops(name: str, ins: list[tuple[int, ...]], outs: list[tuple[int, ...]], args: Sequence[Any]) -> Flops:
    """Convolution FLOPs from input, weight ([Cout, Cin/groups, *k] or,
    transposed, [Cin, Cout/groups, *k]) and output shapes (flop_counter's
    formula), plus one add per output for the bias.  Transposed: the
    ``conv_transpose*`` ops, or ``args[6]`` of ``convolution`` /
    ``_convolution`` (for ``conv2d`` and the like ``args[6]`` is ``groups``)."""
    from torch.utils.flop_counter import conv_flop_count

    if name in ("convolution", "_convolution", "convolution_overrideable", "cudnn_convolution"):
        transposed = bool(args[6]) if name != "cudnn_convolution" and len(args) > 6 else False
    else:
        transposed = name.startswith("conv_transpose")
    products = conv_flop_count(list(ins[0]), list(ins[1]), list(outs[0]), transposed)
    bias = _numel(outs[0]) if len(ins) > 2 and outs else 0
    return Flops(products, bias)


def _attention_flops(ins: list[tuple[int, ...]], causal: bool) -> Flops:
    """Q K^T and P V for q ``(..., L, E)``, k ``(..., S, E)``, v ``(..., S, Ev)``:
    ``2*B*H*L*S*(E + Ev)`` (the softmax not counted), halved when ``causal``."""
    q, k, v = ins[0], ins[1], ins[2]
    products = 2 * _numel(q[:-2]) * q[-2] * k[-2] * (q[-1] + v[-1])
    return Flops(products // 2 if causal else products)


def flash_attention_flops(b: int, h: int, m: int, n: int, d: int, dv: int, kept: float = 1.0) -> Flops:
    """FLOPs of one flash-attention kernel over ``b*h`` heads of ``m`` queries
    and ``n`` keys (head dims ``d``, ``dv``): Q K^T and P V, ``2*b*h*m*n*(d + dv)``,
    as ``tensor_core``, and the online softmax, about 5 per score (scale,
    mask, max, exp, sum), as ``vector``; both times ``kept``, the fraction of
    scores a mask keeps (1.0 for none, about 0.5 for causal)."""
    scores = b * h * m * n
    return Flops(round(2 * scores * (d + dv) * kept), round(5 * scores * kept))


def _pool_window(name: str, args: Sequence[Any]) -> int:
    """Elements of the pooling window (``kernel_size`` is ``args[1]``); an
    integer kernel size stands for every spatial dimension of the op
    (``max_pool1d``: 1, ``avg_pool2d``: 2, ``max_pool3d_with_indices``: 3)."""
    if len(args) > 1 and isinstance(args[1], (list, tuple)):
        size = [int(k) for k in args[1]]
        rank = _pool_rank(name)
        return _numel(size * rank if len(size) == 1 and rank > 1 else size)
    if len(args) > 1 and isinstance(args[1], int):
        return args[1] ** _pool_rank(name)
    return 1


def _pool_rank(name: str) -> int:
    """Spatial dimensions of a pooling op from its name (``avg_pool3d``: 3)."""
    digits = [c for c in name if c in "123"]
    return int(digits[0]) if digits else 2
