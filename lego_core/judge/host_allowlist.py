"""The allow-list every kernel file must pass: what a candidate's file (and a
file the kernel cache stores) may hold, named node type by node type.

Why (issue 27): a kernel that can read the process's modules, keep hidden
state between calls or patch the judge can behave only while judged.  A
denylist (``static_check.calls_back_into_reference``) missed, among others, a
``match torch: case object(sys=s)`` pattern (patterns read attributes with no
Name or Attribute node), a ``functools.lru_cache`` counter right for 40 calls,
a module-level buffer returned on every call and a patch of the call
tracer's class.  So a kernel file may hold only what a Triton kernel file
needs, and a road nobody thought of is closed by default:

* **imports**, at its top only: ``import torch``, ``import triton``,
  ``import triton.language as tl``, ``import math`` (no ``from`` import, no
  other module or alias: ``sys``, ``gc``, ``os``, ``inspect``, ``functools``,
  ``importlib``, ``builtins``... are refused by omission);
* **functions**: ``@triton.jit`` kernels (Triton's language inside), plain
  host helpers and launchers (``def``; ``lambda`` too, inside functions);
  no decorator but ``@triton.jit`` (``functools`` caches, ``triton.autotune``:
  the judge tunes ``CONFIG`` itself, ``lego_core.judge.tuning``), no class,
  no ``async``, no generator function (``yield``), no ``global``,
  ``nonlocal``, ``with``, ``try``, ``match``, no import inside a function;
* **module-level constants of literal data** (:data:`MODULE_STATEMENTS`):
  numbers, strings, tuples, torch dtypes, arithmetic on them, a few pure
  calls (:data:`PURE_CALLS`: ``float``, ``tuple``, ``math.<fn>``,
  ``triton.cdiv``, ``tl.constexpr``...), dict/list/set literals such as
  ``CONFIG = {...}`` and ``TUNE_CONFIGS = [...]`` that the tuner reads and
  sets; a docstring; ``if`` over constants.  No other call at import: a
  tensor, a counter or a cache made there is state kept between calls.

Every statement and expression is of a listed node type
(:data:`FUNCTION_STATEMENTS`, :data:`EXPRESSIONS`); anything else is refused
with its name and line.  Names: every name is bound by the file (scoped as
Python scopes it), one of the four modules (only as the root of a dotted
name on the profile's lists, never as a value or rebound) or a builtin of
:data:`BUILTINS` (never ``getattr``, ``setattr``, ``vars``, ``globals``,
``type``, ``object``, ``open``, ``eval``, ``id``, ``__import__``...); no
dunder name.  Attributes of values are public (no ``_x``, no ``__x__``) and
not on :data:`VALUE_DENIED_ATTRIBUTES` (a tensor's autograd, storage,
address and in-place metadata state; ``str.format``, which reads attributes
by name) nor a frame's, code object's or generator's (``f_back``,
``gi_frame``: the call stack).  Text is made from values (``str()``,
f-strings, ``%`` formatting) only in the message of a ``raise`` or
``assert``: a value's text shows its type and autograd state
(``Parameter containing``, ``requires_grad=True``), which tells a user's
program from the judge.
Annotations are dotted names (no string: ``typing.get_type_hints`` would
run it).

**Nothing outlives a call**, structurally:

* no attribute is ever assigned or deleted (``obj.x = ...``: state kept on a
  tensor the user's program passes again, or a patch of the judge);
* a module-level dict/list/set is read only: inside functions its name is
  only indexed, iterated, compared, copied (``dict(CONFIG)``, ``**CONFIG``)
  or asked ``.get/.keys/.values/.items/.index/.count/.copy``; never stored
  into, mutated (``.append``, ``.update``, ``.setdefault``...), aliased or
  passed on; the dicts or lists it holds (``TUNE_CONFIGS``) are read the same
  way (``TUNE_CONFIGS[0]["BLOCK"]``, ``dict(TUNE_CONFIGS[0])``), never taken
  out whole;
* a default argument of a top-level function is immutable literal data
  (no ``_calls=[0]``);
* a function the file defines is called or launched (``kernel[grid](...)``,
  as a statement), never used as a value: its attributes are Triton's
  caches; inside a ``@triton.jit`` body it may be handed to a ``tl.<name>``
  call (a ``tl.reduce`` combine function);
* lambdas are allowed inside functions (``grid = lambda meta: ...``): one
  expression, no statement, made anew at each call and stored nowhere that
  outlives it, so they keep nothing the rules above do not allow (refused at
  module level: define functions with ``def``); generator expressions too,
  except stored at module level (a generator there is a counter:
  ``for _ in G: break``); a generator *function* (``yield``) is refused, its
  suspended frame being state; a walrus binds a local of its call only
  (refused at module level).

Two profiles, one set of rules: ``"candidate"`` (every candidate kernel file,
template agent's and language model's alike, through
``static_check.calls_back_into_reference``) and ``"cache"`` (a file the kernel
cache stores, through ``static_check.unsafe_host_code``), whose name lists are
the template agent's own (:data:`TORCH_NAMES`, :data:`TL_NAMES`; torch op
names from the op registry, ``Op.template_call``); the candidate's add the
registry's host names (``Op.host_call``), a few shape and dtype helpers and
more of Triton's language (:data:`CANDIDATE_TORCH_NAMES`,
:data:`CANDIDATE_TL_NAMES`).  Heavy compute is refused apart, by region
(``static_check``).

:func:`refusal` returns a one-line reason (``line N: <construct>: <why>``) or None.
"""
from __future__ import annotations

import ast
import builtins
import dataclasses

from lego_core import ops
from lego_core.load.spec import syntax_error_text

