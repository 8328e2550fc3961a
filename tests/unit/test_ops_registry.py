"""The op registry (``lego_core.ops``): one table, every stage's op facts derived from it.

Checks the table itself (no op twice, every fused overload a real ATen
overload), that each stage's op sets are the registry's (fusion policy and
template expressions, cost model, roofline, capture, static check, call-trace
policy, kernel-cache allow-list), the one FLOP counter against hand counts,
the name normaliser, and that no op-name table is kept outside ``ops.py``
(:data:`OP_TABLE_GREP`, the command a reviewer runs from the repository root).
"""
import operator
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from lego_core import ops
from lego_core.agents.template import expressions
from lego_core.cost import costing, costmodel
from lego_core.judge import host_allowlist, static_check, verify_policy
from lego_core.load import capture, decompose
from lego_core.tree.fusion import attention, gemm, legality, policy

REPO = Path(__file__).resolve().parents[2]

# Op-name tables kept outside lego_core/ops.py: prints nothing when there are none.  An op name is
# a quoted qualified ATen name ("aten.add.Tensor", a prefix "aten.lstm.") or a bare name only
# ATen uses; a table is a line that starts with one and a comma, ends with one and a comma (one
# entry per line), holds three in a row, assigns a collection that starts with one, or maps one
# to a number, tuple or string (a dict of facts).  One op compared in an ``if``, a pair in one
# ``if`` (``name in ("aten.div.Tensor", "aten.div.Scalar")``), a handler dict and a single
# constant (``CONV_OP = "aten.convolution.default"``) are not tables.
OP_TABLE_GREP = r"""OP='"(aten\.[a-z0-9_]+\.[A-Za-z0-9_]*|_{0,2}(mm|addmm|bmm|baddbmm|addbmm|addmv|matmul|linear|bilinear|convolution|cudnn_convolution|conv[123]d|conv_transpose[123]d|log_softmax|softmin|native_layer_norm|layer_norm|rms_norm|group_norm|native_group_norm|batch_norm|native_batch_norm[a-z_]*|instance_norm|amax|amin|logsumexp|linalg_vector_norm|var_mean|std_mean|unsafe_view|reshape_alias|expand_as|view_as|empty|empty_strided|empty_permuted|empty_like|full_like|new_empty|new_zeros|lift_fresh|lift_fresh_copy|to_copy|local_scalar_dense|record_stream|split_with_sizes|index_select|constant_pad_nd|slice_scatter|scaled_dot_product_[a-z_]+|flash_attention_forward|efficient_attention_forward|max_pool[123]d[a-z_]*|avg_pool[123]d|adaptive_[a-z]+_pool[123]d|subtract|multiply|true_divide|hardtanh|native_dropout|triu|tril|equal|lstm|gru|rnn_tanh|rnn_relu))"'; grep -rnE --include='*.py' -e "^\s*$OP\s*," -e "$OP\s*,\s*$" -e "$OP\s*,\s*$OP\s*,\s*$OP" -e "=\s*((frozenset|set|tuple|list)\()?[\[{(]\s*$OP" -e "$OP\s*:\s*[0-9(\"]" lego_core | grep -v '^lego_core/ops\.py:'"""


def _grep(root: Path) -> str:
    return subprocess.run(["bash", "-c", OP_TABLE_GREP], cwd=root, capture_output=True, text=True, check=False).stdout


# ---------------------------------------------------------------------------
# the table
# ---------------------------------------------------------------------------


def test_no_op_is_registered_twice_and_every_row_is_well_formed():
    names = [op.name for op in ops._OPS]
    assert len(names) == len(set(names)) == len(ops.REGISTRY)
    for op in ops._OPS:
        assert op.category in ops.CATEGORIES, op
        assert op.fuse in (None, "pointwise", "reduction", "layout", "channel_affine", "gemm", "attention"), op
        assert op.view in (None, "reshape", "unit_dim", "reorder", "broadcast", "subset", "identity"), op
        assert (op.fuse or op.view) is None or op.overloads, f"{op.name}: fuse/view without overloads"
        assert op.per_element >= 1


def test_every_fused_or_walked_overload_is_a_real_aten_overload():
    fused = set().union(*(ops.fusion_overloads(f) for f in ("pointwise", "reduction", "layout", "channel_affine", "gemm", "attention")))
    walked = ops.view_overloads("reshape", "unit_dim", "reorder", "broadcast", "subset", "identity")
    for qualified in fused | walked:
        if qualified == "getitem":
            continue
        _, name, overload = qualified.split(".")
        assert hasattr(getattr(torch.ops.aten, name), overload), qualified


