"""The whole composed model against eager, in processes of its own.

Enters: an output folder and the problem.  Leaves: the end-to-end verdict
(``e2e``, ``e2e_judge``: outputs against the truth, the plan that actually
ran), the final user check (``user_check``, whose process runs the
standalone ``user_runner.py``: ``ModelNew`` called as a user calls it, many
times, on several input distributions), the launch plan chosen by
measurement (``launch``: CUDA graph, channels-last), the plan with failing
kernels dropped (``fallback``),
``ModelNew`` imported as a user imports it (``shipped``) and the
side-by-side timing of eager, torch.compile and ModelNew (``benchmark``).
"""
