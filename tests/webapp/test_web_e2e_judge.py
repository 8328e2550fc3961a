"""The run page shows the end-to-end judge's errors against fp64 (eager, plan,
torch.compile) and the kernels it dropped (issue 14)."""
from __future__ import annotations

import copy

import pytest
from django.urls import reverse

pytestmark = pytest.mark.django_db


def test_the_run_page_shows_errors_vs_fp64_and_the_dropped_kernels(user_client, make_run, sample_report):
    report = copy.deepcopy(sample_report)
    report["end_to_end"].update(
        errors_vs_fp64={
            "eager": {"max_abs": 3.1e-3, "rmse": 6.2e-4, "norm_rel": 2.7e-7, "nonfinite": 0},
            "plan": {"max_abs": 2.9e-3, "rmse": 6.0e-4, "norm_rel": 2.6e-7, "nonfinite": 0},
            "compile": {"max_abs": 3.3e-3, "rmse": 6.4e-4, "norm_rel": 2.8e-7, "nonfinite": 0},
        },
        multiplier=2.0, floor=1e-5,
        dropped=[{"node_id": "or7", "label": "softmax chain", "kernel": "kernels/sp1.py",
                  "reason": "the end-to-end judge failed with this kernel in the plan: rmse 0.1 > 2 x 6e-4"}],
    )
    run = make_run(state="finished", report=report)
    text = user_client.get(reverse("runs:detail", args=[run.id])).content.decode()
    assert 'id="run-e2e-fp64"' in text
    assert "eager 2.7e-07" in text and "plan 2.6e-07" in text and "torch.compile 2.8e-07" in text
    assert 'id="run-e2e-dropped"' in text and "kernels/sp1.py" in text and "end-to-end judge failed" in text


def test_a_report_without_the_judges_fields_shows_neither(user_client, make_run, sample_report):
    run = make_run(state="finished", report=sample_report)
    text = user_client.get(reverse("runs:detail", args=[run.id])).content.decode()
    assert 'id="run-e2e"' in text and 'id="run-e2e-fp64"' not in text and 'id="run-e2e-dropped"' not in text
