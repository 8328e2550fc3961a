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

An edge set can be ill-conditioned where eager happens to be exact (a
LayerNorm's constant row: eager's mean is exact, a kernel's is off by an
ulp, which ``1/sqrt(eps)`` makes 1.5e-4 of the output); the verifier judges
each edge set with a tolerance derived from eager's own error on it
(``verify.edge_tolerances``), never tighter than the normal one.
"""
from __future__ import annotations

from collections.abc import Sequence

import torch

# magnitude of the "large" elements, per dtype: fp16 overflows at 65504, and an
# eager fp16 chain rounds every intermediate (x * x of 1e3 is inf there) where a
# fused kernel keeps fp32, so 16-bit-range values stay small enough to square
_LARGE = {torch.float16: 64.0}
_LARGE_DEFAULT = 1.0e4


EDGE_KINDS = ("NaN and +-inf", "large, constant and zero rows")


class EdgeInputSets(Sequence):
    """The two edge-case sets of :func:`edge_input_sets`, each built when
    indexed (``sets[j] -> (label, inputs)``), so only the one being checked
    is alive: an edited copy of a long sequence's 4.6 GiB score matrix is
    made once per check, not twice up front.  ``base``: the input set, or a
    callable returning it (fetched again at each index, so a boundary store
    may drop it between checks; ``release()``, when given, is called once
    the edited copies are made).  Set ``j``'s positions come from
    ``torch.Generator().manual_seed(seed + j)``."""

    def __init__(self, base, editable: Sequence[bool] | None, seed: int, release=None):
        self._base = base if callable(base) else (lambda: base)
        self._release = release
        self.editable, self.seed = editable, int(seed)
        first = self._base()
        floating = [isinstance(x, torch.Tensor) and x.is_floating_point() and x.numel() > 0 for x in first]
        chosen = [f and (editable is None or bool(editable[j])) for j, f in enumerate(floating)]
        self.chosen = chosen if any(chosen) else floating
        del first

    def __len__(self) -> int:
        return len(EDGE_KINDS) if any(self.chosen) else 0

    def __getitem__(self, j: int) -> tuple[str, list]:
        if not 0 <= j < len(self):
            raise IndexError(j)
        gen = torch.Generator().manual_seed(self.seed + j)
        edit = _with_specials if j == 0 else _with_extremes
        inputs = list(self._base())
        for k, x in enumerate(inputs):
            if self.chosen[k]:
                inputs[k] = edit(x, gen)
        del x
        if self._release is not None:
            self._release()  # the edited copies replace the originals while this set is checked
        return EDGE_KINDS[j], inputs


def edge_input_sets(inputs, editable: Sequence[bool] | None, seed: int, release=None) -> EdgeInputSets:
    """Two edge-case sets derived from ``inputs`` (one input set, in order, or
    a callable returning it), built when indexed (:class:`EdgeInputSets`).

    ``editable[j]``: whether input ``j`` may be edited (say False for the
    model's parameters; None: every floating input).  When no editable
    input is floating, every floating input is edited instead.  ``seed``
    picks the edited positions (``torch.Generator``).  Items are
    ``(label, inputs)``: "NaN and +-inf" (NaN, +inf and -inf in three
    different last-dimension rows of each edited tensor) and "large,
    constant and zero rows" (one element +1e4 and one -1e4 (64 for fp16),
    one last-dimension row constant, one row of zeros, four rows apart).
    Empty when no input is floating.  ``release()``: called once a set is
    built (a store may then drop the originals).
    """
    return EdgeInputSets(inputs, editable, seed, release)


def _rows(x: torch.Tensor, gen: torch.Generator) -> list[int]:
    """The last-dimension rows of ``x`` (logical, row-major) in a random order."""
    n_rows = x.numel() // max(1, x.shape[-1]) if x.dim() else 1
    return torch.randperm(n_rows, generator=gen).tolist()


def _in_row(x: torch.Tensor, row: int, gen: torch.Generator) -> tuple:
    """The index of a random element of last-dimension row ``row`` of ``x``."""
    if x.dim() == 0:
        return ()
    col = int(torch.randint(x.shape[-1], (), generator=gen))
    flat = torch.tensor(row * x.shape[-1] + col)
    return tuple(int(i) for i in torch.unravel_index(flat, x.shape))


def _with_specials(x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """A copy of ``x`` (same strides) with NaN, +inf and -inf, each in a row of
    its own when ``x`` has three rows (a row reduction meets each alone: +inf
    without a NaN beside it)."""
    y = x.clone()
    rows = _rows(x, gen)
    for k, value in enumerate((float("nan"), float("inf"), float("-inf"))):
        y[_in_row(x, rows[k % len(rows)], gen)] = value
    return y


def _with_extremes(x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """A copy of ``x`` with a large positive and a large negative element, a
    constant last-dim row and a zero row, in four different rows when there
    are four (a row that is overwritten loses nothing planted before)."""
    y = x.clone()
    large = _LARGE.get(x.dtype, _LARGE_DEFAULT)
    rows = _rows(x, gen)
    for k, sign in enumerate((1.0, -1.0)):
        y[_in_row(x, rows[k % len(rows)], gen)] = sign * large
    if x.dim() >= 1:
        flat_rows = y.reshape(-1, x.shape[-1]) if y.is_contiguous() else None
        if flat_rows is not None and len(rows) >= 2:
            constant, zero = (rows[2], rows[3]) if len(rows) >= 4 else (rows[0], rows[1])
            flat_rows[constant] = flat_rows[constant, 0].clone()  # constant row: its own first value
            flat_rows[zero] = 0.0
        elif flat_rows is None and x.dim() >= 2:
            y[(0,) * (x.dim() - 1)] = 0.0  # a strided input: one zero row
    return y
