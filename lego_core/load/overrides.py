"""Constant overrides (``--set batch_size=2``) applied where the file sets them.

A KernelBench-style file builds other module-level values from its
constants: ``input_shape = (batch_size, 16)``, ``hidden = 4 * d_model``, a
default argument ``def get_init_inputs(n=dim)``, a class attribute, an
f-string name.  Setting ``module.batch_size = 2`` after the import leaves all
of them at the old value.  So the file is executed with every module-level
statement that binds an overridden name followed by a rebinding to the
override::

    batch_size = 4                                   # the user's line, unchanged
    batch_size = _lego_override("batch_size", batch_size, 3)   # inserted

and everything after it (derived constants, defaults, class bodies) sees the
new value.  Any simple statement that binds the name at module level counts:
``x = ...``, ``x: int = ...``, ``x += ...``, ``a, x = ...``, ``x = y = ...``.
Statements inside functions and classes are not module level and are left
alone.

A constant is a number, ``True``/``False``, or a list or tuple of them
(``layer_sizes = [400, 800]``, ``kernel = (3, 3)``, nested up to
:data:`MAX_DEPTH` levels and :data:`MAX_ITEMS` numbers): :func:`is_constant_value`.

Standard library only, and no ``lego_core`` import: ``lego_core.load.problem``
uses it to load a problem, and the same file is shipped next to
``optimized_model.py`` (as ``lego_overrides.py``), which must stay plain torch.
"""
from __future__ import annotations

import ast
import math
import os
import sys
import types

HOOK = "_lego_override"
MAX_DEPTH = 4  # lists or tuples nested in one another, at most (a list of tuples of sizes is 2)
MAX_ITEMS = 1024  # numbers in one list or tuple constant, nested ones counted, at most


def is_constant_value(value, finite: bool = False) -> bool:
    """Whether ``value`` is a constant that may be overridden: an int, float
    or bool, or a list or tuple (exactly those types, not a namedtuple or
    ``torch.Size``) of such values, nested at most ``MAX_DEPTH`` deep and
    holding at most ``MAX_ITEMS`` numbers.  ``finite``: no nan or infinite
    float either (what an override can be written as)."""
    numbers = 0

    def fits(item, depth: int) -> bool:
        nonlocal numbers
        if type(item) in (list, tuple):
            return depth < MAX_DEPTH and all(fits(element, depth + 1) for element in item)
        if not isinstance(item, (bool, int, float)) or isinstance(item, type):
            return False
        numbers += 1
        return numbers <= MAX_ITEMS and not (finite and isinstance(item, float) and not math.isfinite(item))

    return fits(value, 0)


def _fresh(value):
    """A list or tuple override rebuilt, so that the file's code (``sizes.append(..)``)
    never changes the caller's value; numbers as they are."""
    if type(value) in (list, tuple):
        return type(value)(_fresh(item) for item in value)
    return value


class OverrideError(ValueError):
    """An override cannot be applied: ``name`` is never bound by a module-level
    assignment of the file, or is rebound afterwards by something other than
    such an assignment (so its final value is not the override).  ``line`` is
    the file's line where known, else None."""

    def __init__(self, name: str, message: str, line: int | None = None):
        super().__init__(message)
        self.name, self.message, self.line = name, message, line


class _Rebind(ast.NodeTransformer):
    """Appends ``name = _lego_override("name", name, line)`` after each
    module-level simple statement that binds an overridden ``name``."""

    def __init__(self, names):
        self.names = set(names)

    def _skip(self, node):  # a new scope: not module level
        return node

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = visit_Lambda = _skip

    def _bound(self, targets) -> list[str]:
        found = []
        for target in targets:
            for node in ast.walk(target):
                if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and node.id in self.names:
                    found.append(node.id)
        return list(dict.fromkeys(found))

    def _rebind(self, node, targets):
        names = self._bound(targets)
        if not names:
            return node
        extra = []
        for name in names:
            call = ast.Call(
                func=ast.Name(HOOK, ast.Load()),
                args=[ast.Constant(name), ast.Name(name, ast.Load()), ast.Constant(node.lineno)],
                keywords=[],
            )
            extra.append(ast.copy_location(ast.Assign(targets=[ast.Name(name, ast.Store())], value=call), node))
        return [node, *extra]

    def visit_Assign(self, node):
        return self._rebind(node, node.targets)

    def visit_AnnAssign(self, node):
        return self._rebind(node, [node.target]) if node.value is not None else node

    def visit_AugAssign(self, node):
        return self._rebind(node, [node.target])


def compile_with_overrides(source: str, path: str, names) -> types.CodeType:
    """``source`` compiled (file name ``path``, line numbers kept) with each
    module-level binding of a name in ``names`` followed by a call of the
    ``_lego_override`` hook.  Raises SyntaxError as ``compile`` does."""
    tree = ast.parse(source, path)
    tree = ast.fix_missing_locations(_Rebind(names).visit(tree))
    return compile(tree, path, "exec")


