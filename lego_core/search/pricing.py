"""What agent work can win, and which library times decide something.

Two policies of the search (``search.engine``), kept apart from its driver:

- **ranking** (:class:`SignatureCoverage`): the open nodes grouped by
  canonical signature (dedupe solves one node per signature), each
  signature scored by what a kernel for it can win over the whole model:
  ``occurrences x (library estimate - fused estimate)`` in ms, where the
  fused estimate is the roofline time of one kernel that reads its inputs
  and writes its outputs once (``cost.costing``).  That is the signature's
  share of the model's time times its distance to the roofline floor.
  Signatures carrying at least :data:`MUST_ATTEMPT_SHARE` of the model's
  library time come first and must each get one attempt before any retry,
  finer split or smaller signature; the coverage is reported
  (``report.json["metrics"]["signatures"]``).
- **what to measure** (:func:`estimated_library_leaves`): a library time is
  measured on the GPU only where a choice depends on it, that is under a
  node that has a verified, timed agent candidate (the node's library
  leaves are what the candidate competes with) and for the items a mutation
  would replace; everything else keeps the cost model's price.
"""
from __future__ import annotations

import dataclasses
import math

from lego_core.cost import costing
from lego_core.tree.fusion_tree import AndNode, OrNode

MUST_ATTEMPT_SHARE = 0.01  # a signature with this share of the library time is attempted before patience may stop the search


@dataclasses.dataclass
class SignatureRow:
    """One distinct signature of the open nodes: ``label`` (its first node's),
    ``count`` (distinct regions of the graph with it: OR nodes of several
    decompositions that cover the same nodes count once), ``library_ms`` /
    ``fused_ms`` (cost model, one region, ms), ``share`` (``count x
    library_ms`` over the model's library time, 0..1) and ``score``
    (``count x (library_ms - fused_ms)``, ms); ``regions``: each region's
    graph node names."""

    signature: str
    label: str
    count: int
    library_ms: float
    fused_ms: float
    share: float
    score: float
    regions: list[frozenset] = dataclasses.field(default_factory=list)


def region(node: OrNode) -> frozenset:
    """The graph nodes ``node``'s sub-problem computes (its region of the model)."""
    return frozenset(n.name for n in node.sub.nodes)


