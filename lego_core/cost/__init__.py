"""What things cost: the roofline model, and measured times.

Enters: a sub-problem or a whole graph, a dtype and a target GPU.  Leaves:
times in ms (``costmodel``: an analytic roofline estimate; ``costing``: the
estimate or a GPU measurement of a candidate; ``roofline``: the least time a
whole model's work can take on this machine), with FLOP and byte counts.
"""