def exec_with_overrides(module: types.ModuleType, source: str, path: str, overrides: dict, check=None) -> dict:
    """Execute ``source`` in ``module``'s namespace with ``overrides`` (name ->
    value) in force from each name's own assignment on; returns
    ``{name: (original value, line)}`` of the last binding of each name.

    ``check(name, original, value, line)``, when given, is called at each
    binding before the override replaces ``original`` (it may raise to refuse
    it).  Raises OverrideError when an override's name is never bound at
    module level, or when its final value is not the override (rebound by a
    loop, an import, ``globals()``...).  Exceptions of the file's own code
    propagate unchanged."""
    seen: dict = {}
    given: dict = {}  # name -> the object last bound: a list override is a fresh copy at each binding

    def hook(name, original, line):
        if check is not None:
            check(name, original, overrides[name], line)
        seen[name] = (original, line)
        given[name] = _fresh(overrides[name])
        return given[name]

    code = compile_with_overrides(source, path, overrides)
    namespace = module.__dict__
    namespace[HOOK] = hook
    try:
        exec(code, namespace)
    finally:
        namespace.pop(HOOK, None)
    for name, value in overrides.items():
        if name not in seen:
            raise OverrideError(name, f"the file has no module-level assignment `{name} = ...`")
        final = namespace.get(name)
        if final is not given[name] and final != value:  # the bound list itself, even if the file appended to it
            raise OverrideError(
                name,
                f"`{name}` is {final!r} after the file ran, not the override {value!r}: something other than an assignment rebinds it",
                seen[name][1],
            )
    return seen


# set on a module :func:`load_reference` imported: (the file's real path, the overrides)
LOADED_FROM = "__lego_loaded_from__"
REFERENCE_FILE = "reference_model.py"
LOCAL_MODULES = "reference_modules"  # copies of the modules the model imported from its own folder (lego_core.load.local_modules)


def load_reference(folder, name: str, overrides: dict) -> types.ModuleType:
    """The model file ``folder/reference_model.py`` as module ``name`` with
    ``overrides`` in force (:func:`load`): how ``optimized_model.py`` imports
    the user's model file.

    When ``sys.modules[name]`` already holds that file imported with the same
    overrides (an earlier import of ``optimized_model.py``, or LEGO's judge,
    which imports the user's file first and then judges only what LEGO
    generated: ``lego_core.judge.end_to_end.shipped``), that module is returned and the file
    is not run again, so one process has one ``Model`` class and the file's
    import-time effects (torch flags, a library's start-up) happen once.
    ``folder/reference_modules`` (the modules the model imported from its
    own folder, when it did) goes first on ``sys.path`` before the file runs.
    Raises OverrideError, or what the file raises."""
    folder = os.path.realpath(os.fspath(folder))
    path = os.path.join(folder, REFERENCE_FILE)
    loaded = sys.modules.get(name)
    if loaded is not None and vars(loaded).get(LOADED_FROM) == (path, dict(overrides)):
        return loaded
    own = os.path.join(folder, LOCAL_MODULES)
    if os.path.isdir(own) and own not in sys.path:  # the model file's own modules, copied from its folder
        sys.path.insert(0, own)
    module = load(name, path, overrides)
    setattr(module, LOADED_FROM, (path, dict(overrides)))
    return module


def load(name: str, path, overrides: dict) -> types.ModuleType:
    """Import the Python file ``path`` as module ``name`` (registered in
    ``sys.modules``) with ``overrides`` applied as described above: what
    ``optimized_model.py`` uses to build the reference model the way it was
    optimized.  Raises OverrideError, or what the file raises."""
    path = str(path)
    with open(path, encoding="utf-8-sig") as handle:  # as lego_core read it (spec.decode_source): a UTF-8 BOM dropped
        source = handle.read()
    module = types.ModuleType(name)
    module.__file__ = path
    sys.modules[name] = module
    exec_with_overrides(module, source, path, overrides)
    return module


def file_constants(source: str) -> dict:
    """The module-level constants a file sets, read from its syntax tree
    (never executed): ``NAME = <literal>`` where the literal is an int,
    float or bool (``-1``, ``1e-5`` and ``x: int = 2`` too) or a non-empty
    list or tuple of them (``[400, 800]``, ``(3, 3)``, nested within
    :func:`is_constant_value`'s bounds), finite; the last such value per
    name, in the order of first appearance; names starting with ``_`` left
    out.  Raises SyntaxError for a file that does not parse."""
    return {name: value for name, (value, _line) in literal_constants(ast.parse(source)).items()}


def literal_constants(tree: ast.Module) -> dict:
    """``{name: (value, line)}``: :func:`file_constants` with the line of
    each value's assignment, from a parsed file."""
    found: dict = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            target, value = stmt.targets[0], stmt.value
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            target, value = stmt.target, stmt.value
        else:
            continue
        if not isinstance(target, ast.Name) or target.id.startswith("_"):
            continue
        try:
            literal = ast.literal_eval(value)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            continue
        empty = type(literal) in (list, tuple) and not literal  # says nothing of what its elements are
        if is_constant_value(literal, finite=True) and not empty:
            found[target.id] = (literal, stmt.lineno)
    return found


def assigned_names(tree: ast.Module) -> set[str]:
    """The names an override can replace: those bound at module level by a
    simple assignment (``x = ...``, ``x: int = ...``, ``x += ...``,
    ``a, x = ...``), inside module-level ``if``/``for``/``try`` blocks too,
    never inside a function or class: what :func:`exec_with_overrides`
    hooks.  A name outside it makes OverrideError "no module-level
    assignment"."""
    names: set[str] = set()

    def bind(targets) -> None:
        for target in targets:
            names.update(node.id for node in ast.walk(target) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store))

    def visit(node) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                continue
            if isinstance(child, ast.Assign):
                bind(child.targets)
            elif isinstance(child, ast.AugAssign) or (isinstance(child, ast.AnnAssign) and child.value is not None):
                bind([child.target])
            elif not isinstance(child, ast.AnnAssign):  # `x: int` alone binds nothing
                visit(child)

    visit(tree)
    return names
