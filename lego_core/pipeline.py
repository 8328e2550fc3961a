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
from pathlib import Path

import torch

from lego_core.judge.end_to_end import composed, e2e, fallback, user_check
from lego_core.load import local_modules
from lego_core.runtime import faults, output, sandbox_child
from lego_core.agents import make_agent
from lego_core.agents.budget import TokenBudget
from lego_core.search.cache import KernelCache
from lego_core.load.capture import capture_graph, layout_inputs, use_channels_last
from lego_core.compose.folder import write_output
from lego_core.config import OptimizeConfig
from lego_core.errors import OptimizeError
from lego_core.judge.process.executor import use_model_file_settings
from lego_core.judge.process.forkserver import warm_up
from lego_core.events import RunStarted, Sink, StageStarted, TranscriptMessage, thread_safe
from lego_core.judge.end_to_end.launch import rule_out
from lego_core.runtime.memory import MemoryMeter
from lego_core.load.problem import ProblemError, ProblemSpec, load_problem
from lego_core.load.spec import new_run_id, overrides_to_json
from lego_core.phases import PhaseClock
from lego_core.report import build_report
from lego_core.search.engine import Search
from lego_core.search.plan import Plan
from lego_core.judge.boundary import BoundaryStore
from lego_core.cost.costing import library_estimate_ms
from lego_core.tree.fusion_tree import FusionTree, OrNode, build_tree, node_created
from lego_core.judge.verify_policy import seeds_record


def run_pipeline(spec: ProblemSpec, out_dir: str, config: OptimizeConfig, emit: Sink, run_id: str | None = None, commit: bool = True,
                 started_at: float | None = None) -> dict:
    """Optimize one problem; write ``out_dir``; return the report dict.

    The output is composed, verified end to end and given its launch plan in
    a staging folder beside ``out_dir`` (``lego_core.runtime.output``), and moved into
    ``out_dir`` only when everything passed; on any exception the staging
    folder is removed and ``out_dir`` is as it was.  ``run_id`` names the run
    (and its staging folder; a new one when None).  ``commit=False`` (the
    sandboxed child, which cannot see ``out_dir``): stop with the verified
    output and ``report.json`` in the staging folder; the caller checks and
    commits it (``output.finish``).  ``started_at``: ``time.monotonic()``
    when this process began the run (its imports until now are the
    ``startup`` phase of ``report["phases_s"]``)."""
    run_id = run_id or new_run_id()
    stage = output.staging_path(Path(out_dir), run_id)
    try:
        return _run(spec, Path(out_dir), stage, config, emit, run_id, commit, started_at)
    except BaseException:
        output.discard(stage)
        raise