def test_ops_imports_no_torch():
    code = "import lego_core, lego_core.ops, sys; assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True)


# ---------------------------------------------------------------------------
# names
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("form", ["aten.add.Tensor", "torch.ops.aten.add.Tensor", "aten.add", "add.Tensor", "add", torch.ops.aten.add.Tensor])
def test_op_name_forms(form):
    assert ops.op_name(form) == "add" and ops.public_name(form) == "add"


def test_op_name_keeps_underscores_public_name_strips_them():
    assert ops.op_name(operator.getitem) == "getitem"
    assert ops.op_name("aten._softmax.default") == "_softmax" and ops.public_name("aten._softmax.default") == "softmax"
    assert ops.op_name("aten.add_.Tensor") == "add_" and ops.public_name("aten.add_.Tensor") == "add"
    assert ops.op_name("prims.convert_element_type.default") == "convert_element_type"
    assert ops.lookup("aten.relu_.default").name == "relu" and ops.lookup("aten.no_such_op.default") is None
    # the static check's normaliser is the registry's public name
    for text in ("aten._softmax.default", "torch.ops.aten.native_layer_norm.default", "aten.add_.Tensor", "mm", "quantized.linear.default"):
        assert static_check.op_base_name(text) == ops.public_name(text)
    # capture names a node's op in full, the registry by its short name
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    node = graph.call_function(torch.ops.aten.add.Tensor, (x, x))
    assert capture.op_name(node) == "aten.add.Tensor" and ops.op_name(node.target) == "add"


def test_kept_whole_prefixes_are_the_recurrent_layers():
    assert ops.kept_whole_prefixes() == ("aten.gru.", "aten.lstm.", "aten.rnn_relu.", "aten.rnn_tanh.")
    assert capture.KEPT_WHOLE == ops.kept_whole_prefixes()
    assert not [op for op in capture.decomposition_table() if str(op).startswith(capture.KEPT_WHOLE)]
    assert "aten.scaled_dot_product_attention." in decompose.KNOWN_TROUBLESOME


# ---------------------------------------------------------------------------
# every stage's sets come from the registry
# ---------------------------------------------------------------------------


def test_every_pointwise_op_of_the_policy_has_a_template_expression_and_back():
    assert set(expressions.POINTWISE) == policy.POINTWISE_OPS == ops.fusion_overloads("pointwise")
    assert set(expressions.TUPLE_POINTWISE) == policy.CHANNEL_AFFINE_OPS == ops.fusion_overloads("channel_affine")
    assert policy.SOFTMAX_OPS == expressions.SOFTMAX_OPS == {"aten._softmax.default", "aten._log_softmax.default"}
    assert policy.SOFTMAX_OPS < policy.REDUCTION_OPS == ops.fusion_overloads("reduction")
    assert policy.LAYOUT_OPS == ops.fusion_overloads("layout") and "getitem" in policy.LAYOUT_OPS


def test_layout_walks_and_gemm_heads_come_from_the_registry():
    reshapes = {"aten.view.default", "aten._unsafe_view.default", "aten.reshape.default"}
    assert gemm.VIEW_OPS == attention.VIEW_OPS == ops.view_overloads("reshape") == reshapes
    assert expressions.ROW_IDENTITY == reshapes | {"aten.squeeze.dim", "aten.squeeze.dims", "aten.squeeze.default", "aten.unsqueeze.default"}
    assert gemm.GEMM_OPS == legality.GEMM_OPS == {"aten.mm.default", "aten.addmm.default"}
    assert attention.SCALE_OPS == {"aten.mul.Scalar", "aten.mul.Tensor", "aten.div.Scalar", "aten.div.Tensor"}
    assert attention.IDENTITY_OPS == {"aten.clone.default", "aten.alias.default", "aten.detach.default"}
    assert attention.SDPA_OPS <= {ops.qualified(n) for n in ops.of_category(ops.ATTENTION)}
    # a walk reads layout ops and identities only, never arithmetic
    assert attention.WALK_LAYOUT - policy.LAYOUT_OPS == {"aten.clone.default", "aten.alias.default", "aten.repeat_interleave.self_int"}


