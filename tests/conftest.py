"""Fixtures shared by every test package: the reference models in ../shared."""
import importlib.util
import json
import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _load_test_session():
    """webapp/config/settings/test_session.py by its path: importing it as
    ``webapp.config...`` runs ``webapp/config/__init__.py``, which imports
    Celery, and the GPU machine (``pytest -m gpu``) has no Celery or Django."""
    spec = importlib.util.spec_from_file_location("lego_test_session", REPO / "webapp" / "config" / "settings" / "test_session.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


own_test_session_names = _load_test_session().own_test_session_names
# ../shared/models as laid out in CI; $LEGO_MODELS_DIR where they were carried
# elsewhere (the GPU machine: bench/gpu_session.sh), as the benches read it
SHARED_MODELS = Path(os.environ.get("LEGO_MODELS_DIR") or REPO.parent / "shared" / "models")

# A fresh kernel cache per test session (worker and child processes inherit
# it): tests never read ~/.cache, and a test that counts agent calls is not
# answered by an earlier session's kernels.  Tests of the cache itself use
# their own tmp_path.
own_test_session_names()  # under pytest-xdist: per worker process


@pytest.fixture(scope="session")
def shared_models() -> Path:
    """``../shared/models`` beside the repository (as laid out in CI), or ``$LEGO_MODELS_DIR``."""
    if not SHARED_MODELS.is_dir():
        pytest.skip(f"reference models not found at {SHARED_MODELS}")
    return SHARED_MODELS


@pytest.fixture(scope="session")
def tiny_overrides(shared_models):
    """``tiny_overrides("mlp_residual.py")`` -> its CPU-sized constant overrides."""
    table = json.loads((shared_models / "tiny.json").read_text())
    return lambda name: dict(table[name])


def pytest_collection_modifyitems(config, items):
    """Skip tests marked ``gpu`` on a machine without CUDA."""
    gpu_tests = [item for item in items if "gpu" in item.keywords]
    if not gpu_tests:
        return
    import torch

    if not torch.cuda.is_available():
        for item in gpu_tests:
            item.add_marker(pytest.mark.skip(reason="needs a CUDA GPU"))
