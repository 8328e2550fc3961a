"""What every kernel template shares: the Jinja environment, names, layouts and the pointwise emitter.

Each template codegen (``pointwise_codegen``, ``gemm_codegen``,
``conv_codegen``, ``attention_codegen``, ``sequence_codegen``) computes the
values its kernel file needs and renders ``templates/<kind>_kernel_file.py.j2``
with :data:`TEMPLATES`; the template holds the kernel's body (program index,
masks, loads, loops, stores).  This module gives them what they have in
common, so that none of them imports another or the dispatcher (``codegen``):

- :func:`kernel_name`: the Python identifier a kernel is named after;
- :func:`operand_names`: the identifiers a kernel file gives the boundary
  tensors of a sub-problem (``x``, ``fc1_weight``, ``addmm_1``: the pointer
  parameter of input ``x`` is ``x_ptr``), and :func:`output_names`;
- :func:`is_contiguous`, :func:`triton_next_pow2`, :func:`outputs_decl`;
- :func:`pointwise_lines`: the Triton statements of a chain of pointwise ATen
  ops (``expressions.POINTWISE``), the epilogue or prologue of every template.
"""
from __future__ import annotations

import builtins
import keyword
import re
from pathlib import Path

import torch.fx as fx

from lego_core.templating import code_templates
from lego_core.agents.template.expressions import POINTWISE, ROW_IDENTITY, TUPLE_POINTWISE, Unsupported, literal, row_reduction_lines
from lego_core.load.capture import ValueInfo, op_name
from lego_core.tree.subproblem import SubProblem

TEMPLATES = code_templates(Path(__file__).parent / "templates")


def render(template: str, **values) -> str:
    """``templates/<template>`` rendered with ``values``, no line ending in spaces.

    Raises jinja2.UndefinedError when the template reads a value not given."""
    text = TEMPLATES.get_template(template).render(**values)
    return "\n".join(line.rstrip() for line in text.split("\n"))


def kernel_name(sp: SubProblem) -> str:
    """A Python identifier naming the kernel after its sub-problem (``sp004_native_layer_norm``)."""
    ops = [op_name(n).split(".")[1].strip("_") for n in sp.nodes if op_name(n) != "getitem"]
    main = next((o for o in ops if o in ("softmax", "log_softmax", "native_layer_norm", "sum", "mean", "amax")), ops[0] if ops else "region")
    return re.sub(r"\W", "_", f"{sp.id}_{main}")


def triton_next_pow2(n: int) -> int:
    """Smallest power of two >= n (what triton.next_power_of_2 returns)."""
    return 1 << max(0, (n - 1).bit_length())


def is_contiguous(spec: ValueInfo) -> bool:
    """Whether ``spec`` (shape, strides in elements) is row-major contiguous,
    ignoring the strides of dimensions of size 1."""
    expected, acc = [], 1
    for size in reversed(spec.shape):
        expected.append(acc)
        acc *= size
    return all(st == ex or sz == 1 for st, ex, sz in zip(spec.stride, reversed(expected), spec.shape))


def outputs_decl(specs: list[ValueInfo]) -> str:
    """The ``OUTPUTS`` literal of a kernel file: ``((shape, strides, dtype), ...)`` of each output, as captured."""
    return "(" + "".join(f"({tuple(s.shape)}, {tuple(s.stride)}, {s.dtype}), " for s in specs) + ")"


# --------------------------------------------------------------------------
# Names of the boundary tensors in a kernel file
# --------------------------------------------------------------------------

# Identifiers the kernel bodies and ``launch`` functions of the templates use
# themselves; an operand is never given one of them (nor a keyword or builtin).
KERNEL_LOCALS = frozenset(
    """
    a b c k t r q v y acc alpha carry cfg device dtype grid i j m_i l_i m_new m_safe mask mask_m mask_n
    mask_st mask_kind causal out p pid pid_m pid_n pid_r pid_t pid_bh row rest s scan_in shape strides tail tin
    tile mvals kt vt qk offs offs_n offs_m offs_k offs_d offs_dv offs_am offs_bn k_mask
    num_pid_m num_pid_n num_pid_in_group first_pid_m group_size_m n_cols n_elements h
    weight bias launch launch_tail torch triton tl diagonal lo hi k_base v_base m_base start_n
    """.split()
)
_GENERATED = re.compile(r"^(v_.*|idx_\d+|size_\d+|[iwx]\d+|out\d*|.*_ptrs?|.*_strides?(_\d+)?|.*_stride_\w+|.*_s\d+|.*_view\d+)$")
_EXPORT_PREFIXES = ("p_", "b_", "c_")  # torch.export's placeholder names: parameter, buffer, constant


