"""The library's front door: ``optimize(spec, out_dir, config, sink)``.

Usage from Python::

    from lego_core import ProblemSpec, optimize
    report = optimize(ProblemSpec("model.py", {"batch_size": 2}), "out/")

The run happens in a child process (``lego_core.runtime.sandbox``) because it
imports and runs the user's model file; progress arrives at ``sink`` as
``lego_core.events`` objects.
"""
from __future__ import annotations

import dataclasses
import functools
import json
import os
import re
import shutil
import tempfile
import time
from pathlib import Path

from lego_core.runtime import jail as jail_mod
from lego_core.runtime import output, staged
from lego_core.search.cache import KernelCache, store_forwarded

from lego_core.config import OptimizeConfig
from lego_core.events import RunFailed, Sink, null_sink
from lego_core.load.spec import TORCH_DTYPE_NAMES, ProblemError, ProblemSpec, new_run_id
from lego_core.runtime.sandbox import ChildCrashed, StageTimeLimit, run_in_child  # noqa: F401 - ChildCrashed: part of the API


def optimize(
    spec: ProblemSpec,
    out_dir: str | Path,
    config: OptimizeConfig | None = None,
    sink: Sink | None = None,
    isolate: bool = True,
    run_id: str | None = None,
) -> dict:
    """Optimize one problem and write the output folder.

    Writes ``out_dir/optimized_model.py``, ``out_dir/kernels/*.py``,
    ``out_dir/reference_model.py`` and ``out_dir/report.json``, and returns the
    report (a JSON-ready dict).  The files appear only when the run passed
    (composed in a staging folder, verified, then moved in by rename:
    ``lego_core.runtime.output``); a failed run leaves ``out_dir`` as it was, with
    ``FAILED.json`` beside an earlier run's output, and never touches files
    LEGO did not write.  ``isolate=False`` runs in this process (tests
    of lego_core's internals only; never for uploaded code).  ``run_id``
    names the run in ``.lego_output.json``, report.json and the generated
    modules' names (1 to 32 lowercase letters, digits or ``_``; a fresh 8
    hex digits by default): the web app passes its run's, so the zip's name
    and its record agree.

    Raises ProblemError for a broken model file or options, OptimizeError
    when the optimizer fails, ChildCrashed when its process dies.  Every
    failure is also sent to ``sink`` as a ``RunFailed`` event.
    """
    sink = sink or null_sink
    config = with_llm_model(config or OptimizeConfig())
    out_dir = str(Path(out_dir).resolve())
    if run_id is not None and not re.fullmatch(r"[0-9a-z_]{1,32}", run_id):
        raise ValueError(f"run_id must be 1 to 32 lowercase letters, digits or _, not {run_id!r}")
    run_id = run_id or new_run_id()
    made: list[Path] = []
    try:
        output.check_target(Path(out_dir))  # a file of the user's under a name LEGO writes: refused before the run
        if isolate:
            return _run_isolated(spec, out_dir, config, sink, run_id, made)
        from lego_core.pipeline import run_pipeline

        server, pools, config, sink = _agent_server(config, sink, isolated=False)
        try:
            return run_pipeline(spec, out_dir, config, sink, run_id=run_id)
        finally:
            _close_agent_server(server, pools)
    except BaseException as exc:
        _leave_no_unverified_output(Path(out_dir), run_id, spec, exc)
        for folder in reversed(made):  # folders made for the staging folder's sake, now empty again
            try:
                folder.rmdir()
            except OSError:
                pass
        if isinstance(exc, ProblemError):
            sink(RunFailed(error_type="ProblemError", message=str(exc), path=exc.path, line=exc.line, hint=exc.hint))
        elif isinstance(exc, Exception):
            sink(RunFailed(error_type=type(exc).__name__, message=str(exc)))
        raise


