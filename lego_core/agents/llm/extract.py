"""The kernel file out of a model's reply.

Models answer in many shapes: one fenced block, several (the kernel, then
the launcher, then a usage example), a fence without a language, no fence
at all, prose around the code.  ``extract_code(reply)`` returns the Python
source that defines ``launch`` (the entry point the verifier calls), or
None when there is none:

1. fenced blocks (```python, ```py, ``` or ~~~): the last one that parses
   and defines both ``launch`` and a ``@triton.jit`` kernel; else all the
   blocks that parse, joined in order, when together they define them
   (a kernel block and a launcher block); blocks that only use the kernel
   (``if __name__ == ...`` examples, tests) are left out when the rest
   already has everything;
2. no usable fence: the longest run of lines, from the first ``import`` /
   ``from`` / ``@triton.jit`` / ``def`` line, that parses as Python and
   defines ``launch``.
"""
from __future__ import annotations

import ast
import re

FENCE = re.compile(r"^(```|~~~)[ \t]*([\w+-]*)[^\n]*\n(.*?)^\1[ \t]*$", re.S | re.M)
PYTHON_TAGS = ("", "python", "py", "python3")
START = re.compile(r"^(import |from |@triton|def |class )")


def extract_code(reply: str) -> str | None:
    """The kernel file in ``reply`` (see the module docstring), or None."""
    blocks = [m.group(3) for m in FENCE.finditer(reply or "") if m.group(2).lower() in PYTHON_TAGS]
    parsed = [b for b in blocks if _parses(b)]
    for block in reversed(parsed):
        if _complete(block):
            return block.strip() + "\n"
    if parsed:
        useful = [b for b in parsed if _defines(b)]
        joined = "\n\n".join(b.strip() for b in useful)
        if _complete(joined) and _parses(joined):
            return joined + "\n"
    return _unfenced(reply or "")


def _unfenced(reply: str) -> str | None:
    lines = reply.splitlines()
    for start, line in enumerate(lines):
        if not START.match(line):
            continue
        for end in range(len(lines), start, -1):
            text = "\n".join(lines[start:end])
            if _complete(text) and _parses(text):
                return text.strip() + "\n"
        return None  # the code starts here but never parses as a whole
    return None


def _parses(source: str) -> bool:
    try:
        ast.parse(source)
    except SyntaxError:
        return False
    return True


def _names(source: str) -> tuple[set[str], bool]:
    """Top-level function names, and whether a function is decorated ``@triton.jit``/``@jit``."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set(), False
    names = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    jit = any(
        "jit" in ast.unparse(d) or "autotune" in ast.unparse(d)
        for n in tree.body if isinstance(n, ast.FunctionDef) for d in n.decorator_list
    )
    return names, jit


def _defines(source: str) -> bool:
    names, jit = _names(source)
    return bool(names) or jit


def _complete(source: str) -> bool:
    names, jit = _names(source)
    return "launch" in names and jit
