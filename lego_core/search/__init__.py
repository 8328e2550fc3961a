"""Stage 3, the search over the FusionTree (see ``engine`` for the phases).

Enters: a ``tree.fusion_tree.FusionTree``, agents and the judge.  Leaves: a
``SearchResult`` (the cheapest complete verified plan, its cost in ms, the
search's metrics).  ``engine.Search.run`` is what the pipeline calls;
``plan`` selects the cheapest complete plan; ``mutation`` proposes
speculative fusions; ``tuning`` picks launch configurations per shape;
``cache`` is the persistent kernel cache.
"""
