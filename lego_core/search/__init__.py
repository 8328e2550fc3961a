"""The search over the FusionTree (see ``engine`` for the phases).

``run_search`` is the entry point the pipeline calls; ``plan`` selects the
cheapest complete plan; ``mutation`` proposes speculative fusions;
``inputs`` builds verification inputs.
"""
from lego_core.search.engine import Search, SearchResult
from lego_core.search.inputs import leaf_input_sets, load_module, perturbed
from lego_core.search.plan import Plan, best_plan

__all__ = ["Plan", "Search", "SearchResult", "best_plan", "leaf_input_sets", "load_module", "perturbed", "run_search"]


def run_search(search: Search) -> SearchResult:
    """Run one search to the end (done or out of budget)."""
    return search.run()
