"""Static check of a kernel file: does it compute its region in Triton, and
nothing a kernel file has no business doing?

A candidate kernel file is Triton device code plus host code that allocates,
reshapes and launches.  :func:`calls_back_into_reference` reads its source
(never runs it) and refuses, with a one-line reason:

* PyTorch's own version of a region op or any heavy op outside ``@triton.jit``
  code (``torch.softmax``, ``F.layer_norm``, ``torch.ops.aten.<op>``, ``@``),
  ``torch.compile`` and friends, an ``nn`` compute module;
* imports beyond an allowlist (:data:`ALLOWED_IMPORTS`: torch, triton and a
  few pure-Python helpers): no ``sys``, ``os``, ``time``, ``threading``,
  ``numpy``, ``inspect``... A kernel that can read the clock, the process's
  modules or its call stack can tell the verifier from the user's program
  and behave only while judged;
* the names and attributes that reach the interpreter's insides whatever was
  imported (:data:`EVASIVE_NAMES`, :data:`EVASIVE_ATTRIBUTES`): ``getattr``,
  ``globals``, ``vars``, ``open``, dunder attributes (``__dict__``,
  ``__globals__``, ``__class__``), frame attributes (``_getframe``,
  ``f_back``), a module's ``sys`` / ``os`` / ``modules`` attribute;
* assignments to PyTorch, Triton or LEGO objects, also through a local alias
  (``cls = torch.nn.Softmax; cls.forward = ...``).

Then, whatever the region, every candidate passes the allow-list of
``lego_core.judge.host_allowlist`` (profile ``"candidate"``): only the node
types, imports, names and attributes a Triton kernel file needs, and nothing
that outlives a call (no class, ``match``, ``global``, decorator but
``@triton.jit``, module-level state written at run time, mutable default,
function used as a value, attribute assignment).  This list of what is
refused names the common roads with a precise reason; the allow-list closes
the ones nobody listed (issue 27).

It is the first of the verifier's defences, cheap and explainable; what a
static reading cannot see (a patch made through a value computed at run
time) is caught by the executor's tamper snapshot (``judge.process.child.Snapshot``)
and the call trace (``verify_trace``).

Op facts (the heavy ops, the host names, each op's public aliases, the name
normaliser) come from the op registry, ``lego_core.ops``.
"""
from __future__ import annotations

import ast
from typing import Sequence

from lego_core import ops
from lego_core.judge import host_allowlist
from lego_core.load.spec import syntax_error_text


# Heavy compute that a candidate must never hand to PyTorch, whatever the
# region holds: every matmul, convolution, attention and normalization of the
# op registry.  Names are compared after stripping leading/trailing "_".
_ALWAYS_FORBIDDEN = ops.public_names(ops.MATMUL, ops.CONVOLUTION, ops.ATTENTION, ops.NORMALIZATION)

# Layout, allocation and bookkeeping names that host code may always call,
# even when the region's graph lists the op (views cost nothing): ``Op.host_call``.
_HOST_ALLOWED = ops.host_names(call=True)

# Method names too common on non-tensors (sets, dicts, lists) to flag.
_AMBIGUOUS_METHODS = frozenset({"add", "copy", "update", "get", "pop", "index", "count"})

