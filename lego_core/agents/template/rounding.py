"""fp32 -> bf16 rounding that matches PyTorch under Triton's interpreter.

A compiled Triton kernel converts fp32 to bf16 in ``tl.store`` with
round-to-nearest-even, as PyTorch does.  Triton's CPU interpreter
(``TRITON_INTERPRET=1``, triton 3.6 ``interpreter._convert_float``) truncates
the mantissa instead, so kernels checked on a CPU are biased toward zero and
about twice as far from the exact result as eager bf16.  Generated kernel
files therefore round their bf16 outputs themselves before the store, but
only under the interpreter (a module-level constexpr from
``triton.knobs.runtime.interpret``; compiled kernels skip it and keep the hardware conversion).

The rounding is the usual bit trick (as in PyTorch's ``c10::BFloat16``
``round_to_nearest_even``): add ``0x7FFF + ((bits >> 16) & 1)`` to the fp32
bit pattern and clear the low 16 bits; NaN is kept as it is.  The result is
an fp32 value that bf16 represents exactly, so the interpreter's truncating
store then loses nothing.

Use :func:`round_store` for the value of a ``tl.store`` and
:func:`with_helper` on a finished kernel file's source.
"""
from __future__ import annotations

HELPER = '''

# Triton's interpreter converts fp32 to bf16 by truncation; PyTorch (and a compiled
# kernel's store) rounds to nearest even.  Under the interpreter, round first.
BF16_RNE = tl.constexpr(bool(triton.knobs.runtime.interpret))


@triton.jit
def _round_bf16(x, ptr):
    """``x`` (fp32) rounded to the nearest bf16 value, ties to even, when ``ptr``
    points to bf16 and the interpreter runs; otherwise ``x`` unchanged."""
    if BF16_RNE:
        if ptr.dtype.element_ty == tl.bfloat16:
            bits = x.to(tl.float32).to(tl.int32, bitcast=True)
            bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & -65536
            x = tl.where(x != x, x, bits.to(tl.float32, bitcast=True))
    return x
'''

_ANCHOR = "import triton.language as tl\n"


def round_store(value: str, pointer: str, dtype: object) -> str:
    """The expression to store: ``value`` wrapped in ``_round_bf16`` when the
    output ``dtype`` (a torch dtype) is bf16, else ``value`` itself.
    ``pointer``: any expression of the output's pointer type."""
    if str(dtype) == "torch.bfloat16":
        return f"_round_bf16({value}, {pointer})"
    return value


def complete_file(generate):
    """Decorator for a code generator's ``generate(sp) -> source``: the file
    it returns defines ``_round_bf16`` whenever it calls it, whichever
    generator is called (the dispatcher in ``codegen`` or one directly)."""
    import functools

    @functools.wraps(generate)
    def wrapped(*args, **kwargs):
        return with_helper(generate(*args, **kwargs))

    return wrapped


def with_helper(source: str) -> str:
    """``source`` with :data:`HELPER` after its ``import triton.language as tl``
    line when it calls ``_round_bf16`` and does not define it yet.
    Raises ValueError when the source lacks that import line."""
    if "_round_bf16(" not in source or "def _round_bf16(" in source:
        return source
    if _ANCHOR not in source:
        raise ValueError("kernel source has no 'import triton.language as tl' line")
    return source.replace(_ANCHOR, _ANCHOR + HELPER, 1)
