"""The output folder, written atomically: a failed run leaves no unverified file.

A run composes into a *staging* folder next to the target
(``<parent>/.<name>.lego-<run id>``, same file system, so a rename moves
it), checks the composed model end to end and chooses its launch from
there, writes ``report.json`` there, and only then :func:`commit` moves its
files into the target by rename.  Until that moment the target folder is
not touched.

On failure (the model file, the optimizer, the child process dying) the
staging folder is removed (:func:`discard`) and the target keeps what it
held before.  When that is an earlier run's output, :func:`mark_failed`
writes ``FAILED.json`` beside it (this run's id, what failed, and the id of
the run the files belong to), so no one takes the earlier ``report.json``
for this run's; the next successful run removes it.  A failed run into a
folder without LEGO output writes nothing (and creates no folder).

The target may be a folder of the user's with other files in it: LEGO
replaces or removes only the entries it wrote itself, listed in
``.lego_output.json`` (written with each committed output).  A folder from
an older LEGO without that record counts as LEGO's when its
``optimized_model.py`` carries LEGO's header.  A file of the user's with a
name LEGO writes (``tests/``, ``report.json``...) is never overwritten: the
run is refused before it starts (:func:`check_target`).
"""
from __future__ import annotations

import json
import os
import shutil
import stat
import time
from pathlib import Path

from lego_core.events import RunFinished
from lego_core.load.spec import ProblemError

RECORD = ".lego_output.json"
FAILED = "FAILED.json"
# every top-level name LEGO (lego_core, and the web app's report.html) may write into an output folder
LEGO_NAMES = (
    "optimized_model.py", "lego_runtime.py", "lego_overrides.py", "reference_model.py", "reference_modules", "kernels", "tests",
    "constants.pt", "report.json", "report.html", FAILED, RECORD,
)
_LEGACY_HEADER = '"""Optimized by LEGO'
# A staging folder the sandboxed child wrote, as check_staged walks it before
# anything in it is read or moved (its names: runtime.staged's limits, within these)
MAX_STAGED_ENTRIES = 8192  # files and folders in all (staged.MAX_FILES kernels and tests, 1,000 files in reference_modules/)
MAX_STAGED_DEPTH = 12  # folders nested (reference_modules/: local_modules.MAX_DEPTH)
MAX_STAGED_BYTES = 2 << 30  # all files together, bytes (constants.pt: at most 1 GiB; the rest source text)


def staging_path(out: Path, run_id: str) -> Path:
    """Where run ``run_id`` composes before its output is committed to ``out``."""
    out = Path(out)
    return out.parent / f".{out.name}.lego-{run_id}"


def owned(out: Path) -> set[str]:
    """Top-level names in ``out`` that LEGO wrote: those its record lists (and
    the record, ``FAILED.json`` and the web app's ``report.html``), or, in a
    folder from a LEGO without a record, every LEGO name when its
    ``optimized_model.py`` has LEGO's header; else none."""
    out = Path(out)
    record = _read_record(out)
    if record is not None:
        names = set(record.get("files", [])) | {RECORD, FAILED, "report.html"}
    else:
        model = out / "optimized_model.py"
        try:
            legacy = model.is_file() and model.read_text(errors="replace").startswith(_LEGACY_HEADER)
        except OSError:
            legacy = False
        names = set(LEGO_NAMES) if legacy else set()
    return {name for name in names if (out / name).exists() or (out / name).is_symlink()}


def check_target(out: Path) -> None:
    """Raise ProblemError unless ``out`` can receive LEGO's output: it is a
    folder or does not exist yet, and holds no entry of the user's under a
    name LEGO writes."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ProblemError(f"the output path {out} is a file, not a folder.", hint="name a new or existing folder.")
    if not out.is_dir():
        return
    mine = owned(out)
    clash = sorted(name for name in LEGO_NAMES if name not in mine and ((out / name).exists() or (out / name).is_symlink()))
    if clash:
        raise ProblemError(
            f"the output folder {out} holds {', '.join(clash)}, which LEGO did not write and would replace.",
            hint="move those away or choose another output folder.",
        )


def commit(stage: Path, out: Path, run_id: str) -> None:
    """Move the verified output in ``stage`` to ``out`` and remove ``stage``.

    ``out`` missing: ``stage`` is renamed to it.  Otherwise the entries LEGO
    wrote there before (:func:`owned`) go to a trash folder beside it, the
    staged entries are renamed in, and the trash is removed; files of the
    user's stay.  Raises ProblemError (see :func:`check_target`) before
    moving anything when a staged name is taken by a file of the user's."""
    stage, out = Path(stage), Path(out)
    files = sorted(p.name for p in stage.iterdir())
    (stage / RECORD).write_text(json.dumps({"run_id": run_id, "files": files, "written": _now()}, indent=2))
    check_target(out)
    if not out.exists():
        stage.rename(out)
        return
    trash = stage.with_name(stage.name + ".old")
    trash.mkdir()
    try:
        for name in owned(out):
            (out / name).rename(trash / name)
        for name in [*files, RECORD]:
            (stage / name).rename(out / name)
    finally:
        shutil.rmtree(trash, ignore_errors=True)
    shutil.rmtree(stage, ignore_errors=True)


