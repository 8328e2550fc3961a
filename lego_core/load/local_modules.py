"""A model split over several files: the modules beside the model file.

A model file may import the modules and packages of its own folder
(``from mylayers import Block``), as ``python model.py`` finds them.  This
module is the one place that decides what of the user's files a run sees
and ships:

- the jail (``jail.for_run``) shows the model file's folder read-only, not
  its parents (:func:`import_view`), unless that folder is too broad to show
  whole (the file system's root, a folder directly under it, the home folder,
  the temporary folder): then only the model file itself.  The command line
  also shows the folders of the caller's ``PYTHONPATH``
  (``OptimizeConfig.import_paths``); a web run shows its own upload folder.
  The jail hands the child what it shows in :data:`VIEW_ENV`;
- loading (``problem.load_problem``) puts the folder first on ``sys.path``
  (:func:`put_on_path`), lists the modules the model imported from it
  (:func:`imported_modules`) and explains a failed import
  (:func:`explain_import_error`: the missing module, what the import path
  holds, and the fix);
- composing (``compose.folder.write_output``) copies those modules into the output
  folder's ``reference_modules/`` (:func:`copy_into`), and
  ``optimized_model.py``'s import of ``reference_model.py``
  (``lego_overrides.load_reference``) puts that folder first on ``sys.path``
  before it runs the file, so the output folder works on its own.  Only Python source is shipped (``.py`` files; a package
  as its folder's ``.py`` files), within :data:`MAX_FILES` files,
  :data:`MAX_FILE_BYTES` each and :data:`MAX_TOTAL_BYTES` in all; the parent
  checks the staged folder against the same limits (``staged``).

Light on purpose (standard library only): the parent process imports it
(``jail``, ``staged``) without torch.
"""
from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import sys
import tempfile
import traceback
import types
from pathlib import Path

FOLDER = "reference_modules"  # in the output folder, beside reference_model.py
VIEW_ENV = "LEGO_IMPORT_VIEW"  # set by the jail for the child: what it shows of the user's files (JSON)
MAX_FILES = 1000  # .py files shipped in reference_modules/
MAX_FILE_BYTES = 4 << 20  # one shipped file (as staged.SOURCE_BYTES)
MAX_TOTAL_BYTES = 64 << 20  # all shipped files together
MAX_DEPTH = 8  # folders nested under reference_modules/ (a package, its subpackages...)
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")  # a module or package name (no dots, no dashes)
PSEUDO_FILE_SYSTEMS = ("/proc", "/sys", "/dev", "/run")


@dataclasses.dataclass
class LocalModules:
    """The modules a model imported from its own folder (``folder``):
    ``names`` the top-level modules and packages (``["blocks", "mylayers"]``),
    ``files`` what ships, as ``(path under reference_modules/, source file)``
    (``("blocks/__init__.py", "/models/blocks/__init__.py")``)."""

    folder: str
    names: list[str] = dataclasses.field(default_factory=list)
    files: list[tuple[str, str]] = dataclasses.field(default_factory=list)


# --- what the jail shows --------------------------------------------------


def too_broad(folder: str | Path) -> str:
    """Why the jail does not show ``folder`` whole as a model's (or a
    ``PYTHONPATH``) folder, in words; ``""`` when it may.  Too broad: the
    file system's root, a folder directly under it (``/home``, ``/tmp``,
    ``/work``), the home folder, the temporary folder, and the kernel's
    pseudo file systems."""
    folder = Path(os.path.realpath(folder))
    if folder == Path(folder.anchor):
        return "it is the file system's root"
    if folder.parent == Path(folder.anchor):
        return "it is a top-level folder of the machine"
    if any(folder == Path(p) or Path(p) in folder.parents for p in PSEUDO_FILE_SYSTEMS):
        return "it is a system folder"
    if folder == Path(os.path.realpath(Path.home())):
        return "it is the home folder"
    if folder == Path(os.path.realpath(tempfile.gettempdir())):
        return "it is the temporary folder, shared with other programs"
    return ""


