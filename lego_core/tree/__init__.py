"""Stage 2, the FusionTree: a captured graph split top-down into sub-problems.

Enters: a ``load.capture.Graph``.  Leaves: a ``fusion_tree.FusionTree``, an
AND-OR tree whose OR nodes are sub-problems (``subproblem.SubProblem``:
a context-isolated region with its inputs, outputs and reference source)
and whose AND nodes are the ways to split one; ``fusion/`` holds the
fusion groups that decide the regions (pointwise chains, GEMM and
convolution epilogues, attention, recurrent sequences) and what may legally
fuse with what.
"""
