"""Overrides checked against the model file's own constants, by type.

An override must be a value of the kind the file's constant is: an integer
constant takes a whole number, a float one any number, a true/false one
``true`` or ``false``; a list constant takes a list and a tuple constant a
tuple, each element of the kind of the file's elements (``layer_sizes =
[400, 800]`` takes ``[64, 32]``, not ``[64.5]`` nor ``(64, 32)``; an element
of a list of floats may be an integer).  The length may differ from the
file's.  :func:`override_type_error` says what is wrong; ``lego_core.load.problem``
asks it at each assignment while it runs the file, and
:func:`check_overrides_in_source` asks it before anything runs, from the
syntax tree alone (the upload form, the JSON API and the command line), so
that a wrong override is refused at once with the same message.

No torch and no Django: the web process imports it.
"""
from __future__ import annotations

import ast

from lego_core.load.overrides import assigned_names, literal_constants
from lego_core.load.spec import ProblemError, format_override, shorten

# A kind is "int", "float", "bool", "any" (a mix: anything goes), or
# ("list" | "tuple", element kind or None for an empty one).


def _kind(value):
    """The kind of a constant's value (see above)."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if type(value) in (list, tuple):
        element = None
        for item in value:
            element = _join(element, _kind(item))
        return (type(value).__name__, element)
    return "any"


def _join(a, b):
    """The kind that takes what either ``a`` or ``b`` takes (int and float:
    float; containers of one type: their elements joined; else any)."""
    if a is None or a == b:
        return b
    if b is None:
        return a
    if {a, b} == {"int", "float"}:
        return "float"
    if isinstance(a, tuple) and isinstance(b, tuple) and a[0] == b[0]:
        return (a[0], _join(a[1], b[1]))
    return "any"


def _mismatch(kind, value, where: str):
    """``(where, value, expected kind)`` of the first part of ``value`` that
    ``kind`` does not take (``where`` grows to ``sizes[1]``), or None."""
    if kind in (None, "any"):
        return None
    if kind == "bool":
        fits = isinstance(value, bool)
    elif kind == "int":
        fits = isinstance(value, int) and not isinstance(value, bool)
    elif kind == "float":
        fits = isinstance(value, (int, float)) and not isinstance(value, bool)
    else:
        container, element = kind
        if type(value).__name__ != container:
            return where, value, kind
        for k, item in enumerate(value):
            found = _mismatch(element, item, f"{where}[{k}]")
            if found is not None:
                return found
        return None
    return None if fits else (where, value, kind)


_SCALARS = {"int": "whole numbers", "float": "numbers", "bool": "true/false values"}
_ONE = {"int": "a whole number", "float": "a number", "bool": "true or false"}


def _plural(kind) -> str:
    if isinstance(kind, tuple):
        return f"{kind[0]}s" + (f" of {_plural(kind[1])}" if kind[1] not in (None, "any") else "")
    return _SCALARS.get(kind, "values")


def _describe(kind) -> str:
    """``an integer constant``, ``a list of whole numbers``, ``a tuple of lists of numbers``."""
    if isinstance(kind, tuple):
        return f"a {kind[0]}" + (f" of {_plural(kind[1])}" if kind[1] not in (None, "any") else "")
    return {"int": "an integer constant", "float": "a float constant", "bool": "a true/false constant"}.get(kind, "a constant")


def _hint(name: str, kind, file_value, value) -> str:
    original = shorten(format_override(file_value))
    if kind == "int":
        return f"give {name} a whole number."
    if kind == "float":
        return f"give {name} a number (an integer or a float)."
    if kind == "bool":
        return f"give {name} true or false."
    brackets = "square brackets" if kind[0] == "list" else "parentheses"
    hint = f"give {name} {_describe(kind)} in {brackets}, like the file's {name}={original}"
    if kind[0] == "tuple" and type(value) not in (list, tuple):  # (3) is the number 3
        hint += f"; a tuple of one is written with a comma: {name}=(3,)"
    return hint + "."


def override_type_error(name: str, file_value, value, path: str | None = None, line: int | None = None) -> ProblemError | None:
    """None when the override ``value`` fits the file's constant
    ``file_value`` (module docstring); else the ProblemError to raise, which
    names the constant, the file's value, what was given and, inside a
    list or tuple, the element that does not fit (``sizes[1]=32.5 is not a
    whole number``), with ``path`` and ``line`` (the file's assignment)."""
    kind = _kind(file_value)
    found = _mismatch(kind, value, name)
    if found is None:
        return None
    where, wrong, expected = found
    message = (f"override {name}={shorten(format_override(value))}: `{name}` is {_describe(kind)} "
               f"({name} = {shorten(repr(file_value))} in the file)")  # as the file writes it: True, (3, 3)
    if where != name:
        one = _ONE.get(expected) or f"a {expected[0]}"
        message += f"; {where}={shorten(format_override(wrong))} is not {one}"
    return ProblemError(message + ".", path, line, hint=_hint(name, kind, file_value, value))


def unknown_constant_error(name: str, value, known, path: str | None = None) -> ProblemError:
    """The ProblemError for an override naming no module-level constant of
    the file; ``known``: the names it does have, listed in the hint."""
    return ProblemError(
        f"override {name}={shorten(format_override(value))}: the file has no module-level constant `{name}`.",
        path,
        hint=f"override one of: {', '.join(sorted(known)) or 'none'}.",
    )


# a constant passed as one of these keywords is a position or an offset, which may be negative (dim=-1)
INDEX_KEYWORDS = frozenset({"dim", "dims", "axis", "axes", "start_dim", "end_dim", "dim0", "dim1", "shifts", "shift", "offset",
                            "diagonal", "index", "source", "destination", "start", "end", "step", "seed"})
# ... and so is a constant whose name holds one of these words (dim alone: hidden_dim is a size)
INDEX_WORDS = frozenset({"dim", "dims", "axis", "axes", "shift", "shifts", "offset", "offsets", "diagonal", "index", "idx",
                         "pos", "position", "start", "end", "seed", "min", "max", "low", "high", "delta", "bias", "value"})


def index_names(tree: ast.Module) -> set[str]:
    """Names the file passes as a position or offset (``dim=dim``,
    ``torch.roll(x, shifts=shift)``: :data:`INDEX_KEYWORDS`), which may be
    negative although the file's value is positive."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg in INDEX_KEYWORDS:
            names.update(n.id for n in ast.walk(node.value) if isinstance(n, ast.Name))
    return names


def _is_index(name: str, indexes: set[str]) -> bool:
    words = name.lower().split("_")
    return name in indexes or (name.lower() in ("dim", "dims")) or any(w in INDEX_WORDS - {"dim", "dims"} for w in words)


def _negative(file_value, value, where: str):
    """``(where, value)`` of the first number of ``value`` below 0 where the
    file's (every number of it an integer above 0) is positive, or None."""
    if type(value) in (list, tuple) and type(file_value) in (list, tuple) and file_value:
        for k, item in enumerate(value):
            found = _negative(file_value[min(k, len(file_value) - 1)], item, f"{where}[{k}]")
            if found is not None:
                return found
        return None
    if type(file_value) is int and file_value > 0 and type(value) is int and value < 0:
        return where, value
    return None


def _all_positive_ints(value) -> bool:
    if type(value) in (list, tuple):
        return bool(value) and all(_all_positive_ints(item) for item in value)
    return type(value) is int and value > 0


def override_sign_error(name: str, file_value, value, path: str | None = None, line: int | None = None,
                        indexes: set[str] = frozenset()) -> ProblemError | None:
    """None unless the override ``value`` is negative where the file's
    integer constant ``file_value`` is positive (every number of a list or
    tuple constant: sizes), which makes a size or count no model can have
    (``rows=-5`` for ``rows = 4``); a position or offset (``dim``,
    ``shift``, a name the file passes as ``dim=``: :func:`index_names`,
    ``indexes``) may be negative.  Else the ProblemError, at the file's
    assignment."""
    if _is_index(name, indexes) or not _all_positive_ints(file_value):
        return None
    found = _negative(file_value, value, name)
    if found is None:
        return None
    where, wrong = found
    what = ("a positive integer constant, a size or count" if type(file_value) is int
            else "positive whole numbers, sizes or counts")
    message = (f"override {name}={shorten(format_override(value))}: `{name}` {'is' if type(file_value) is int else 'holds'} "
               f"{what} ({name} = {shorten(repr(file_value))} in the file); "
               + (f"{wrong} is negative" if where == name else f"{where}={wrong} is negative"))
    return ProblemError(message + ".", path, line,
                        hint=f"give {where} a whole number of at least 1 (0 only where the model allows it, such as a padding).")


def check_overrides_in_source(overrides: dict, source: str, path: str | None = None, refuse_unknown_names: bool = True) -> None:
    """Refuse, before the file runs, the overrides that its syntax tree
    already shows cannot apply: a name that no module-level assignment binds
    (``overrides.assigned_names``; only with ``refuse_unknown_names``), a
    value of the wrong kind for a constant the file sets to a literal
    (``overrides.literal_constants``), or a negative value for a positive
    integer constant (:func:`override_sign_error`).
    Raises the ProblemError that loading would raise (the sign: what the
    upload form, the JSON API and the command line say); a file that does
    not parse, and overrides of constants the file computes (``hidden = 4 *
    d_model``), are left to the load, which checks them as the file runs."""
    if not overrides:
        return
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return
    bound, literals, indexes = assigned_names(tree), literal_constants(tree), index_names(tree)
    for name, value in overrides.items():
        if refuse_unknown_names and name not in bound:
            raise unknown_constant_error(name, value, literals, path)
        if name in literals:
            file_value, line = literals[name]
            error = (override_type_error(name, file_value, value, path, line)
                     or override_sign_error(name, file_value, value, path, line, indexes))
            if error is not None:
                raise error
