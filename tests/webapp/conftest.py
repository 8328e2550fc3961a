"""Fixtures for the web app's tests: users, runs, media in a temporary folder."""
from __future__ import annotations

import pytest
from django.core.files.base import ContentFile

from webapp.runs.models import Run

GOOD_MODEL = b'''import torch
import torch.nn as nn

rows = 4


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x) * 2


def get_inputs():
    return [torch.randn(rows, 8)]


def get_init_inputs():
    return []
'''

# the syntax error is on line 6
BROKEN_MODEL = b'''import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x) return x


def get_inputs():
    return [torch.randn(2, 2)]


def get_init_inputs():
    return []
'''


@pytest.fixture
def good_model() -> bytes:
    return GOOD_MODEL


@pytest.fixture
def broken_model() -> bytes:
    """A model file with a syntax error on line 6."""
    return BROKEN_MODEL


@pytest.fixture(autouse=True)
def media_root(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    return settings.MEDIA_ROOT


@pytest.fixture
def user(django_user_model):
    return django_user_model.objects.create_user("alice", password="pw-alice")


@pytest.fixture
def other_user(django_user_model):
    return django_user_model.objects.create_user("bob", password="pw-bob")


@pytest.fixture
def user_client(client, user):
    client.force_login(user)
    return client


@pytest.fixture
def sample_report():
    """A report.json in the shape lego_core writes."""
    return {
        "model": "scores_chain",
        "overrides": {"rows": 16},
        "dtype": "fp32",
        "device": "cpu",
        "subproblems": [
            {
                "id": "sp0", "label": "proj", "module_path": "proj", "kind": "gemm",
                "ops": ["aten.addmm.default"], "input_shapes": [[16, 40]], "output_shapes": [[16, 30]],
                "implementation": "library", "kernel": None, "max_abs_error": None,
                "time_ms": 0.0125, "time_kind": "estimated", "baseline_ms": 0.0125,
            },
            {
                "id": "sp1", "label": "softmax chain", "module_path": "", "kind": "rows",
                "ops": ["aten.div.Tensor", "aten._softmax.default", "aten.logsumexp.default"],
                "input_shapes": [[16, 30]], "output_shapes": [[16]],
                "implementation": "triton", "kernel": "kernels/sp1.py", "max_abs_error": 2.4e-07,
                "time_ms": 0.0031, "time_kind": "estimated", "baseline_ms": 0.0212,
            },
        ],
        "plan": {"cost_ms": 0.0156, "cost_kind": "estimated", "baseline_ms": 0.0337, "speedup": 2.16},
        "end_to_end": {"passed": True, "max_abs_error": 4.8e-07, "norm_rel_error": 1.1e-07, "seed": 4242},
        "metrics": {"agent_calls": 3, "wall_time_s": 4.2, "subproblems": 2, "triton": 1, "library": 1},
    }


@pytest.fixture
def make_run(user):
    """``make_run(state=..., owner=..., source=..., **fields)`` saves a Run with an upload."""

    def make(owner=None, source: bytes = GOOD_MODEL, filename: str = "model.py", **fields) -> Run:
        run = Run(owner=owner or user, original_filename=filename, **fields)
        run.upload.save(filename, ContentFile(source), save=False)
        run.save()
        return run

    return make
