"""What the parent accepts from the sandboxed child's staging folder.

The child, which runs the upload's code, composes the output in a staging
folder (``pipeline``, ``commit=False``); the parent commits it
(``output.finish``) only after :func:`accept` found in it exactly what
LEGO writes, nothing else:

* top level: ``optimized_model.py``, ``reference_model.py``,
  ``lego_runtime.py``, ``lego_overrides.py`` (how the model file is
  imported) and ``report.json`` (all required); ``constants.pt``;
  the folders ``kernels/`` (only ``<name>.py``) and ``tests/`` (only
  ``test_<name>.py``), ``<name>`` a plain Python identifier that is not a
  dunder (no ``__init__.py``: ``kernels`` is no package); no other folder;
* ``reference_modules/`` (the model's own modules, ``local_modules``):
  only ``<name>.py`` files and ``<name>`` folders (``<name>`` a Python
  identifier, no ``__pycache__``), at most ``local_modules.MAX_DEPTH``
  folders deep, ``local_modules.MAX_FILES`` files and
  ``local_modules.MAX_TOTAL_BYTES`` in all;
* at most ``output.MAX_STAGED_ENTRIES`` files and folders,
  ``output.MAX_STAGED_DEPTH`` folders deep and ``output.MAX_STAGED_BYTES``
  in all, counted as the folder is walked, before anything in it is read or
  moved (``output.check_staged``); the report the child returned at most
  ``MAX_BYTES["report.json"]`` as JSON, measured before anything else;
* only regular files with one link (``output.check_staged``), none with
  holes (a sparse file costs no disk here and gigabytes in every zip), each
  within its size limit (:data:`MAX_BYTES`);
* ``report.json``: JSON within the limits of the pipe's messages
  (``sandbox``), equal to the report the child returned, and naming what
  this process knows: the run id, the model's name, dtype, device and
  overrides; the summary's fields the web app shows are of their types
  (:func:`check_report`).  The parent then writes ``report.json`` itself
  from the checked report.

The report's numbers (speedups, times, errors) remain the child's claims:
they come from the child's own measurements, and a parent that does not
re-run the model cannot re-derive them.
"""
from __future__ import annotations

import json
import math
import os
import re
import stat
from pathlib import Path

from lego_core.load import local_modules
from lego_core.load.spec import ProblemError, overrides_to_json
from lego_core.phases import PHASES, SEQUENTIAL
from lego_core.runtime import output, sandbox

REQUIRED = ("optimized_model.py", "reference_model.py", "lego_runtime.py", "lego_overrides.py", "report.json")
OPTIONAL = ("constants.pt",)
FOLDERS = {"kernels": re.compile(r"(?!__)[A-Za-z_][A-Za-z0-9_]{0,127}\.py"), "tests": re.compile(r"test_[A-Za-z_][A-Za-z0-9_]{0,127}\.py")}
MiB = 1 << 20
# bytes per file; a name not listed: SOURCE_BYTES
MAX_BYTES = {"report.json": 16 * MiB, "reference_model.py": 16 * MiB, "constants.pt": 1024 * MiB}
SOURCE_BYTES = 4 * MiB  # a kernel, a test, the composed model
MAX_FILES = 4096  # kernels and their tests
_SHOWN_COUNTS = ("subproblems", "triton", "library")


def accept(stage: Path, report: dict, run_id: str, spec) -> dict:
    """Check the child's staging folder ``stage`` and the ``report`` it
    returned (module docstring); write ``report.json`` there from the checked
    report and return it.  ``spec``: the run's ``ProblemSpec`` as this
    process knows it.  Raises ProblemError naming the first thing that is not
    LEGO's output (the run fails; nothing is committed)."""
    _check_result_size(report)
    try:
        return _accept(Path(stage), report, run_id, spec)
    except OSError as exc:  # a folder the child made unreadable (a non-root worker cannot look inside)
        raise _refusal(f"it cannot be read ({exc.strerror}: {Path(exc.filename or stage).name})") from None


