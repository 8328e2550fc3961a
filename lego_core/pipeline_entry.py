"""What the optimizer's child process runs (``api._run_isolated``): the fork
server of the candidate executors started first, then the pipeline.

The parent names this light module, not ``lego_core.pipeline``, so that
neither the parent (the command line, a web worker) imports the pipeline
(torch, torch._dynamo, triton: seconds of CPU) just to hand the child a
function, nor the child imports it before the fork server is on its way:
the fork server's imports of torch and triton then run beside the child's.
"""
from __future__ import annotations


def run_pipeline_in_child(*args, **kwargs) -> dict:
    """``lego_core.pipeline.run_pipeline(*args, **kwargs)`` after starting the
    judge's fork server (``lego_core.judge.process.forkserver.warm_up``).  A CPU run
    sets ``TRITON_INTERPRET=1`` first (unless set): the fork server's
    executors inherit its environment when it starts, and Triton without a
    GPU and without its interpreter fails every kernel ("0 active drivers").
    The config's ``import_paths`` (``args[2]``) go on ``sys.path`` if not there
    yet (the jail's ``PYTHONPATH`` holds them already; an unjailed child
    starts with the caller's ``sys.path``)."""
    import os
    import sys
    import time

    entered = time.monotonic()  # the pipeline's clock counts this process's imports as its "startup" phase
    config = args[2] if len(args) > 2 else kwargs.get("config")
    for folder in getattr(config, "import_paths", ()):
        if folder not in sys.path:
            sys.path.append(folder)
    from lego_core.judge.process.forkserver import warm_up

    spec = args[0] if args else kwargs.get("spec")
    if getattr(spec, "device", None) == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")
    warm_up()
    from lego_core.pipeline import run_pipeline

    return run_pipeline(*args, started_at=entered, **kwargs)
