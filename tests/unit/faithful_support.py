"""Helpers for the ``faithful`` tests (issue 10, section 2): write a tiny
model file, optimize it at CPU sizes (Triton interpreter) through the API
or the command line, and load the ``ModelNew`` it produced next to eager."""
from __future__ import annotations

import uuid
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import torch

from lego_core import ProblemSpec, optimize
from lego_core.config import OptimizeConfig
from lego_core.judge.inputs import load_module  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


# the top of a small model file: imports, its two size constants and get_inputs / get_init_inputs
MODEL_HEAD = '''
import torch
import torch.nn as nn

batch_size = 2
width = 4


def get_inputs():
    return [torch.randn(batch_size, width)]


def get_init_inputs():
    return []
'''


def write_model(folder: Path, name: str, source: str) -> Path:
    """Write ``source`` (dedented) to ``folder/name.py``; returns the path."""
    path = Path(folder) / f"{name}.py"
    path.write_text(textwrap.dedent(source).lstrip())
    return path


def optimize_api(model_file: Path, out: Path, overrides: dict | None = None, **config) -> dict:
    """Optimize ``model_file`` into ``out`` (no kernel cache); returns report.json's dict."""
    return optimize(ProblemSpec(str(model_file), overrides or {}), str(out), OptimizeConfig(cache=False, **config))


def optimize_cli(model_file: Path, out: Path, *args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    """``python -m lego_core optimize MODEL --out OUT --no-cache ARGS`` as a user runs it."""
    env = dict(os.environ, TRITON_INTERPRET="1", COLUMNS="200", PYTHONWARNINGS="ignore")
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return subprocess.run(
        [sys.executable, "-m", "lego_core", "optimize", str(model_file), "--out", str(out), "--no-cache", *args],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout,
    )


def load_optimized(out: Path):
    """Import ``out/optimized_model.py`` under a fresh module name, with a fresh
    reference module (``lego_overrides.load_reference`` reuses the model file's
    module an earlier import of the same folder left in ``sys.modules``)."""
    for name in [n for n in sys.modules if n.startswith("lego_reference_")]:
        del sys.modules[name]
    return load_module(Path(out) / "optimized_model.py", f"faithful_{uuid.uuid4().hex[:8]}")


def fresh_pair(module, seed: int = 0):
    """(eager Model in eval mode, ModelNew with the same weights)."""
    torch.manual_seed(seed)
    model = module.Model(*module.get_init_inputs()).eval()
    new = module.ModelNew(*module.get_init_inputs())
    new.load_state_dict(model.state_dict())
    return model, new