def _run(spec: ProblemSpec, target: Path, out: Path, config: OptimizeConfig, emit: Sink, run_id: str, commit: bool = True,
         started_at: float | None = None) -> dict:
    """The passes; ``out`` is the staging folder, committed to ``target`` at the end."""
    started = time.time()
    if spec.device == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")  # no GPU: Triton's interpreter runs the kernels
    output.check_target(target)  # never overwrite a file of the user's, even at the end
    emit(RunStarted(model=Path(spec.path).name, overrides=overrides_to_json(spec.overrides), dtype=spec.dtype, device=spec.device))

    emit(StageStarted(stage="load"))
    phases = PhaseClock(started_at)  # seconds per phase: report["phases_s"]
    if started_at is not None:
        phases.add("startup", time.monotonic() - started_at)
    phases.begin("load")
    warm_up()  # candidate executors' fork server imports torch and triton meanwhile (lego_core.judge)
    meter = MemoryMeter(spec.device)  # the run's peak device memory, from here to the report
    meter.enter_stage("load")
    problem = load_problem(spec)  # import the file, apply overrides, build and run the model
    use_model_file_settings(problem.torch_settings)  # torch flags the file set: candidates are judged with them too
    meter.add_base(_model_tensors(problem.model))  # CPU: weights were made before the counter
    eager_out: dict = {}
    meter.measure_eager(lambda: _eager_forward(problem, eager_out))  # eager's peak: the bound's reference
    phases.begin("capture")
    _stage(emit, meter, "capture")
    channels_last = use_channels_last(config.channels_last, problem)  # NHWC activations for 2-D conv models on CUDA
    layout_report = {"setting": config.channels_last, "channels_last": channels_last}
    graph, channels_last = capture(problem, channels_last, layout_report)  # torch.export -> core ATen with shapes and module paths
    phases.begin("construct")
    _stage(emit, meter, "construct")
    tree = build_tree_and_announce(graph, emit, spec.torch_dtype, config.target_gpu)  # top-down FusionTree down to fusion groups
    # boundary values per seed, on demand within the memory bound (not every
    # intermediate of every seed: that multiplies the model's memory)
    with meter.tracking():
        activations = boundary_store(graph, tree, problem, config, meter, channels_last)
    # the total is the search's own: it counts the nodes it queues (after
    # dedupe, retries and fusions included) in its progress events
    phases.begin("search")
    _stage(emit, meter, "search")
    emit = thread_safe(emit)  # agents report from several threads
    # a neutral name: nothing in a kernel file's path says it is being judged (issue 27)
    with tempfile.TemporaryDirectory() as work:
        parameters = {name for name, src in graph.sources.items() if src.kind == "parameter"}
        # signatures solved by earlier runs; in the sandbox, new entries go to the parent, which writes them
        cache = KernelCache(config.cache_dir, enabled=config.cache, forward=sandbox_child.forwarder("cache"))
        tokens = TokenBudget(config.max_tokens)  # the run's one token budget: the agents spend it, the search stops on it
        search = Search(tree, activations, parameters, make_agent(config.agent, config, emit, budget=tokens), config, spec.torch_dtype, spec.device,
                        Path(work), emit, cache, meter=meter, cache_origin=f"run {run_id} of {spec.name}", tokens=tokens, phases=phases,
                        run_id=run_id)
        result = search.run()  # top-down, dedupe, agents in parallel, mutation, budgets
        activations.drop()
        del activations, search
        phases.begin("compose")
        _stage(emit, meter, "compose")
        layout = {"channels_last": channels_last, "output_strides": eager_out.get("strides")}
        kernel_files = write_output(out, graph, result.plan.items, problem, run_id, layout)  # optimized_model.py + kernels/
    phases.begin("e2e_check")
    _stage(emit, meter, "verify")
    with meter.tracking():  # eager, the fp64 truth (and torch.compile on a GPU) once, here
        reference = e2e.reference_run(problem, config.e2e_seed, fp64_device(problem, meter), with_compile=spec.device == "cuda" and config.compare_compile)

    # then, when it passed, the final user check: ModelNew run as a user runs it (a plain python importing only torch
    # and the folder, many calls, several input distributions); a plan that fails it falls back like one that fails the check
    user = user_check.UserCheck(problem, config.e2e_seed, fp64_device(problem, meter), avoid=config.verify_seeds,
                                import_paths=config.import_paths, meter=meter)

    def judge() -> dict:  # ModelNew runs in fresh processes (it imports the kernels); the judging here
        with meter.tracking():
            check = e2e.check_end_to_end(out, problem, config.e2e_seed, meter=meter, reference=reference)
            return user_check.with_user_check(check, out, user)

    def compose(items: list) -> list:
        return write_output(out, graph, items, problem, run_id, layout)

    # a plan that fails the judge ships without the kernels at fault (bisected), else the library plan
    delivered = fallback.deliver(result.plan.items, compose, judge, judge(), kernel_files)
    check, kernel_files = delivered.check, delivered.kernel_files
    if delivered.dropped:
        result.plan = replan(delivered.items)
        announce_dropped(emit, tree.root.id, delivered.dropped)
    phases.begin("launch_variants")
    _stage(emit, meter, "launch")
    with meter.tracking():
        launch = composed.choose_launch(out, problem, config, meter=meter)  # plan or original forward, direct or CUDA graph: measured (in a fresh process)
    while launch["measured"]:  # check what ships; a variant that fails gives way to the next fastest
        shipped = judge()
        if shipped["passed"]:
            check = dict(shipped, plan_check=check)
            break
        if launch["chosen"] == "original":
            raise OptimizeError(f"the model as shipped ({launch['chosen']}) does not match eager end to end: {shipped['reason']}")
        launch = rule_out(out, launch, shipped["reason"])
    phases.begin("timing")
    meter.enter_stage("timing")  # eager, torch.compile and the shipped model timed (GPU): its own memory peak
    timing = composed.time_models(out, problem, config) if spec.device == "cuda" and config.timing == "auto" else None
    phases.end()
    report = build_report(problem, tree, result, check, timing, kernel_files, started, _versions(), launch, delivered.dropped)
    report["phases_s"] = phases.as_dict()  # where the time went (lego_core.phases: stages add up, search phases are busy seconds)
    report["memory"] = memory_report(meter, emit, tree.root.id)
    report["moved_attributes"] = problem.moved_attributes  # plain tensor attributes the loader moved to the device
    report["model_file_torch_settings"] = problem.torch_settings  # flags the file set at import: the user's, kept in force
    report["layout"] = layout_report  # setting, channels_last used, fallback reason if any
    report["capture"] = {"kept_whole": [k.to_dict() for k in graph.kept_whole]}  # ops left un-decomposed (library calls) and why
    report["sandbox"] = local_modules.report_entry(problem.local_modules, problem.spec.path)  # what the jail showed; reference_modules/
    report["run_id"] = run_id
    report["verification"] = seeds_record(config)  # the seeds, secret while the run checked candidates
    (out / "report.json").write_text(json.dumps(report, indent=2))
    if commit:
        output.finish(out, target, run_id, report, emit)  # verified: the files move into the target folder by rename
    return report


