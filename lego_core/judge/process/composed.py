"""The composed model in a fresh process: the end-to-end check's forward,
the launch plan's measurements and the final timings.

``optimized_model.py`` imports every chosen kernel, so the optimizer never
imports it: each use starts a fresh executor (forked from the clean fork
server, no candidate code run in it before, no tamper snapshot: it is used
once and stopped), sends
the output folder's path, the original model's weights and the inputs, and
gets the outputs (or the ``launch`` dict, or the timings) back.  The
comparison with eager is the caller's (``lego_core.judge.end_to_end.e2e``), on eager
outputs computed in the optimizer.

The process could rewrite files of the output folder it imports from; so
:func:`run_fresh` hashes the folder's files before and after and fails when
one changed, and removes any ``__pycache__`` folder that appeared (the
process writes no bytecode; one that did was not written by Python's import).
"""
from __future__ import annotations

import hashlib
import shutil
import types
from pathlib import Path
from typing import Any, NamedTuple

import torch

from lego_core.errors import OptimizeError
from lego_core.judge.process import wire
from lego_core.judge.process.executor import Executor

# seconds the composed model's process may take for one request (a whole
# model through Triton's interpreter on a CPU is slow; the run's own limit still applies)
COMPOSED_TIMEOUT_S = 3600.0


class ProblemView:
    """What ``e2e.load_composed`` and ``launch.measure_launch`` read from a
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
        """The parts to send: weights copied on the CPU (sharing would move the
        model's own storages into shared memory), shared as they are on a GPU."""
        from lego_core.load.capture import has_conv2d

        state = {name: _sendable(value) for name, value in problem.model.state_dict().items()}
        return {
            "holds_conv2d": has_conv2d(problem),
            "device": problem.spec.device,
            "dtype": problem.spec.torch_dtype,
            "dtype_name": problem.spec.dtype,
            "state_dict": state,
            "inputs": {seed: [_sendable(x) for x in xs] for seed, xs in inputs.items()},
        }

    @classmethod
    def from_payload(cls, payload: dict) -> "ProblemView":
        return cls(payload["device"], payload["dtype"], payload["dtype_name"], payload["state_dict"], payload["inputs"],
                   payload.get("holds_conv2d", False))


def _sendable(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        value = value.detach()
        return value.clone() if value.device.type == "cpu" and not value.is_shared() else value
    return value


def folder_digest(folder: Path) -> dict[str, str]:
    """sha256 of every file under ``folder`` outside ``__pycache__``, by relative path."""
    digest = {}
    for path in sorted(Path(folder).rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            digest[str(path.relative_to(folder))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return digest


def run_fresh(out_dir: Path, op: str, payload: dict, meter=None) -> dict:
    """Run ``op`` (``composed``, ``choose_launch``, ``time_models``) in a fresh
    executor and return its answer (a dict); the executor is stopped after.
    Raises OptimizeError when the process fails or changed the output folder."""
    before = folder_digest(out_dir)
    caches = {p for p in Path(out_dir).rglob("__pycache__")}
    fresh = Executor(snapshot=False, call_timeout_s=COMPOSED_TIMEOUT_S)
    try:
        answer = fresh.request(op, dict(payload, out_dir=str(out_dir), memory=meter is not None))
    except wire.CandidateRaised as exc:
        missing = _file_beside_the_model(exc, out_dir)
        if missing:
            raise OptimizeError(
                f"the model file reads {missing} from its own folder (a path built from __file__), and the optimized model "
                "runs a copy of the file from the output folder (reference_model.py), beside which only Python modules are "
                f"copied: read {missing} from an absolute path or the working folder, or build what it holds in the model file") from None
        raise OptimizeError(f"the composed model failed in its process: {type(exc).__name__}: {exc}") from None
    except wire.JudgeError as exc:
        raise OptimizeError(f"the composed model's process gave no result: {exc}") from None
    finally:
        fresh.close()
        for path in Path(out_dir).rglob("__pycache__"):
            if path not in caches:
                shutil.rmtree(path, ignore_errors=True)
    after = folder_digest(out_dir)
    if after != before:
        changed = sorted(set(before) ^ set(after) | {k for k in before.keys() & after.keys() if before[k] != after[k]})
        raise OptimizeError(f"the composed model's process changed files of the output folder: {', '.join(changed[:10])}")
    if not isinstance(answer, dict):
        raise OptimizeError("the composed model's process answered outside the protocol")
    if meter is not None and isinstance(answer.get("memory"), int) and answer["memory"] > 0:
        meter.note_external(answer["memory"])
    return answer


class ComposedForward(NamedTuple):
    """What :func:`composed_forward` got back: ``output`` (the forward's
    output, with the state after the call for a stateful forward), ``pid``
    (the process that computed it) and ``forward``: ``requested`` (the
    ``lego_forward`` ModelNew was built with, ``LAUNCH``'s), ``ran`` (what
    the call ran: ``"plan"`` or ``"original"``) and ``why`` (why the plan did
    not run, when it did not; ``lego_runtime.forward_mode``)."""

    output: Any
    pid: int | None
    forward: dict


def _file_beside_the_model(exc: Exception, out_dir: Path) -> str | None:
    """The name of the file a ``FileNotFoundError`` of the composed model's
    process looked for inside the output folder (the model file opened a
    data file beside itself: ``os.path.dirname(__file__)``), else None."""
    if type(exc).__name__ != "FileNotFoundError":
        return None
    import re

    found = re.search(r"No such file or directory: '(?P<path>[^']+)'", str(exc))
    if not found:
        return None
    path, folder = Path(found["path"]), Path(out_dir).resolve()
    try:
        return str(path.resolve().relative_to(folder))
    except ValueError:
        return None


def composed_forward(out_dir: Path, problem, inputs: list, meter=None) -> ComposedForward:
    """``ModelNew(*inputs)`` of the output folder, computed in a fresh process
    with the original model's weights, ModelNew imported and built as a user
    does (``e2e.load_composed``); see :class:`ComposedForward`."""
    payload = ProblemView.payload(problem, {})
    payload["forward_inputs"] = [_sendable(x) for x in inputs]
    payload["state_targets"] = list(getattr(problem, "state_targets", None) or ())  # judged with the outputs (state.with_state)
    answer = run_fresh(out_dir, "composed", payload, meter)
    try:
        output = wire.decode(answer.get("output"), None)
    except wire.BadReply as exc:
        raise OptimizeError(f"the composed model's process answered outside the protocol: {exc}") from None
    forward = answer.get("forward")
    if not (isinstance(forward, dict) and forward.get("ran") in ("plan", "original")):
        raise OptimizeError("the composed model's process did not say whether the plan ran")
    return ComposedForward(output, answer.get("pid"), {k: forward.get(k) for k in ("requested", "ran", "why")})