def _run_isolated(spec: ProblemSpec, out_dir: str, config: OptimizeConfig, sink: Sink, run_id: str, made: list) -> dict:
    """The run in a child process: jailed by bubblewrap where it can be
    (``lego_core.runtime.jail``), with ``config.limits``; kernel cache entries it
    sends are checked and written here (``cache.store_forwarded``); its
    staged output is checked (``staged.accept``) and committed here.  Each
    stage runs within ``config.stage_limits`` (enforced by ``run_in_child``,
    outside the jail): StageTimeLimit names the stage past its limit; the
    load stage's is a ProblemError of the file (:func:`_load_too_long`)."""
    from lego_core.pipeline_entry import run_pipeline_in_child

    started = time.monotonic()
    cache = KernelCache(config.cache_dir, enabled=config.cache)  # the writer: only this process writes the cache
    config = dataclasses.replace(config, cache_dir=str(cache.root))  # the child's $HOME is not this one's
    stage = output.staging_path(Path(out_dir), run_id)
    made += _make_folders(stage)
    scratch = tempfile.mkdtemp(prefix="lego-sandbox-")
    child_spec = spec
    server, pools, config, sink = _agent_server(config, sink, isolated=True)  # agents that run here, not in the child
    try:
        jail = None
        if jail_mod.wanted():
            if config.cache:
                _make_folders(cache.root)  # to be mounted read-only it must exist
            cache_root = str(cache.root) if config.cache and cache.root.is_dir() else None
            jail = jail_mod.for_run(spec.path, str(stage), scratch, cache_root,
                                    model_folder=config.model_folder, import_paths=config.import_paths)
        target = functools.partial(run_pipeline_in_child, run_id=run_id, commit=False)
        if jail is not None:  # the jail's working folder is its scratch folder: the model file by its full path
            child_spec = dataclasses.replace(spec, path=str(Path(spec.path).resolve()))
        store = functools.partial(store_forwarded, cache, key_for=_key_for(spec, config), origin=f"run {run_id} of {spec.name}")
        watchdog = None if server is None else server.alarm  # a flooded agent relay stops the run
        report = run_in_child(
            target, (child_spec, out_dir, config), sink, timeout_s=config.timeout_s, watchdog=watchdog,
            jail=jail, limits=config.limits.as_dict(), handlers={"cache": store},
            stage_limits=config.stage_limits.for_run(config.max_search_s),  # enforced here, outside the jail
        )
        if server is not None and server.alarm() is not None:  # flooded after the last look
            raise server.alarm()
    except StageTimeLimit as exc:
        if exc.stage == "load":  # an endless loop there is the file's fault, not the run's
            raise _load_too_long(spec, exc.limit_s) from None
        raise
    except ProblemError as exc:
        if exc.path == child_spec.path:
            exc.path = spec.path  # the user's own spelling of it
        raise
    finally:
        _close_agent_server(server, pools)
        shutil.rmtree(scratch, ignore_errors=True)
    if not isinstance(report, dict):
        raise ChildCrashed("the optimizer process returned something that is not a report.")
    report = staged.accept(stage, report, run_id, spec)  # only what LEGO writes, within limits; report.json checked and rewritten here
    process_wall_s(report, time.monotonic() - started, stage / "report.json")
    output.finish(stage, Path(out_dir), run_id, report, sink)
    return report


def process_wall_s(report: dict, wall_s: float, path: Path) -> None:
    """Add the optimizer's whole wall time (``wall_s``, s, this process's
    view: the child's start, the pipeline, the output's check) to ``report``
    as ``metrics.optimizer_wall_s`` and what the pipeline's own clock did
    not see as ``phases_s.process`` (``lego_core.phases``); rewrite ``path``."""
    phases = report.get("phases_s")
    if isinstance(phases, dict) and isinstance(phases.get("_wall"), (int, float)):
        phases["process"] = round(max(0.0, wall_s - phases["_wall"]), 3)
        phases["_wall"] = round(wall_s, 3)
    if isinstance(report.get("metrics"), dict):
        report["metrics"]["optimizer_wall_s"] = round(wall_s, 3)
    path.write_text(json.dumps(report, indent=2))


def with_llm_model(config: OptimizeConfig) -> OptimizeConfig:
    """``config`` with ``llm_model`` set from this process's ``LEGO_LLM_*``
    (``agents.llm.settings``) when an LLM agent runs and it is empty, so the
    kernel cache key names the model (in this process and in the child)."""
    if config.agent == "template" or config.llm_model:
        return config
    from lego_core.agents.llm.settings import LLMSettings

    try:
        model = LLMSettings.from_env().model
    except ValueError:  # settings the agent itself reports, inside the run
        model = os.environ.get("LEGO_LLM_MODEL", "")
    return dataclasses.replace(config, llm_model=model)


