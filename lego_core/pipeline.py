"""The optimization pipeline: ordered passes, one screen.

``run_pipeline(spec, out_dir, config, emit)`` runs in the child process that
``lego_core.optimize`` starts.  Each pass is a named function; this driver
calls them in order and reports progress through ``emit``.
"""
from __future__ import annotations

import json
import os
import platform
import tempfile
import time
import uuid
from pathlib import Path

import torch

from lego_core import e2e
from lego_core.agents import make_agent
from lego_core.cache import KernelCache
from lego_core.capture import capture_graph
from lego_core.compose import write_output
from lego_core.config import OptimizeConfig
from lego_core.errors import OptimizeError
from lego_core.launch import choose_launch
from lego_core.events import RunFinished, RunStarted, Sink, StageStarted
from lego_core.problem import ProblemSpec, load_problem
from lego_core.report import build_report
from lego_core.search import Search, run_search
from lego_core.tree import FusionTree, build_tree, node_created


def run_pipeline(spec: ProblemSpec, out_dir: str, config: OptimizeConfig, emit: Sink) -> dict:
    """Optimize one problem; write ``out_dir``; return the report dict."""
    started = time.time()
    if spec.device == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")  # no GPU: Triton's interpreter runs the kernels
    out = Path(out_dir)
    run_id = uuid.uuid4().hex[:8]
    emit(RunStarted(model=Path(spec.path).name, overrides=dict(spec.overrides), dtype=spec.dtype, device=spec.device))

    emit(StageStarted(stage="load"))
    problem = load_problem(spec)  # import the file, apply overrides, build and run the model
    emit(StageStarted(stage="capture"))
    graph = capture_graph(problem)  # torch.export -> core ATen with shapes and module paths
    emit(StageStarted(stage="construct"))
    tree = build_tree_and_announce(graph, emit)  # top-down FusionTree down to fusion groups
    activations = [graph.run(problem.model, problem.make_inputs(seed)) for seed in config.verify_seeds]
    # the total is the search's own: it counts the nodes it queues (after
    # dedupe, retries and fusions included) in its progress events
    emit(StageStarted(stage="search"))
    emit = _thread_safe(emit)  # agents report from several threads
    with tempfile.TemporaryDirectory(prefix="lego-candidates-") as work:
        parameters = {name for name, src in graph.sources.items() if src.kind == "parameter"}
        cache = KernelCache(config.cache_dir, enabled=config.cache)  # signatures solved by earlier runs
        search = Search(tree, activations, parameters, make_agent("template"), config, spec.torch_dtype, spec.device, Path(work), emit, cache)
        search.cache_origin = f"run {run_id} of {spec.name}"
        result = run_search(search)  # top-down, dedupe, agents in parallel, mutation, budgets
        del activations
        emit(StageStarted(stage="compose"))
        kernel_files = write_output(out, graph, result.plan.items, problem, run_id)  # optimized_model.py + kernels/
    emit(StageStarted(stage="verify"))
    check = e2e.check_end_to_end(out, problem, config.e2e_seed)  # composed ModelNew vs eager
    if not check["passed"]:
        raise OptimizeError(f"the composed model does not match eager end to end: {check['reason']}")
    emit(StageStarted(stage="launch"))
    launch = choose_launch(out, problem, config)  # plan or original forward, direct or CUDA graph: measured
    if launch["measured"]:
        check = dict(e2e.check_end_to_end(out, problem, config.e2e_seed), plan_check=check)  # what ships
        if not check["passed"]:
            raise OptimizeError(f"the model as shipped ({launch['chosen']}) does not match eager end to end: {check['reason']}")
    timing = e2e.time_models(out, problem, config) if spec.device == "cuda" and config.timing == "auto" else None
    report = build_report(problem, tree, result, check, timing, kernel_files, started, _versions(), launch)
    (out / "report.json").write_text(json.dumps(report, indent=2))
    emit(RunFinished(out_dir=str(out), summary=report["summary"]))
    return report


def _thread_safe(emit: Sink) -> Sink:
    import threading

    lock = threading.Lock()

    def locked(event) -> None:
        with lock:
            emit(event)

    return locked


def build_tree_and_announce(graph, emit: Sink) -> FusionTree:
    """Build the FusionTree and send one NodeCreated event per node, parents first."""
    tree = build_tree(graph)
    for node in tree.walk():
        emit(node_created(node))
    return tree


def _versions() -> dict:
    import triton

    return {"torch": torch.__version__, "triton": triton.__version__, "python": platform.python_version()}

