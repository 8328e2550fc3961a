"""How candidate executors start, without importing torch here.

Executors are forked from multiprocessing's *fork server*: a fresh
interpreter, started once per optimizer process, that imports torch and
triton (``lego_core.judge.process.preload``) and never runs candidate code nor
touches CUDA, so every executor starts clean and in milliseconds, and CUDA
initialises in the executor itself (CUDA cannot be used in a child forked
from a process that initialised it; the fork server never does).  ``spawn``
where there is no fork server.

This module imports no torch, so that the optimizer's process can start the
fork server first thing (``lego_core.pipeline_entry``): its imports then run
beside the optimizer's own (about 3 s of torch, torch._dynamo and triton each).
"""
from __future__ import annotations

import multiprocessing as mp

# imported by the fork server, by name, before it forks: the executors' own
# libraries, then the composed model's process side (its handlers and what they
# import), so neither kind of process imports them at its start
PRELOAD = ["lego_core.judge.process.preload", "lego_core.judge.end_to_end.served"]


def context():
    """The multiprocessing context executors start from (fork server, else spawn)."""
    if "forkserver" not in mp.get_all_start_methods():
        return mp.get_context("spawn")
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD)
    return ctx


def warm_up() -> str:
    """Start the fork server if it is not running (returns at once; it
    imports torch and triton in the background).  Returns the start method
    (``forkserver`` or ``spawn``)."""
    ctx = context()
    method = ctx.get_start_method()
    if method == "forkserver":
        from multiprocessing import forkserver

        forkserver.ensure_running()
    return method
