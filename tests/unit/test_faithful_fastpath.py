"""PyTorch's attention fast paths and what LEGO captures (issue 10, section 2).

In eval mode under ``torch.no_grad()``, ``nn.TransformerEncoder``,
``nn.TransformerEncoderLayer`` and ``nn.MultiheadAttention`` run fused fast
paths that torch.export cannot capture; LEGO captures the ordinary path.
Where the two compute different values on the example inputs, capture now
refuses with a ProblemError that names the modules, the first differing
element and the fix (``faithful_capture.check_fast_paths``); before, the
run failed after the whole search with "composed model does not match eager
end to end" and no explanation.  The refusal tests failed before this
change; the controls (fast path equal to the ordinary path, or turned off by
the model file) check that nothing else is refused and that ModelNew then
matches the user's eager.
"""
import pytest
import torch

from faithful_support import fresh_pair, load_optimized, optimize_api, optimize_cli, write_model
from lego_core.errors import OptimizeError
from lego_core.load.spec import ProblemError

pytestmark = pytest.mark.faithful

MODEL = '''
import torch
import torch.nn as nn
{preamble}
kind = "{kind}"
batch_size = 2
seq = 8
d_model = 32
heads = 4
padded = {padded}  # positions masked at the end of each sequence (8: the whole first row)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        if kind == "encoder":
            layer = nn.TransformerEncoderLayer(d_model, heads, 64, dropout=0.0, batch_first=True)
            self.net = nn.TransformerEncoder(layer, 2{encoder_args})
        elif kind == "layer":
            self.net = nn.TransformerEncoderLayer(d_model, heads, 64, dropout=0.0, batch_first=True)
        else:
            self.net = nn.MultiheadAttention(d_model, heads, batch_first=True)

    def forward(self, x, mask):
        if kind == "mha":
            return self.net(x, x, x, key_padding_mask=mask, need_weights=False)[0]
        return self.net(x, src_key_padding_mask=mask)


def get_inputs():
    mask = torch.zeros(batch_size, seq, dtype=torch.bool)
    mask[0, seq - padded:] = True
    mask[1:, seq - min(padded, 2):] = True
    return [torch.randn(batch_size, seq, d_model), mask]


def get_init_inputs():
    return []
'''


def model_file(tmp_path, kind, padded, preamble="", encoder_args=""):
    source = MODEL.replace("{preamble}", preamble).replace("{kind}", kind).replace("{padded}", str(padded))
    return write_model(tmp_path, f"fastpath_{kind}", source.replace("{encoder_args}", encoder_args))


def refusal(tmp_path, path) -> ProblemError:
    try:
        optimize_api(path, tmp_path / "out", mutation=False)
    except ProblemError as err:
        assert "fast path" in err.message and "set_fastpath_enabled(False)" in err.hint, str(err)
        return err
    except OptimizeError as err:  # before this change: after the whole search, unexplained
        pytest.fail(f"failed only after the search: {err}")
    pytest.fail("a model whose fast path differs from the capture was optimized")


def test_transformer_encoder_nested_tensor_padding_is_refused_with_the_fix_on_the_command_line(tmp_path):
    """The reported case: nn.TransformerEncoder (default enable_nested_tensor=True), width 32,
    4 heads, 2 of 8 positions padded: eager returns 0 at the padded positions, the captured
    ordinary path does not.  Exit 1 at capture, the message and fix on the terminal."""
    path = model_file(tmp_path, "encoder", 2)
    proc = optimize_cli(path, tmp_path / "out")
    text = " ".join((proc.stdout + proc.stderr).split())
    assert proc.returncode == 1, text
    assert "composed model does not match eager" not in text
    assert "fast path" in text and "nn.TransformerEncoder" in text and "enable_nested_tensor=False" in text, text
    assert "net (TransformerEncoder)" in text and "0 with the fast path" in text, text


@pytest.mark.parametrize("kind", ["layer", "mha"])
def test_fused_attention_on_a_fully_masked_row_is_refused(tmp_path, kind):
    """nn.TransformerEncoderLayer / nn.MultiheadAttention alone in eval with a key padding
    mask that masks a whole row: the fused kernel returns NaN there, the ordinary path
    (what LEGO captures) finite values."""
    err = refusal(tmp_path, model_file(tmp_path, kind, 8))
    assert "nan with the fast path" in err.message, err.message


def test_transformer_encoder_without_nested_tensors_is_refused_on_a_fully_masked_row(tmp_path):
    """enable_nested_tensor=False alone is not enough when a row is fully masked: each
    layer's fused kernel still returns NaN; the message's other fix is needed."""
    err = refusal(tmp_path, model_file(tmp_path, "encoder", 8, encoder_args=", enable_nested_tensor=False"))
    assert "nan with the fast path" in err.message, err.message


def check_matches_eager(tmp_path, path):
    optimize_api(path, tmp_path / "out", mutation=False)
    module = load_optimized(tmp_path / "out")
    model, new = fresh_pair(module)
    for seed in (1, 2):
        torch.manual_seed(seed)
        x, mask = module.get_inputs()
        with torch.no_grad():
            torch.testing.assert_close(new(x, mask), model(x, mask), atol=1e-4, rtol=1e-4)


def test_layer_with_partial_padding_is_optimized_and_matches_eager_fast_path(tmp_path):
    """Control: nn.TransformerEncoderLayer with 2 of 8 positions padded: the fused kernel
    and the ordinary path agree, so LEGO optimizes it, and ModelNew matches eager run with
    the fast path on (as the user runs it)."""
    assert torch.backends.mha.get_fastpath_enabled()
    check_matches_eager(tmp_path, model_file(tmp_path, "layer", 2))


def test_the_suggested_fix_makes_the_encoder_optimizable(tmp_path):
    """Control: the reported encoder with the fix from the message (fast path turned off at
    the top of the model file): optimized, and ModelNew matches eager as the file now runs it."""
    try:
        check_matches_eager(tmp_path, model_file(tmp_path, "encoder", 2, preamble="torch.backends.mha.set_fastpath_enabled(False)\n"))
    finally:
        torch.backends.mha.set_fastpath_enabled(True)  # the model file turned it off in this process
