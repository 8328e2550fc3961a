"""Stage 3, the search over the FusionTree (see ``engine`` for the phases).

Enters: a ``tree.fusion_tree.FusionTree``, agents and the judge.  Leaves: a
``SearchResult`` (the cheapest complete verified plan, its cost in ms, the
search's metrics).  ``engine.Search.run`` is what the pipeline calls; the
search is policy only (what to try next, when to stop) and hands every
candidate to the judge (``judge.candidate.CandidateJudge``).  ``plan``
selects the cheapest complete plan; ``agents_at_work`` asks the agents of a
node; ``dedupe`` solves one node per signature; ``budget`` says when to
stop; ``mutation`` proposes speculative fusions and ``mutation_rounds``
tries them; ``cache`` is the persistent kernel cache (``cache.run_key``
its key) and ``cached`` the search's use of it; ``metrics`` the report's
numbers; ``outcome`` what solving one node gave.
"""