def _agent_server(config: OptimizeConfig, sink: Sink, isolated: bool):
    """The agents of a run that answer in this process, served to the
    optimizer through the agent relay (``lego_core.agents.relay``).

    With ``config.agent_pool`` (the caller's ``agents.pool.AgentPoolFactory``)
    every agent of the run is a pool it makes here, so the caller's code
    stays in the caller's process.  Without it, a run in a child (``isolated``)
    with the LLM agent serves the LLM agent here, where the network is: its
    endpoint settings and key are read from this process's environment
    (``agents.llm.settings``), the child never sees them.

    Returns ``(server, pools, config, sink)``: an entered
    ``relay.AgentServer`` (``$LEGO_AGENT_RELAY`` set for the child) or None,
    the pools it serves (name -> AgentPool, for ``_close_agent_server``),
    ``config`` for the optimizer (``agent_relay`` naming the served agents,
    ``agent_pool`` None: the factory never crosses to the child) and
    ``sink``, made safe for the server's threads when the LLM agent streams
    from them."""
    from lego_core.agents import member_names
    from lego_core.agents.relay import AgentServer, NETWORK_AGENTS

    factory = config.agent_pool
    if factory is not None:
        pools = {}
        try:
            for name in member_names(config.agent):
                pools[name] = factory(name, config.agents)
            server = AgentServer(pools, getattr(factory, "timeout_s", None)).__enter__()
        except BaseException:
            _close_agent_server(None, pools)
            raise
        return server, pools, dataclasses.replace(config, agent_pool=None, agent_relay=tuple(pools)), sink
    if not isolated or not set(member_names(config.agent)) & set(NETWORK_AGENTS):
        return None, {}, config, sink
    from lego_core.agents import make_llm_agent
    from lego_core.agents.pool import InlineAgentPool
    from lego_core.events import thread_safe

    locked = thread_safe(sink)
    pools = {"llm": InlineAgentPool(make_llm_agent(config, locked), config.agents)}
    server = AgentServer(pools).__enter__()
    return server, pools, dataclasses.replace(config, agent_relay=tuple(pools)), locked


def _close_agent_server(server, pools: dict) -> None:
    """Close the agent relay's socket (restoring ``$LEGO_AGENT_RELAY``), then its pools."""
    try:
        if server is not None:
            server.__exit__(None, None, None)
    finally:
        for pool in pools.values():
            pool.close()


def _key_for(spec: ProblemSpec, config: OptimizeConfig):
    """``signature -> cache key`` for the run's forwarded kernels
    (``search.cache.run_key``, the child's own key function), from what this
    process knows (the device and its GPU's name from its own probe, the
    dtype, the pipeline's agent, the config), not from what the child says."""
    from lego_core.agents import agent_name
    from lego_core.search.cache import run_key

    gpu_name = None
    if spec.device == "cuda":
        from lego_core.runtime import gpu_probe

        gpu_name = gpu_probe.probe()["name"]
    dtype = TORCH_DTYPE_NAMES[spec.dtype]  # str(spec.torch_dtype) less "torch.", without importing torch here
    return run_key(spec.device, gpu_name, dtype, agent_name(config.agent), config)


def _make_folders(path: Path) -> list[Path]:
    """``mkdir -p path``; returns the folders it made, outermost first
    (OSError when it cannot)."""
    path = Path(path)
    missing = []
    while not path.exists():
        missing.append(path)
        path = path.parent
    for folder in reversed(missing):
        folder.mkdir(exist_ok=True)
    return list(reversed(missing))


def _leave_no_unverified_output(out: Path, run_id: str, spec: ProblemSpec, exc: BaseException) -> None:
    """After a failed run: remove its staging folder (a child that died could
    not), and mark an earlier run's output in ``out`` with ``FAILED.json``
    (``lego_core.runtime.output``)."""
    output.discard(output.staging_path(out, run_id))
    try:
        output.mark_failed(out, run_id, Path(spec.path).name, f"{type(exc).__name__}: {exc}")
    except OSError:
        pass  # the folder is not writable: the failure itself is what the caller reports


def _load_too_long(spec: ProblemSpec, limit_s: float) -> ProblemError:
    """The ProblemError of a file whose load stage (import, get_inputs,
    building and running the model) ran past ``limit_s`` seconds."""
    return ProblemError(
        f"loading the file did not finish within {limit_s:g} s (importing it, calling get_inputs() and "
        "get_init_inputs(), building Model and running forward once).",
        spec.path,
        hint="look for an endless loop or very large sizes; lower the sizes with overrides. If it needs longer, raise the "
             "load stage's limit: --stage-limit load=SECONDS on the command line, LEGO_STAGE_LIMIT_LOAD_S on the server.",
    )
