"""Stage 5, compose: the chosen plan becomes an output folder a user imports.

Enters: the plan (an OR node per sub-problem and the candidate chosen for
it), the captured graph and the problem.  Leaves: the files of the output
folder: ``optimized_model.py`` (``ModelNew``), ``kernels/``, each kernel's
own test, ``lego_runtime.py`` (``templates/``), ``reference_model.py`` and
the model file's globals that the plan bakes in (``baked_globals``), guarded
at run time.  ``folder`` writes them.
"""
