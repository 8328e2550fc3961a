"""A forward that returns several tensors (an RNN's ``(out, h)``, an LSTM's
``out, (h, c)``, a dict of heads) is optimized, and ModelNew returns the
same structure with the same values as eager: the captured output's pytree
spec travels into optimized_model.py (``OUTPUT_SPEC``).  A forward that
returns a non-tensor beside its tensors is refused at load, naming it."""
import json

import pytest
import torch

from faithful_support import fresh_pair, load_optimized, optimize_api, write_model
from lego_core.load.problem import ProblemSpec, load_problem
from lego_core.load.spec import ProblemError

pytestmark = pytest.mark.slow

HEAD = '''
import torch
import torch.nn as nn

batch_size = 3
seq_len = 4
width = 8
'''

RNN_TUPLE = HEAD + '''
class Model(nn.Module):
    """An unrolled RNN that returns every step's output and its last hidden state."""

    def __init__(self):
        super().__init__()
        self.ih = nn.Linear(width, width)
        self.hh = nn.Linear(width, width)
        self.head = nn.Linear(width, 5)

    def forward(self, x, h):
        outs = []
        for t in range(seq_len):
            h = torch.tanh(self.ih(x[:, t]) + self.hh(h))
            outs.append(self.head(h))
        return torch.stack(outs, 1), h


def get_inputs():
    return [torch.randn(batch_size, seq_len, width), torch.zeros(batch_size, width)]


def get_init_inputs():
    return []
'''

LSTM_NESTED = HEAD + '''
class Model(nn.Module):
    """An LSTM cell stepped over the sequence, returning ``out, (h, c)`` as nn.LSTM does."""

    def __init__(self):
        super().__init__()
        self.gates = nn.Linear(2 * width, 4 * width)

    def forward(self, x, h, c):
        outs = []
        for t in range(seq_len):
            i, f, g, o = self.gates(torch.cat([x[:, t], h], -1)).chunk(4, -1)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            h = torch.sigmoid(o) * torch.tanh(c)
            outs.append(h)
        return torch.stack(outs, 1), (h, c)


def get_inputs():
    return [torch.randn(batch_size, seq_len, width), torch.zeros(batch_size, width), torch.zeros(batch_size, width)]


def get_init_inputs():
    return []
'''

DICT_HEADS = HEAD + '''
class Model(nn.Module):
    """A shared trunk with two heads returned by name, one of them twice (a list)."""

    def __init__(self):
        super().__init__()
        self.trunk = nn.Linear(width, width)
        self.cls = nn.Linear(width, 3)
        self.box = nn.Linear(width, 4)

    def forward(self, x):
        z = torch.relu(self.trunk(x))
        logits = self.cls(z)
        return {"logits": logits, "boxes": [torch.sigmoid(self.box(z)), logits.softmax(-1)]}


def get_inputs():
    return [torch.randn(batch_size, width)]


def get_init_inputs():
    return []
'''


def _same(new_out, eager_out):
    """Same pytree structure (types included) and values within fp32 rounding."""
    new_leaves, new_spec = torch.utils._pytree.tree_flatten(new_out)
    eager_leaves, eager_spec = torch.utils._pytree.tree_flatten(eager_out)
    assert new_spec == eager_spec, (new_spec, eager_spec)
    for a, b in zip(new_leaves, eager_leaves):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


def test_an_rnn_returning_its_output_and_hidden_state_matches_eager_over_five_calls(tmp_path):
    report = optimize_api(write_model(tmp_path, "rnn_tuple", RNN_TUPLE), tmp_path / "out", mutation=False)
    assert report["end_to_end"]["passed"]
    module = load_optimized(tmp_path / "out")
    assert "unflatten_output" in (tmp_path / "out" / "optimized_model.py").read_text()
    model, new = fresh_pair(module)
    h_eager = h_new = torch.zeros(3, 8)
    torch.manual_seed(1)
    with torch.no_grad():
        for _ in range(5):  # the state carried by the caller from call to call, as a streaming user does
            x = torch.randn(3, 4, 8)
            eager_out, new_out = model(x, h_eager), new(x, h_new)
            assert type(new_out) is tuple and len(new_out) == 2
            _same(new_out, eager_out)
            h_eager, h_new = eager_out[1], new_out[1]


