"""Decomposing a captured program to core ATen, keeping whole the ops whose decomposition fails.

torch.export captures a model at the level the user wrote it
(``aten.scaled_dot_product_attention``, ``aten.layer_norm``, ...);
``ExportedProgram.run_decompositions`` then rewrites those ops into core ATen
by tracing each op's decomposition.  A decomposition can disagree with the op
it replaces in more than values: Hugging Face GPT-2 runs SDPA, then
``transpose(1, 2).contiguous().view(B, T, C)`` and ``.view(-1, C)`` in its
Conv1D; the fused op's meta says the transposed result is contiguous (so
``contiguous()`` is a no-op), the decomposed math gives strides
``(64, 128, 1)``, and the later ``view`` fails ("Cannot view a tensor with
shape [2, 16, 64] and strides (64, 128, 1) as (32, 64)") although the model
exports and runs.

:func:`decompose` retries such a failure with some ops kept whole (removed
from the table, so the graph holds them as one node each, which the plan runs
as one library call, ATen): first the fused-attention family
(``KNOWN_TROUBLESOME``, the attention ops of the op registry ``lego_core.ops``;
LEGO's attention region understands a whole SDPA node, ``fusion/attention.py``), then every decomposable op present in the graph,
and from there re-adds decompositions by halves while the result still
decomposes, so that what stays whole is a small set (at most
``MAX_ATTEMPTS`` decompositions in all).  What it kept and why is returned as
:class:`KeptWhole` records (``capture.Graph.kept_whole``).

Failures whose fix is in the user's code (a mutated constant, a decision on
a tensor's value, dynamic shapes: ``capture_errors.classify``) are not
retried; when no table decomposes the program, the first failure is raised
as a ``ProblemError`` of class ``decomposition`` (``capture_errors.
decomposition_error``: what failed, at which op and line, what was tried).

``python -m lego_core.load.capture MODEL.py`` prints what was kept whole after the graph.
"""
from __future__ import annotations

import dataclasses
from typing import Any

import torch
from torch.export import ExportedProgram

from lego_core import ops
from lego_core.load import capture_errors

# ops whose decomposition is known to change strides that later views rely on (HF GPT-2's SDPA):
# tried first, before the search over the graph's ops.  Every attention op of the registry
# (lego_core.ops), "aten.scaled_dot_product_attention." and kin.
KNOWN_TROUBLESOME = ops.prefixes(ops.ATTENTION)
# run_decompositions calls at most per capture (the first, failing one included): each is a full
# retrace of the program (about a second for a small transformer on a CPU)
MAX_ATTEMPTS = 12
# failure classes whose fix is the user's code: keeping ops whole cannot help
NOT_RETRIED = ("mutated constant", "data-dependent control flow", "dynamic shapes")


