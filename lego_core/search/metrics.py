"""The search's metrics, for the report and the CLI's summary.

Agent calls, tokens (prompt and completion) and cost (USD), times to the
first and the final plan (s), reuse, cache hits, mutation counts, the best
cost over time ([s, ms] pairs), the stop reason and the settings that shaped
the search (strategy, agents, dedupe, mutation, cache, budgets).
"""
from __future__ import annotations


def search_metrics(search) -> dict:
    """The metrics dict of ``search`` (a ``search.engine.Search`` that ran).

    The first plan is the first one built from agent work (the first
    improvement on the library plan); with none, the end of the top-down
    phase.  Times in seconds, rounded to ms."""
    improved = search.cost_over_time[1:]
    first = improved[0][0] if improved else (search.first_plan_s or 0.0)
    final = improved[-1][0] if improved else first
    budget, config = search.budget, search.config
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
        "time_to_final_plan_s": round(final, 3),
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