def test_every_host_name_the_judge_allows_comes_from_the_registry():
    known = {op.name.strip("_") for op in ops._OPS}
    assert static_check._HOST_ALLOWED == ops.host_names(call=True) and static_check._HOST_ALLOWED <= known
    assert verify_policy.HOST_OPS == ops.host_names(run=True) and verify_policy.HOST_OPS <= known
    assert verify_policy.MASK_OPS == ops.host_names(mask_test=True) == {"equal", "triu", "tril"}
    assert static_check._ALWAYS_FORBIDDEN == ops.public_names(ops.MATMUL, ops.CONVOLUTION, ops.ATTENTION, ops.NORMALIZATION)
    assert not static_check._ALWAYS_FORBIDDEN & static_check._HOST_ALLOWED
    # the kernel cache's torch.<name> list: the registry's template calls, the rest dtypes and memory formats
    template = ops.host_names(template=True)
    assert template == {"empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones", "ones_like", "full", "full_like", "equal", "convolution"}
    assert template <= host_allowlist.TORCH_NAMES and not (host_allowlist.TORCH_NAMES - template) & known


def test_static_check_forbids_each_region_op_and_its_registry_aliases():
    assert {"sub", "subtract"} <= static_check.forbidden_names(["aten.sub.Tensor"])
    assert {"softmax", "mm", "conv2d", "layer_norm"} <= static_check.forbidden_names(["aten._softmax.default"])
    assert {"var", "std", "var_mean", "std_mean"} <= static_check.forbidden_names(["aten.var.correction"])
    assert "view" not in static_check.forbidden_names(["aten.view.default"])  # host code may always view


def test_cost_model_classes_are_the_registry_categories():
    for name in ops.of_category(ops.LAYOUT):
        assert costmodel.is_layout_op(f"aten.{name}.default") and costmodel.op_launches(name) == 0
    for name in ops.of_category(*ops.TENSOR_CORE):
        assert costmodel.is_matmul_op(name) and not costmodel.is_layout_op(name)
    assert costmodel.is_layout_op(operator.getitem) and not costmodel.is_layout_op("aten.view_as_real.default")
    assert costmodel.op_name is ops.op_name


# ---------------------------------------------------------------------------
# the one FLOP counter
# ---------------------------------------------------------------------------


def test_matmul_flops_by_hand():
    assert ops.flops("aten.mm.default", [(64, 32), (32, 16)], [(64, 16)]) == ops.Flops(2 * 64 * 16 * 32, 0)
    assert ops.flops("aten.addmm.default", [(16,), (64, 32), (32, 16)], [(64, 16)]) == ops.Flops(2 * 64 * 16 * 32, 64 * 16)
    assert ops.flops("aten.bmm.default", [(8, 64, 32), (8, 32, 16)], [(8, 64, 16)]).tensor_core == 2 * 8 * 64 * 16 * 32
    assert ops.flops("aten.linear.default", [(4, 10, 32), (16, 32), (16,)], [(4, 10, 16)]) == ops.Flops(2 * 40 * 16 * 32, 40 * 16)
    assert ops.flops("aten.addbmm.default", [(64, 16), (8, 64, 32), (8, 32, 16)], [(64, 16)]) == ops.Flops(2 * 8 * 64 * 32 * 16, 64 * 16)
    assert ops.flops("aten.mm.default", [(64, 32), (32, 16)], [(64, 16)]).total == costmodel.op_flops("aten.mm.default", [(64, 32), (32, 16)], [(64, 16)])


def test_conv_flops_by_hand():
    args = (None, None, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 2)  # groups 2: weight [16, 8/2, 3, 3]
    products = 2 * 2 * 16 * 10 * 10 * 4 * 3 * 3  # 2 * N * Cout * Hout * Wout * Cin/groups * kh * kw
    assert ops.flops("aten.convolution.default", [(2, 8, 10, 10), (16, 4, 3, 3)], [(2, 16, 10, 10)], args) == ops.Flops(products, 0)
    assert ops.flops("aten.convolution.default", [(2, 8, 10, 10), (16, 4, 3, 3), (16,)], [(2, 16, 10, 10)], args) == ops.Flops(products, 2 * 16 * 100)
    transposed = (None, None, None, [2, 2], [0, 0], [1, 1], True, [0, 0], 1)  # x [1, 4, 5, 5], weight [Cin 4, Cout 6, 2, 2]
    assert ops.flops("aten.convolution.default", [(1, 4, 5, 5), (4, 6, 2, 2)], [(1, 6, 10, 10)], transposed).tensor_core == 2 * 1 * 4 * 25 * 6 * 4


