"""Capture falls back when the core-ATen decomposition fails (issue 24).

Hugging Face GPT-2 (SDPA, then ``transpose(1, 2).contiguous().view(...)``)
passes torch.export but failed in ``run_decompositions`` ("Cannot view a
tensor with shape [2, 16, 64] and strides (64, 128, 1) as (32, 64)"), and the
message told the user to "read torch.export's message above" (nothing was
printed above) and to run ``torch.export.export``, which works on such a file.
Now ``lego_core.load.decompose`` keeps whole the op(s) whose decomposition fails
(SDPA first, then a bounded search over the graph's ops), records them in
``Graph.kept_whole``, and when nothing works raises a ``decomposition`` error
that quotes what failed and where.  No library model here: the plain-torch
reproduction ``tests/models_real/gpt2_attention_plain.py`` and a custom op
(``tests/unit/test_hf_capture.py`` has the transformers models).
"""
from pathlib import Path

import pytest
import torch
from torch import nn

from lego_core.load import capture_errors, decompose
from lego_core.load.capture import capture_graph, op_name
from lego_core.load.problem import ProblemSpec, load_problem
from lego_core.load.spec import ProblemError

MODELS = Path(__file__).resolve().parents[1] / "models_real"
PLAIN = MODELS / "gpt2_attention_plain.py"


def test_sdpa_followed_by_a_view_is_captured_with_sdpa_kept_whole_and_the_graph_computes_the_model():
    problem = load_problem(ProblemSpec(str(PLAIN), {}))
    graph = capture_graph(problem)
    ops = [op_name(n) for n in graph.compute_nodes]
    assert ops.count("aten.scaled_dot_product_attention.default") == 1 and "aten._softmax.default" not in ops
    [kept] = graph.kept_whole
    assert (kept.op, kept.nodes, kept.cause) == ("aten.scaled_dot_product_attention.default", 1, "decomposition failed")
    assert "Cannot view a tensor" in kept.reason and "aten.view.default" in kept.reason and "library (ATen) call" in kept.reason
    inputs = problem.make_inputs(3)
    env = graph.run(problem.model, inputs)
    with torch.no_grad():
        torch.testing.assert_close(env[graph.output_nodes[0].name], problem.model(*inputs))


@torch.library.custom_op("lego_test_decompose::doubled", mutates_args=())
def doubled(x: torch.Tensor) -> torch.Tensor:
    return x * 2.0


@doubled.register_fake
def _doubled_fake(x):
    return torch.empty_like(x)  # contiguous, as the op's own result is


def doubled_column_major(x):
    """A decomposition that computes the same values in other strides than the op's fake (column-major)."""
    return (x * 2.0).t().contiguous().t()


class Doubling(nn.Module):
    """Decomposable ops around the custom op (layer_norm, gelu, transpose), then a view of its result."""

    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(8)

    def forward(self, x):
        y = torch.nn.functional.gelu(self.norm(x)).transpose(0, 1).transpose(0, 1)
        return doubled(y).view(-1)


def _exported_with_a_strided_decomposition():
    model = Doubling().eval()
    ep = torch.export.export(model, (torch.randn(4, 8),))
    table = torch.export.default_decompositions()
    table[torch.ops.lego_test_decompose.doubled.default] = doubled_column_major
    return model, ep, table


def test_the_search_keeps_only_the_op_whose_decomposition_fails_within_its_attempt_bound(monkeypatch):
    """Not the SDPA case: the search keeps every decomposable op whole, then
    gives decompositions back by halves; only the culprit stays whole, and
    the decomposable ops around it are decomposed."""
    model, ep, table = _exported_with_a_strided_decomposition()
    with pytest.raises(Exception, match="Cannot view a tensor"):
        ep.run_decompositions(table)
    calls = []
    original = torch.export.ExportedProgram.run_decompositions

    def counted(self, *args, **kwargs):
        calls.append(1)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(torch.export.ExportedProgram, "run_decompositions", counted)
    decomposed, kept = decompose.decompose(ep, table, None)
    assert [(k.op, k.nodes, k.cause) for k in kept] == [("lego_test_decompose.doubled.default", 1, "decomposition failed")]
    ops = {str(n.target) for n in decomposed.graph.nodes if n.op == "call_function"}
    assert "aten.native_layer_norm.default" in ops and "aten.layer_norm.default" not in ops and "aten.transpose.int" not in ops
    assert 2 < len(calls) <= decompose.MAX_ATTEMPTS
    x = torch.randn(4, 8)
    with torch.no_grad():
        torch.testing.assert_close(decomposed.module()(x), model(x))