# import statement -> local name it binds
IMPORTS = {("torch", None): "torch", ("triton", None): "triton", ("triton.language", "tl"): "tl", ("math", None): "math"}
_DTYPES = frozenset({
    "bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64",
    "half", "float", "double", "short", "int", "long",
})
# torch.<name> in a cached file: the ops the template agent's files call (allocation, the
# attention template's mask test ``equal``, the convolution a conv+BN kernel hands to
# cuDNN: ``Op.template_call`` in the op registry), memory formats, dtypes
TORCH_NAMES = ops.host_names(template=True) | _DTYPES | frozenset({
    "channels_last", "contiguous_format", "preserve_format", "cuda.is_current_stream_capturing",
})
# torch.<name> in a candidate: the above, the registry's host names (``Op.host_call``:
# layout, allocation, bookkeeping; less the method-only names, ``cuda`` above all,
# which as a dotted name would open all of torch.cuda), and shape/dtype helpers
CANDIDATE_TORCH_NAMES = TORCH_NAMES | (ops.host_names(call=True) - {"cuda", "cpu", "getitem", "copy", "item", "tolist", "data_ptr"}) | frozenset({
    "Tensor", "Size", "device", "dtype", "finfo", "iinfo", "broadcast_shapes", "is_tensor", "is_floating_point",
    "promote_types", "result_type", "cuda.get_device_properties", "uint16", "uint32", "uint64",
    "float8_e4m3fn", "float8_e5m2", "complex64", "complex128", "strided",
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
# more of Triton's language for a candidate (device code a language model writes)
CANDIDATE_TL_NAMES = TL_NAMES | frozenset({
    "device_print", "static_print", "rand4x", "randn4x", "randint4x", "philox", "uint_to_uniform_float",
    "pair_uniform_to_normal", "tuple", "slice", "reduce_or", "map_elementwise", "bitonic_merge",
    "pointer_type", "block_type", "void", "const",
})
# tl.<module>.<one public function>: libdevice's math (a candidate only; not its ``core``)
CANDIDATE_TL_MODULES = frozenset({"extra.libdevice", "extra.cuda.libdevice"})
# builtins code may use; every other builtin is refused
BUILTINS = frozenset({
    "len", "range", "tuple", "list", "dict", "set", "frozenset", "int", "float", "bool", "str", "min", "max",
    "abs", "sum", "all", "any", "zip", "enumerate", "sorted", "reversed", "isinstance", "round", "divmod",
    "slice", "ValueError", "TypeError", "RuntimeError", "NotImplementedError", "AssertionError", "IndexError",
    "KeyError", "ZeroDivisionError",
})
CANDIDATE_BUILTINS = BUILTINS | frozenset({"map", "filter", "pow", "Exception"})
# attributes of values that read or keep per-object state beyond the data, or that
# reach further than data: str.format's replacement fields read attributes by name;
# a tensor's autograd state and hooks, its storage, its in-place metadata changes
# (a tensor the user's program passes on every call would carry them to the next),
# and whether it lives in shared or pinned memory (the judge's inputs do)
VALUE_DENIED_ATTRIBUTES = frozenset({
    "format", "format_map",
    "requires_grad", "requires_grad_", "grad", "grad_fn", "is_leaf", "retain_grad", "retains_grad", "backward",
    "register_hook", "register_post_accumulate_grad_hook", "data", "untyped_storage", "storage", "set_",
    "resize_", "resize_as_", "as_strided_", "squeeze_", "unsqueeze_", "t_", "transpose_", "swapdims_",
    "swapaxes_", "detach_", "rename_", "refine_names", "names", "has_names", "output_nr", "share_memory_",
    "is_shared", "is_pinned", "pin_memory", "is_inference", "apply_", "map_", "map2_",
    # where the memory lies (the judge's buffers lie elsewhere than a user's), and the
    # interpreter's handle on a tensor's host array
    "data_ptr", "storage_offset", "handle",
})
# attributes of frames, code objects, generators, coroutines and tracebacks (a local
# generator's ``gi_frame.f_back`` is its caller's frame: the judge's)
_FRAME_PREFIXES = ("f_", "gi_", "cr_", "ag_", "tb_", "co_")
# dtype names after which a dotted module name may go on (``torch.float32.itemsize``); any
# other listed name is used as listed (``torch.Tensor`` yes, ``torch.Tensor.requires_grad_`` no)
_TORCH_DTYPES = _DTYPES | frozenset({"uint16", "uint32", "uint64", "float8_e4m3fn", "float8_e5m2", "complex64", "complex128"})
_TL_DTYPES = frozenset({
    "bfloat16", "float16", "float32", "float64", "float8e4b15", "float8e4b8", "float8e4nv", "float8e5", "float8e5b16",
    "int1", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
})
# calls a module-level value may make (pure, and never a mutable or stateful object)
PURE_CALLS = frozenset({
    "float", "int", "bool", "str", "abs", "round", "min", "max", "len", "sum", "tuple", "frozenset", "range",
    "divmod", "triton.cdiv", "triton.next_power_of_2", "tl.constexpr",
})  # and any math.<name>
# builtins that read a module-level dict/list whatever it holds, and those that copy
# it (only when what it holds is immutable: a shallow copy shares the rest)
_READ_ANY_DEPTH = frozenset({"len", "isinstance", "bool"})
_COPYING = frozenset({"dict", "list", "tuple", "set", "frozenset", "sorted", "min", "max", "sum", "any", "all",
                      "enumerate", "zip", "reversed", "map", "filter", "str"})
_READ_METHODS = frozenset({"get", "keys", "values", "items", "index", "count", "copy"})
_JIT_KEYWORDS = frozenset({"do_not_specialize", "do_not_specialize_on_alignment", "noinline", "debug"})

# node types (the allow-list proper); every other is refused by name
MODULE_STATEMENTS = (ast.Import, ast.FunctionDef, ast.Assign, ast.AnnAssign, ast.Expr, ast.If, ast.Pass)
FUNCTION_STATEMENTS = (ast.FunctionDef, ast.Return, ast.Assign, ast.AugAssign, ast.AnnAssign, ast.For, ast.While,
                       ast.If, ast.Raise, ast.Assert, ast.Expr, ast.Pass, ast.Break, ast.Continue, ast.Delete)
EXPRESSIONS = (ast.BoolOp, ast.NamedExpr, ast.BinOp, ast.UnaryOp, ast.Lambda, ast.IfExp, ast.Dict, ast.Set,
               ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.Compare, ast.Call, ast.FormattedValue,
               ast.JoinedStr, ast.Constant, ast.Attribute, ast.Subscript, ast.Starred, ast.Name, ast.List,
               ast.Tuple, ast.Slice)
_PARTS = (ast.comprehension, ast.arguments, ast.arg, ast.keyword, ast.alias, ast.expr_context, ast.operator,
          ast.boolop, ast.unaryop, ast.cmpop)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)

# what a refused node is called, and why it has no place in a kernel file
_CONSTRUCTS = {
    "Match": ("a match statement", "its patterns read attributes and names no check sees"),
    "ClassDef": ("a class definition", "a class keeps state between calls and can patch what it subclasses"),
    "Global": ("a global statement", "a function that rebinds module names keeps state between calls"),
    "Nonlocal": ("a nonlocal statement", "a closure cell written by a call keeps state between calls"),
    "With": ("a with statement", "a kernel file enters no context (streams, devices, modes)"),
    "Try": ("a try statement", "a kernel file handles no errors: they go to the judge"),
    "TryStar": ("a try statement", "a kernel file handles no errors: they go to the judge"),
    "AsyncFunctionDef": ("async code", "a kernel file runs no coroutines"),
    "AsyncFor": ("async code", "a kernel file runs no coroutines"),
    "AsyncWith": ("async code", "a kernel file runs no coroutines"),
    "Await": ("async code", "a kernel file runs no coroutines"),
    "Yield": ("a yield (a generator function)", "a suspended generator keeps its frame between calls"),
    "YieldFrom": ("a yield (a generator function)", "a suspended generator keeps its frame between calls"),
    "Import": ("an import inside a function or block", "a kernel file imports at its top only"),
    "ImportFrom": ("a from-import (ImportFrom)", "a kernel file imports only torch, triton, triton.language as tl and math, by those names"),
    "Lambda": ("a module-level lambda", "define module-level functions with def"),
    "NamedExpr": ("a module-level walrus", "a module-level value is literal data"),
    "GeneratorExp": ("a module-level generator", "a stored generator is a counter kept between calls"),
}


@dataclasses.dataclass(frozen=True)
class Profile:
    """The name lists of one use of the rules; ``what`` names the file in messages."""

    name: str
    what: str
    torch: frozenset
    triton: frozenset
    tl: frozenset
    tl_modules: frozenset
    builtins: frozenset


PROFILES = {
    "candidate": Profile("candidate", "a kernel file", CANDIDATE_TORCH_NAMES, TRITON_NAMES, CANDIDATE_TL_NAMES,
                         CANDIDATE_TL_MODULES, CANDIDATE_BUILTINS),
    "cache": Profile("cache", "a cached kernel file", TORCH_NAMES, TRITON_NAMES, TL_NAMES, frozenset(), BUILTINS),
}
_BUILTIN_NAMES = frozenset(dir(builtins))


def refusal(source: str, profile: str = "cache") -> str | None:
    """Why ``source`` is not a kernel file of ``profile`` (``"candidate"``:
    every candidate; ``"cache"``: one the kernel cache stores): one line,
    ``line N: <construct>: <why>``; None when every node, name and attribute
    in it is allowed (module docstring)."""
    rules = PROFILES[profile]
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        return f"source does not parse: {syntax_error_text(exc)}"
    try:
        _Checker(tree, rules).check()
    except _Refused as refused:
        return str(refused)
    return None


class _Refused(Exception):
    pass


@dataclasses.dataclass
class _Binding:
    """A module-level name: ``kind`` "module" | "function" | "constant"; ``depth``: the
    container levels above a constant's deepest dict, list or set (0: immutable data;
    ``_Checker._constant``); ``jit``: a ``@triton.jit`` kernel."""

    kind: str
    depth: int = 0
    jit: bool = False


class _Scope:
    def __init__(self, names: set[str], jit: bool):
        self.names, self.jit = names, jit


class _Checker:
    def __init__(self, tree: ast.Module, rules: Profile):
        self.tree, self.rules = tree, rules
        self.what = rules.what
        self.globals: dict[str, _Binding] = {}
        self.parents: dict[int, ast.AST] = {}
        for node in ast.walk(tree):
            for child in ast.iter_child_nodes(node):
                self.parents[id(child)] = node
        self.chained: set[int] = set()  # Name / Attribute nodes judged as part of a module's dotted name

    # -- reporting -------------------------------------------------------------
    def refuse(self, node: ast.AST, message: str) -> None:
        line = getattr(node, "lineno", None)
        raise _Refused(f"line {line}: {message}" if line else message)

    def refuse_construct(self, node: ast.AST, name: str | None = None) -> None:
        kind = name or type(node).__name__
        label, why = _CONSTRUCTS.get(kind, (f"a {kind} node", f"not among the node types {self.what} may hold"))
        self.refuse(node, f"{label}: {why} (lego_core.judge.host_allowlist)")

    def parent(self, node: ast.AST) -> ast.AST | None:
        return self.parents.get(id(node))

    # -- the module's statements ---------------------------------------------
    def check(self) -> None:
        self._module_statements(self.tree.body)
        scopes: list[_Scope] = []
        for statement in self.tree.body:
            self._visit(statement, scopes)

    def _module_statements(self, body: list[ast.stmt]) -> None:
        for statement in body:
            if not isinstance(statement, MODULE_STATEMENTS):
                self.refuse_construct(statement, "ImportFrom" if isinstance(statement, ast.ImportFrom) else None)
            if isinstance(statement, ast.Import):
                if statement not in self.tree.body:
                    self.refuse_construct(statement)
                self._import(statement)
            elif isinstance(statement, ast.FunctionDef):
                self._bind(statement, statement.name, _Binding("function", jit=self._decorators(statement)))
            elif isinstance(statement, ast.Expr):
                if not isinstance(statement.value, ast.Constant):
                    self.refuse(statement, f"a module-level expression statement: {self.what} runs nothing at import "
                                           "(it defines kernels, functions and literal constants)")
            elif isinstance(statement, ast.If):
                self._constant(statement.test)
                self._module_statements(statement.body)
                self._module_statements(statement.orelse)
            elif isinstance(statement, ast.Assign):
                depth = self._constant(statement.value)
                for target in statement.targets:
                    self._assign_target(target, statement.value, depth)
            elif isinstance(statement, ast.AnnAssign):
                if not isinstance(statement.target, ast.Name):
                    self.refuse(statement, f"an annotated assignment to {ast.unparse(statement.target)}: a module-level name is bound by a plain name")
                if statement.value is not None:
                    self._bind(statement, statement.target.id, _Binding("constant", self._constant(statement.value)))

    def _import(self, node: ast.Import) -> None:
        for alias in node.names:
            local = IMPORTS.get((alias.name, alias.asname))
            if local is None:
                spelled = f"import {alias.name}" + (f" as {alias.asname}" if alias.asname else "")
                self.refuse(node, f"{spelled}: {self.what} imports only torch, triton, triton.language as tl and math "
                                  "(other modules can read the process, the clock or the call stack and tell the judge from a user's program)")
            self._bind(node, local, _Binding("module"))

    def _bind(self, node: ast.AST, name: str, binding: _Binding) -> None:
        self._binding_name(node, name)
        known = self.globals.get(name)
        if known is not None and (known.kind != "constant" or binding.kind != "constant"):
            self.refuse(node, f"binds {name} twice at module level: a function or module is bound once")
        if known is not None:
            binding.depth = max(binding.depth, known.depth)
        self.globals[name] = binding

    def _binding_name(self, node: ast.AST, name: str) -> None:
        if name.startswith("__"):
            self.refuse(node, f"binds the dunder name {name}")
        if name in ("torch", "triton", "tl", "math") and not isinstance(node, ast.Import):
            self.refuse(node, f"rebinds the module name {name}")

    def _assign_target(self, target: ast.expr, value: ast.expr, depth: int) -> None:
        if isinstance(target, ast.Name):
            self._bind(target, target.id, _Binding("constant", depth))
        elif isinstance(target, (ast.Tuple, ast.List)) and all(isinstance(e, ast.Name) for e in target.elts):
            values = value.elts if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts) else None
            for k, element in enumerate(target.elts):
                self._bind(element, element.id, _Binding("constant", self._constant(values[k]) if values else depth))
        else:
            self.refuse(target, f"a module-level assignment to {ast.unparse(target)}: module-level code binds names, it stores into nothing")

    def _decorators(self, node: ast.FunctionDef) -> bool:
        """Whether ``node`` is a ``@triton.jit`` kernel; refuses any other decorator."""
        for decorator in node.decorator_list:
            target = decorator.func if isinstance(decorator, ast.Call) else decorator
            if not (isinstance(target, ast.Attribute) and target.attr == "jit" and isinstance(target.value, ast.Name) and target.value.id == "triton"):
                self.refuse(decorator, f"the decorator @{ast.unparse(decorator)}: {self.what} has no decorator but @triton.jit "
                                       "(a cache or wrapper keeps state between calls; the judge tunes CONFIG itself)")
            if isinstance(decorator, ast.Call):
                for keyword in decorator.keywords:
                    if keyword.arg not in _JIT_KEYWORDS or not _literal(keyword.value):
                        self.refuse(decorator, f"@triton.jit({ast.unparse(keyword)}): only {', '.join(sorted(_JIT_KEYWORDS))}, with literal values")
                if decorator.args:
                    self.refuse(decorator, "@triton.jit(...) with positional arguments")
        return bool(node.decorator_list)

    # -- module-level values: literal data ----------------------------------------
    def _constant(self, node: ast.expr, local: dict[str, int] | None = None) -> int:
        """Refuses ``node`` unless it is literal data; its depth: how many
        container levels (tuples included) lie above its deepest dict, list or
        set, counting that one (0: immutable data; ``[1, 2]``: 1; ``([1],)``: 2;
        ``[{"BLOCK": 64}]``: 2); indexing takes one level off."""
        local = local or {}
        if isinstance(node, ast.Constant):
            return 0
        if isinstance(node, ast.Name):
            if node.id in local:
                return local[node.id]
            binding = self.globals.get(node.id)
            if node.id.startswith("__"):
                self.refuse(node, f"uses {node.id}: {self.what} uses no dunder names")
            if binding is None and node.id in _BUILTIN_NAMES:
                self._builtin(node)
                self.refuse(node, f"a module-level value names the builtin {node.id}: module-level values are literal data")
            if binding is None:
                self.refuse(node, f"uses {node.id}, which the file neither defines nor imports")
            if binding.kind == "constant":
                return binding.depth
            if binding.kind == "module":
                self.refuse(node, f"uses the module {node.id} as a value: only its allow-listed names may be used")
            self.refuse(node, f"a module-level value names the function {node.id}: a function is called or launched, never kept as a value")
        if isinstance(node, ast.Attribute):
            parts, base = _dotted(node)
            if not (isinstance(base, ast.Name) and self.globals.get(base.id, _Binding("")).kind == "module"):
                self.refuse(node, f"a module-level value reads the attribute .{node.attr} of a value: module-level values are literal data")
            return 0
        if isinstance(node, ast.Tuple):
            inner = max((self._element(e, local) for e in node.elts), default=0)
            return 1 + inner if inner else 0
        if isinstance(node, (ast.List, ast.Set)):
            return 1 + max((self._element(e, local) for e in node.elts), default=0)
        if isinstance(node, ast.Dict):
            depths = [self._constant(k, local) for k in node.keys if k is not None]
            depths += [self._constant(v, local) - (1 if k is None else 0) for k, v in zip(node.keys, node.values)]
            return 1 + max(depths, default=0)
        if isinstance(node, ast.UnaryOp):
            return self._constant(node.operand, local)
        if isinstance(node, ast.BinOp):
            return max(self._constant(node.left, local), self._constant(node.right, local))
        if isinstance(node, ast.BoolOp):
            return max(self._constant(v, local) for v in node.values)
        if isinstance(node, ast.Compare):
            for operand in [node.left, *node.comparators]:
                self._constant(operand, local)
            return 0
        if isinstance(node, ast.IfExp):
            self._constant(node.test, local)
            return max(self._constant(node.body, local), self._constant(node.orelse, local))
        if isinstance(node, ast.Subscript):
            depth = self._constant(node.value, local)
            self._constant(node.slice, local)
            return depth if isinstance(node.slice, ast.Slice) else max(depth - 1, 0)
        if isinstance(node, ast.Slice):
            for part in (node.lower, node.upper, node.step):
                if part is not None:
                    self._constant(part, local)
            return 0
        if isinstance(node, (ast.JoinedStr, ast.FormattedValue)):
            for part in ast.iter_child_nodes(node):
                if isinstance(part, ast.expr):
                    self._constant(part, local)
            return 0
        if isinstance(node, ast.Call):
            return self._pure_call(node, local)
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp)):
            inner = self._comprehension(node.generators, local)
            if isinstance(node, ast.DictComp):
                return 1 + max(self._constant(node.key, inner), self._constant(node.value, inner))
            return 1 + self._constant(node.elt, inner)
        if isinstance(node, (ast.Lambda, ast.NamedExpr, ast.GeneratorExp)):
            self.refuse_construct(node)
        self.refuse(node, f"a module-level value holds {_describe(node)}: module-level values are literal data "
                          "(numbers, strings, tuples, dtypes, dict/list literals)")
        return 0  # unreachable

    def _element(self, node: ast.expr, local: dict[str, int]) -> int:
        if isinstance(node, ast.Starred):
            return max(self._constant(node.value, local) - 1, 0)
        return self._constant(node, local)

    def _comprehension(self, generators: list[ast.comprehension], local: dict[str, int]) -> dict[str, int]:
        inner = dict(local)
        for generator in generators:
            depth = max(self._constant(generator.iter, inner) - 1, 0)
            for target in ast.walk(generator.target):
                if isinstance(target, ast.Name):
                    inner[target.id] = depth
                elif not isinstance(target, (ast.Tuple, ast.List, ast.expr_context)):
                    self.refuse(target, f"a comprehension target {ast.unparse(generator.target)}: comprehension targets are names")
            for condition in generator.ifs:
                self._constant(condition, inner)
        return inner

    def _pure_call(self, node: ast.Call, local: dict[str, int]) -> int:
        if isinstance(node.func, ast.Name) and node.func.id not in self.globals and node.func.id in _BUILTIN_NAMES:
            self._builtin(node.func)
        name = _dotted_name(node.func)
        root = name.split(".")[0] if name else None
        pure = name in PURE_CALLS and (root not in self.globals or self.globals[root].kind == "module")
        pure = pure and (("." in name) or name in _BUILTIN_NAMES)
        if not pure and not (root == "math" and name.count(".") == 1 and self.globals.get("math", _Binding("")).kind == "module"):
            spelled = name or ast.unparse(node.func)
            self.refuse(node, f"a module-level value calls {spelled}: module-level values are literal data made by pure calls "
                              f"({', '.join(sorted(PURE_CALLS))}, math.<fn>); a tensor, counter or cache made at import is state kept between calls")
        depths = []
        for argument in node.args:
            if isinstance(argument, ast.GeneratorExp):
                depths.append(1 + self._constant(argument.elt, self._comprehension(argument.generators, local)))
            else:
                depths.append(self._element(argument, local))
        depths += [self._constant(k.value, local) for k in node.keywords]
        deepest = max(depths, default=0)
        if name in ("tuple", "frozenset"):
            return deepest if deepest > 1 else 0  # the elements of what it copies, in an immutable container
        if name in ("tl.constexpr", "min", "max", "sum"):
            return deepest  # holds or returns (a part of) what it is given
        return 0  # a number, a string, a range

    # -- every node: types, names, attributes, state ----------------------------
    def _visit(self, node: ast.AST, scopes: list[_Scope]) -> None:
        in_function = bool(scopes)
        if isinstance(node, ast.stmt):
            if not isinstance(node, FUNCTION_STATEMENTS if in_function else MODULE_STATEMENTS):
                self.refuse_construct(node)
        elif isinstance(node, ast.expr):
            if not isinstance(node, EXPRESSIONS):
                self.refuse_construct(node)
        elif not isinstance(node, _PARTS):
            self.refuse_construct(node)
        if isinstance(node, ast.FunctionDef):
            self._function(node, scopes)
        elif isinstance(node, ast.Lambda):
            self._lambda(node, scopes)
        elif isinstance(node, _COMPREHENSIONS):
            self._comprehension_scope(node, scopes)
        elif isinstance(node, ast.Attribute):
            self._attribute(node, scopes)
        elif isinstance(node, ast.Name):
            if id(node) not in self.chained:
                self._name(node, scopes)
        elif isinstance(node, ast.JoinedStr) and in_function:
            self._formatting(node, "an f-string")
            for child in ast.iter_child_nodes(node):
                self._visit(child, scopes)
        elif isinstance(node, ast.Constant) and in_function and isinstance(node.value, (str, bytes)) and \
                ("%" in node.value if isinstance(node.value, str) else b"%" in node.value) and not isinstance(self.parent(node), ast.Expr):
            self._formatting(node, "a %-format string")
        elif isinstance(node, ast.AnnAssign):
            self._annotation(node.annotation, scopes)
            for child in (node.target, node.value):
                if child is not None:
                    self._visit(child, scopes)
        else:
            for child in ast.iter_child_nodes(node):
                self._visit(child, scopes)

    def _function(self, node: ast.FunctionDef, scopes: list[_Scope]) -> None:
        top = not scopes
        if not top and node.decorator_list:
            self.refuse(node.decorator_list[0], f"a decorator on the nested function {node.name}: only top-level kernels carry @triton.jit")
        for decorator in node.decorator_list:
            self._visit(decorator, scopes)
        self._binding_name(node, node.name)
        args = node.args
        self._defaults(args, scopes, top)
        for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs, *filter(None, [args.vararg, args.kwarg])]:
            self._binding_name(arg, arg.arg)
            if arg.annotation is not None:
                self._annotation(arg.annotation, scopes)
        if node.returns is not None:
            self._annotation(node.returns, scopes)
        jit = (top and self.globals.get(node.name, _Binding("")).jit) or bool(scopes and scopes[-1].jit)
        inner = scopes + [_Scope(_scope_names(node), jit)]
        for statement in node.body:
            self._visit(statement, inner)

    def _lambda(self, node: ast.Lambda, scopes: list[_Scope]) -> None:
        if not scopes:
            self.refuse_construct(node)
        self._defaults(node.args, scopes, False)
        for arg in [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs, *filter(None, [node.args.vararg, node.args.kwarg])]:
            self._binding_name(arg, arg.arg)
        inner = scopes + [_Scope(_scope_names(node), scopes[-1].jit)]
        self._visit(node.body, inner)

    def _defaults(self, args: ast.arguments, scopes: list[_Scope], top: bool) -> None:
        for default in [*args.defaults, *filter(None, args.kw_defaults)]:
            if top and self._constant(default) > 0:
                self.refuse(default, f"a mutable default argument {ast.unparse(default)}: a default is made once and kept between calls; "
                                     "defaults are immutable literal data")
            self._visit(default, scopes)

    def _comprehension_scope(self, node: ast.expr, scopes: list[_Scope]) -> None:
        if not scopes and not isinstance(self.parent(node), ast.Call) and isinstance(node, ast.GeneratorExp):
            self.refuse_construct(node)
        generators = node.generators
        self._visit(generators[0].iter, scopes)  # evaluated in the enclosing scope
        names = {t.id for g in generators for t in ast.walk(g.target) if isinstance(t, ast.Name)}
        inner = scopes + [_Scope(names, bool(scopes and scopes[-1].jit))] if scopes else [_Scope(names, False)]
        for k, generator in enumerate(generators):
            self._visit(generator.target, inner)
            if k:
                self._visit(generator.iter, inner)
            for condition in generator.ifs:
                self._visit(condition, inner)
        for part in ([node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]):
            self._visit(part, inner)

    def _annotation(self, node: ast.expr, scopes: list[_Scope]) -> None:
        for part in ast.walk(node):
            if isinstance(part, ast.Constant) and isinstance(part.value, str):
                self.refuse(node, "a string annotation: code that typing.get_type_hints would evaluate, unseen by this check")
            if not isinstance(part, (ast.Name, ast.Attribute, ast.Subscript, ast.Tuple, ast.Constant, ast.BinOp, ast.BitOr,
                                     ast.expr_context)):
                self.refuse(node, f"an annotation {ast.unparse(node)}: annotations are dotted names (they run at import)")
        self._visit(node, scopes)

    # names ------------------------------------------------------------------------
    def _resolve(self, name: str, scopes: list[_Scope]) -> tuple[str, _Binding | None]:
        for scope in reversed(scopes):
            if name in scope.names:
                return "local", None
        if name in self.globals:
            return "global", self.globals[name]
        if name in _BUILTIN_NAMES:
            return "builtin", None
        return "unknown", None

    def _name(self, node: ast.Name, scopes: list[_Scope]) -> None:
        name = node.id
        if name.startswith("__"):
            self.refuse(node, f"uses {name}: {self.what} uses no dunder names")
        if not isinstance(node.ctx, ast.Load):
            self._binding_name(node, name)
        kind, binding = self._resolve(name, scopes)
        if kind == "unknown":
            self.refuse(node, f"uses {name}, which the file neither defines nor imports")
        if kind == "builtin":
            self._builtin(node)
            parent = self.parent(node)
            as_type = isinstance(parent, ast.Call) and _dotted_name(parent.func) == "isinstance" and node in parent.args[1:]
            as_type = as_type or (isinstance(parent, ast.Tuple) and isinstance(self.parent(parent), ast.Call) and _dotted_name(self.parent(parent).func) == "isinstance")
            if name == "str" and scopes and not as_type:
                self._formatting(node, "str()")
            return
        if kind != "global" or not scopes:
            return  # a local of this call; module-level values are judged as literal data
        if binding.kind == "module":
            self.refuse(node, f"uses the module {name} as a value: only its allow-listed names may be used")
        elif binding.kind == "function":
            self._function_use(node, scopes)
        elif binding.depth > 0 and not self._read_only(node, binding.depth):
            holds = " (it holds dicts or lists, shared with it: read them down to their values or copy them)" if binding.depth > 1 else ""
            self.refuse(node, f"{self._use(node)} the module-level {name} other than reading it{holds}: a module-level dict or list "
                              "is read only (indexed, iterated, copied); state kept between calls lets a kernel behave only while judged")

    def _use(self, node: ast.expr) -> str:
        parent = self.parent(node)
        while isinstance(parent, ast.Subscript) and parent.value is node and isinstance(parent.ctx, ast.Load):
            node, parent = parent, self.parent(parent)  # TUNE_CONFIGS[0].update(...): what is done with the part
        if isinstance(parent, ast.Subscript) and not isinstance(parent.ctx, ast.Load):
            return "stores into"
        if isinstance(parent, ast.Attribute):
            return f"calls .{parent.attr} on" if isinstance(self.parent(parent), ast.Call) else f"reads .{parent.attr} of"
        return "uses"

    def _builtin(self, node: ast.Name) -> None:
        if node.id not in self.rules.builtins:
            self.refuse(node, f"uses the builtin {node.id}, which is not on the allow-list of {self.what} "
                              "(it reaches the interpreter, an object's type or the process)")

    def _formatting(self, node: ast.AST, what: str) -> None:
        """Text made from a value only as the message of a raise or assert: a value's
        text shows its type and autograd state (``Parameter containing``,
        ``requires_grad=True``), which tells a user's program from the judge; raising
        instead of computing is no silent difference."""
        statement = node
        while statement is not None and not isinstance(statement, ast.stmt):
            statement = self.parent(statement)
        if not isinstance(statement, (ast.Raise, ast.Assert)):
            self.refuse(node, f"{what} outside a raise or assert message: a value's text shows its type and autograd state "
                              "(a Parameter, requires_grad), which tells a user's program from the judge")

    def _function_use(self, node: ast.Name, scopes: list[_Scope]) -> None:
        """A function the file defines is called, or launched as a statement
        (``kernel[grid](...)``); inside a kernel it may be an argument of a tl call."""
        parent = self.parent(node)
        if isinstance(parent, ast.Call) and parent.func is node:
            return
        if isinstance(parent, ast.Subscript) and parent.value is node and isinstance(parent.ctx, ast.Load):
            call = self.parent(parent)
            if isinstance(call, ast.Call) and call.func is parent and isinstance(self.parent(call), ast.Expr):
                return
            self.refuse(node, f"keeps or reads the launch of {node.id}: a launch kernel[grid](...) is a statement of its own "
                              "(what it returns holds Triton's caches)")
        if scopes[-1].jit and isinstance(parent, ast.Call) and node in parent.args and (_dotted_name(parent.func) or "").startswith("tl."):
            return
        self.refuse(node, f"uses the function {node.id} as a value: a function the file defines is called or launched, never "
                          "read, stored or passed on (its attributes are Triton's caches)")

    def _read_only(self, node: ast.expr, depth: int) -> bool:
        """Whether ``node`` (a module-level dict/list, or a part of one, nesting
        ``depth`` deep) is only read where it stands."""
        parent = self.parent(node)
        if isinstance(parent, ast.Subscript) and parent.value is node:
            if isinstance(parent.slice, ast.Slice):  # a slice: a copy holding the same parts
                return isinstance(parent.ctx, ast.Load) and (depth <= 1 or self._read_only(parent, depth))
            return isinstance(parent.ctx, ast.Load) and (depth <= 1 or self._read_only(parent, depth - 1))
        if isinstance(parent, ast.BoolOp):
            return self._tested(parent)  # `if CONFIG and ...`: only tested (a BoolOp gives an operand back)
        if isinstance(parent, (ast.For, ast.comprehension)) and parent.iter is node:
            return depth <= 1
        if isinstance(parent, ast.Compare) or (isinstance(parent, ast.UnaryOp) and isinstance(parent.op, ast.Not)):
            return True  # a bool
        if isinstance(parent, (ast.If, ast.While, ast.IfExp, ast.Assert)) and parent.test is node:
            return True  # only tested
        if isinstance(parent, ast.Starred) and isinstance(parent.ctx, ast.Load):
            return depth <= 1 and isinstance(self.parent(parent), (ast.Call, ast.List, ast.Tuple, ast.Set))
        if isinstance(parent, ast.keyword) and parent.arg is None:
            return depth <= 1
        if isinstance(parent, ast.Dict) and any(k is None and v is node for k, v in zip(parent.keys, parent.values)):
            return depth <= 1
        if isinstance(parent, ast.Call) and node in parent.args and isinstance(parent.func, ast.Name):
            fn = parent.func.id
            if fn in _BUILTIN_NAMES and fn not in self.globals and not self._shadowed(parent.func):
                return fn in _READ_ANY_DEPTH or (fn in _COPYING and depth <= 1)
        if isinstance(parent, ast.Attribute) and parent.value is node and parent.attr in _READ_METHODS:
            call = self.parent(parent)
            return depth <= 1 and isinstance(call, ast.Call) and call.func is parent
        return False

    def _tested(self, node: ast.expr) -> bool:
        """Whether ``node``'s value is only tested for truth."""
        parent = self.parent(node)
        if isinstance(parent, (ast.If, ast.While, ast.IfExp, ast.Assert)) and parent.test is node:
            return True
        if isinstance(parent, ast.UnaryOp) and isinstance(parent.op, ast.Not):
            return True
        return isinstance(parent, ast.BoolOp) and self._tested(parent)

    def _shadowed(self, node: ast.Name) -> bool:
        """Whether a local binds ``node``'s name where it stands (conservatively: anywhere in the file)."""
        return any(isinstance(n, ast.Name) and n.id == node.id and not isinstance(n.ctx, ast.Load) for n in ast.walk(self.tree)) or \
            any(isinstance(n, ast.arg) and n.arg == node.id for n in ast.walk(self.tree))

    # attributes ---------------------------------------------------------------------
    def _attribute(self, node: ast.Attribute, scopes: list[_Scope]) -> None:
        if not isinstance(node.ctx, ast.Load):
            self.refuse(node, f"assigns or deletes the attribute .{node.attr}: {self.what} assigns no attribute "
                              "(state kept on an object outlives the call; on the judge's objects it is a patch)")
        if id(node) in self.chained:
            return
        parts, base = _dotted(node)
        if isinstance(base, ast.Name) and self._resolve(base.id, scopes)[0] == "global" and self.globals[base.id].kind == "module":
            for inner in ast.walk(node):  # the dotted name's own pieces are judged here, as one name
                if isinstance(inner, (ast.Name, ast.Attribute)) and _dotted(inner)[1] is base:
                    self.chained.add(id(inner))
            self._module_name(node, base.id, parts)
            return
        attr = node.attr
        if attr.startswith("_") or attr in VALUE_DENIED_ATTRIBUTES or attr.startswith(_FRAME_PREFIXES):
            if attr.startswith("_"):
                why = "a private or dunder attribute reaches an object's insides"
            elif attr.startswith(_FRAME_PREFIXES):
                why = "frames, code and generator internals reach the call stack (the judge's frames)"
            elif attr in ("format", "format_map"):
                why = "its replacement fields read attributes by name, unseen by this check"
            else:
                why = ("it reads or changes a tensor's state beyond its data (autograd, storage, address, metadata changed in place): "
                       "that tells a user's program from the judge, or outlives the call")
            self.refuse(node, f"uses the attribute .{attr}: {why}")
        self._visit(node.value, scopes)

    def _module_name(self, node: ast.AST, root: str, parts: list[str]) -> None:
        dotted = ".".join(parts)
        rules = self.rules
        if any(p.startswith("_") for p in parts):
            allowed = False
        elif root == "math":
            allowed = len(parts) == 1
        else:
            names, dtypes = {"torch": (rules.torch, _TORCH_DTYPES), "triton": (rules.triton, frozenset()), "tl": (rules.tl, _TL_DTYPES)}[root]
            modules: frozenset = frozenset()
            if root == "tl" or (root == "triton" and parts[:1] == ["language"]):
                names, dtypes, modules = rules.tl, _TL_DTYPES, rules.tl_modules
                parts = parts[1:] if root == "triton" else parts
            # a listed name, or a listed dtype and attributes of it (torch.float32.itemsize)
            known = max((n for n in range(1, len(parts) + 1) if ".".join(parts[:n]) in names), default=0)
            allowed = known == len(parts) or (known == 1 and parts[0] in dtypes and not set(parts) & VALUE_DENIED_ATTRIBUTES)
            # a module of functions (libdevice): exactly one of them, not its imports
            allowed = allowed or any(".".join(parts[:-1]) == m and parts[-1] != "core" for m in modules)
        if not allowed:
            self.refuse(node, f"uses {root}.{dotted}, which is not on the allow-list of {self.what} (lego_core.judge.host_allowlist)")