@pytest.mark.parametrize("name, source, inputs", [
    ("lstm_nested", LSTM_NESTED, lambda: (torch.randn(3, 4, 8), torch.randn(3, 8), torch.randn(3, 8))),
    ("dict_heads", DICT_HEADS, lambda: (torch.randn(3, 8),)),
])  # fmt: skip
def test_nested_and_dict_outputs_keep_their_structure(tmp_path, name, source, inputs):
    report = optimize_api(write_model(tmp_path, name, source), tmp_path / "out", mutation=False)
    assert report["end_to_end"]["passed"], report["end_to_end"]["reason"]
    model, new = fresh_pair(load_optimized(tmp_path / "out"))
    torch.manual_seed(2)
    with torch.no_grad():
        for _ in range(2):
            xs = inputs()
            _same(new(*xs), model(*xs))
    json.loads(json.dumps(report))  # the report stays plain JSON


@pytest.mark.parametrize("returned, named", [
    ("z, width", "returned a tuple holding int: LEGO optimizes a forward that returns tensors only."),
    ("{'z': z, 'note': 'done'}", "returned a dict holding str:"),
    ("(z, [z, 2.5, 'x'])", "returned a tuple holding float, str:"),
    ("[]", "returned an empty list: there is no tensor to optimize."),
    ("z.sum().item()", "returned float, not a tensor (nor a tuple, list or dict of tensors)."),
])  # fmt: skip
def test_a_forward_returning_a_non_tensor_is_refused_naming_it(tmp_path, returned, named):
    source = HEAD + f'''
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(width, width)

    def forward(self, x):
        z = self.fc(x)
        return {returned}


def get_inputs():
    return [torch.randn(batch_size, width)]


def get_init_inputs():
    return []
'''
    with pytest.raises(ProblemError) as caught:
        load_problem(ProblemSpec(str(write_model(tmp_path, "odd", source)), {}))
    assert named in caught.value.message
    assert "return a tensor, or a tuple, list or dict of tensors" in caught.value.hint


def test_named_outputs_cross_from_the_executor_to_the_judge_and_malformed_ones_do_not():
    import collections

    from lego_core.judge.process import wire

    value = collections.OrderedDict(out=torch.ones(2), aux=[torch.zeros(1), 3])
    back = wire.decode(wire.encode(value, None), None)
    assert list(back) == ["out", "aux"] and torch.equal(back["out"], torch.ones(2)) and back["aux"][1] == 3
    assert wire.decode(wire.encode({object(): 1}, None), None).type_name == "dict"  # keys that are not plain data do not cross
    with pytest.raises(wire.BadReply):
        wire.decode(("dict", [("a", ("value", 1), "extra")]), None)
    with pytest.raises(wire.BadReply):
        wire.decode(("dict", [(("not", "a key"), ("value", 1))]), None)


def test_a_namedtuple_output_is_refused_at_load_with_its_fix(tmp_path):
    """torch's pytree cannot write a namedtuple's spec down: refused when the
    file is loaded (exit 1, its fix), not after the whole search (exit 3)."""
    source = HEAD + '''
from collections import namedtuple

Out = namedtuple("Out", ["y", "x"])


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(width, width)

    def forward(self, x):
        return Out(torch.relu(self.fc(x)), x)


def get_inputs():
    return [torch.randn(batch_size, width)]


def get_init_inputs():
    return []
'''
    with pytest.raises(ProblemError) as caught:
        load_problem(ProblemSpec(str(write_model(tmp_path, "named", source)), {}))
    assert "returned the namedtuple Out," in caught.value.message and "plain tuples, lists and dicts" in caught.value.message
    assert "out._asdict()" in caught.value.hint
