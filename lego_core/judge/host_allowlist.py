"""The allow-list a kernel file must pass before the kernel cache stores it.

The kernel cache's entries outlive the run that wrote them, and the run that
forwarded one ran an upload's code (``cache.store_forwarded``).  So a stored
kernel file may hold only what the template agent's files hold
(``lego_core/agents/template/templates/*.j2``), named one by one, instead of
"anything but the known-bad names" (``static_check``, which candidates pass):

* module-level imports only, and only ``import torch``, ``import triton``,
  ``import triton.language as tl`` and ``import math`` (no ``from`` imports,
  no ``__future__``: that would make every annotation a string);
* every dotted name rooted at one of those modules is on a list:
  :data:`TORCH_NAMES`, :data:`TRITON_NAMES`, :data:`TL_NAMES` (Triton's
  language, and ``tl.math``), any public name of ``math``; a module is
  never used as a value (``f(torch)``, ``t = torch``);
* every other name is one the file binds itself (a function, a parameter,
  an assignment) or a builtin of :data:`BUILTINS`; no other builtin may be
  used or shadowed (``getattr``, ``type``, ``object``, ``open``...), no
  dunder name (``__builtins__``, ``__loader__``);
* attributes of values are public (no ``_x``, no ``__x__``; ``_version``,
  a tensor's version counter, excepted);
* no class, no ``async`` code, no string annotation, no decorator but
  ``@triton.jit``.

:func:`refusal` returns a one-line reason or None.  A kernel from another
agent (a language model's) that needs more is verified and used in its own
run as usual; it is only not stored for later runs.

Op facts (the ``torch.<op>`` names the template agent's files call) come from
the op registry, ``lego_core.ops`` (``Op.template_call``).
"""
from __future__ import annotations

import ast
import builtins

from lego_core import ops
from lego_core.load.spec import syntax_error_text

# import statement -> local name it binds
IMPORTS = {("torch", None): "torch", ("triton", None): "triton", ("triton.language", "tl"): "tl", ("math", None): "math"}
# torch.<name>: the ops the template agent's files call (allocation, the attention
# template's mask test ``equal``, the convolution a conv+BN kernel hands to cuDNN:
# ``Op.template_call`` in the op registry), memory formats, dtypes
TORCH_NAMES = ops.host_names(template=True) | frozenset({
    "channels_last", "contiguous_format", "preserve_format",
    "cuda.is_current_stream_capturing",
    "bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64",
    "half", "float", "double", "short", "int", "long",
})
# triton.<name> (``triton.language`` is ``tl``, below)
TRITON_NAMES = frozenset({"jit", "cdiv", "next_power_of_2", "knobs.runtime.interpret"})
# tl.<name>: Triton's language (3.x), less what hands it Python or assembly
# (``str_to_ty``, ``inline_asm_elementwise``); ``tl.math.<name>`` and
# ``tl.PropagateNan.<name>`` below
TL_NAMES = frozenset({
    "PropagateNan", "TRITON_MAX_TENSOR_NUMEL", "abs", "add", "advance", "arange", "argmax", "argmin",
    "associative_scan", "assume", "atomic_add", "atomic_and", "atomic_cas", "atomic_max", "atomic_min",
    "atomic_or", "atomic_xchg", "atomic_xor", "bfloat16", "broadcast", "broadcast_to", "cast", "cat",
    "cdiv", "ceil", "clamp", "constexpr", "cos", "cumprod", "cumsum", "debug_barrier", "device_assert",
    "div_rn", "dot", "dot_scaled", "dtype", "erf", "exp", "exp2", "expand_dims", "fdiv", "flip", "float16",
    "float32", "float64", "float8e4b15", "float8e4b8", "float8e4nv", "float8e5", "float8e5b16", "floor",
    "fma", "full", "gather", "histogram", "int1", "int16", "int32", "int64", "int8", "interleave", "join",
    "load", "log", "log2", "make_block_ptr", "max", "max_constancy", "max_contiguous", "maximum", "min",
    "minimum", "mul", "multiple_of", "num_programs", "permute", "program_id", "rand", "randint", "randn",
    "range", "ravel", "reduce", "reshape", "rsqrt", "sigmoid", "sin", "softmax", "sort", "split", "sqrt",
    "sqrt_rn", "static_assert", "static_range", "store", "sub", "sum", "swizzle2d", "tensor", "topk", "trans",
    "uint16", "uint32", "uint64", "uint8", "umulhi", "view", "where", "xor_sum", "zeros", "zeros_like",
    "math.abs", "math.ceil", "math.cos", "math.div_rn", "math.erf", "math.exp", "math.exp2", "math.fdiv",
    "math.floor", "math.fma", "math.log", "math.log2", "math.rsqrt", "math.sin", "math.sqrt", "math.sqrt_rn",
    "math.umulhi", "PropagateNan.ALL", "PropagateNan.NONE",
})
# builtins host code may call; every other builtin is refused, used or rebound
BUILTINS = frozenset({
    "len", "range", "tuple", "list", "dict", "set", "frozenset", "int", "float", "bool", "str", "min", "max",
    "abs", "sum", "all", "any", "zip", "enumerate", "sorted", "reversed", "isinstance", "round", "divmod",
    "slice", "ValueError", "TypeError", "RuntimeError", "NotImplementedError", "AssertionError", "IndexError",
    "KeyError", "ZeroDivisionError",
})
VALUE_PRIVATE_ATTRIBUTES = frozenset({"_version"})
# public attributes of values that reach further than data (str.format's
# replacement fields read attributes by name; static_check refuses the others)
VALUE_DENIED_ATTRIBUTES = frozenset({"format", "format_map"})  # a tensor's version counter (the attention template's mask check)
_ROOTS = {"torch": TORCH_NAMES, "triton": TRITON_NAMES, "tl": TL_NAMES}
_BUILTIN_NAMES = frozenset(dir(builtins))