def _scope_names(node: ast.FunctionDef | ast.Lambda) -> set[str]:
    """The names a function or lambda binds in its own scope: parameters, and
    every name bound in its body outside nested functions and comprehensions
    (a walrus inside a comprehension binds here)."""
    args = node.args
    names = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs, *filter(None, [args.vararg, args.kwarg])]}
    body = node.body if isinstance(node.body, list) else [node.body]

    def collect(child: ast.AST, in_comprehension: bool) -> None:
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(child.name)
            return
        if isinstance(child, ast.Lambda):
            return
        if isinstance(child, ast.NamedExpr) and isinstance(child.target, ast.Name):
            names.add(child.target.id)
        elif isinstance(child, ast.Name) and not isinstance(child.ctx, ast.Load) and not in_comprehension:
            names.add(child.id)
        for grandchild in ast.iter_child_nodes(child):
            collect(grandchild, in_comprehension or isinstance(child, _COMPREHENSIONS))

    for statement in body:
        collect(statement, False)
    return names


def _dotted(node: ast.expr) -> tuple[list[str], ast.expr]:
    """``a.b.c`` -> (["b", "c"], the Name ``a``); for ``f(x).y``: (["y"], the Call)."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return list(reversed(parts)), node


def _dotted_name(node: ast.expr) -> str | None:
    parts, base = _dotted(node)
    return ".".join([base.id, *parts]) if isinstance(base, ast.Name) else None


def _literal(node: ast.expr) -> bool:
    return all(isinstance(n, (ast.Constant, ast.Tuple, ast.List, ast.Load)) for n in ast.walk(node))


def _describe(node: ast.AST) -> str:
    return {"Set": "a set", "Starred": "a starred value"}.get(type(node).__name__, f"a {type(node).__name__} expression")
