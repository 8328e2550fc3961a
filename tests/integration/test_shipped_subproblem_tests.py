"""The output folder ships each kernel's sub-problem test; they must pass as shipped."""
import json
import os
import subprocess
import sys

import pytest

from lego_core import OptimizeConfig, ProblemSpec, optimize
from conftest import SHARED_MODELS  # ../shared/models, or $LEGO_MODELS_DIR where they were carried

MODELS = SHARED_MODELS
TINY = json.loads((MODELS / "tiny.json").read_text())


@pytest.mark.parametrize("name", ["gpt_stack", "scores_chain"])
def test_shipped_kernel_tests_pass(name, tmp_path):
    out = tmp_path / name
    report = optimize(ProblemSpec(str(MODELS / f"{name}.py"), TINY[f"{name}.py"]), out, OptimizeConfig(force_triton=True), isolate=False)
    kernels = sorted(p.stem for p in (out / "kernels").glob("*.py"))
    tests = sorted(p.stem for p in (out / "tests").glob("test_*.py"))
    assert kernels and tests == [f"test_{k}" for k in kernels]
    assert report["summary"]["triton"] >= len(kernels)
    env = dict(os.environ, TRITON_INTERPRET="1")
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:django", "tests"],
        cwd=out, env=env, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert f"{3 * len(kernels)} passed" in result.stdout