def capture(problem, channels_last: bool, layout: dict) -> tuple:
    """(graph, channels_last): the captured graph, in channels-last when asked
    and torch.export can trace the model so (a ``view`` of an NHWC input
    that only NCHW strides allow fails); else in the user's layout, with
    ``layout["channels_last"]`` False and ``layout["fallback"]`` saying why.
    Raises ProblemError when neither captures."""
    if channels_last:
        try:
            return capture_graph(problem, channels_last=True), True
        except ProblemError as exc:
            layout.update(channels_last=False, fallback=f"channels-last capture failed: {exc}")
    return capture_graph(problem), False


def replan(items: list) -> Plan:
    """The plan of ``items`` after the fallback swapped some to the library: cost re-summed."""
    cost = sum(leaf.chosen.time_ms or 0.0 for leaf in items)
    kind = "measured" if all(leaf.chosen.time_kind == "measured" for leaf in items) else "estimated"
    return Plan(items, cost, kind)


def announce_dropped(emit: Sink, node_id: str, dropped: list) -> None:
    """A transcript line (agent ``judge``, on the root) naming each kernel the end-to-end judge dropped."""
    for item in dropped:
        emit(TranscriptMessage(node_id=node_id, agent="judge", role="system", content=(
            f"dropped {item['kernel']} ({item['label']}, {item['node_id']}): the library runs it instead; {item['reason']}")))


def _model_tensors(model: torch.nn.Module) -> list:
    return [*model.parameters(), *model.buffers()]


def _stage(emit: Sink, meter: MemoryMeter, name: str) -> None:
    """Announce stage ``name`` and start its memory peak (``report["memory"]["stage_peaks_mb"]``);
    the stage-limit tests' fault injection (``runtime.faults``) may hang here."""
    meter.enter_stage(name)
    emit(StageStarted(stage=name))
    faults.at_stage(name)


def _eager_forward(problem, record: dict | None = None) -> None:
    """One eager forward on the example inputs (seed 0), as a user runs it;
    ``record["strides"]``: its output's strides (a single tensor output)."""
    from lego_core.load.state import preserved

    inputs = problem.make_inputs(0)
    with torch.no_grad(), preserved(problem.model):  # a stateful forward's writes are undone
        out = problem.model(*inputs)
    if record is not None and isinstance(out, torch.Tensor):
        record["strides"] = tuple(out.stride())


def boundary_store(graph, tree: FusionTree, problem, config: OptimizeConfig, meter: MemoryMeter, channels_last: bool = False) -> BoundaryStore:
    """The verification seeds' boundary values of every sub-problem, within the
    memory bound (less a margin for what the store does not count: the
    timer's L2 flush buffer, compiler workspaces, comparison pieces).
    ``channels_last``: the graph was captured so; its 4-D inputs are made so
    too, and every boundary value has the captured strides."""
    needed = {node.name for n in tree.or_nodes() for node in n.sub.inputs}
    limit = meter.bound - min(STORE_MARGIN_BYTES, meter.bound // 8)
    make_inputs = layout_inputs(problem.make_inputs, channels_last)
    return BoundaryStore(graph, problem.model, make_inputs, config.verify_seeds, needed, limit, meter, meter.activation_bytes)


STORE_MARGIN_BYTES = 1024 << 20  # the L2 flush buffer (256 MB), timing and tuning graphs, compare pieces, workspaces


def fp64_device(problem, meter: MemoryMeter) -> str:
    """Where the end-to-end check's fp64 copy of the model runs: on the model's
    device when a float64 forward (weights and activations scaled from the
    eager peak) fits under the bound next to what is alive, else on the CPU."""
    if problem.spec.device != "cuda":
        return problem.spec.device
    scale = 8 // max(1, problem.spec.torch_dtype.itemsize)
    weights = sum(t.numel() * t.element_size() for t in _model_tensors(problem.model))
    need = scale * (weights + meter.activation_bytes)
    return "cuda" if meter.allocated() + need <= meter.bound else "cpu"


def memory_report(meter: MemoryMeter, emit: Sink, node_id: str) -> dict:
    """``report["memory"]``; warns (a transcript line on ``node_id``, the tree's root) when the peak broke the bound."""
    data = meter.report()
    if data["within_bound"] is False:
        emit(TranscriptMessage(node_id=node_id, agent="memory", role="system", content=(
            f"peak device memory {data['search_peak_mb']:.0f} MiB exceeded the bound {data['bound_mb']:.0f} MiB "
            f"(max(2 x eager peak, eager peak + 4 GiB); eager peak {data['eager_peak_mb']:.0f} MiB)")))
    return data


def build_tree_and_announce(graph, emit: Sink, dtype: torch.dtype = torch.float32, target_gpu: str = "H200") -> FusionTree:
    """Build the FusionTree and send one NodeCreated event per node, parents
    first, each OR node with the cost model's library estimate (ms on
    ``target_gpu`` in ``dtype``: the run page's time view from the start)."""
    tree = build_tree(graph)
    for node in tree.walk():
        estimate = library_estimate_ms(node.sub, dtype, target_gpu) if isinstance(node, OrNode) else None
        emit(node_created(node, estimate))
    return tree


def _versions() -> dict:
    import triton

    return {"torch": torch.__version__, "triton": triton.__version__, "python": platform.python_version()}

