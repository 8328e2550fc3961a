"""Bottom-up mutation: rounds of speculative fusion of the best plan's neighbours.

Each round takes the current best plan, asks ``mutation.propose_fusions``
for fusions of neighbouring items (rules in ``tree.fusion.legality``,
ranked by bytes saved), keeps the non-overlapping ones, attaches each as a
new decomposition of the nearest ancestor whose best plan holds all its
items, and has the agents solve the fused nodes like any others.  A fusion
is accepted only when it verifies and is cheaper than the items it
replaces (``record``), both measured on a GPU (the replaced library items
are measured in one batch per round, ``Search.measure_library``), so the
whole plan's measured time goes down; plan selection then takes it by
itself.

``search`` is the running ``search.engine.Search`` (its tree, config,
budgets, and its ``solve_all`` / ``add_library`` / ``announce`` /
``plan_changed`` / ``measure_library`` / ``reprice``).
"""
from __future__ import annotations

from lego_core.events import TranscriptMessage
from lego_core.search.mutation import FusionProposal, propose_fusions
from lego_core.search.plan import Plan, best_plan, cheaper, direct_options
from lego_core.tree.fusion_tree import OrNode


def mutate(search) -> None:
    """Rounds of speculative fusion until no proposal is left or a budget is spent (``search.stop_reason``)."""
    tried: set[frozenset] = set()
    while True:
        reason = search.out_of_budget()
        if reason:
            search.stop_reason = reason
            return
        plan = best_plan(search.tree, search.config.force_triton)
        proposals, _rejected = propose_fusions(plan.items, search.tree.graph_outputs, tried)
        proposals = [p for p in proposals if not unpromising(search.mutations, p.kind)]
        if not proposals:
            return
        batch: list[FusionProposal] = []
        taken: set[str] = set()
        proven = {m["kind"] for m in search.mutations if m["accepted"]}
        for proposal in proposals:
            ids = {item.id for item in proposal.items}
            if ids & taken:
                continue  # overlaps a better proposal of this round; proposed again next round
            if proposal.kind not in proven and sum(1 for p in batch if p.kind == proposal.kind) >= GIVE_UP_AFTER:
                continue  # a kind not yet accepted here is tried a few at a time; the rest wait for its verdict
            tried.add(proposal.key)
            taken |= ids
            batch.append(proposal)
        # a fusion is judged against what it replaces as measured, not as estimated: one batch, before the fused kernels
        search.measure_library([item for proposal in batch for item in proposal.items if item.chosen.implementation == "library"])
        search.reprice()
        fused = [attach(search, proposal, plan) for proposal in batch]
        search.solve_all([node for node in fused if search.agent.can_attempt(node.sub)])  # each finished node re-prices
        for proposal, node in zip(batch, fused):
            if record(search.mutations, proposal, node):
                combine(search, proposal, node)
        search.plan_changed(best_plan(search.tree, search.config.force_triton))  # what re-pricing found counts too


GIVE_UP_AFTER = 4  # tries of one fusion kind, none accepted: that kind is not proposed again in this run


def unpromising(mutations: list[dict], kind: str) -> bool:
    """Whether fusions of ``kind`` (a ``FusionProposal.kind``) had a kernel
    judged :data:`GIVE_UP_AFTER` times in this run (a fusion no agent wrote a
    kernel for, or a budget cut off, does not count) and none was accepted: the
    kernels for it lose to the library here (a ResNet-101 on an H200 tried
    104 conv + BatchNorm folds, none cheaper, for 38 s of its search), so the
    budget goes to other kinds."""
    tried = [m for m in mutations if m["kind"] == kind and m.get("judged", True)]
    return len(tried) >= GIVE_UP_AFTER and not any(m["accepted"] for m in tried)


def attach(search, proposal: FusionProposal, plan: Plan) -> OrNode:
    """Add the fusion as a new decomposition of the nearest ancestor whose best plan holds every fused item."""
    host, kept = _host(search, {item.id for item in proposal.items}, plan)
    split, node = search.tree.add_mutation(host, proposal.sub, proposal.items, kept, proposal.label())
    parts = " + ".join(item.sub.label.removeprefix("fused ") for item in proposal.items)
    node.sub.label = f"fused {parts}"[:200]  # a fusion of fusions is not "fused fused ..."
    search.announce(split)
    search.announce(node)
    search.add_library(node)  # the fused region op by op: its baseline
    search.emit(TranscriptMessage(node_id=node.id, agent="mutation", role="system", content=f"{proposal.kind}: fusing {', '.join(i.id for i in proposal.items)} saves {proposal.bytes_saved} bytes of traffic; decomposition {split.id} of {host.id}"))
    return node


def combine(search, proposal: FusionProposal, node: OrNode) -> None:
    """Make an accepted fusion usable together with the others of its round.

    Every fusion of a round was attached against the plan of the round's
    start, so two accepted ones are sibling alternatives that exclude each
    other.  When the current best plan still holds this fusion's items
    unfused, add one more decomposition that shares the fused node with the
    current plan's other items (both fusions then count)."""
    plan = best_plan(search.tree, search.config.force_triton)
    ids = {item.id for item in proposal.items}
    if node.id in plan.item_ids or not ids <= set(plan.item_ids):
        return
    host, kept = _host(search, ids, plan)
    split = search.tree.new_and(host, f"combined: {proposal.label()} with the current plan")
    split.shared = kept + [node]
    search.announce(split)
    search.plan_changed(best_plan(search.tree, search.config.force_triton))


def _host(search, ids: set[str], plan: Plan) -> tuple[OrNode, list[OrNode]]:
    """The nearest OR ancestor whose best plan holds every item in ``ids``, and that plan's other items."""
    tree = search.tree
    first = next(item for item in plan.items if item.id in ids)
    for ancestor in tree.ancestors(first)[1:]:
        sub_plan = plan if ancestor is tree.root else best_plan(tree, search.config.force_triton, root=ancestor)
        if ids <= set(sub_plan.item_ids):
            return ancestor, [item for item in sub_plan.items if item.id not in ids]
    return tree.root, [item for item in plan.items if item.id not in ids]


def record(mutations: list[dict], proposal: FusionProposal, node: OrNode) -> bool:
    """Append one dict for the tried fusion to ``mutations`` (the report's);
    whether it was accepted (verified and cheaper than what it replaces)."""
    options = [c for c in direct_options(node) if c.implementation != "library"]
    replaced_ms = sum(item.chosen.time_ms for item in proposal.items)
    fused_ms = options[0].time_ms if options else None
    accepted = fused_ms is not None and cheaper(fused_ms, replaced_ms)
    if options and not accepted:
        reason = f"verified but not cheaper ({fused_ms:.4g} ms vs {replaced_ms:.4g} ms)"
    elif not options:
        failed = [c.rejected_reason for c in node.candidates if c.rejected_reason]
        reason = failed[-1] if failed else "no kernel was written for it"
    else:
        reason = ""
    mutations.append(
        {
            "node_id": node.id,
            "kind": proposal.kind,
            "fused": [item.id for item in proposal.items],
            "ops": node.sub.ops,
            "bytes_saved": proposal.bytes_saved,
            "replaced_ms": replaced_ms,
            "fused_ms": fused_ms,
            "accepted": accepted,
            "judged": any(c.implementation != "library" and c.verified is not None for c in node.candidates),
            "reused_from": node.reused_from,
            "reason": reason,
        }
    )
    return accepted
