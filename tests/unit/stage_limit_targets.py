"""Module-level targets for ``run_in_child`` in test_stage_limits.py (the
child imports them by reference, as ``sandbox_targets``)."""
from __future__ import annotations

import os
import subprocess
import time

from lego_core.events import Progress, StageStarted


def hang_in_stage(stage, emit):
    """Announces ``stage``, then hangs."""
    emit(StageStarted(stage=stage))
    time.sleep(300)
    return "woke up"


def hang_without_a_word(emit):
    """Hangs before announcing any stage (the first stage counts from the child's start)."""
    time.sleep(300)
    return "woke up"


def hang_with_a_grandchild(emit):
    """Starts a ``sleep`` of its own (in its process group, as a model's
    subprocess would be), says its pid, announces capture and hangs."""
    sleeper = subprocess.Popen(["sleep", "300"])
    emit(Progress(stage="capture", done=0, total=1, message=str(sleeper.pid)))
    emit(StageStarted(stage="capture"))
    time.sleep(300)
    return "woke up"


def claim_earlier_stages_forever(emit):
    """Enters capture, then keeps announcing load, capture again and a
    made-up stage, as a hostile child would to restart the parent's clock."""
    emit(StageStarted(stage="capture"))
    end = time.monotonic() + 300
    while time.monotonic() < end:
        for stage in ("load", "capture", "nap"):
            emit(StageStarted(stage=stage))
        time.sleep(0.05)
    return "woke up"


def send_half_a_message(emit):
    """Writes a frame header that promises 1000 bytes, then 10 of them, and hangs:
    a parent that waits for the whole message waits for ever."""
    from lego_core.runtime import sandbox_child

    os.write(sandbox_child._out.fileno(), (1000).to_bytes(4, "big") + b'{"kind": "')
    time.sleep(300)
    return "woke up"


def flood_events(size, emit):
    """Emits events carrying ``size`` characters each, as fast as it can, for ever."""
    text = "x" * size
    i = 0
    while True:
        i += 1
        emit(Progress(stage="search", done=i, total=0, message=text))


def one_big_event(size, emit):
    """Emits one event of ``size`` characters, then returns."""
    emit(Progress(stage="search", done=1, total=1, message="x" * size))
    return "sent"
