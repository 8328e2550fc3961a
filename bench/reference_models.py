"""The reference models the benchmarks run, and their tiny sizes.

Models are the ``*.py`` files of ``$LEGO_MODELS_DIR``, else of
``../shared/models`` beside the repository; ``tiny.json`` there maps a file
name to the constant overrides that make it small enough for a CPU
(``{"mlp_residual.py": {"batch_size": 8, ...}}``).
"""
from __future__ import annotations

import json
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODELS_DIR = Path(os.environ.get("LEGO_MODELS_DIR", ROOT.parent / "shared" / "models"))


def model_names(selected: list[str] | None = None, models_dir: Path = MODELS_DIR) -> list[str]:
    """Model names (file stems), sorted; ``selected`` restricts them and may
    name files with or without ``.py``.  Raises SystemExit naming the
    folder when a selected model is not there."""
    available = sorted(p.stem for p in models_dir.glob("*.py"))
    if not selected:
        return available
    names = [Path(s).name.removesuffix(".py") for s in selected]
    unknown = [n for n in names if n not in available]
    if unknown:
        raise SystemExit(f"no model {', '.join(unknown)} in {models_dir} (there: {', '.join(available) or 'nothing'})")
    return names


def model_path(name: str, models_dir: Path = MODELS_DIR) -> Path:
    return models_dir / f"{name}.py"


def tiny_table(models_dir: Path = MODELS_DIR) -> dict[str, dict]:
    """``tiny.json`` as a dict keyed by file name; empty when the file is missing."""
    path = models_dir / "tiny.json"
    return json.loads(path.read_text()) if path.is_file() else {}


def tiny_overrides(name: str, table: dict[str, dict] | None) -> dict:
    """The tiny overrides of model ``name`` (a stem) from ``table``, or ``{}``
    (no table means the file's own sizes)."""
    return dict((table or {}).get(f"{name}.py", {}))
