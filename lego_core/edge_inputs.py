"""Edge-case input sets for verification: NaN, +-inf, large magnitudes,
constant rows and zeros (issue 10: every input was ``randn``, so a kernel
that dropped NaN in a row maximum passed).

Each edge set is a small edit of an existing (seeded) input set: the same
tensors with a few elements replaced, so the check costs two more candidate
calls and nothing else.  Only floating inputs are edited; integer, bool and
non-tensor inputs pass unchanged.  Candidates are judged against the
reference on the same edited inputs (``verify.compare`` requires NaN/inf at
exactly the reference's positions), so a region that legitimately turns NaN
into a number (``masked_fill``, ``where`` with a mask input) is judged by
what the reference does there.
"""
from __future__ import annotations

from collections.abc import Sequence

import torch

# magnitude of the "large" elements, per dtype: fp16 overflows at 65504, and an
# eager fp16 chain rounds every intermediate (x * x of 1e3 is inf there) where a
# fused kernel keeps fp32, so 16-bit-range values stay small enough to square
_LARGE = {torch.float16: 64.0}
_LARGE_DEFAULT = 1.0e4


def edge_input_sets(inputs: Sequence[object], editable: Sequence[bool] | None, seed: int) -> list[tuple[str, list]]:
    """Two edge-case sets derived from ``inputs`` (one input set, in order).

    ``editable[j]``: whether input ``j`` may be edited (say False for the
    model's parameters; None: every floating input).  When no editable
    input is floating, every floating input is edited instead.  ``seed``
    picks the edited positions (``torch.Generator``).  Returns
    ``[(label, inputs)]``: "NaN and +-inf" (NaN, +inf and -inf at three
    positions of each edited tensor) and "large, constant and zero rows"
    (a few elements scaled to about 1e4 (64 for fp16), one last-dimension
    row constant, one row of zeros).  Empty when no input is floating.
    """
    floating = [isinstance(x, torch.Tensor) and x.is_floating_point() and x.numel() > 0 for x in inputs]
    chosen = [f and (editable is None or bool(editable[j])) for j, f in enumerate(floating)]
    if not any(chosen):
        chosen = floating
    if not any(chosen):
        return []
    gen = torch.Generator().manual_seed(int(seed))
    specials, extremes = list(inputs), list(inputs)
    for j, x in enumerate(inputs):
        if chosen[j]:
            specials[j] = _with_specials(x, gen)
            extremes[j] = _with_extremes(x, gen)
    return [("NaN and +-inf", specials), ("large, constant and zero rows", extremes)]


def _positions(numel: int, count: int, gen: torch.Generator) -> list[int]:
    return torch.randperm(numel, generator=gen)[: min(count, numel)].tolist()


def _with_specials(x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """A copy of ``x`` (same strides) with NaN, +inf, -inf at random positions."""
    y = x.clone()
    flat = y.view(-1) if y.is_contiguous() else None
    values = (float("nan"), float("inf"), float("-inf"))
    for value, pos in zip(values, _positions(x.numel(), 3, gen)):
        index = torch.unravel_index(torch.tensor(pos), x.shape) if flat is None else None
        if flat is not None:
            flat[pos] = value
        else:
            y[tuple(int(i) for i in index)] = value
    return y


def _with_extremes(x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """A copy of ``x`` with a few large elements, a constant last-dim row and a zero row."""
    y = x.clone()
    large = _LARGE.get(x.dtype, _LARGE_DEFAULT)
    for pos in _positions(x.numel(), 2, gen):
        index = tuple(int(i) for i in torch.unravel_index(torch.tensor(pos), x.shape)) if x.dim() else ()
        sign = 1.0 if float(torch.rand((), generator=gen)) < 0.5 else -1.0
        y[index] = sign * large
    if x.dim() >= 1:
        rows = y.reshape(-1, x.shape[-1]) if y.is_contiguous() else None
        n_rows = x.numel() // max(1, x.shape[-1])
        if rows is not None and n_rows >= 2:
            picks = _positions(n_rows, 2, gen)
            rows[picks[0]] = rows[picks[0], 0].clone()  # constant row: its own first value
            rows[picks[1]] = 0.0
        elif rows is None and x.dim() >= 2:
            y[(0,) * (x.dim() - 1)] = 0.0  # a strided input: one zero row
    return y
