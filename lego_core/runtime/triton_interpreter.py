"""Device-function calls under Triton's CPU interpreter without re-patching.

Under ``TRITON_INTERPRET=1`` Triton runs a kernel as Python: before each
program grid it swaps every builtin of ``triton.language`` (``tl.load``,
``tl.program_id``, the ``tl.tensor`` operators, ``tl.math``) for a version
bound to its NumPy builder, and puts the originals back after the grid
(triton 3.6, ``runtime/interpreter.py``: ``GridExecutor.__call__`` with
``_patch_lang``).  A *device function* call inside the kernel, any
``@triton.jit`` function it calls (``tl.sum``, ``tl.max``, ``tl.sigmoid``
and ``tl.cdiv`` are such functions in ``triton.language.standard``, and so
are a kernel file's own helpers), goes through
``InterpretedFunction.__call__``, which calls ``_patch_lang`` again: it
walks the language modules with ``inspect.getmembers`` and finds every
builtin already swapped, so it changes nothing, at about a millisecond a
call.  A row-softmax kernel's program makes three such calls; in a CPU
search they were about a quarter of the time spent running candidates.

:func:`skip_nested_repatching` makes that second ``_patch_lang`` return at
once when every language module the function sees is already swapped by
the running grid, and otherwise patch as before, so what a kernel computes
does not change.  It does nothing unless the interpreter is on and
``triton.runtime.interpreter`` has the names it expects (another Triton
version keeps its own behaviour).
"""
from __future__ import annotations

import inspect
import os

_INSTALLED = False


def _interpreting() -> bool:
    """Whether Triton runs kernels in its interpreter: ``triton.knobs`` where
    this Triton has it (it reads ``TRITON_INTERPRET``), else the variable."""
    try:
        import triton

        return bool(triton.knobs.runtime.interpret)
    except Exception:  # noqa: BLE001 - an older triton or none
        return os.environ.get("TRITON_INTERPRET", "0").lower() in ("1", "true", "on", "yes")


def skip_nested_repatching() -> bool:
    """Install the shortcut (see the module docstring) once per process.

    Returns True when it is installed (now or before), False when the
    interpreter is off, Triton is missing or its interpreter module lacks
    ``_patch_lang``, ``_LangPatchScope`` or ``InterpretedFunction``.  Never
    raises."""
    global _INSTALLED
    if _INSTALLED:
        return True
    if not _interpreting():
        return False
    try:
        import triton.language as tl
        from triton.runtime import interpreter
    except Exception:  # noqa: BLE001 - no usable triton: nothing to speed up
        return False
    original = getattr(interpreter, "_patch_lang", None)
    scope_type = getattr(interpreter, "_LangPatchScope", None)
    if original is None or scope_type is None or not hasattr(interpreter, "InterpretedFunction"):
        return False
    is_builtin = tl.core.is_builtin

    def swapped(lang) -> bool:
        # the grid's patch replaced these builtins with bound versions
        if is_builtin(getattr(lang, "program_id", None)) or is_builtin(getattr(lang.tensor, "__add__", None)):
            return False
        return lang is not tl or not is_builtin(getattr(lang.math, "exp", None))

    def patch_lang(fn):
        langs = [v for v in fn.__globals__.values() if inspect.ismodule(v) and v in (tl, tl.core)]
        if langs and all(swapped(lang) for lang in langs):
            return scope_type()  # nothing to swap: an empty scope, as the caller expects one
        return original(fn)

    patch_lang.__wrapped__ = original
    interpreter._patch_lang = patch_lang
    _INSTALLED = True
    return True
