"""Uploads that take their run down, through a real run worker (issue 11):
one whose forward hangs past the load limit, one that segfaults while it
loads.  Each run ends failed with a message a person can act on, within the
limits, and the same worker then finishes a good run.  (The candidate
kernels that hang or crash are tests/unit/test_judge_boundary.py's; an
upload killed by SIGKILL while it loads is test_web_worker.py's.)"""
import time

import pytest

from webapp.runs.models import Run

pytestmark = [pytest.mark.slow, pytest.mark.faults, pytest.mark.django_db(transaction=True)]

# LEGO_LOAD_TIMEOUT_S of the worker (default 300). It also covers the child's
# start and its torch import beside the judge's fork server: on a loaded 2-core
# machine the segfaulting upload had not reached its crash within 8 s.
LOAD_LIMIT_S = 20

# imports and builds fine; forward never returns
HANGING_FORWARD = b"""import time

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        time.sleep(3600)
        return x


def get_inputs():
    return [torch.randn(2, 2)]


def get_init_inputs():
    return []
"""

# reads address 0 when imported: SIGSEGV in the optimizer's child
SEGFAULTING_MODEL = b"""import ctypes

ctypes.string_at(0)
"""


def run_state(run: Run) -> str:
    run.refresh_from_db()
    return run.state


def test_a_hanging_and_a_segfaulting_upload_fail_readably_and_the_worker_goes_on(
    client, user, start_worker, agents_worker, wait_for, upload_model, good_model, media_root
):
    proc, log = start_worker("worker", LEGO_LOAD_TIMEOUT_S=str(LOAD_LIMIT_S))
    client.force_login(user)

    hanging = upload_model(client, "hangs.py", HANGING_FORWARD)
    wait_for(lambda: run_state(hanging) != "queued", 60, "the hanging run to start", log, every_s=0.2)
    started = time.monotonic()
    wait_for(lambda: run_state(hanging) != "running", LOAD_LIMIT_S + 60, "the hanging run to end", log, every_s=0.2)
    took = time.monotonic() - started
    assert hanging.state == "failed", (hanging.state, hanging.error_message)
    assert f"loading the file did not finish within {LOAD_LIMIT_S} s" in hanging.error_message, hanging.error_message
    assert str(media_root) not in hanging.error_message  # no server paths
    assert LOAD_LIMIT_S - 1 < took < LOAD_LIMIT_S + 30, took
    assert hanging.events.last().data["error_type"] == "ProblemError"

    segfault = upload_model(client, "segfault.py", SEGFAULTING_MODEL)
    wait_for(lambda: run_state(segfault) not in ("queued", "running"), 120, "the segfaulting run to end", log)
    assert segfault.state == "failed", (segfault.state, segfault.error_message)
    message = segfault.error_message
    assert "killed by SIGSEGV" in message and "crash in native code" in message, message
    assert proc.poll() is None  # the worker survived both
    print(f"\nhanging forward failed {took:.1f} s after it started: {hanging.error_message}\n"
          f"segfault: {segfault.error_message}")

    good = upload_model(client, "good.py", good_model)
    wait_for(lambda: run_state(good) not in ("queued", "running"), 300, "the good run", log)
    assert good.state == "finished", (good.error_message, log.read_text()[-4000:])
    assert proc.poll() is None
    assert {good.worker} == {hanging.worker} == {segfault.worker}