def import_view(model_file: str, import_paths: tuple | list = (), model_folder: bool = True) -> dict:
    """What the jail shows of the user's own files besides the model file,
    all read-only: ``{"model_folder": folder or None, "model_folder_hidden":
    why not ("" when shown), "import_paths": the folders of ``import_paths``
    shown, "import_paths_hidden": [[folder, why not], ...]}``.  The model
    file's folder is shown unless ``model_folder`` is False (a web upload
    whose folder is not its run's own) or it is :func:`too_broad`; an import
    path unless it is missing, not a folder, or too broad.  Paths are
    absolute and resolved (the jail mounts them at the same place)."""
    folder = os.path.realpath(Path(model_file).parent)
    hidden = "" if model_folder else "it is not a folder of this run's own"
    hidden = hidden or too_broad(folder)
    shown, refused = [], []
    for entry in import_paths:
        if not entry:
            continue
        path = os.path.realpath(entry)
        why = "it does not exist" if not os.path.exists(path) else ("it is not a folder" if not os.path.isdir(path) else too_broad(path))
        if why:
            refused.append([str(entry), why])
        elif path not in shown and path != folder:
            shown.append(path)
    return {"model_folder": None if hidden else folder, "model_folder_hidden": hidden, "import_paths": shown,
            "import_paths_hidden": refused}


def jail_view() -> dict | None:
    """In the jailed child: what the jail shows (:func:`import_view`, from
    :data:`VIEW_ENV`); None outside the jail (everything this user can read
    is visible there)."""
    try:
        view = json.loads(os.environ.get(VIEW_ENV) or "null")
    except ValueError:
        return None
    return view if isinstance(view, dict) else None


def describe_view(view: dict) -> str:
    """``view`` (:func:`import_view`) in words, for a log line."""
    parts = [f"the model file's folder {view['model_folder']}" if view.get("model_folder")
             else f"the model file alone (its folder is not shown: {view.get('model_folder_hidden')})"]
    if view.get("import_paths"):
        parts.append("the PYTHONPATH folders " + ", ".join(view["import_paths"]))
    for path, why in view.get("import_paths_hidden", []):
        parts.append(f"not the PYTHONPATH entry {path} ({why})")
    return "; ".join(parts)


# --- loading -----------------------------------------------------------------


