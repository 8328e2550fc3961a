"""Fall back instead of failing: a composed plan that fails the end-to-end
judge is delivered without the kernels at fault.

Every sub-problem of a plan has its library implementation (the captured
ATen ops), so a plan can always give up any of its Triton items.  When the
whole plan fails the end-to-end judge (``lego_core.judge.end_to_end.e2e_judge``), the
offending items are found by bisection over the plan's Triton items, each
step composing and judging the plan with a subset of them kept
(:func:`find_offenders`); the offenders are replaced by the library and the
result is checked again.  If that plan still fails (offenders that only fail
together with others), every Triton item is dropped: the library plan.
Only when the library plan fails too, i.e. the captured graph itself does not
compute what eager does, does the run fail.

Usage is the pipeline's (``pipeline._run``): :func:`deliver` with the plan's
items, a ``compose(items) -> kernel_files`` that writes the output folder and a
``judge() -> check`` that judges what is written.
"""
from __future__ import annotations

import dataclasses
from typing import Callable

from lego_core.errors import OptimizeError
from lego_core.tree.fusion_tree import Candidate, OrNode


@dataclasses.dataclass
class Delivered:
    """The plan that ships: ``items`` (OR nodes with ``chosen``), the
    ``kernel_files`` written, its passing ``check``, the ``dropped`` kernels
    (dicts: ``node_id``, ``label``, ``kernel``, ``reason``) and ``checks``, the
    number of end-to-end checks the fallback ran."""

    items: list
    kernel_files: list
    check: dict
    dropped: list = dataclasses.field(default_factory=list)
    checks: int = 0


def as_library(leaf: OrNode) -> OrNode:
    """A copy of plan item ``leaf`` with its library candidate chosen (the tree is untouched)."""
    library = next((c for c in leaf.candidates if c.implementation == "library"), None)
    if library is None:
        library = Candidate(f"{leaf.id}-library", leaf.id, "library", "library")
    return dataclasses.replace(leaf, chosen=library)


def find_offenders(candidates: list[str], passes: Callable[[frozenset], bool]) -> list[str]:
    """The items of ``candidates`` to drop, by adaptive bisection.

    ``passes(kept)`` says whether the plan passes with the items in ``kept``
    in Triton (the rest in the library); the library plan (``kept`` empty)
    must pass and all of ``candidates`` kept must fail.  Each step splits the
    open items in halves: a half that passes together with the items known
    good joins them; one that fails is searched further.  With k offenders
    among n items that costs about ``2 k log2 n`` checks.  Returns the
    offenders in ``candidates``' order."""
    def search(open_items: list[str], good: frozenset) -> list[str]:
        # invariant: passes(good) and not passes(good | open_items)
        if len(open_items) == 1:
            return list(open_items)
        half = len(open_items) // 2
        first, second = open_items[:half], open_items[half:]
        if passes(good | set(first)):
            return search(second, good | set(first))
        bad = search(first, good)
        good = good | (set(first) - set(bad))
        if passes(good | set(second)):
            return bad
        return bad + search(second, good)

    return search(list(candidates), frozenset())


def deliver(items: list, compose: Callable[[list], list], judge: Callable[[], dict], first: dict, kernel_files: list) -> Delivered:
    """The plan to ship, given ``items`` (the search's plan, composed into the
    output folder as ``kernel_files``) and its first check ``first``.

    A passing ``first`` ships as is.  Otherwise the offending Triton items
    are found (:func:`find_offenders`: ``compose`` writes a plan, ``judge``
    checks what was written) and replaced by the library; the result is
    composed and checked again, and if it fails, the library plan is.
    Raises OptimizeError when the library plan fails too (the captured
    graph does not reproduce eager: not a kernel's fault), and at once when
    ``first`` says ModelNew ran the original forward instead of the plan
    (``fell_back``: no kernel is at fault, and no plan would run)."""
    if first["passed"]:
        return Delivered(items, kernel_files, first)
    if first.get("fell_back"):  # ModelNew does not run its plan at all: dropping kernels changes nothing
        raise OptimizeError(f"nothing delivered: {first['reason']}; no speedup is reported for a plan that does not run "
                            "(please report it with the model file)")
    triton = [leaf.id for leaf in items if leaf.chosen.implementation == "triton"]
    checks: dict[frozenset, dict] = {frozenset(triton): first}

    def check(kept: frozenset) -> dict:
        if kept not in checks:
            compose(_with_kept(items, kept))
            checks[kept] = judge()
        return checks[kept]

    library = check(frozenset())
    if not library["passed"]:
        raise OptimizeError(
            "the composed model does not match eager end to end, not even with every sub-problem in the library "
            f"(the captured graph itself): {library['reason']}; the plan with its kernels: {first['reason']}")
    offenders = find_offenders(triton, lambda kept: check(kept)["passed"]) if triton else []
    kept = frozenset(triton) - set(offenders)
    final = check(kept)
    if final["passed"]:
        why = {leaf: _isolated_reason(leaf, checks, first) for leaf in offenders}
    else:  # offenders that fail only together with others: give up every kernel
        why = {leaf: f"the plan without its bisected offenders still failed: {final['reason']}" for leaf in triton}
        offenders, kept, final = triton, frozenset(), library
    chosen = _with_kept(items, kept)
    files = compose(chosen)
    by_id = {leaf.id: leaf for leaf in items}
    dropped = [
        {"node_id": leaf, "label": by_id[leaf].sub.label, "kernel": f"kernels/{by_id[leaf].chosen.kernel_name}.py",
         "reason": why[leaf]}
        for leaf in offenders
    ]
    return Delivered(chosen, files, dict(final, plan_before_fallback=_brief(first)), dropped, len(checks))


def _with_kept(items: list, kept: frozenset) -> list:
    return [leaf if leaf.chosen.implementation != "triton" or leaf.id in kept else as_library(leaf) for leaf in items]


def _isolated_reason(leaf: str, checks: dict, first: dict) -> str:
    """The failing check that shows ``leaf`` at fault: the smallest failing kept set holding it."""
    failing = sorted((kept for kept, c in checks.items() if leaf in kept and not c["passed"]), key=len)
    reason = checks[failing[0]]["reason"] if failing else first["reason"]
    return f"the end-to-end judge failed with this kernel in the plan: {reason}"


def _brief(check: dict) -> dict:
    keep = ("passed", "reason", "criterion", "errors_vs_fp64", "max_abs_error", "norm_rel_error", "user_check")
    return {k: check[k] for k in keep if k in check}
