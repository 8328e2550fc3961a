"""One request in a fresh executor, the output folder it reads guarded.

``optimized_model.py`` imports every chosen kernel, so the optimizer never
imports it: each use of the composed model (``lego_core.judge.end_to_end.composed``
asks: the end-to-end check's forward, the launch plan's measurements, the
final timings) starts a fresh executor (forked from the clean fork server,
no candidate code run in it before, no tamper snapshot: it is used once and
stopped) whose main function the caller gives (``serve``: the executor's
loop with the caller's handlers, ``lego_core.judge.end_to_end.served``), sends it
one request and gets the answer back.

The process could rewrite files of the output folder it imports from; so
:func:`run_fresh` hashes the folder's files before and after and fails when
one changed, and removes any ``__pycache__`` folder that appeared (the
process writes no bytecode; one that did was not written by Python's import).
"""
from __future__ import annotations

import hashlib
import re
import shutil
from pathlib import Path
from typing import Callable

from lego_core.errors import OptimizeError
from lego_core.judge.process import wire
from lego_core.judge.process.executor import Executor

# seconds the composed model's process may take for one request (a whole
# model through Triton's interpreter on a CPU is slow; the run's own limit still applies)
COMPOSED_TIMEOUT_S = 3600.0


def folder_digest(folder: Path) -> dict[str, str]:
    """sha256 of every file under ``folder`` outside ``__pycache__``, by relative path."""
    digest = {}
    for path in sorted(Path(folder).rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            digest[str(path.relative_to(folder))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return digest


def run_fresh(out_dir: Path, op: str, payload: dict, serve: Callable, meter=None) -> dict:
    """Run ``op`` (``composed``, ``choose_launch``, ``time_models``: one of
    the handlers ``serve`` answers) in a fresh executor whose main function
    is ``serve`` (a module-level ``serve(conn, options)``) and return its
    answer (a dict); the executor is stopped after.  ``meter``: a
    ``MemoryMeter`` told the process's peak bytes.  Raises OptimizeError when
    the process fails, answers no dict or changed the output folder."""
    before = folder_digest(out_dir)
    caches = {p for p in Path(out_dir).rglob("__pycache__")}
    fresh = Executor(snapshot=False, call_timeout_s=COMPOSED_TIMEOUT_S, serve=serve)
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


def _file_beside_the_model(exc: Exception, out_dir: Path) -> str | None:
    """The name of the file a ``FileNotFoundError`` of the composed model's
    process looked for inside the output folder (the model file opened a
    data file beside itself: ``os.path.dirname(__file__)``), else None."""
    if type(exc).__name__ != "FileNotFoundError":
        return None
    found = re.search(r"No such file or directory: '(?P<path>[^']+)'", str(exc))
    if not found:
        return None
    path, folder = Path(found["path"]), Path(out_dir).resolve()
    try:
        return str(path.resolve().relative_to(folder))
    except ValueError:
        return None
