"""``report.json``: what was optimized, how, how well it verified, what it costs.

Per sub-problem (leaf of the FusionTree): the region (module path, ops,
shapes), the implementation chosen (``triton`` or ``library``), the verified
max error, and its time with ``time_kind`` ``measured`` or ``estimated``.
Run level: the plan's cost, the end-to-end check, GPU timings when measured,
and ``metrics`` (agent calls, wall time).
"""
from __future__ import annotations

import time

from lego_core.search import SearchResult
from lego_core.tree import FusionTree


def _leaf_entry(leaf) -> dict:
    chosen, library = leaf.chosen, leaf.candidates[0]
    entry = leaf.sub.summary()
    triton = next((c for c in leaf.candidates if c.implementation == "triton"), None)
    entry.update(
        node_id=leaf.id,
        implementation=chosen.implementation,
        kernel=f"kernels/{chosen.kernel_name}.py" if chosen.implementation == "triton" else None,
        max_abs_error=_error(chosen),
        time_ms=chosen.time_ms,
        time_kind=chosen.time_kind,
        baseline_ms=library.time_ms,
        baseline_kind=library.time_kind,
        reused_from=leaf.reused_from,
    )
    if triton is not None and triton is not chosen:
        entry["triton_candidate"] = {
            "verified": bool(triton.verified and triton.verified.passed),
            "reason": triton.rejected_reason or "slower than the library call",
            "time_ms": triton.time_ms,
        }
    return entry


def _error(candidate) -> float | None:
    """Verified max abs error; None for the library call, which is the reference itself."""
    if candidate.implementation == "library" or candidate.verified is None:
        return None
    return candidate.verified.to_dict()["max_abs_error"]


def build_report(problem, tree: FusionTree, result: SearchResult, check: dict, timing: dict | None, kernel_files: list, started: float, versions: dict) -> dict:
    """The report dict (JSON-ready)."""
    leaves = tree.leaves()
    entries = [_leaf_entry(leaf) for leaf in leaves]
    compute = [e for e in entries if e["kind"] != "layout"]
    n_triton = sum(1 for e in entries if e["implementation"] == "triton")
    plan = {
        "cost_ms": result.plan_cost_ms,
        "cost_kind": result.cost_kind,
        "baseline_ms": result.baseline_ms,
        "speedup": result.baseline_ms / result.plan_cost_ms if result.plan_cost_ms else 1.0,
    }
    if timing:
        plan.update(measured_speedup=timing["speedup_vs_eager"])
    speedup, kind = (timing["speedup_vs_eager"], "measured") if timing else (plan["speedup"], result.cost_kind)
    metrics = dict(result.metrics)
    metrics.update(
        wall_time_s=round(time.time() - started, 3),
        subproblems=len(compute),
        layout_leaves=len(entries) - len(compute),
        triton=n_triton,
        library=len(compute) - n_triton,
        kernels=len(kernel_files),
    )
    spec = problem.spec
    return {
        "model": spec.name,
        "overrides": dict(spec.overrides),
        "dtype": spec.dtype,
        "device": spec.device,
        "versions": versions,
        "subproblems": entries,
        "plan": plan,
        "end_to_end": check,
        "timing": timing,
        "metrics": metrics,
        "summary": {
            "model": spec.name,
            "subproblems": len(compute),
            "triton": n_triton,
            "library": len(compute) - n_triton,
            "e2e_max_abs_error": check["max_abs_error"],
            "e2e_passed": check["passed"],
            "speedup": speedup,
            "speedup_kind": kind,
        },
    }
