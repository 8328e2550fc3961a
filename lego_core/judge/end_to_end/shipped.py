"""Importing an output folder's ``optimized_model.py`` as a user does, judging only what LEGO generated.

``optimized_model.py`` imports two kinds of code: the user's model file
(``reference_model.py``, a copy of theirs) with everything *it* imports (a
Hugging Face model imports ``transformers``, which creates temporary
folders; ``torchvision`` loads its compiled extension; a model file may set
``torch.backends`` flags), and the files LEGO generated (``lego_runtime.py``,
``kernels/*.py``, whose candidate code must not write files, start
processes, load libraries or patch torch when imported).  The import guard
(``verify_trace.import_guard``, through ``judge.inputs.load_module``) must see
only the second kind.

So :func:`import_optimized_model` first imports the user's file exactly as
``optimized_model.py`` will (``lego_core.load.overrides.load_reference``, under
the module name and overrides the file names in its ``REFERENCE_MODULE`` and
``OVERRIDES`` literals, read from its syntax tree without running it), with
no guard: whatever that import does is the user's own and stays in effect
(a flag it sets is set when ``ModelNew`` runs, as in the user's process).
Then it imports ``optimized_model.py`` under the guard; its own import of the
user's file finds the module already loaded (``load_reference`` reuses it),
so what the guard sees is what LEGO's files add.

:func:`load_composed` builds ``ModelNew`` from it as a user does, with the
original model's weights; :func:`fallback_problem` says when a call of it
ran the user's forward instead of the plan.
"""
from __future__ import annotations

import ast
from pathlib import Path
from types import ModuleType

import torch

from lego_core.judge.inputs import load_module
from lego_core.load.overrides import load_reference
from lego_core.load.problem import move_plain_tensor_attributes

MODULE_NAME = "optimized_model"  # as a user imports it: ``from optimized_model import ModelNew``


def reference_import(optimized_model: Path) -> tuple[str, dict] | None:
    """``(module name, overrides)`` with which ``optimized_model.py`` imports
    the model file (its ``REFERENCE_MODULE`` and ``OVERRIDES`` assignments,
    read as literals), or None when the file names none (written by an older
    LEGO).  Raises SyntaxError for a file that does not parse."""
    found: dict = {}
    for stmt in ast.parse(Path(optimized_model).read_text(encoding="utf-8"), str(optimized_model)).body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            if stmt.targets[0].id in ("REFERENCE_MODULE", "OVERRIDES"):
                try:
                    found[stmt.targets[0].id] = ast.literal_eval(stmt.value)
                except ValueError:
                    return None
    name, overrides = found.get("REFERENCE_MODULE"), found.get("OVERRIDES")
    if not isinstance(name, str) or not isinstance(overrides, dict):
        return None
    return name, overrides


def import_optimized_model(out_dir: Path, module_name: str = MODULE_NAME) -> ModuleType:
    """``out_dir/optimized_model.py`` imported as ``module_name``: the user's
    model file first, unjudged (see the module docstring), then the file
    itself under the import guard.  Raises ImportError naming what a
    generated file did at import (wrote files, started a process or loaded a
    library, changed global torch state, replaced a torch function), and
    whatever the model file raises."""
    path = Path(out_dir) / "optimized_model.py"
    reference = reference_import(path)
    if reference is not None:
        load_reference(Path(out_dir), *reference)  # the user's file and what it imports: theirs, not judged
    try:
        return load_module(path, module_name)
    except ImportError as exc:
        culprit = _file_at_fault(Path(out_dir))
        if culprit is None:
            raise
        raise ImportError(f"optimized_model.py: {culprit}") from None


def _file_at_fault(out_dir: Path) -> str | None:
    """After ``optimized_model.py``'s import was refused: the generated file
    whose own import the guard refuses (each imported again alone, under the
    guard, which undoes what it changed), as ``"kernels/x.py: reason"``; None
    when none is refused alone."""
    for path in [out_dir / "lego_runtime.py", *sorted((out_dir / "kernels").glob("*.py"))]:
        try:
            load_module(path, f"lego_fault_{path.stem}")
        except ImportError as exc:
            return f"{path.relative_to(out_dir)}: {str(exc).split(': ', 1)[-1]}"
        except Exception:  # noqa: BLE001 - a file that fails alone for another reason is not the one refused
            continue
    return None


def load_composed(out_dir: Path, problem) -> torch.nn.Module:
    """``ModelNew`` from ``out_dir`` with the original model's weights, on the
    problem's device and dtype, built as a user builds it: ``optimized_model``
    imported as a user imports it (``lego_core.judge.end_to_end.shipped``: the model file
    first, then the generated files under the import guard),
    ``ModelNew(*get_init_inputs())`` under ``torch.manual_seed(0)``, moved,
    eval, the weights loaded."""
    module = import_optimized_model(Path(out_dir))
    torch.manual_seed(0)
    new = module.ModelNew(*module.get_init_inputs())
    new = new.to(device=problem.spec.device, dtype=problem.spec.torch_dtype).eval()
    move_plain_tensor_attributes(new, problem.spec.device)  # as the problem's loader moved them (a stateful cell's self.hidden)
    new.load_state_dict(problem.model.state_dict())
    return new


def fallback_problem(forward: dict) -> str:
    """Why a composed call whose ``forward`` (``composed.ComposedForward.forward``)
    is not acceptable as a test of the plan, or ``""``: ``LAUNCH`` asked for
    the plan and the call ran the user's original forward instead (a value
    the plan baked in that differs as a user loads the model, a dtype the
    plan was not made for...); its output is eager's, so judging it would
    pass a plan that never ran."""
    if forward.get("requested") == "plan" and forward.get("ran") != "plan":
        return ("ModelNew ran the original forward instead of LEGO's plan when built and called as a user does "
                f"(optimized_model.py imported from its folder): {forward.get('why') or 'no reason given'}")
    return ""
