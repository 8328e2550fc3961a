"""Stage 1, load: the user's model file becomes a captured graph.

Enters: what the user asked for (``spec.ProblemSpec``: a model file, its
constant overrides, dtype, device).  Leaves: a ``problem.Problem`` (the
model, its inputs, the torch flags its file set, the sibling modules it
imported) and a ``capture.Graph`` (core ATen, with shapes, strides and
module paths), or a ``spec.ProblemError`` that says what is wrong with the
file and how to fix it.

Files: ``spec`` (the request, parsed without torch), ``overrides`` /
``override_checks`` (``--set name=value``), ``local_modules`` (a model split
over several files), ``torch_settings``, ``problem`` (importing the file),
``capture`` / ``decompose`` / ``faithful_capture`` / ``capture_errors``
(torch.export and what its failures mean), ``state`` / ``state_checks``
(module state a forward writes).  Nothing here imports a later stage.
"""