def _accept(stage: Path, report: dict, run_id: str, spec) -> dict:
    output.check_staged(stage)  # links and special files
    names = {p.name for p in stage.iterdir()}
    allowed = {*REQUIRED, *OPTIONAL, *FOLDERS, local_modules.FOLDER}
    _refuse_unless(not names - allowed, stage, sorted(names - allowed))
    _refuse_unless(set(REQUIRED) <= names, stage, [], f"misses {', '.join(sorted(set(REQUIRED) - names))}")
    files = [stage / n for n in names if n not in FOLDERS and n != local_modules.FOLDER]
    for folder, pattern in FOLDERS.items():
        if folder in names:
            inside = sorted(p.name for p in (stage / folder).iterdir())
            odd = [f"{folder}/{n}" for n in inside if not pattern.fullmatch(n)]
            _refuse_unless(not odd, stage, odd)
            files += [stage / folder / n for n in inside]
    _refuse_unless(len(files) <= MAX_FILES, stage, [], f"holds {len(files)} files (at most {MAX_FILES})")
    if local_modules.FOLDER in names:
        files += _module_files(stage)
    for path in files:
        _check_file(stage, path)
    modules_bytes = sum(p.lstat().st_size for p in files if p.relative_to(stage).parts[0] == local_modules.FOLDER)
    _refuse_unless(modules_bytes <= local_modules.MAX_TOTAL_BYTES, stage, [],
                   f"holds {modules_bytes / MiB:.1f} MiB in {local_modules.FOLDER}/ (at most {local_modules.MAX_TOTAL_BYTES / MiB:g} MiB)")
    checked = check_report(stage / "report.json", report, run_id, spec)
    (stage / "report.json").write_text(json.dumps(checked, indent=2))
    return checked


def _check_result_size(report) -> None:
    """ProblemError when the report the child returned is more than
    ``MAX_BYTES["report.json"]`` as JSON (its ``report.json`` could not
    equal it), measured as it is written out, never whole."""
    limit, size = MAX_BYTES["report.json"], 0
    try:
        for chunk in json.JSONEncoder(check_circular=False).iterencode(report):
            size += len(chunk)
            if size > limit:
                raise _refusal(f"the optimizer process returned a report of more than {limit / MiB:g} MiB as JSON")
    except (TypeError, ValueError, RecursionError):
        raise _refusal("the optimizer process returned a report that is not plain JSON data") from None


def _module_files(stage: Path) -> list[Path]:
    """The files of ``stage/reference_modules/`` once it holds only what
    ``local_modules.copy_into`` writes (``<name>.py`` files, ``<name>``
    folders, within the depth and count limits); raises ProblemError naming
    the first thing that is not."""
    top = stage / local_modules.FOLDER
    _refuse_unless(stat.S_ISDIR(top.lstat().st_mode), stage, [local_modules.FOLDER])
    files: list[Path] = []
    folders = [top]
    entries = 0  # files and folders: every folder copy_into makes holds a file
    while folders:  # no recursion: the child chose the depth
        folder = folders.pop()
        depth = len(folder.relative_to(top).parts)
        for path in folder.iterdir():  # counted as listed: a folder of millions is refused early
            entries += 1
            _refuse_unless(entries <= 2 * local_modules.MAX_FILES, stage, [],
                           f"holds more than {local_modules.MAX_FILES} files in {local_modules.FOLDER}/")
            relative = path.relative_to(stage).as_posix()
            if stat.S_ISDIR(path.lstat().st_mode):
                _refuse_unless(local_modules.NAME.fullmatch(path.name) is not None and path.name != "__pycache__", stage, [relative])
                _refuse_unless(depth < local_modules.MAX_DEPTH, stage, [], f"nests {relative} more than {local_modules.MAX_DEPTH} folders deep")
                folders.append(path)
            else:
                _refuse_unless(path.suffix == ".py" and local_modules.NAME.fullmatch(path.stem) is not None, stage, [relative])
                files.append(path)
    _refuse_unless(len(files) <= local_modules.MAX_FILES, stage, [],
                   f"holds more than {local_modules.MAX_FILES} files in {local_modules.FOLDER}/")
    return files