def put_on_path(model_file: str) -> str:
    """Put the model file's folder first on ``sys.path`` (once), as ``python
    model.py`` does, so that the model imports its sibling modules and
    packages; returns the folder (resolved)."""
    folder = os.path.realpath(Path(model_file).parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    return folder


def imported_modules(model_file: str, before: set[str], model_module: types.ModuleType | None = None) -> LocalModules:
    """The modules the model imported from its own folder: those whose
    import root is the model file's folder or a folder below it (not the
    interpreter's), and that are either new in ``sys.modules`` since
    ``before`` (its names before the file was imported: a lazy import in
    forward counts) or referred to by ``model_module``'s globals, directly
    or through another such module (``from mylayers import Block``: an
    earlier load of the same model in this process imported ``mylayers``
    already).  ``model_module`` (the file itself, as LEGO loaded it) and
    LEGO's own package are not the model's modules.  A module ships as its
    file, a package as its folder's ``.py`` files (subpackages too,
    ``__pycache__`` and names that cannot be imported left out).

    Raises ProblemError when what ships cannot be: a compiled module (only
    Python source is copied) or more than the limits (:data:`MAX_FILES`,
    :data:`MAX_FILE_BYTES`, :data:`MAX_TOTAL_BYTES`, :data:`MAX_DEPTH`)."""
    from lego_core.load.spec import ProblemError

    folder = Path(os.path.realpath(Path(model_file).parent))
    local = _LocalRoots(folder)
    names = {name for name in sys.modules if name not in before} | _referenced(model_module, local)
    tops: dict[str, Path] = {}
    compiled: list[str] = []
    for name in sorted(names):
        module = sys.modules.get(name)
        if module is None or module is model_module or name.split(".")[0] == "lego_core":
            continue
        for location, is_package in _locations(module):
            root = local.root(name, location, is_package)
            if root is None:
                continue
            if not is_package and location.suffix != ".py":
                compiled.append(f"{name} ({location.name})")
                continue
            top = name.split(".")[0]
            tops.setdefault(top, root / top if is_package or "." in name else location)
    if compiled:
        raise ProblemError(
            f"the model imports the compiled module(s) {', '.join(compiled[:5])} from its folder; the optimized model "
            f"ships the model's own modules as Python source only ({FOLDER}/), so it could not import them.",
            model_file, hint="install the compiled module into the environment as a package (pip install), or make it a .py file.")
    found = LocalModules(str(folder), sorted(tops))
    for top, source in sorted(tops.items()):
        found.files += _package_files(top, source) if source.is_dir() else [(source.name, str(source))]
    _check_limits(found, model_file)
    return found


class _LocalRoots:
    """Which modules were imported from the model's ``folder``: their import
    root is the folder or below it, and not inside the interpreter's prefix
    (a virtual environment inside the model's folder holds installed
    packages, not the model's)."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.interpreter = {Path(os.path.realpath(p)) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix)}

    def root(self, name: str, location: Path, is_package: bool) -> Path | None:
        """The import root of module ``name`` at ``location`` when it is the model's, else None."""
        root = _import_root(name, location, is_package)
        if root is None or not (root == self.folder or self.folder in root.parents):
            return None
        if any(root == p or p in root.parents for p in self.interpreter):
            return None
        return root

    def holds(self, module: types.ModuleType) -> bool:
        name = getattr(module, "__name__", None)
        return isinstance(name, str) and any(self.root(name, loc, pkg) is not None for loc, pkg in _locations(module))


def _referenced(model_module: types.ModuleType | None, local: _LocalRoots) -> set[str]:
    """Names of the model folder's modules that ``model_module``'s globals
    refer to (a module, or an object defined in one: ``Block.__module__``),
    and those their globals refer to in turn."""
    found: set[str] = set()
    queue = [model_module] if model_module is not None else []
    while queue:
        for value in list(vars(queue.pop()).values()):
            try:
                name = value.__name__ if isinstance(value, types.ModuleType) else getattr(value, "__module__", None)
            except Exception:  # noqa: BLE001 - an object of the user's whose attribute lookup fails
                continue
            module = sys.modules.get(name) if isinstance(name, str) and name not in found else None
            if module is not None and module is not model_module and local.holds(module):
                found.add(name)
                queue.append(module)
    return found


def _locations(module: types.ModuleType) -> list[tuple[Path, bool]]:
    """Where a module was imported from: ``(its file, False)``, ``(its
    package folder, True)``; a namespace package's folders."""
    file = getattr(module, "__file__", None)
    if isinstance(file, str) and file:
        path = Path(file)
        return [(path.parent, True)] if path.stem == "__init__" else [(path, False)]
    paths = getattr(module, "__path__", None)
    try:
        return [(Path(p), True) for p in list(paths or []) if isinstance(p, str)]
    except TypeError:
        return []


def _import_root(name: str, location: Path, is_package: bool) -> Path | None:
    """The ``sys.path`` folder a module named ``name`` was found under
    (``blocks.inner`` at ``/m/blocks/inner.py``: ``/m``), or None when its
    location does not spell its name (a file loaded by path under another
    name)."""
    parts = name.split(".")
    try:
        root = location.parents[len(parts) - 1]
    except IndexError:
        return None
    relative = location.relative_to(root).parts
    spelled = [*relative[:-1], relative[-1] if is_package else relative[-1].split(".")[0]]
    return Path(os.path.realpath(root)) if spelled == parts else None


def _package_files(top: str, package: Path) -> list[tuple[str, str]]:
    """A package's ``.py`` files under ``top/``, its subfolders too (not
    ``__pycache__``, hidden folders, folders through links, or names that
    cannot be imported), sorted."""
    files = []
    for dirpath, dirnames, filenames in os.walk(package):  # links to folders are not followed
        relative = Path(dirpath).relative_to(package)
        dirnames[:] = sorted(d for d in dirnames if NAME.fullmatch(d) and d != "__pycache__")
        for name in sorted(filenames):
            if name.endswith(".py") and NAME.fullmatch(name[:-3]):
                files.append(((Path(top) / relative / name).as_posix(), str(Path(dirpath) / name)))
    return files


def _check_limits(found: LocalModules, model_file: str) -> None:
    from lego_core.load.spec import ProblemError

    hint = "keep the model and the modules it imports in a folder of their own, without large or generated files."
    if len(found.files) > MAX_FILES:
        raise ProblemError(f"the modules the model imports from its folder ({', '.join(found.names[:5])}) hold "
                           f"{len(found.files)} Python files; the optimized model ships at most {MAX_FILES}.", model_file, hint=hint)
    total = 0
    for relative, source in found.files:
        if relative.count("/") > MAX_DEPTH:
            raise ProblemError(f"{relative} lies {relative.count('/')} folders deep; the optimized model ships the model's "
                               f"modules at most {MAX_DEPTH} deep.", model_file, hint=hint)
        size = os.stat(source).st_size
        total += size
        if size > MAX_FILE_BYTES:
            raise ProblemError(f"{relative}, a module the model imports from its folder, is {size / (1 << 20):.1f} MiB; the "
                               f"optimized model ships files of at most {MAX_FILE_BYTES >> 20} MiB.", model_file, hint=hint)
    if total > MAX_TOTAL_BYTES:
        raise ProblemError(f"the modules the model imports from its folder hold {total / (1 << 20):.1f} MiB of Python; the "
                           f"optimized model ships at most {MAX_TOTAL_BYTES >> 20} MiB.", model_file, hint=hint)


# --- a failed import, explained --------------------------------------------


@dataclasses.dataclass
class ImportExplanation:
    """What a failed import of the model (or of a module it imports) means:
    ``message`` (after ``"ModuleNotFoundError while importing the file: "``)
    and ``hint`` (the fix)."""

    message: str
    hint: str


def explain_import_error(exc: ImportError, model_file: str) -> ImportExplanation | None:
    """The message and fix for an ImportError raised while the model file
    (or code it runs) imported something; None for an ImportError of
    another kind (a library failing to load its own binary, say), which
    keeps the generic message.

    - a missing module (``No module named 'mylayers'``): names it, says what
      the import path holds (in the jail: the interpreter's packages,
      LEGO's own package, the model file's folder read-only, the
      ``PYTHONPATH`` folders shown), and the fix: the module beside the
      model file, or installed into LEGO's environment;
    - a missing submodule of a package that exists: names the package's file;
    - a name a module lacks (``cannot import name 'X' from 'm'``): names the
      file it came from, and a same-named module of the model's folder that
      an already imported one hides;
    - a relative import (``from .mylayers import ...``): the absolute form."""
    text = str(exc)
    where = _raised_in(exc, model_file)
    if "attempted relative import" in text:
        return ImportExplanation(text + where, "import the model's own modules absolutely (`from mylayers import Block`, not "
                                 "`from .mylayers import Block`): LEGO imports the model file as a top-level module, with its folder "
                                 "first on the import path.")
    if isinstance(exc, ModuleNotFoundError) and exc.name:
        parent, _, child = exc.name.rpartition(".")
        loaded = sys.modules.get(parent) if parent else None
        if loaded is not None and getattr(loaded, "__file__", None):
            return ImportExplanation(f"No module named '{exc.name}': the package `{parent}` ({loaded.__file__}) has no module "
                                     f"`{child}`{where}", "check the module's name at that line.")
        return _missing_module(exc.name.split(".")[0], text + where, model_file)
    if exc.name and exc.path and "cannot import name" in text:
        mine = Path(os.path.realpath(Path(model_file).parent)) / f"{exc.name.split('.')[0]}.py"
        if mine.is_file() and os.path.realpath(exc.path) != str(mine):
            return ImportExplanation(text + where, f"`{exc.name}` was already loaded from {exc.path} (before the model's own "
                                     f"{mine.name}, which it hides): rename your module.")
        return ImportExplanation(text + where, f"check the name imported at that line: `{exc.name}` came from {exc.path}.")
    return None


def _missing_module(top: str, message: str, model_file: str) -> ImportExplanation:
    view = jail_view()
    holds = import_path_words(view, model_file)
    install = f"or install the package that provides `{top}` into LEGO's environment (`{sys.executable} -m pip install ...`)"
    if view is not None and not view.get("model_folder"):
        return ImportExplanation(
            f"{message}; {holds}",
            f"move the model file and its modules into a folder of their own (the sandbox shows the model file's folder unless "
            f"{view.get('model_folder_hidden') or 'it is too broad'}), {install}; a web upload is one file: paste the module's "
            "code into it.")
    return ImportExplanation(
        f"{message}; {holds}",
        f"put `{top}.py` (or the package folder `{top}/`) beside the model file, {install}; a web upload is one file: paste "
        "the module's code into it.")


def import_path_words(view: dict | None, model_file: str) -> str:
    """What the import path holds, in words: inside the jail (``view``: :func:`jail_view`)
    only the interpreter's packages, LEGO's own package, the model file's
    folder (read-only) or why it is not shown, and the ``PYTHONPATH``
    folders shown; outside it, the model file's folder and ``sys.path``."""
    packages = [p for p in sys.path if p.endswith(("site-packages", "dist-packages")) and os.path.isdir(p)]
    interpreter = f"the interpreter's packages ({', '.join(packages) or sys.prefix})"
    if view is None:
        folder = os.path.realpath(Path(model_file).parent)
        others = [p for p in sys.path if p and p != folder and p not in packages]
        return (f"the import path holds the model file's folder ({folder}), {interpreter}"
                + (f" and {len(others)} more folders ({', '.join(others[:4])}{', ...' if len(others) > 4 else ''})" if others else ""))
    shown = [interpreter, "LEGO's own package (lego_core)"]
    if view.get("model_folder"):
        shown.append(f"the model file's folder ({view['model_folder']}, read-only)")
    if view.get("import_paths"):
        shown.append(f"the PYTHONPATH folders {', '.join(view['import_paths'])} (read-only)")
    words = "inside the sandbox the import path holds only " + ", ".join(shown[:-1]) + " and " + shown[-1]
    if not view.get("model_folder"):
        words += f"; the model file's folder is not shown ({view.get('model_folder_hidden')}), only the file"
    return words


def _raised_in(exc: BaseException, model_file: str) -> str:
    """`` (in mylayers.py, line 3)`` when the failed import is in a module of
    the model's folder rather than the model file itself; else ``""``."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if not f.filename.startswith("<")]
    if not frames or os.path.realpath(frames[-1].filename) == os.path.realpath(model_file):
        return ""
    folder = Path(os.path.realpath(Path(model_file).parent))
    last = Path(os.path.realpath(frames[-1].filename))
    if folder not in last.parents:
        return ""
    return f" (in {last.relative_to(folder).as_posix()}, line {frames[-1].lineno})"


# --- the output folder ---------------------------------------------------------


def copy_into(out_dir: Path, modules: LocalModules | None) -> None:
    """Copy the model's own modules (``modules.files``) into
    ``out_dir/reference_modules/`` (an earlier copy there removed first;
    nothing when the model imported none).  Links are copied as the files
    they point to."""
    target = Path(out_dir) / FOLDER
    shutil.rmtree(target, ignore_errors=True)
    for relative, source in (modules.files if modules else []):
        dest = target / relative
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, dest)


def report_entry(modules: LocalModules | None, model_file: str) -> dict:
    """``report.json``'s ``"sandbox"``: ``jailed`` (whether the run ran in
    bubblewrap), ``model_folder`` / ``model_folder_hidden`` /
    ``import_paths`` / ``import_paths_hidden`` (what the jail showed of the
    user's files, :func:`import_view`; outside the jail everything was
    visible and ``model_folder`` is the folder put on the import path) and
    ``reference_modules`` (the model's own modules shipped in
    ``reference_modules/``)."""
    view = jail_view()
    if view is None:
        view = {"model_folder": os.path.realpath(Path(model_file).parent), "model_folder_hidden": "", "import_paths": [],
                "import_paths_hidden": []}
    return {"jailed": jail_view() is not None, **view, "reference_modules": list(modules.names) if modules else []}