def finish(stage: Path, out: Path, run_id: str, report: dict, emit) -> None:
    """Commit the verified output in ``stage`` to ``out`` (:func:`commit`)
    and send ``RunFinished`` to ``emit``."""
    commit(stage, out, run_id)
    emit(RunFinished(out_dir=str(out), summary=report.get("summary", {})))


def check_staged(stage: Path) -> None:
    """Raise ProblemError unless everything under ``stage`` (written by the
    sandboxed child) is a regular file or a folder: a symbolic link, a
    hard link to a file elsewhere, a FIFO or a device file would make the
    output folder, its downloads or its zip reach outside the run.  The
    parent calls this before it commits the child's output.

    Bounded: the walk (no recursion, entries counted as they are listed)
    stops at the first of :data:`MAX_STAGED_ENTRIES` files and folders,
    :data:`MAX_STAGED_DEPTH` folders deep or :data:`MAX_STAGED_BYTES` in
    all that is passed, so a folder of millions of files costs the parent
    no more than that before the run is refused."""
    stage = Path(stage)
    entries, total = 0, 0
    folders = [(stage, 0)]
    while folders:
        folder, depth = folders.pop()
        if depth == 0 and not stat.S_ISDIR(stage.lstat().st_mode):  # the folders below: seen as folders when listed
            _refuse_staged(stage, stage, stage.lstat())
        with os.scandir(folder) as listing:
            for entry in listing:
                entries += 1
                if entries > MAX_STAGED_ENTRIES:
                    raise _too_much(f"it holds more than {MAX_STAGED_ENTRIES:,} files and folders")
                path = Path(entry.path)
                info = entry.stat(follow_symlinks=False)
                if stat.S_ISDIR(info.st_mode):
                    if depth + 1 > MAX_STAGED_DEPTH:
                        raise _too_much(f"it nests {path.relative_to(stage)} more than {MAX_STAGED_DEPTH} folders deep")
                    folders.append((path, depth + 1))
                    continue
                _refuse_staged(path, stage, info)
                total += info.st_size
                if total > MAX_STAGED_BYTES:
                    raise _too_much(f"its files hold more than {MAX_STAGED_BYTES >> 20:,} MiB in all")


def _too_much(what: str) -> ProblemError:
    return ProblemError(f"the run's output was discarded: {what}, which LEGO never writes.",
                        hint="the model file must not write into the output folder; LEGO writes it.")


def _refuse_staged(path: Path, stage: Path, info: os.stat_result) -> None:
    """ProblemError unless ``info`` (``path``'s, not followed) is a regular file with one link."""
    if not stat.S_ISREG(info.st_mode) or info.st_nlink > 1:
        what = "a symbolic link" if stat.S_ISLNK(info.st_mode) else ("a hard link" if stat.S_ISREG(info.st_mode) else "a special file")
        raise ProblemError(
            f"the run's output holds {what} ({path.relative_to(stage) if path != stage else path.name}), "
            "which LEGO never writes; the output was discarded.",
            hint="the model file must not create links or special files in the output folder.",
        )


def discard(stage: Path) -> None:
    """Remove a staging folder (and a commit's trash) left by a failed run; no error if absent."""
    stage = Path(stage)
    for path in (stage, stage.with_name(stage.name + ".old")):
        shutil.rmtree(path, ignore_errors=True)


def mark_failed(out: Path, run_id: str, model: str, error: str) -> Path | None:
    """After run ``run_id`` failed: when ``out`` holds an earlier run's output,
    write ``out/FAILED.json`` (``run_id``, ``model``, ``error``,
    ``output_from_run``: the run the files there belong to) and list it in the
    record; return its path.  Otherwise write nothing and return None."""
    out = Path(out)
    if not out.is_dir() or not owned(out) - {FAILED}:
        return None
    record = _read_record(out) or {"run_id": None, "files": sorted(owned(out))}
    failed = {
        "run_id": run_id,
        "model": model,
        "passed": False,
        "error": error,
        "failed_at": _now(),
        "output_from_run": record.get("run_id"),
        "note": "this run failed and wrote no output; the other LEGO files here are from an earlier run (output_from_run)",
    }
    (out / FAILED).write_text(json.dumps(failed, indent=2))
    record["files"] = sorted(set(record.get("files", [])) | {FAILED})
    (out / RECORD).write_text(json.dumps(record, indent=2))
    return out / FAILED


def _read_record(out: Path) -> dict | None:
    try:
        data = json.loads((out / RECORD).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