@dataclasses.dataclass(frozen=True)
class KeptWhole:
    """An op the captured graph holds un-decomposed, run as one library (ATen) call.

    ``op``: its name (``aten.scaled_dot_product_attention.default``);
    ``nodes``: how many nodes of the graph call it; ``cause``: ``"policy"``
    (LEGO keeps it whole on purpose: ``capture.KEPT_WHOLE``, whole recurrent
    layers) or ``"decomposition failed"`` (its decomposition made the
    program fail to decompose); ``reason``: a sentence saying why, for the
    report."""

    op: str
    nodes: int
    cause: str
    reason: str

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def decompose(ep: ExportedProgram, table: Any, path: str | None) -> tuple[ExportedProgram, list[KeptWhole]]:
    """``ep`` decomposed to core ATen with ``table`` (a decomposition table,
    ``torch.export.default_decompositions()`` minus what LEGO keeps whole),
    and the ops kept whole because their decomposition failed (empty when
    ``table`` works as given).  ``ep`` itself is not changed.

    ``path``: the model file (the error names its line torch's message names).
    Raises torch's own exception, unchanged, for a failure whose fix is the
    user's code (``NOT_RETRIED``; the caller explains it and carries a
    mutated constant as state); ProblemError
    (``capture_errors.decomposition_error``, class ``decomposition``) when no
    table within ``MAX_ATTEMPTS`` decomposes the program.
    """
    try:
        return ep.run_decompositions(table), []
    except Exception as exc:  # noqa: BLE001 - a decomposition may raise anything: retried, then explained
        first = exc
    kind, _groups = capture_errors.classify(first)
    if kind in NOT_RETRIED:  # the caller explains it (and carries a mutated constant as state)
        raise first
    search = _KeepWholeSearch(ep, table)
    found = search.run()
    if found is None:
        raise capture_errors.decomposition_error(first, path, capture_errors.user_line(first, path), tried=search.tried) from None
    decomposed, removed = found
    counts: dict[str, int] = {}
    for node in decomposed.graph.nodes:
        if node.op == "call_function" and node.target in removed:
            counts[str(node.target)] = counts.get(str(node.target), 0) + 1
    failed = capture_errors.failure_summary(first, path)
    kept = [
        KeptWhole(op, n, "decomposition failed",
                  f"with its decomposition, decomposing the graph to core ATen failed ({failed}); kept whole, it runs as "
                  "one library (ATen) call")
        for op, n in sorted(counts.items())
    ]
    return decomposed, kept


class _KeepWholeSearch:
    """Tables to try for a program whose decomposition failed: the ``table``
    minus ``KNOWN_TROUBLESOME``, then minus every op of the graph that has a
    decomposition, shrunk by halves (an op goes back into the table when the
    program still decomposes with it).  ``tried`` lists what was tried, in
    words, for the error when nothing works."""

    def __init__(self, ep: ExportedProgram, table: Any):
        self.ep, self.table = ep, table
        self.attempts = 1  # the failed full table
        self.tried: list[str] = []
        present = {n.target for n in ep.graph.nodes if n.op == "call_function" and isinstance(n.target, torch._ops.OpOverload)}
        self.decomposable = sorted((op for op in present if op in table), key=str)
        self.troublesome = [op for op in table if str(op).startswith(KNOWN_TROUBLESOME)]

    def attempt(self, kept: set, what: str = "") -> ExportedProgram | None:
        """The program decomposed with ``kept`` removed from the table, or None
        when that fails too or the attempts are spent; ``what``: the attempt
        in words, listed in ``tried`` when it runs."""
        if self.attempts >= MAX_ATTEMPTS:
            return None
        self.attempts += 1
        if what:
            self.tried.append(what)
        table = self.table.copy()
        for op in kept:
            if op in table:
                del table[op]
        try:
            return self.ep.run_decompositions(table)
        except Exception:  # noqa: BLE001 - this table fails too: try another
            return None

    def run(self) -> tuple[ExportedProgram, set] | None:
        """(the decomposed program, the ops removed from the table) of the first table that works, or None."""
        if any(str(op).startswith(KNOWN_TROUBLESOME) for op in self.decomposable):
            done = self.attempt(set(self.troublesome), "keeping scaled_dot_product_attention whole")
            if done is not None:
                return done, set(self.troublesome)
        if not self.decomposable:
            return None
        kept = set(self.decomposable)
        best = self.attempt(kept, f"keeping every decomposable op of the graph whole ({', '.join(_short(op) for op in self.decomposable)})")
        if best is None:
            return None
        groups = _halves(self.decomposable)
        while groups and self.attempts < MAX_ATTEMPTS:
            group = groups.pop(0)
            trial = kept - set(group)
            done = self.attempt(trial)
            if done is not None:  # these decompose fine: back into the table
                kept, best = trial, done
            elif len(group) > 1:
                groups += _halves(group)
        return best, kept


def _halves(ops: list) -> list[list]:
    if len(ops) <= 1:
        return [list(ops)] if ops else []
    middle = len(ops) // 2
    return [list(ops[:middle]), list(ops[middle:])]


def _short(op) -> str:
    return str(op).removeprefix("aten.")