def test_when_no_table_decomposes_the_error_quotes_what_failed_where_and_says_what_to_try(monkeypatch):
    """With no retry allowed (``MAX_ATTEMPTS`` 1: only the full table), the
    error is its own class: it says torch.export captured the model, quotes
    torch's line, the op and the model file's line, and its fix suggests a
    reshape, never torch.export.export (which works on this file)."""
    monkeypatch.setattr(decompose, "MAX_ATTEMPTS", 1)
    with pytest.raises(ProblemError) as caught:
        capture_graph(load_problem(ProblemSpec(str(PLAIN), {})))
    err = caught.value
    view_line = 1 + PLAIN.read_text().splitlines().index("        return self.proj(y.view(-1, c)).view(b, t, c)")
    assert err.kind == "decomposition" and err.line == view_line
    assert err.message.startswith("torch.export captured the model, but decomposing its graph to core ATen")
    assert "Cannot view a tensor with shape torch.Size([2, 16, 64]) and strides (64, 128, 1)" in err.message
    assert "at aten.view.default" in err.message and "return self.proj(y.view(-1, c)).view(b, t, c)" in err.message
    assert "also tried" not in err.message  # no retry ran, so none is claimed
    assert ".reshape(...)" in err.hint and "torch.export.export" not in err.hint and "above" not in str(err)


def test_an_unsorted_export_failure_quotes_torchs_lines_in_the_message_not_above_it():
    """``explain``'s generic class: the message carries torch's first line,
    the op and the source line torch names; the fix says what to try."""
    problem = load_problem(ProblemSpec(str(PLAIN), {}))
    ep = torch.export.export(problem.model, tuple(problem.make_inputs(0)))
    with pytest.raises(Exception) as raised:
        ep.run_decompositions(torch.export.default_decompositions())
    err = capture_errors.explain(raised.value, str(PLAIN), None)
    assert err.kind == "other"
    assert "ValueError: Cannot view a tensor" in err.message and "at aten.view.default" in err.message
    assert "in the model file line" in err.message and "`return self.proj(y.view(-1, c)).view(b, t, c)`" in err.message
    assert "above" not in err.hint and "quoted in the message" in err.hint and "torch.export.export(" in err.hint


def test_failures_whose_fix_is_the_users_code_are_not_retried(monkeypatch):
    """A constant written in place fails in run_decompositions on torch 2.13:
    torch's own exception comes back at once (``capture_graph`` carries that
    state as a buffer), with no search."""

    class Cell(nn.Module):
        def __init__(self):
            super().__init__()
            self.hidden = torch.zeros(2, 4)

        def forward(self, x):
            self.hidden.copy_(torch.tanh(x + self.hidden))
            return self.hidden * 1.0

    try:
        ep = torch.export.export(Cell(), (torch.randn(2, 4),))
    except Exception as exc:  # noqa: BLE001 - older torch fails in export itself: nothing to decompose
        pytest.skip(f"torch.export fails before decomposing here: {type(exc).__name__}")
    calls = []
    original = torch.export.ExportedProgram.run_decompositions
    monkeypatch.setattr(torch.export.ExportedProgram, "run_decompositions", lambda self, *a, **k: calls.append(1) or original(self, *a, **k))
    try:
        decompose.decompose(ep, torch.export.default_decompositions(), None)
    except ProblemError:
        raise
    except Exception as exc:  # noqa: BLE001 - torch's own exception, unchanged
        assert capture_errors.classify(exc)[0] == "mutated constant" and len(calls) == 1
    else:
        assert len(calls) == 1  # a torch that decomposes it needs no retry either
