"""Fault injection for the stage-limit tests: a run's child that hangs at a stage.

The stage limits (``config.StageLimits``) are enforced by the parent from
outside the jail, whatever the child is doing (``sandbox.run_in_child``).
Most stages have a real trigger a test can upload (an import that sleeps:
load; a forward that sleeps only while exported: capture; agents that never
answer: search; a forward that sleeps only in float64: verify), but nothing
in an upload runs during ``construct`` and ``compose``, and ``launch``
measures variants only on a GPU.  For those, setting
``LEGO_FAULT_HANG_STAGE=<stage>`` in the environment of the process that
starts the run (a test's, a run worker's) makes the optimizer's child hang
right after it announces that stage, the way a real hang there would look
to the parent.  It acts only inside a sandboxed child (a run in the
caller's own process would hang the caller) and is read nowhere else; an
unset variable (every real deployment) changes nothing.
"""
from __future__ import annotations

import os
import time

HANG_STAGE_ENV = "LEGO_FAULT_HANG_STAGE"


def at_stage(stage: str) -> None:
    """Hang for ever when ``$LEGO_FAULT_HANG_STAGE`` names ``stage`` and this
    process is a sandboxed run child; else return at once.  Raises nothing."""
    if os.environ.get(HANG_STAGE_ENV) != stage:
        return
    from lego_core.runtime import sandbox_child

    if not sandbox_child.in_child():
        return
    while True:
        time.sleep(3600)
