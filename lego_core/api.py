"""The library's front door: ``optimize(spec, out_dir, config, sink)``.

Usage from Python::

    from lego_core import ProblemSpec, optimize
    report = optimize(ProblemSpec("model.py", {"batch_size": 2}), "out/")

The run happens in a child process (``lego_core.sandbox``) because it
imports and runs the user's model file; progress arrives at ``sink`` as
``lego_core.events`` objects.
"""
from __future__ import annotations

import functools
import time
from pathlib import Path

from lego_core import output

from lego_core.config import OptimizeConfig
from lego_core.events import RunFailed, Sink, null_sink
from lego_core.spec import ProblemError, ProblemSpec
from lego_core.sandbox import ChildCrashed, run_in_child  # noqa: F401 - ChildCrashed: part of the API


def optimize(
    spec: ProblemSpec,
    out_dir: str | Path,
    config: OptimizeConfig | None = None,
    sink: Sink | None = None,
    isolate: bool = True,
) -> dict:
    """Optimize one problem and write the output folder.

    Writes ``out_dir/optimized_model.py``, ``out_dir/kernels/*.py``,
    ``out_dir/reference_model.py`` and ``out_dir/report.json``, and returns the
    report (a JSON-ready dict).  The files appear only when the run passed
    (composed in a staging folder, verified, then moved in by rename:
    ``lego_core.output``); a failed run leaves ``out_dir`` as it was, with
    ``FAILED.json`` beside an earlier run's output, and never touches files
    LEGO did not write.  ``isolate=False`` runs in this process (tests
    of lego_core's internals only; never for uploaded code).

    Raises ProblemError for a broken model file or options, OptimizeError
    when the optimizer fails, ChildCrashed when its process dies.  Every
    failure is also sent to ``sink`` as a ``RunFailed`` event.
    """
    from lego_core.pipeline import new_run_id, run_pipeline

    sink = sink or null_sink
    config = config or OptimizeConfig()
    out_dir = str(Path(out_dir).resolve())
    run_id = new_run_id()
    try:
        output.check_target(Path(out_dir))  # a file of the user's under a name LEGO writes: refused before the run
        if isolate:
            clock = _LoadClock(spec, config.load_timeout_s, sink)
            target = functools.partial(run_pipeline, run_id=run_id)
            return run_in_child(target, (spec, out_dir, config), clock, timeout_s=config.timeout_s, watchdog=clock.overdue)
        return run_pipeline(spec, out_dir, config, sink, run_id=run_id)
    except BaseException as exc:
        _leave_no_unverified_output(Path(out_dir), run_id, spec, exc)
        if isinstance(exc, ProblemError):
            sink(RunFailed(error_type="ProblemError", message=str(exc), path=exc.path, line=exc.line, hint=exc.hint))
        elif isinstance(exc, Exception):
            sink(RunFailed(error_type=type(exc).__name__, message=str(exc)))
        raise


def _leave_no_unverified_output(out: Path, run_id: str, spec: ProblemSpec, exc: BaseException) -> None:
    """After a failed run: remove its staging folder (a child that died could
    not), and mark an earlier run's output in ``out`` with ``FAILED.json``
    (``lego_core.output``)."""
    output.discard(output.staging_path(out, run_id))
    try:
        output.mark_failed(out, run_id, Path(spec.path).name, f"{type(exc).__name__}: {exc}")
    except OSError:
        pass  # the folder is not writable: the failure itself is what the caller reports


class _LoadClock:
    """Forwards events, and notices when loading the user's file (import,
    get_inputs, building and running the model) takes longer than
    ``limit_s``: an endless loop there is the file's fault, not the run's."""

    def __init__(self, spec: ProblemSpec, limit_s: float | None, sink: Sink):
        self.spec, self.limit_s, self.sink = spec, limit_s, sink
        self.started = time.monotonic()
        self.loading = True

    def __call__(self, event) -> None:
        if event.type == "stage_started" and event.stage != "load":
            self.loading = False
        self.sink(event)

    def overdue(self) -> ProblemError | None:
        if self.loading and self.limit_s is not None and time.monotonic() - self.started > self.limit_s:
            return ProblemError(
                f"loading the file did not finish within {self.limit_s:g} s (importing it, calling get_inputs() and "
                "get_init_inputs(), building Model and running forward once).",
                self.spec.path,
                hint="look for an endless loop or very large sizes; lower the sizes with overrides.",
            )
        return None
