"""The composed model's process side: what a fresh process runs for the end-to-end checks.

The optimizer never imports ``optimized_model.py`` (it imports every chosen
kernel); each use of the composed model starts a fresh executor
(``lego_core.judge.process.fresh.run_fresh``) whose main function is
:func:`serve`: the executor's loop (``lego_core.judge.process.child.serve``) with
the three requests of this module added.  The optimizer's side, which asks
them, is ``lego_core.judge.end_to_end.composed``.

* ``composed``: ``ModelNew`` built as a user builds it
  (``shipped.load_composed``) and its forward run on the inputs sent;
  the output, the state after the call and which forward ran go back.
* ``choose_launch``: ``launch.measure_launch``, the launch variants timed.
* ``time_models``: ``benchmark.time_models_here``, eager, torch.compile and
  ``ModelNew`` side by side, on a problem loaded here from its spec.

:class:`ProblemView` is what the first two read of a ``Problem``, sent as
plain parts (the model's weights, not its modules).
"""
from __future__ import annotations

import os
import types
from pathlib import Path
from typing import Any

import torch

from lego_core.judge.end_to_end.benchmark import time_models_here
from lego_core.judge.end_to_end.launch import measure_launch
from lego_core.judge.end_to_end.shipped import load_composed
from lego_core.judge.process import child, wire
from lego_core.load.capture import has_conv2d
from lego_core.load.problem import load_problem
from lego_core.load.state import with_state


class ProblemView:
    """What ``shipped.load_composed`` and ``launch.measure_launch`` read from a
    ``Problem``, rebuilt in the fresh process from plain parts: ``spec.device``,
    ``spec.torch_dtype``, ``spec.dtype``, ``model.state_dict()`` and
    ``make_inputs(seed)`` for the seeds that were sent, and ``holds_conv2d``
    (whether the original model holds a 2-D convolution: the model's modules
    are not sent, only its weights)."""

    def __init__(self, device: str, dtype: torch.dtype, dtype_name: str, state_dict: dict, inputs: dict, holds_conv2d: bool = False):
        self.spec = types.SimpleNamespace(device=device, torch_dtype=dtype, dtype=dtype_name)
        self.model = types.SimpleNamespace(state_dict=lambda: state_dict)
        self.holds_conv2d = bool(holds_conv2d)
        self._inputs = inputs

    def make_inputs(self, seed: int) -> list:
        return list(self._inputs[seed])

    @staticmethod
    def payload(problem, inputs: dict) -> dict:
        """The parts to send (in the optimizer's process): weights copied on
        the CPU (sharing would move the model's own storages into shared
        memory), shared as they are on a GPU; ``inputs``: ``{seed: [input,
        ...]}``."""
        state = {name: sendable(value) for name, value in problem.model.state_dict().items()}
        return {
            "holds_conv2d": has_conv2d(problem),
            "device": problem.spec.device,
            "dtype": problem.spec.torch_dtype,
            "dtype_name": problem.spec.dtype,
            "state_dict": state,
            "inputs": {seed: [sendable(x) for x in xs] for seed, xs in inputs.items()},
        }

    @classmethod
    def from_payload(cls, payload: dict) -> "ProblemView":
        return cls(payload["device"], payload["dtype"], payload["dtype_name"], payload["state_dict"], payload["inputs"],
                   payload.get("holds_conv2d", False))


def sendable(value: Any) -> Any:
    """``value`` as sent to the fresh process: a tensor detached, and copied
    first when it is a CPU tensor not yet in shared memory (sharing would
    move the caller's own storage); anything else as it is."""
    if isinstance(value, torch.Tensor):
        value = value.detach()
        return value.clone() if value.device.type == "cpu" and not value.is_shared() else value
    return value


def _composed(state: child.State, payload: dict) -> dict:
    """Build the composed ``ModelNew`` from ``payload["out_dir"]`` and run the
    forward on ``payload["forward_inputs"]`` (``composed.composed_forward``)."""
    count = payload.get("memory", False)
    child.memory_start(state, count)
    problem = ProblemView.from_payload(payload)
    with child.counted(state, count):
        new = load_composed(Path(payload["out_dir"]), problem)
        with torch.no_grad():
            actual = new(*payload["forward_inputs"])
            actual = with_state(actual, new, payload.get("state_targets") or [])  # the state after the call, judged too
        child.sync()
    # what the call ran (lego_runtime.note_forward): a plan that fell back to the user's forward is not the plan judged
    # a ModelNew without LEGO's runtime (a hand-written one, in tests) has no other forward to fall back to
    requested = str(getattr(new, "lego_forward", "plan"))
    ran = new.__dict__.get("lego_last_forward", None if hasattr(new, "lego_forward") else "plan")
    forward = {"requested": requested, "ran": ran, "why": new.__dict__.get("lego_fallback")}
    del new
    return {"output": wire.encode(actual, None), "memory": child.memory_peak(state, count), "pid": os.getpid(), "forward": forward}


def _choose_launch(state: child.State, payload: dict) -> dict:
    """``launch.measure_launch`` on the composed model (``composed.choose_launch``)."""
    count = payload.get("memory", False)
    child.memory_start(state, count)
    problem = ProblemView.from_payload(payload)
    with child.counted(state, count):
        launch = measure_launch(Path(payload["out_dir"]), problem, payload["config"])
    return {"launch": launch, "memory": child.memory_peak(state, count), "pid": os.getpid()}


def _time_models(state: child.State, payload: dict) -> dict:
    """``benchmark.time_models_here`` on a problem loaded here from its spec,
    with the judge's weights (``composed.time_models``)."""
    problem = load_problem(payload["spec"])
    problem.model.load_state_dict(payload["state_dict"])
    return {"timing": time_models_here(Path(payload["out_dir"]), problem, payload["config"]), "pid": os.getpid()}


HANDLERS = {"composed": _composed, "choose_launch": _choose_launch, "time_models": _time_models}


def serve(conn, options: dict) -> None:
    """The composed model's process main function: the executor's loop
    (``child.serve``) answering :data:`HANDLERS` too."""
    child.serve(conn, options, HANDLERS)
