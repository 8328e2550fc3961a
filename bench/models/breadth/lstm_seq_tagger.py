"""A sequence tagger over a hand-written LSTM cell (PyTorch gate order i, f,
g, o) that returns what ``nn.LSTM`` returns, ``logits, (h, c)``: per-step tag
logits and the final state as a nested tuple, which the caller feeds into
the next chunk of a stream.  ModelNew returns the same nested structure
(the captured output spec, ``OUTPUT_SPEC`` in optimized_model.py)."""
import torch
import torch.nn as nn

batch_size = 64
seq_len = 24
d_input = 256
d_hidden = 512
n_tags = 48


class Model(nn.Module):
    def __init__(self, d_input: int, d_hidden: int, n_tags: int):
        super().__init__()
        self.ih = nn.Linear(d_input, 4 * d_hidden)
        self.hh = nn.Linear(d_hidden, 4 * d_hidden, bias=False)
        self.tagger = nn.Linear(d_hidden, n_tags)

    def forward(self, x: torch.Tensor, h: torch.Tensor, c: torch.Tensor):
        gates_in = self.ih(x)  # every step's input projection in one GEMM
        outs = []
        for t in range(x.shape[1]):
            i, f, g, o = (gates_in[:, t] + self.hh(h)).chunk(4, dim=-1)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            h = torch.sigmoid(o) * torch.tanh(c)
            outs.append(h)
        return self.tagger(torch.stack(outs, 1)), (h, c)


def get_inputs():
    return [torch.randn(batch_size, seq_len, d_input), torch.randn(batch_size, d_hidden), torch.randn(batch_size, d_hidden)]


def get_init_inputs():
    return [d_input, d_hidden, n_tags]