def refusal(source: str) -> str | None:
    """Why ``source`` is not a kernel file the kernel cache may store (one
    line, with its line number), or None when every import, name and
    attribute in it is on the allow-list (module docstring)."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        return f"source does not parse: {syntax_error_text(exc)}"
    checker = _AllowList(tree)
    checker.check(tree)
    return checker.problem


class _AllowList:
    def __init__(self, tree: ast.Module):
        self.problem: str | None = None
        self.modules: set[str] = set()  # local names of the allowed imports
        self.bound = _bound_names(tree)
        self.chained: set[int] = set()  # ids of Name / Attribute nodes already judged as part of a dotted name
        self.top_imports = {id(s) for s in tree.body if isinstance(s, ast.Import)}

    def check(self, tree: ast.Module) -> None:
        for statement in tree.body:
            if isinstance(statement, ast.Import):
                self._import(statement)
        for node in ast.walk(tree):
            if self.problem:
                return
            self._node(node)

    def _flag(self, node: ast.AST, message: str) -> None:
        if self.problem is None:
            line = getattr(node, "lineno", None)
            self.problem = f"line {line}: {message}" if line else message

    def _import(self, node: ast.Import) -> None:
        for alias in node.names:
            local = IMPORTS.get((alias.name, alias.asname))
            if local is None:
                spelled = f"import {alias.name}" + (f" as {alias.asname}" if alias.asname else "")
                self._flag(node, f"{spelled}: a cached kernel file imports only torch, triton, triton.language as tl and math")
            self.modules.add(local or "")

    def _node(self, node: ast.AST) -> None:
        if isinstance(node, (ast.ImportFrom, ast.ClassDef, ast.AsyncFunctionDef, ast.Await, ast.AsyncFor, ast.AsyncWith)):
            self._flag(node, f"holds {type(node).__name__}, which a cached kernel file never needs")
        elif isinstance(node, ast.Import) and id(node) not in self.top_imports:
            self._flag(node, "imports inside a function or block: a cached kernel file imports at its top only")
        elif isinstance(node, ast.FunctionDef):
            self._function(node)
        elif isinstance(node, ast.Attribute) and id(node) not in self.chained:
            self._attribute(node)
        elif isinstance(node, ast.Name) and id(node) not in self.chained:
            self._name(node)
        elif isinstance(node, ast.AnnAssign) and _has_string(node.annotation):
            self._flag(node, "has a string annotation")
        elif isinstance(node, ast.arg):
            self._binding(node, node.arg)

    def _function(self, node: ast.FunctionDef) -> None:
        for decorator in node.decorator_list:
            target = decorator.func if isinstance(decorator, ast.Call) else decorator
            if not (isinstance(target, ast.Attribute) and target.attr == "jit" and isinstance(target.value, ast.Name) and target.value.id == "triton"):
                self._flag(decorator, "has a decorator other than @triton.jit")
        args = node.args
        every = [*args.posonlyargs, *args.args, *args.kwonlyargs, *filter(None, [args.vararg, args.kwarg])]
        if any(a.annotation is not None and _has_string(a.annotation) for a in every) or (node.returns is not None and _has_string(node.returns)):
            self._flag(node, f"{node.name} has a string annotation")
        self._binding(node, node.name)

    def _attribute(self, node: ast.Attribute) -> None:
        parts, base = _dotted(node)
        for inner in ast.walk(node):  # the dotted name's own pieces are judged here, as one name
            if isinstance(inner, (ast.Name, ast.Attribute)) and _dotted(inner)[1] is base:
                self.chained.add(id(inner))
        if isinstance(base, ast.Name) and base.id in self.modules:
            self._module_name(node, base.id, parts)
            return
        if isinstance(base, ast.Name):
            self._name(base)
        for attr in parts:
            if (attr.startswith("_") and attr not in VALUE_PRIVATE_ATTRIBUTES) or attr in VALUE_DENIED_ATTRIBUTES:
                self._flag(node, f"uses the attribute .{attr}: a cached kernel file reads only public data attributes and methods")
                return

    def _module_name(self, node: ast.AST, root: str, parts: list[str]) -> None:
        dotted = ".".join(parts)
        if root == "math":
            allowed = len(parts) == 1 and not parts[0].startswith("_")
        else:
            names = _ROOTS[root]
            if root == "triton" and parts[:1] == ["language"]:  # triton.language.x is tl.x
                names, parts = TL_NAMES, parts[1:]
            # the longest allowed prefix; what follows is an attribute of a value (tl.float32 ... .to())
            allowed = any(".".join(parts[:n]) in names for n in range(1, len(parts) + 1))
            allowed = allowed and all(not p.startswith("_") for p in parts)
        if not allowed:
            self._flag(node, f"uses {root}.{dotted}, which is not on the allow-list of a cached kernel file (lego_core.judge.host_allowlist)")

    def _name(self, node: ast.Name) -> None:
        name = node.id
        if name in self.modules:
            if isinstance(node.ctx, ast.Load):
                self._flag(node, f"uses the module {name} as a value: only its allow-listed names may be used")
            else:
                self._flag(node, f"rebinds the module name {name}")
            return
        if name.startswith("__"):
            self._flag(node, f"uses {name}: a cached kernel file uses no dunder names")
        elif isinstance(node.ctx, ast.Load):
            if name in _BUILTIN_NAMES and name not in self.bound:
                if name not in BUILTINS:
                    self._flag(node, f"uses the builtin {name}, which is not on the allow-list of a cached kernel file")
            elif name not in self.bound:
                self._flag(node, f"uses {name}, which the file neither defines nor imports")
        else:
            self._binding(node, name)

    def _binding(self, node: ast.AST, name: str) -> None:
        if name in _BUILTIN_NAMES and name not in BUILTINS:
            self._flag(node, f"binds the builtin name {name}")
        elif name.startswith("__"):
            self._flag(node, f"binds the dunder name {name}")


def _bound_names(tree: ast.Module) -> set[str]:
    """Every name the file binds anywhere (functions, parameters, targets,
    ``except ... as``), and its top-level import names."""
    bound: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            bound.add(node.id)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            bound.update(node.names)
    return bound


def _dotted(node: ast.expr) -> tuple[list[str], ast.expr]:
    """``a.b.c`` -> (["b", "c"], the Name ``a``); for ``f(x).y``: (["y"], the Call)."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return list(reversed(parts)), node


def _has_string(annotation: ast.expr) -> bool:
    return any(isinstance(n, ast.Constant) and isinstance(n.value, str) for n in ast.walk(annotation))
