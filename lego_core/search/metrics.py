"""The search's metrics, for the report and the CLI's summary.

Agent calls, tokens (prompt and completion) and cost (USD), times to the
first plan, the first agent call, the first improved and the final plan
(s), the distinct signatures attempted and won, reuse, cache hits, mutation counts, the best
cost over time ([s, ms] pairs), the stop reason and the settings that shaped
the search (strategy, agents, dedupe, mutation, cache, budgets).
"""
from __future__ import annotations


def search_metrics(search, plan) -> dict:
    """The metrics dict of ``search`` (a ``search.engine.Search`` that ran)
    whose final plan is ``plan`` (a ``search.plan.Plan``).

    ``time_to_first_plan_s``: when the first complete plan existed (the
    library plan, priced by the cost model); ``time_to_first_agent_call_s``:
    when the first node went to an agent or the kernel cache (None: none
    did); ``time_to_first_improved_plan_s``: the first plan better than the
    library plan (None: none was); ``signatures``: the distinct signatures
    of the open nodes, attempted and won (``search.pricing``);
    ``library_timing``: how many library signatures were measured and in
    how many GPU-lock holds.  Times in seconds since the search started,
    rounded to ms."""
    improved = search.cost_over_time[1:]
    first = search.first_plan_s or 0.0
    final = improved[-1][0] if improved else first
    budget, config = search.budget, search.config
    rounded = (lambda v: None if v is None else round(v, 3))
    return {
        "agent_calls": budget.agent_calls,
        "tokens": budget.tokens.spent,
        "prompt_tokens": budget.prompt_tokens,
        "completion_tokens": budget.completion_tokens,
        "cost_usd": round(budget.cost_usd, 6),
        "tokens_by_node": dict(budget.node_tokens),
        "agent": search.agent.name,
        "agents_retired": dict(search.agents.retired),
        "time_to_first_plan_s": round(first, 3),
        "time_to_first_agent_call_s": rounded(search.first_agent_call_s),
        "time_to_first_improved_plan_s": rounded(improved[0][0] if improved else None),
        "time_to_final_plan_s": round(final, 3),
        "top_down_s": rounded(search.top_down_s),
        "signatures": search.coverage.as_dict(plan.items),
        "library_timing": {"signatures_measured": search.judge.library_measured, "gpu_lock_holds": search.judge.library_batches},
        "reused_nodes": search.dedupe.reused,
        "cache_hits": search.cached.hits,
        "mutations_tried": len(search.mutations),
        "mutations_accepted": sum(1 for m in search.mutations if m["accepted"]),
        "best_cost_over_time": search.cost_over_time,
        "search_time_s": round(budget.elapsed(), 3),
        "stop_reason": search.stop_reason or "search space exhausted",
        "cache_stale": search.cached.stale,
        "strategy": config.strategy,
        "agents": config.agents,
        "dedupe": config.dedupe,
        "mutation": config.mutation and config.strategy == "lego",
        "cache": search.cached.used,
        "budgets": budget.as_dict(),
    }
