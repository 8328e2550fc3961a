"""The GPU half of the corpus: verification and guarded timing on CUDA.

Used by the ``gpu``-marked tests in ``test_hacks.py`` and by
``bench/gpu_checks/check_hacks.py`` (which prints a table).
"""
from __future__ import annotations

import itertools
from pathlib import Path

import torch

from hacks_support import build_case, judge_candidate

_unique = itertools.count()


def verify_on_gpu(hack, folder: Path, inputs: str | None = None) -> str:
    """The rejection reason of ``hack`` judged by a CUDA search ("" if accepted)."""
    case = build_case(hack.case, folder / f"{hack.case}_{next(_unique)}", device="cuda", inputs=inputs)
    cand = judge_candidate(hack.source, case)
    return "" if cand.usable else cand.rejected_reason


def load_candidate(source: str, folder: Path):
    from lego_core.judge.inputs import load_module

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"gpu_candidate_{next(_unique)}.py"
    path.write_text(source)
    return load_module(path, f"lego_gpu_candidate_{path.stem}")


def input_sets(case, seeds=(11, 12, 13)) -> list[list]:
    """The case node's boundary inputs for ``seeds`` (on the case's device)."""
    envs = [case.graph.run(case.problem.model, case.problem.make_inputs(s)) for s in seeds]
    return [[env[n.name] for n in case.node.sub.inputs] for env in envs]


def time_guarded(source: str, case, folder: Path, clock: str = "gpu"):
    """What the search does with a verified candidate: ``timing_guard.guarded_remote_time``,
    the kernel imported, timed and called in a candidate executor, the
    reference and the judgement here (``clock="cpu"``: timed with the CPU clock)."""
    from lego_core.judge.process import Executor
    from lego_core.judge.timing_guard import guarded_remote_time

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"guarded_candidate_{next(_unique)}.py"
    path.write_text(source)
    executor = Executor(call_timeout_s=300)
    try:
        module = executor.load(path, f"lego_candidate_{path.stem}")
        return guarded_remote_time(module, input_sets(case), case.node.sub.run_reference, clock=clock)
    finally:
        executor.close()


def time_on_gpu(source: str, case_name: str, folder: Path, inputs: str | None = None):
    """:func:`time_guarded` of a kernel file on ``case_name``'s node, captured on CUDA."""
    case = build_case(case_name, folder / f"{case_name}_{next(_unique)}", device="cuda", inputs=inputs)
    return time_guarded(source, case, folder)


def time_unguarded(source: str, case_name: str, folder: Path, inputs: str | None = None) -> float:
    """What the search measured before the guard: ``costing.measure_ms`` of ``launch(*xs)``."""
    from lego_core.cost import costing

    case = build_case(case_name, folder / f"{case_name}_{next(_unique)}", device="cuda", inputs=inputs)
    module = load_candidate(source, folder)
    return costing.measure_ms(lambda xs: module.launch(*xs), input_sets(case))