def check_report(path: Path, report: dict, run_id: str, spec) -> dict:
    """The report, once ``path`` (the staged ``report.json``) holds it and
    it names this run (module docstring); raises ProblemError otherwise."""
    try:
        data = path.read_bytes()
        if sandbox.value_bound(data) > sandbox.MAX_MESSAGE_VALUES:
            raise ValueError(f"more than {sandbox.MAX_MESSAGE_VALUES:,} values")
        try:
            staged = json.loads(data)
            too_deep = sandbox._depth_over(staged, sandbox.MAX_MESSAGE_DEPTH)
        except RecursionError:
            too_deep = True
        if too_deep:
            raise ValueError(f"nested deeper than {sandbox.MAX_MESSAGE_DEPTH} levels")
    except (OSError, ValueError) as exc:
        raise _refusal(f"its report.json cannot be read as JSON ({str(exc)[:200]})") from None
    if _canonical(staged) != _canonical(report):  # as text: NaN is not equal to itself
        raise _refusal("its report.json is not the report the optimizer process returned")
    if not isinstance(report, dict) or not isinstance(report.get("summary"), dict):
        raise _refusal("its report is not an object with a summary")
    known = json.loads(json.dumps({"run_id": run_id, "model": spec.name, "dtype": spec.dtype, "device": spec.device, "overrides": overrides_to_json(spec.overrides)}))
    wrong = sorted(k for k, v in known.items() if report.get(k) != v)
    if wrong or report["summary"].get("model") != spec.name:
        raise _refusal(f"its report names another run ({', '.join(wrong) or 'summary.model'} differ from this run's)")
    summary = report["summary"]
    speedup = summary.get("speedup")
    if not (_number(speedup) and speedup >= 0):
        raise _refusal("its report's speedup is not a finite number of at least 0")
    if summary.get("e2e_passed") is not True:
        raise _refusal("its report does not say the composed model passed")
    if not all(isinstance(summary.get(k), int) and not isinstance(summary.get(k), bool) and summary[k] >= 0 for k in _SHOWN_COUNTS):
        raise _refusal("its report's counts of sub-problems are not counts")
    if not all(v is None or (isinstance(v, str) and len(v) <= 100) for v in (summary.get("speedup_kind"), summary.get("launch"))):
        raise _refusal("its report's speedup kind or launch is not a short text")
    error = summary.get("e2e_max_abs_error")
    if not (error is None or (isinstance(error, (int, float)) and not isinstance(error, bool))):  # NaN where both gave NaN
        raise _refusal("its report's end-to-end error is not a number")
    if summary["triton"] + summary["library"] > summary["subproblems"]:
        raise _refusal("its report counts more kernels and library calls than sub-problems")
    _check_phases(report.get("phases_s"))
    _check_signatures((report.get("metrics") or {}).get("signatures") if isinstance(report.get("metrics"), dict) else None)
    return report


def _check_phases(phases) -> None:
    """``report["phases_s"]`` (``lego_core.phases``): absent, or known phase
    names with finite seconds of at least 0 and a ``_wall`` the pipeline's
    stages fit in (1 s of rounding allowed); refused otherwise."""
    if phases is None:
        return
    if not isinstance(phases, dict) or not set(phases) <= {*PHASES, "_wall"} or "_wall" not in phases:
        raise _refusal("its report's phase times name phases LEGO does not have")
    if not all(_number(v) and v >= 0 for v in phases.values()):
        raise _refusal("its report's phase times are not seconds")
    if sum(v for k, v in phases.items() if k in SEQUENTIAL) > phases["_wall"] + 1.0:
        raise _refusal("its report's pipeline stages take longer than its wall time")


def _check_signatures(sig) -> None:
    """``report["metrics"]["signatures"]`` (``search.pricing``): absent, or
    counts that are counts and agree (attempted, won, above 1% within the
    distinct signatures; above 1% attempted within both); refused otherwise."""
    if sig is None:
        return
    keys = ("distinct", "attempted", "won", "above_1pct", "above_1pct_attempted")
    if not isinstance(sig, dict) or not all(isinstance(sig.get(k), int) and not isinstance(sig.get(k), bool) and sig[k] >= 0 for k in keys):
        raise _refusal("its report's signature counts are not counts")
    if max(sig["attempted"], sig["won"], sig["above_1pct"]) > sig["distinct"] or sig["above_1pct_attempted"] > min(sig["above_1pct"], sig["attempted"]):
        raise _refusal("its report's signature counts contradict each other")


def _check_file(stage: Path, path: Path) -> None:
    info = path.lstat()
    if not stat.S_ISREG(info.st_mode):
        raise _refusal(f"it holds {path.relative_to(stage)}, which is not a file", hint="LEGO writes no folders there.")
    limit = MAX_BYTES.get(path.name, SOURCE_BYTES) if path.parent == stage else SOURCE_BYTES
    if info.st_size > limit:
        raise _refusal(f"its {path.relative_to(stage)} is {info.st_size / MiB:.1f} MiB (at most {limit / MiB:g} MiB)")
    if _has_hole(path, info.st_size):
        raise _refusal(f"its {path.relative_to(stage)} is a sparse file (holes), which LEGO never writes")


def _has_hole(path: Path, size: int) -> bool:
    """Whether the file has a hole before its end (``SEEK_HOLE``; False where
    the file system cannot say)."""
    if size == 0 or not hasattr(os, "SEEK_HOLE"):
        return False
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        return os.lseek(fd, 0, os.SEEK_HOLE) < size
    except OSError:
        return False
    finally:
        os.close(fd)


def _canonical(value) -> str:
    return json.dumps(value, sort_keys=True)


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _refuse_unless(ok: bool, stage: Path, odd: list[str], what: str | None = None) -> None:
    if not ok:
        raise _refusal(what or f"it holds {', '.join(odd[:5])}{' ...' if len(odd) > 5 else ''}, which LEGO never writes")


def _refusal(what: str, hint: str = "the model file must not write into the output folder; LEGO writes it.") -> ProblemError:
    return ProblemError(f"the run's output was discarded: {what}.", hint=hint)