def test_attention_flops_by_hand():
    full = 2 * (2 * 4) * 16 * 32 * (8 + 6)  # Q K^T and P V: 2*B*H*L*S*(E + Ev)
    shapes = [(2, 4, 16, 8), (2, 4, 32, 8), (2, 4, 32, 6)]
    assert ops.flops("aten._scaled_dot_product_flash_attention.default", shapes, [(2, 4, 16, 6)]) == ops.Flops(full, 0)
    assert ops.flops("aten.scaled_dot_product_attention.default", shapes, [], causal=True).tensor_core == full // 2
    assert ops.flash_attention_flops(2, 4, 16, 32, 8, 6) == ops.Flops(full, 5 * 2 * 4 * 16 * 32)
    assert ops.flash_attention_flops(2, 4, 16, 32, 8, 6, kept=0.5) == ops.Flops(full // 2, 5 * 2 * 4 * 16 * 32 // 2)

    class Spec:  # an AttentionSpec's sizes, no mask
        b, h, m, n, d, dv, causal, mask_kind = 2, 4, 16, 32, 8, 6, False, "none"

    assert costing.attention_flops(Spec) == (full, 5 * 2 * 4 * 16 * 32)


def test_row_reduction_pooling_layout_and_pointwise_flops_by_hand():
    assert ops.flops("aten.native_layer_norm.default", [(4, 8), (8,), (8,)], [(4, 8), (4, 1), (4, 1)]) == ops.Flops(0, 8 * 32)
    assert ops.flops("aten._softmax.default", [(4, 8)], [(4, 8)]).vector == 5 * 32
    assert ops.flops("aten.var.correction", [(4, 8)], [(4,)]).vector == 2 * 32
    assert ops.flops("aten.sum.dim_IntList", [(4, 8)], [(4,)]).vector == 32
    assert ops.flops("aten.max_pool2d_with_indices.default", [(1, 2, 8, 8)], [(1, 2, 4, 4)], (None, [2, 2])).vector == 32 * 4
    assert ops.flops("aten.adaptive_max_pool2d.default", [(1, 2, 8, 8)], [(1, 2, 1, 1)]).vector == 128
    assert ops.flops("aten.view.default", [(1024,)], [(32, 32)]).total == 0 == ops.flops("aten.clone.default", [(4, 8)], [(4, 8)]).total
    assert ops.flops("aten.add.Tensor", [(4, 8), (8,)], [(4, 8)]) == ops.Flops(0, 32)
    assert ops.flops("aten.no_such_op.default", [(4, 8)], [(4, 8)]).vector == 32  # unknown: pointwise


def test_recurrent_flops_count_every_weight_once_per_token():
    x, w_ih, w_hh, b = (3, 4, 5), (28, 5), (28, 7), (28,)
    assert ops.flops("aten.lstm.input", [x, w_ih, w_hh, b], [(3, 4, 7)]).tensor_core == 2 * 12 * (28 * 5 + 28 * 7)
    # the cost model keeps pricing a whole recurrent layer as one FLOP per output element
    assert costmodel.op_flops("aten.lstm.input", [x, w_ih, w_hh, b], [(3, 4, 7)]) == 3 * 4 * 7


# ---------------------------------------------------------------------------
# no op table outside ops.py
# ---------------------------------------------------------------------------


def test_no_op_name_table_outside_the_registry():
    found = _grep(REPO)
    assert found == "", f"op-name tables outside lego_core/ops.py (derive them from lego_core.ops):\n{found}"


OLD_TABLES = {  # the forms the hand-kept tables had, one per line: each must be found
    "multi-line set": '    "aten.add.Tensor", "aten.add.Scalar", "aten.sub.Tensor", "aten.sub.Scalar", "aten.rsub.Scalar",',
    "one entry per line": '    "aten._flash_attention_forward.default",',
    "assigned tuple": 'GEMM_OPS = ("aten.mm.default", "aten.addmm.default")',
    "assigned single-entry set": 'CHANNEL_AFFINE_OPS = frozenset({"aten._native_batch_norm_legit_no_training.default"})',
    "prefixes": 'KEPT_WHOLE = ("aten.lstm.", "aten.gru.", "aten.rnn_tanh.", "aten.rnn_relu.")',
    "bare names": 'MATMUL_OPS = frozenset({"mm", "addmm", "bmm", "baddbmm", "matmul", "linear", "mv", "addmv", "dot"})',
    "dict of facts": '    "_softmax": 5, "softmax": 5, "_log_softmax": 5, "log_softmax": 5,',
    "aliases": '    "clamp": ("clip",), "hardtanh": ("relu6", "clamp", "clip"), "sigmoid": ("expit",),',
    "host names": '    "empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones", "ones_like", "full", "full_like",',
    "trailing entry": '    "clone", "copy", "_to_copy", "to", "contiguous", "cat", "stack", "constant_pad_nd",',
    "mask ops": 'MASK_OPS = frozenset({"equal", "triu", "tril"})',
    "inline triple": '        if name in SCALE_OPS or name in ("aten.clone.default", "aten.alias.default", "aten.detach.default"):',
}
NOT_TABLES = {  # single-op logic, a pair in one if, handlers, Triton's names
    "one op": '    if name == "aten.div.Tensor" and rounding_mode is not None:',
    "pair in an if": '    if name in ("aten.div.Tensor", "aten.div.Scalar") and node.kwargs.get("rounding_mode") is not None:',
    "constant": 'CONV_OP = "aten.convolution.default"',
    "handler": '    "aten.add.Tensor": lambda n, a: f"({a[0]} + {a[1]})",',
    "triton names": '    "range", "ravel", "reduce", "reshape", "rsqrt", "sigmoid", "sin", "softmax", "sort", "split", "sqrt",',
    "docstring": '    ``("aten.convolution.default",)`` (the op its kernel file hands to the library)',
}


def test_the_grep_finds_the_old_tables_and_nothing_else(tmp_path):
    module = tmp_path / "lego_core" / "stage.py"
    module.parent.mkdir()
    lines = list(OLD_TABLES.values()) + list(NOT_TABLES.values())
    module.write_text("\n".join(lines) + "\n")
    found = {int(hit.split(":")[1]) for hit in _grep(tmp_path).splitlines()}
    assert found == set(range(1, len(OLD_TABLES) + 1)), textwrap.dedent(f"""
        missed: {[k for i, k in enumerate(OLD_TABLES, 1) if i not in found]}
        flagged: {[k for i, k in enumerate(NOT_TABLES, len(OLD_TABLES) + 1) if i in found]}""")
    (tmp_path / "lego_core" / "ops.py").write_text(OLD_TABLES["multi-line set"] + "\n")  # the registry itself may
    assert "ops.py" not in _grep(tmp_path)


@pytest.mark.parametrize(
    "target, ins, outs, args, expected",
    [
        # an integer kernel size stands for every spatial dimension of the op
        ("aten.max_pool1d.default", [(1, 4, 10)], [(1, 4, 5)], [None, 2], 20 * 2),
        ("aten.avg_pool3d.default", [(1, 4, 4, 4, 4)], [(1, 4, 2, 2, 2)], [None, 2], 32 * 8),
        ("aten.max_pool2d_with_indices.default", [(1, 4, 4, 4)], [(1, 4, 2, 2)], [None, [2]], 16 * 4),
        ("aten.avg_pool2d.default", [(1, 4, 6, 6)], [(1, 4, 2, 2)], [None, [3, 2]], 16 * 6),
    ],
)
def test_pooling_window_follows_the_ops_rank(target, ins, outs, args, expected):
    assert ops.flops(target, ins, outs, args).vector == expected


def test_conv2d_args_6_is_groups_not_transposed():
    """``aten.convolution``'s args[6] is ``transposed``; ``conv2d``'s is ``groups``:
    both spellings of one convolution count the same FLOPs."""
    x, w, out = (1, 3, 8, 8), (6, 3, 3, 3), (1, 6, 6, 6)
    products = 2 * 6 * 36 * 3 * 9  # 2 * Cout * out pixels * Cin * kernel
    conv = ops.flops("aten.convolution.default", [x, w], [out], [None, None, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1])
    conv2d = ops.flops("aten.conv2d.default", [x, w], [out], [None, None, None, [1, 1], [0, 0], [1, 1], 1])
    assert conv.tensor_core == conv2d.tensor_core == products


def test_the_pow_exponents_the_policy_fuses_are_the_ones_the_template_writes():
    from lego_core.agents.template.expressions import POW_FORMS

    assert set(POW_FORMS) == set(ops.POW_EXPONENTS)