# Names that defeat any static check; their presence alone is a failure.
_EVASIVE_CALLS = frozenset({"eval", "exec", "__import__"})
_FORBIDDEN_PREFIXES = ("torch.compile", "torch._inductor", "torch._dynamo", "torch.jit", "torch._C", "torch.export")
# Modules a kernel file has no business importing: each runs work that the
# call trace (lego_core.judge.verify_trace) does not see (other threads, processes,
# NumPy on the host, raw memory) or undoes the trace (garbage-collector walks).
_FORBIDDEN_MODULES = frozenset({
    "threading", "_thread", "concurrent", "multiprocessing", "subprocess", "ctypes", "cffi", "numpy",
    "gc", "socket", "signal", "importlib", "inspect", "pickle", "marshal", "lego_core",
})
# The only modules a kernel file may import (root names): PyTorch and Triton,
# and pure-Python helpers that reach neither the clock, the process nor the
# interpreter's insides.
ALLOWED_IMPORTS = frozenset({
    "torch", "triton", "math", "functools", "itertools", "operator", "typing", "dataclasses",
    "__future__", "collections", "enum", "numbers", "abc",
})
# PyTorch submodules that run work elsewhere (processes, threads, other
# hosts) or change how PyTorch itself works.
_FORBIDDEN_TORCH_MODULES = frozenset({"multiprocessing", "distributed", "utils", "hub", "package", "backends"})
# Builtins that reach the interpreter's insides or the file system, whatever was imported.
EVASIVE_NAMES = frozenset({
    "sys", "os", "builtins", "__builtins__", "globals", "locals", "vars", "getattr", "setattr", "delattr",
    "open", "compile", "breakpoint", "input", "__import__", "eval", "exec", "memoryview", "__loader__", "__spec__",
})
# Attributes that reach another module, the call stack or an object's
# internals, on whatever object: a module's ``sys``/``os``/``modules``
# (``torch.sys.modules``), frames (``sys._getframe().f_back.f_globals``),
# dunders (``F.__dict__``, ``fn.__globals__``, ``cls.__subclasses__()``).
EVASIVE_ATTRIBUTES = frozenset({
    "sys", "os", "modules", "builtins", "environ", "system", "popen", "threading", "_thread", "subprocess",
    "numpy", "ctypes", "gc", "inspect", "importlib", "time", "perf_counter", "monotonic",
    "_getframe", "f_back", "f_globals", "f_locals", "f_code", "f_builtins", "gi_frame", "cr_frame", "ag_frame",
    "tb_frame", "tb_next", "co_code", "attrgetter", "methodcaller",
})
_ALLOWED_DUNDERS = frozenset({"__name__", "__init__"})
# Routes that load or evaluate code the static check never reads: a string
# annotation evaluated by ``typing.get_type_hints`` (or by what calls it, such
# as ``functools.singledispatch``), C++ compiled at run time, a shared library,
# a pickle, a model from the hub.  Refused as a dotted name (after import
# aliases), as an import, and as a bare name imported from its module.
DANGEROUS_ROUTES = (
    "typing.get_type_hints", "typing.ForwardRef", "typing._eval_type", "functools.singledispatch",
    "functools.singledispatchmethod", "torch.hub", "torch.utils", "torch.load", "torch.ops.load_library",
    "torch.classes", "torch.package", "torch.serialization", "torch.multiprocessing", "torch.distributed",
    "torch.library",
    # files written or mapped by PyTorch's C++ code, which Python's audit hook (the call trace) never sees
    "torch.save", "torch.from_file", "torch.UntypedStorage", "torch.TypedStorage", "torch.storage", "torch.profiler",
    "torch.autograd.profiler", "torch.cuda.memory",
)
# Names a @triton.jit body must not reach: under the interpreter the body runs
# as Python, so it could run PyTorch or host code there.
_JIT_FORBIDDEN_ROOTS = frozenset({"torch", "numpy", "os", "sys", "builtins", "open", "exec", "eval", "__import__", "getattr", "globals"})
# torch.nn constructors that are plain containers, not compute.
_NN_CONTAINERS = frozenset({"Module", "Parameter", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict", "Buffer"})


def _private_torch(name: str) -> bool:
    """``torch.utils._python_dispatch.x``, ``torch._refs.softmax``: a dotted
    torch name with a private (``_x``, not ``__x__``) part."""
    parts = name.split(".")
    if parts[:2] == ["torch", "ops"]:
        return False  # ATen op names (torch.ops.aten._softmax) are public; region ops are checked apart
    return parts[0] == "torch" and any(p.startswith("_") and not p.endswith("__") for p in parts[1:])


def op_base_name(op: str) -> str:
    """``"aten.native_layer_norm.default"`` -> ``"native_layer_norm"``
    (``ops.public_name`` of the op's text).

    Accepts ``torch.ops.aten.X.overload``, ``aten.X.overload``, ``aten.X``,
    ``X.overload`` and ``X``; strips leading and trailing underscores
    (``_softmax`` -> ``softmax``, in-place ``add_`` -> ``add``).
    """
    return ops.public_name(str(op))


def forbidden_names(region_ops: Sequence[str]) -> frozenset[str]:
    """Public names a candidate must not call for a region with ``region_ops``:
    the always-forbidden heavy ops plus each region op's name and aliases,
    minus layout/allocation names (:data:`_HOST_ALLOWED`)."""
    names = set(_ALWAYS_FORBIDDEN)
    for op in region_ops:
        base = op_base_name(op)
        names.add(base)
        names.update(ops.aliases(base))
    return frozenset(n for n in names if n not in _HOST_ALLOWED)


def calls_back_into_reference(source: str, region_ops: Sequence[str], library_ops: Sequence[str] = ()) -> str | None:
    """Static check that ``source`` computes the region in Triton.

    Returns a one-line reason when the source does not parse, defines no
    ``@triton.jit`` function, never launches one (``kernel[grid](...)``),
    or, outside its ``@triton.jit`` functions, calls PyTorch's own version of
    a region op (``torch.softmax``, ``F.layer_norm``,
    ``torch.ops.aten.<op>``, ``x.softmax(...)``), any heavy op
    (``torch.matmul``, ``@``, convolutions, attention, norms), an ``nn``
    compute module, ``torch.compile`` and friends, or ``eval``/``exec``;
    then when it is not within the allow-list every kernel file must pass
    (``host_allowlist.refusal(source, profile="candidate")``: node types,
    imports, names, attributes, no state kept between calls).
    Returns None when none of these is found.  ``region_ops``: ATen op names
    such as ``"aten._softmax.default"``.  ``library_ops``: ops the
    sub-problem's form hands to the library on purpose (a ``conv_bn``
    group's convolution, ``FusionGroup.library_ops``); their names may be called.
    """
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        return f"source does not parse: {syntax_error_text(exc)}"
    allowed = {op_base_name(op) for op in library_ops}
    checker = _CallbackChecker(frozenset(n for n in forbidden_names(region_ops) if n not in allowed))
    checker.visit(tree)
    if not checker.jit_functions:
        return "no @triton.jit kernel is defined"
    if checker.problem:
        return checker.problem
    if not checker.launched:
        names = ", ".join(sorted(checker.jit_functions))
        return f"no @triton.jit kernel is launched (expected {names}[grid](...))"
    return host_allowlist.refusal(source, profile="candidate")


def unsafe_host_code(source: str) -> str | None:
    """Why the kernel cache must not store ``source`` (one line), or None.

    The region-independent part of :func:`calls_back_into_reference` (the
    source parses, defines and launches a ``@triton.jit`` kernel, imports
    nothing beyond :data:`ALLOWED_IMPORTS`, reaches no :data:`EVASIVE_NAMES`,
    :data:`EVASIVE_ATTRIBUTES` or :data:`DANGEROUS_ROUTES`, assigns to no
    PyTorch, Triton or LEGO object, passes the candidates' allow-list), then
    the allow-list of ``lego_core.judge.host_allowlist`` with the cache's
    profile: only the imports, names and attributes the template agent's
    kernel files use.  Heavy library calls are not judged
    here (that needs the region's ops).  The kernel cache's writer checks
    forwarded entries with it (``cache.store_forwarded``)."""
    return calls_back_into_reference(source, (), library_ops=tuple(_ALWAYS_FORBIDDEN)) or host_allowlist.refusal(source, profile="cache")


class _CallbackChecker(ast.NodeVisitor):
    """Walks a module: records jit functions, launches and the first
    forbidden call (outside jit bodies) in ``problem``."""

    def __init__(self, forbidden: frozenset[str]):
        self.forbidden = forbidden
        self.aliases: dict[str, str] = {}  # local name -> dotted module path
        self.jit_functions: set[str] = set()
        self.launches: set[str] = set()
        self.problem: str | None = None

    @property
    def launched(self) -> bool:
        return bool(self.launches & self.jit_functions)

    # imports --------------------------------------------------------------
    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            local = alias.asname or alias.name.split(".")[0]
            self.aliases[local] = alias.name if alias.asname else local
            self._check_module(node, alias.name)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        for alias in node.names:
            self.aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}" if node.module else alias.name
            if node.module:
                self._check_module(node, f"{node.module}.{alias.name}")

    def _check_module(self, node: ast.AST, name: str) -> None:
        parts = name.split(".")
        root = parts[0]
        if root in _FORBIDDEN_MODULES:
            self._flag(node, f"imports {root}, which runs work the verifier's call trace does not see")
        elif root not in ALLOWED_IMPORTS:
            self._flag(node, f"imports {root}: a kernel file may import only {', '.join(sorted(ALLOWED_IMPORTS - {'__future__'}))} "
                             "(other modules can read the clock, the process or the call stack, and tell the verifier from a user's program)")
        elif _private_torch(name):
            self._flag(node, f"imports {name}, PyTorch's private API (it can hide what the code runs)")
        elif root == "torch" and len(parts) > 1 and parts[1] in _FORBIDDEN_TORCH_MODULES:
            self._flag(node, f"imports {name}, which runs work elsewhere or changes how PyTorch works")
        else:
            self._check_route(node, name)

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self._check_store(target)
        source = self._qualified(node.value) if isinstance(node.value, (ast.Name, ast.Attribute)) else None
        if source is not None and source.split(".")[0] in ("torch", "triton", "lego_core"):
            for target in node.targets:  # ``cls = torch.nn.Softmax``: ``cls.forward = ...`` then patches torch
                if isinstance(target, ast.Name):
                    self.aliases[target.id] = source
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if node.id in EVASIVE_NAMES and node.id not in self.aliases:
            self._flag(node, f"uses {node.id}, which reaches the interpreter's insides (a kernel file computes, allocates and launches; nothing else)")
        if isinstance(node.ctx, ast.Load) and node.id in self.aliases:
            self._check_route(node, self._qualified(node))

    def _check_route(self, node: ast.AST, name: str | None) -> bool:
        """Flag ``name`` when it is one of :data:`DANGEROUS_ROUTES` or below one; whether it was."""
        route = next((r for r in DANGEROUS_ROUTES if name is not None and (name == r or name.startswith(r + "."))), None)
        if route is not None:
            self._flag(node, f"uses {name}, which loads or evaluates code that no static check reads")
        return route is not None

    def _check_annotations(self, node: ast.AST) -> None:
        """A string annotation (``x: "..."``) is code that ``typing.get_type_hints`` evaluates."""
        args = getattr(node, "args", None)
        annotations = [getattr(node, "returns", None), getattr(node, "annotation", None)]
        if isinstance(args, ast.arguments):
            every = [*args.posonlyargs, *args.args, *args.kwonlyargs, *filter(None, [args.vararg, args.kwarg])]
            annotations += [a.annotation for a in every]
        for annotation in filter(None, annotations):
            if any(isinstance(n, ast.Constant) and isinstance(n.value, str) for n in ast.walk(annotation)):
                self._flag(annotation, "has a string annotation, code that typing.get_type_hints would evaluate unseen by this check")

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._check_annotations(node)
        self._check_store(node.target)
        self.generic_visit(node)

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self.visit_Assign(ast.Assign(targets=[node.target], value=node.value, lineno=node.lineno))

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._check_store(node.target)
        self.generic_visit(node)

    def visit_Delete(self, node: ast.Delete) -> None:
        for target in node.targets:
            self._check_store(target)
        self.generic_visit(node)

    def _check_store(self, target: ast.expr) -> None:
        """``torch.softmax = ...``, ``torch.backends.cuda.matmul.allow_tf32 = True``."""
        if isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self._check_store(element)
        elif isinstance(target, (ast.Attribute, ast.Subscript)):
            name = self._qualified(target.value if isinstance(target, ast.Subscript) else target)
            if name is not None and name.split(".")[0] in ("torch", "triton", "lego_core"):
                self._flag(target, f"assigns to {name}: a kernel file must not change PyTorch, Triton or the verifier")

    def visit_Attribute(self, node: ast.Attribute) -> None:
        attr = node.attr
        if attr in EVASIVE_ATTRIBUTES or (attr.startswith("__") and attr.endswith("__") and attr not in _ALLOWED_DUNDERS):
            self._flag(node, f"uses the attribute .{attr}, which reaches another module, the call stack or an object's internals")
            return
        name = self._qualified(node)
        if name is not None and _private_torch(name):
            self._flag(node, f"uses {name}, PyTorch's private API (it can hide what the code runs)")
            return
        self.generic_visit(node)  # an evasive attribute inside (torch.multiprocessing.reductions.threading) names itself first
        self._check_route(node, name)

    # definitions ------------------------------------------------------------
    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._check_annotations(node)
        if any(self._is_triton_jit(d) for d in node.decorator_list):
            self.jit_functions.add(node.name)
            self._check_jit_body(node)
            return  # device code: tl.* calls, not PyTorch
        self.generic_visit(node)

    def _check_jit_body(self, node: ast.FunctionDef) -> None:
        """Device code may use tl, triton and its own names, not torch or host Python."""
        params = {a.arg for a in node.args.args + node.args.kwonlyargs}
        for inner in ast.walk(node):
            if isinstance(inner, ast.Attribute) and (inner.attr in EVASIVE_ATTRIBUTES or (inner.attr.startswith("__") and inner.attr.endswith("__"))):
                self._flag(inner, f"the @triton.jit function {node.name} uses the attribute .{inner.attr}, which reaches another module, the call stack or an object's internals")
                return
            if isinstance(inner, ast.Name) and inner.id not in params:
                root = self.aliases.get(inner.id, inner.id).split(".")[0]
                if root in _JIT_FORBIDDEN_ROOTS:
                    self._flag(inner, f"the @triton.jit function {node.name} uses {inner.id} (device code cannot run PyTorch or host Python)")
                    return

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def _is_triton_jit(self, decorator: ast.expr) -> bool:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        return self._qualified(target) in ("triton.jit", "triton.runtime.jit.jit", "triton.runtime.jit")

    # calls ------------------------------------------------------------------
    def visit_BinOp(self, node: ast.BinOp) -> None:
        if isinstance(node.op, ast.MatMult):
            self._flag(node, "uses the @ operator (a PyTorch matmul) instead of a Triton kernel")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Subscript):  # kernel[grid](...) or self.kernel[grid](...)
            kernel = func.value
            if isinstance(kernel, ast.Attribute):
                self.launches.add(kernel.attr)
            elif isinstance(kernel, ast.Name):
                self.launches.add(kernel.id)
        elif not self._check_numpy_method(node, func):
            self._check_call(node, func)
        self.generic_visit(node)

    def _check_call(self, node: ast.Call, func: ast.expr) -> None:
        name = self._qualified(func)
        if name is None and isinstance(func, ast.Attribute):  # method on a value: x.softmax(...)
            attr = func.attr.strip("_")
            if attr in self.forbidden and attr not in _AMBIGUOUS_METHODS:
                self._flag(node, f"calls the PyTorch method .{func.attr}() for a region op instead of a Triton kernel")
            return
        if name is None:
            return
        self._check_qualified(node, name)

    def _check_qualified(self, node: ast.Call, name: str) -> None:
        parts = name.split(".")
        if name in _EVASIVE_CALLS or (parts[0] == "builtins" and parts[-1] in _EVASIVE_CALLS):
            self._flag(node, f"calls {parts[-1]}(), which hides what the code runs")
        elif parts[0] in ("setattr", "delattr") and node.args and (self._qualified(node.args[0]) or "").split(".")[0] in ("torch", "triton", "lego_core"):
            self._flag(node, f"calls {parts[0]}() on {self._qualified(node.args[0])}: a kernel file must not change PyTorch, Triton or the verifier")
        elif parts[0] == "getattr" and node.args and self._qualified(node.args[0]) in ("torch", "torch.nn.functional"):
            self._flag(node, "looks up a PyTorch function with getattr()")
        elif parts[0] != "torch":
            return
        elif name.startswith(_FORBIDDEN_PREFIXES):
            self._flag(node, f"calls {name}, which compiles or runs PyTorch's own kernels")
        elif parts[:2] == ["torch", "ops"]:
            op = op_base_name(".".join(parts[3:4]) or name)
            if op in self.forbidden:
                self._flag(node, f"calls {name} (a region op) instead of a Triton kernel")
        elif parts[:2] == ["torch", "nn"] and parts[-1][:1].isupper() and parts[-1] not in _NN_CONTAINERS:
            self._flag(node, f"builds the PyTorch module {name} instead of a Triton kernel")
        elif parts[-1].strip("_") in self.forbidden:
            self._flag(node, f"calls {name} (a region op) instead of a Triton kernel")

    def _qualified(self, node: ast.expr) -> str | None:
        """Dotted name with import aliases resolved (``F.softmax`` ->
        ``torch.nn.functional.softmax``); None if not rooted at a name
        that was imported or is a builtin."""
        parts: list[str] = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return None
        root = self.aliases.get(node.id)
        if root is None:
            if parts:
                return None  # attribute of a local value
            root = node.id
        return ".".join([root, *reversed(parts)])

    def _check_numpy_method(self, node: ast.Call, func: ast.expr) -> bool:
        if isinstance(func, ast.Attribute) and func.attr == "numpy" and self._qualified(func) is None:
            self._flag(node, "calls .numpy(): computing on the host with NumPy instead of a Triton kernel")
            return True
        return False

    def _flag(self, node: ast.AST, message: str) -> None:
        if self.problem is None:
            line = getattr(node, "lineno", None)
            self.problem = f"line {line}: {message}" if line else message
