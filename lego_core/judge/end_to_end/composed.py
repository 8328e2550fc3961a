"""The optimizer's side of the composed model's process: what it asks there.

``optimized_model.py`` imports every chosen kernel, so the optimizer never
imports it: each function here starts a fresh executor
(``lego_core.judge.process.fresh.run_fresh``, the output folder guarded), whose
main function is ``lego_core.judge.end_to_end.served.serve``, sends the output
folder's path, the original model's weights and the inputs, and gets back:

* :func:`composed_forward`: ``ModelNew``'s outputs, for the end-to-end check
  (``lego_core.judge.end_to_end.e2e.check_end_to_end``, which compares them with
  eager outputs computed in the optimizer);
* :func:`choose_launch`: the launch variants measured
  (``lego_core.judge.end_to_end.launch``), the fastest written into the folder;
* :func:`time_models`: eager, torch.compile and ``ModelNew`` timed side by side.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

from lego_core.compose.folder import DEFAULT_LAUNCH, set_launch
from lego_core.errors import OptimizeError
from lego_core.judge.end_to_end.served import ProblemView, sendable, serve
from lego_core.judge.process import wire
from lego_core.judge.process.fresh import run_fresh


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


def composed_forward(out_dir: Path, problem, inputs: list, meter=None) -> ComposedForward:
    """``ModelNew(*inputs)`` of the output folder, computed in a fresh process
    with the original model's weights, ModelNew imported and built as a user
    does (``shipped.load_composed``); see :class:`ComposedForward`."""
    payload = ProblemView.payload(problem, {})
    payload["forward_inputs"] = [sendable(x) for x in inputs]
    payload["state_targets"] = list(getattr(problem, "state_targets", None) or ())  # judged with the outputs (state.with_state)
    answer = run_fresh(out_dir, "composed", payload, serve, meter)
    try:
        output = wire.decode(answer.get("output"), None)
    except wire.BadReply as exc:
        raise OptimizeError(f"the composed model's process answered outside the protocol: {exc}") from None
    forward = answer.get("forward")
    if not (isinstance(forward, dict) and forward.get("ran") in ("plan", "original")):
        raise OptimizeError("the composed model's process did not say whether the plan ran")
    return ComposedForward(output, answer.get("pid"), {k: forward.get(k) for k in ("requested", "ran", "why")})


def choose_launch(out_dir: Path, problem, config, meter=None) -> dict:
    """Measure every launch variant of the composed model in ``out_dir``,
    write the fastest into its ``optimized_model.py`` and return the
    ``launch`` entry of report.json: ``forward``, ``cuda_graph``,
    ``measured``, ``variants`` (name -> median ms, or the error that ruled it
    out), ``reason``.

    On a CPU device nothing is timed: the plan ships launched directly.  On
    a GPU ``launch.measure_launch`` runs in a fresh process (the composed
    model imports every kernel, and this process imports none; ``meter`` is
    told its peak memory); this
    process writes the choice.  Never raises for a variant that fails (it is
    ruled out); raises OptimizeError when the composed model does not load
    or its process fails.
    """
    if problem.spec.device != "cuda":
        launch = dict(DEFAULT_LAUNCH, measured=False, variants={},
                      reason="no GPU: the plan runs launched directly (launch costs are only measured on a GPU)")
        set_launch(out_dir, launch)
        return launch
    payload = ProblemView.payload(problem, {seed: problem.make_inputs(seed) for seed in config.verify_seeds})
    answer = run_fresh(out_dir, "choose_launch", dict(payload, config=config), serve, meter)
    launch = answer.get("launch")
    if not isinstance(launch, dict) or not {"forward", "cuda_graph", "measured"} <= set(launch):
        raise OptimizeError("measuring the launch variants gave no result")
    set_launch(out_dir, launch)
    return launch


def time_models(out_dir: Path, problem, config) -> dict:
    """``benchmark.time_models_here`` in a fresh process (which loads the
    problem from its spec and takes this process's weights): the composed
    model imports every kernel, and this process imports none.  Returns its
    timing dict (``eager_ms``, ``optimized_ms``, ``compile_ms``,
    ``speedup_vs_eager``...); raises OptimizeError when it gave none."""

    state = {name: value.detach() for name, value in problem.model.state_dict().items()}
    answer = run_fresh(out_dir, "time_models", {"spec": problem.spec, "state_dict": state, "config": config}, serve)
    if not isinstance(answer.get("timing"), dict):
        raise OptimizeError("timing the models in their process gave no result")
    return answer["timing"]