class SignatureCoverage:
    """The distinct signatures of a search's open nodes, ranked, and which got an attempt.

    ``rank`` builds it from the open nodes; ``attempted(node)`` /
    ``skipped(node, why)`` / ``stopped(nodes, reason)`` record what
    happened; ``as_dict(plan_items)`` is the report's entry."""

    def __init__(self) -> None:
        self.rows: dict[str, SignatureRow] = {}
        self.tried: set[str] = set()
        self.why_not: dict[str, str] = {}

    def rank(self, nodes: list[OrNode], dtype, target_gpu: str, library_total_ms: float) -> list[OrNode]:
        """``nodes`` in the order agents should take them: one node per
        signature, signatures of at least :data:`MUST_ATTEMPT_SHARE` of
        ``library_total_ms`` (the library plan's cost, ms) first, each tier
        by score, most first; then the other nodes of each signature (with
        dedupe they wait for the first and reuse its result).  Ties keep
        the tree's order."""
        groups: dict[str, list[OrNode]] = {}
        for node in nodes:
            groups.setdefault(node.sub.signature, []).append(node)
        total = max(library_total_ms, 1e-12)
        for sig, members in groups.items():
            first = members[0]
            library = costing.library_estimate_ms(first.sub, dtype, target_gpu)
            fused = costing.fused_estimate_ms(first.sub, dtype, target_gpu)
            regions = list(dict.fromkeys(region(n) for n in members))
            count = len(regions)
            self.rows[sig] = SignatureRow(sig, first.sub.label, count, library, fused, count * library / total, count * max(0.0, library - fused), regions)
        order = sorted(groups, key=lambda sig: (self.rows[sig].share < MUST_ATTEMPT_SHARE, -self.rows[sig].score))
        return [groups[sig][0] for sig in order] + [n for sig in order for n in groups[sig][1:]]

    def all_must_tried(self) -> bool:
        """Whether every signature of at least :data:`MUST_ATTEMPT_SHARE` was tried (or given up with a reason)."""
        return all(r.signature in self.tried or r.signature in self.why_not for r in self.rows.values() if r.share >= MUST_ATTEMPT_SHARE)

    def must_attempt(self, node: OrNode, retrying: set[str]) -> bool:
        """Whether ``node`` is a first attempt at a signature of at least
        :data:`MUST_ATTEMPT_SHARE` not tried yet."""
        row = self.rows.get(node.sub.signature)
        return row is not None and row.share >= MUST_ATTEMPT_SHARE and node.id not in retrying and row.signature not in self.tried

    def attempted(self, node: OrNode) -> None:
        """An agent (or the kernel cache) was asked for ``node``."""
        self.tried.add(node.sub.signature)
        self.why_not.pop(node.sub.signature, None)

    def skipped(self, node: OrNode, why: str) -> None:
        """``node`` was not given to an agent, for ``why``."""
        if node.sub.signature not in self.tried:
            self.why_not[node.sub.signature] = why

    def stopped(self, nodes: list[OrNode], reason: str) -> None:
        """The search stopped (``reason``, a budget) with ``nodes`` still queued."""
        for node in nodes:
            if node.sub.signature not in self.tried:
                self.why_not.setdefault(node.sub.signature, f"the search stopped first ({reason})")

    def as_dict(self, plan_items: list[OrNode]) -> dict:
        """``distinct``, ``attempted``, ``won`` (signatures a Triton kernel of
        the final plan covers: its own, or a fusion's that contains one of
        its regions), ``above_1pct`` / ``above_1pct_attempted``,
        ``not_attempted`` (the at-least-1% ones not tried: label, share,
        why) and ``top`` (the 12 largest shares: label, count, share,
        library_ms, fused_ms, attempted, won)."""
        kernels = [region(item) for item in plan_items if item.chosen is not None and item.chosen.implementation == "triton"]
        won = {r.signature for r in self.rows.values() if any(part <= kernel for part in r.regions for kernel in kernels)}
        rows = self.rows.values()
        big = [r for r in rows if r.share >= MUST_ATTEMPT_SHARE]
        missing = sorted((r for r in big if r.signature not in self.tried), key=lambda r: -r.share)
        top = sorted(rows, key=lambda r: -r.share)[:12]
        return {
            "distinct": len(self.rows),
            "attempted": sum(1 for r in rows if r.signature in self.tried),
            "won": sum(1 for r in rows if r.signature in won),
            "above_1pct": len(big),
            "above_1pct_attempted": sum(1 for r in big if r.signature in self.tried),
            "not_attempted": [{"label": r.label, "share": round(r.share, 4), "why": self.why_not.get(r.signature, "not reached")} for r in missing],
            "top": [{"label": r.label, "count": r.count, "share": round(r.share, 4), "library_ms": r.library_ms, "fused_ms": r.fused_ms,
                     "attempted": r.signature in self.tried, "won": r.signature in won} for r in top],
        }


def library_plan_cost(root: OrNode) -> float:
    """The cheapest all-library plan under ``root`` at today's prices (ms):
    ``plan.best_plan``'s dynamic programme over library candidates alone
    (an OR node: its library candidate or its cheapest decomposition; an AND
    node: the sum of its parts).  The baseline agent work is compared with:
    re-pricing a leaf can make another decomposition the cheapest one."""
    memo: dict[str, float] = {}

    def cost(node: OrNode) -> float:
        if node.id in memo:
            return memo[node.id]
        memo[node.id] = math.inf  # a cycle guard
        library = next((c.time_ms for c in node.candidates if c.implementation == "library" and c.time_ms is not None), math.inf)
        best = min([library] + [sum(cost(part) for part in split.parts) for split in node.children])
        memo[node.id] = best
        return best

    return cost(root)


def leaves_under(node: OrNode) -> list[OrNode]:
    """The leaf OR nodes under ``node`` (``node`` itself when a leaf), each once, through every decomposition."""
    seen: dict[str, OrNode] = {}
    stack: list[OrNode | AndNode] = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, AndNode):
            stack.extend(current.parts)
        elif current.is_leaf:
            seen.setdefault(current.id, current)
        else:
            stack.extend(current.children)
    return list(seen.values())


def estimated_library_leaves(nodes: list[OrNode]) -> list[OrNode]:
    """The leaves under ``nodes`` whose library candidate is still priced by
    the cost model (what :meth:`CandidateJudge.library_times` should measure)."""
    out: dict[str, OrNode] = {}
    for node in nodes:
        for leaf in leaves_under(node):
            library = next((c for c in leaf.candidates if c.implementation == "library"), None)
            if library is not None and library.time_kind != "measured":
                out.setdefault(leaf.id, leaf)
    return list(out.values())