def _base_name(node: fx.Node) -> str:
    """What ``node`` holds, as an identifier: its name without torch.export's
    ``p_`` / ``b_`` / ``c_`` prefix of a parameter, buffer or constant
    (``fc1_weight``).  Only the boundary node itself is read, never the graph
    around it, so a sub-problem rebuilt from its payload in another process
    (``agents.payload``) gets the same kernel file."""
    name = node.name
    if name.startswith(_EXPORT_PREFIXES) and len(name) > 2:
        name = name[2:]
    name = re.sub(r"\W", "_", name).lower().strip("_") or "value"
    return f"t_{name}" if name[0].isdigit() else name


def operand_names(nodes: list[fx.Node], taken: set[str] | frozenset = frozenset()) -> list[str]:
    """One identifier per boundary tensor in ``nodes`` (``x``, ``fc1_weight``,
    ``addmm_1``), unique, none in ``taken`` nor a Python keyword or builtin
    nor a name the kernel files use themselves (``mask``, ``acc``, ``v_...``).
    A kernel file calls the tensor by it in ``launch``, its pointer
    ``<name>_ptr`` and its loaded value ``<name>``."""
    used = set(taken)
    names = []
    for node in nodes:
        base = name = _base_name(node)
        count = 0
        while name in used or name in KERNEL_LOCALS or keyword.iskeyword(name) or hasattr(builtins, name) or _GENERATED.match(name):
            count += 1
            name = f"{base}_in" if count == 1 else f"t_{base}_in{count}"  # t_: never a generated name
        used.add(name)
        names.append(name)
    return names


def output_names(count: int) -> list[str]:
    """``["out"]`` for one output, else ``["out0", "out1", ...]``: the kernel's output pointers are ``<name>_ptr``."""
    return ["out"] if count == 1 else [f"out{k}" for k in range(count)]


# --------------------------------------------------------------------------
# Pointwise ops as Triton statements
# --------------------------------------------------------------------------


def call_arguments(node: fx.Node, env: dict[str, str]) -> list[str]:
    """The Triton expressions of ``node``'s positional arguments: a tensor
    argument is its variable in ``env`` (node name -> variable), a scalar a
    literal.  Raises Unsupported for a tensor not in ``env`` or an argument
    of a type the templates do not write."""

    def one(a: object) -> str:
        if isinstance(a, fx.Node):
            if a.name not in env:
                raise Unsupported(f"{a.name} is not available inside the kernel")
            return env[a.name]
        if a is None:
            return "None"
        if isinstance(a, (list, tuple)):
            return "[" + ", ".join(str(x) for x in a) + "]"
        if hasattr(a, "is_floating_point") or "dtype" in type(a).__name__ or "device" in type(a).__name__:
            return repr(a)
        return literal(a)

    return [one(a) for a in node.args]


def pointwise_lines(nodes: list[fx.Node], env: dict[str, str], is_row: bool = False) -> list[str]:
    """Triton statements computing ``nodes`` (in order) in fp32, each into
    ``v_<node name>``; ``env`` (node name -> variable) holds the values
    already loaded and gains every node computed.  ``is_row``: inside a row
    program, where reductions (``expressions.row_reduction_lines``) and
    per-row layout ops may appear.  Raises Unsupported for an op the
    templates do not write."""
    lines: list[str] = []
    for node in nodes:
        name = op_name(node)
        var = f"v_{node.name}"
        if name == "getitem":
            env[node.name] = f"{env[node.args[0].name]}_{node.args[1]}"
            continue
        if name in TUPLE_POINTWISE and not is_row:
            lines.append(f"{var}_0 = {TUPLE_POINTWISE[name](node, call_arguments(node, env))}  # {name}, output 0")
        elif name in POINTWISE:
            lines.append(f"{var} = {POINTWISE[name](node, call_arguments(node, env))}  # {name}")
        elif is_row and name in ROW_IDENTITY:
            env[node.name] = env[node.args[0].name]
            continue
        elif is_row:
            lines.append(f"# {name}")
            lines += row_reduction_lines(node, call_arguments(node, env), var)
        else:
            raise Unsupported(name)
        env[node.name] = var
    return lines
