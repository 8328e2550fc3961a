"""``report.json``: what was optimized, how, how well it verified, what it costs.

Per sub-problem of the chosen plan (its *items*: leaves of the FusionTree,
or fused sub-problems that mutation made): the region (module path, ops,
shapes), the implementation chosen (``triton`` or ``library``), the verified
max error, its time with ``time_kind`` ``measured`` or ``estimated``, and
``reused_from`` (an equal-signature node's id, or ``cache``).  Run level: the
plan's cost, the end-to-end check, GPU timings when measured, the FusionTree's
size, every mutation tried, and ``metrics`` (agent calls, tokens, times to
first and final plan, reuse, mutations, best cost over time).
"""
from __future__ import annotations

import time

from lego_core.search.engine import SearchResult
from lego_core.load.spec import overrides_to_json
from lego_core.tree.fusion_tree import AndNode, FusionTree, OrNode


def _leaf_entry(leaf) -> dict:
    chosen = leaf.chosen
    library = next((c for c in leaf.candidates if c.implementation == "library"), None)
    entry = leaf.sub.summary()
    triton = next((c for c in leaf.candidates if c.implementation == "triton"), None)
    entry.update(
        node_id=leaf.id,
        implementation=chosen.implementation,
        kernel=f"kernels/{chosen.kernel_name}.py" if chosen.implementation == "triton" else None,
        max_abs_error=_error(chosen),
        time_ms=chosen.time_ms,
        time_kind=chosen.time_kind,
        baseline_ms=library.time_ms if library else None,
        baseline_kind=library.time_kind if library else None,
        fused_from=_fused_from(leaf),
        reused_from=leaf.reused_from,
    )
    if triton is not None and triton is not chosen:
        entry["triton_candidate"] = {
            "verified": bool(triton.verified and triton.verified.passed),
            "reason": triton.rejected_reason or "slower than the library call",
            "time_ms": triton.time_ms,
        }
    return entry


def _fused_from(node) -> list[str] | None:
    """For a fused sub-problem (made by mutation): the ids of the items it replaced."""
    return node.fused_from


def _error(candidate) -> float | None:
    """Verified max abs error; None for the library call, which is the reference itself."""
    if candidate.implementation == "library" or candidate.verified is None:
        return None
    return candidate.verified.to_dict()["max_abs_error"]


def _tree_summary(tree: FusionTree) -> dict:
    nodes = list(tree.walk())
    ors = [n for n in nodes if isinstance(n, OrNode)]
    ands = [n for n in nodes if isinstance(n, AndNode)]
    labels: dict[str, int] = {}
    for node in ands:
        kind = node.label.split(":")[0]
        labels[kind] = labels.get(kind, 0) + 1
    return {
        "or_nodes": len(ors),
        "and_nodes": len(ands),
        "decompositions": labels,
        "or_nodes_with_alternatives": sum(1 for n in ors if len(n.children) + bool([c for c in n.candidates if c.implementation == "triton"]) > 1),
    }


def build_report(problem, tree: FusionTree, result: SearchResult, check: dict, timing: dict | None, kernel_files: list, started: float, versions: dict, launch: dict | None = None, dropped: list | None = None) -> dict:
    """The report dict (JSON-ready).  ``dropped``: the kernels the end-to-end
    judge took out of the plan (``fallback.Delivered.dropped``); listed in
    ``end_to_end.dropped`` and on their sub-problem's entry (``dropped_by_judge``)."""
    leaves = result.plan.items
    entries = [_leaf_entry(leaf) for leaf in leaves]
    dropped = list(dropped or [])
    by_node = {item["node_id"]: item for item in dropped}
    for entry in entries:
        if entry["node_id"] in by_node:
            entry["dropped_by_judge"] = {"kernel": by_node[entry["node_id"]]["kernel"], "reason": by_node[entry["node_id"]]["reason"]}
            if "triton_candidate" in entry:
                entry["triton_candidate"]["reason"] = "dropped by the end-to-end judge"
    check = dict(check, dropped=dropped)
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
    plan["items"] = [leaf.id for leaf in leaves]
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
        "overrides": overrides_to_json(spec.overrides),  # a tuple as its text: JSON would make it a list
        "dtype": spec.dtype,
        "device": spec.device,
        "versions": versions,
        "subproblems": entries,
        "plan": plan,
        "end_to_end": check,
        "timing": timing,
        "launch": launch,
        "metrics": metrics,
        "tree": _tree_summary(tree),
        "mutations": result.mutations,
        "summary": {
            "model": spec.name,
            "subproblems": len(compute),
            "triton": n_triton,
            "library": len(compute) - n_triton,
            "e2e_max_abs_error": check["max_abs_error"],
            "e2e_passed": check["passed"],
            "dropped_by_judge": len(dropped),
            "speedup": speedup,
            "speedup_kind": kind,
            "launch": launch.get("chosen", launch["forward"]) if launch else None,
        },
    }

