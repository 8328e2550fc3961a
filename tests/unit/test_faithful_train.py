"""ModelNew in train mode computes what eager computes (issue 10, section 2).

The plan is the eval-mode forward torch.export captured; before this change
only BatchNorm/Dropout *modules* made ModelNew refuse ``.train()``, and every
other train-dependent computation ran the eval plan silently.  Now train
mode anywhere in the model (the root or any submodule) runs the user's own
forward with a warning (``lego_runtime.forward_mode``), so train-mode
outputs equal eager's under the same RNG seed, and ``.eval()`` runs the plan
again.  Each case failed before this change (ModelNew returned the eval
forward's values) and passes now.
"""
import warnings

import pytest
import torch

from faithful_support import fresh_pair, load_optimized, optimize_api, write_model

pytestmark = pytest.mark.faithful

MODEL = '''
import torch
import torch.nn as nn
import torch.nn.functional as F

kind = "{kind}"
batch_size = 2
seq = 4
width = 8


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(width, width)
        if kind == "lstm":
            self.lstm = nn.LSTM(width, width, num_layers=2, dropout=0.5, batch_first=True)
        if kind == "mha":
            self.attn = nn.MultiheadAttention(width, 2, dropout=0.5, batch_first=True)
        if kind == "batch_norm":
            self.register_buffer("mean", torch.zeros(width))
            self.register_buffer("var", torch.ones(width))
        if kind == "submodule":
            self.block = nn.Sequential(nn.Linear(width, width), nn.Dropout(0.5))

    def forward(self, x):
        h = self.proj(x)
        if kind == "f_dropout":
            return F.dropout(h, p=0.5, training=self.training)
        if kind == "lstm":
            return self.lstm(h)[0]
        if kind == "mha":
            return self.attn(h, h, h, need_weights=False)[0]
        if kind == "branch":
            return h.clamp(-0.1, 0.1) if self.training else h
        if kind == "batch_norm":
            flat = F.batch_norm(h.reshape(-1, width), self.mean, self.var, training=self.training, momentum=0.1)
            return flat.reshape(h.shape)
        return self.block(h)


def get_inputs():
    return [torch.randn(batch_size, seq, width)]


def get_init_inputs():
    return []
'''


def optimized(tmp_path, kind):
    path = write_model(tmp_path, f"train_{kind}", MODEL.replace("{kind}", kind))
    optimize_api(path, tmp_path / "out", mutation=False)
    return load_optimized(tmp_path / "out")


def check_train_matches_eager(module, train):
    """``train(m)`` puts a model in some train mode; ModelNew must then equal
    eager seed for seed (and warn), its buffers too, and after ``.eval()``
    run the plan again."""
    model, new = fresh_pair(module)
    x = torch.randn(2, 4, 8)
    with torch.no_grad():
        torch.testing.assert_close(new(x), model(x), atol=1e-5, rtol=1e-5)  # eval: the plan
        train(model)
        train(new)
        for seed in (1, 2):
            torch.manual_seed(seed)
            expected = model(x)
            torch.manual_seed(seed)
            with pytest.warns(UserWarning, match="train mode"):
                actual = new(x)
            torch.testing.assert_close(actual, expected, atol=1e-6, rtol=1e-6)
        assert not torch.allclose(expected, module.Model.forward(model.eval(), x), atol=1e-4), "the case must differ between train and eval"
        for (name, a), b in zip(new.named_buffers(), model.buffers()):
            torch.testing.assert_close(a, b, msg=f"buffer {name}")
        new.eval()
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # the plan again: no fallback warning
            torch.testing.assert_close(new(x), model(x), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("kind", ["f_dropout", "lstm", "mha", "branch", "batch_norm"])
def test_train_mode_runs_what_eager_runs(tmp_path, kind):
    """F.dropout(training=self.training), nn.LSTM(dropout=0.5), nn.MultiheadAttention(dropout=0.5),
    a branch on self.training and F.batch_norm(training=self.training): none is a BatchNorm or
    Dropout module, so before this change ModelNew().train() silently ran the eval plan."""
    check_train_matches_eager(optimized(tmp_path, kind), lambda m: m.train())


def test_one_submodule_in_train_mode_runs_the_original_forward(tmp_path):
    """model.eval(); model.block.train(): the root says eval, the Dropout in block is active.
    Before this change only the root's flag was read and the plan ran."""
    check_train_matches_eager(optimized(tmp_path, "submodule"), lambda m: m.block.train())
