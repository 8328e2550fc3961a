"""ModelNew called with an input of another memory layout (issue 10, section 2).

The plan's ``view``s were traced against the layout of the example input.
Before ``check_call`` copied inputs into the plan's captured layout
(``lego_runtime.with_strides``), a model that flattens its input crashed with
PyTorch's "view size is not compatible with input tensor's size and stride"
when called with a transposed, sliced, expanded or channels-last tensor of
the right shape, while eager worked.  Each model here is optimized through
``python -m lego_core optimize`` at tiny sizes, then ModelNew is compared
with eager on inputs in other layouts; the cases failed before that change
(commit 91822d3) and pass now.
"""
import pytest
import torch

from faithful_support import fresh_pair, load_optimized, optimize_cli, write_model

pytestmark = pytest.mark.faithful

FLATTEN = '''
import torch
import torch.nn as nn

rows = 6
cols = 8


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(rows * cols, 4)

    def forward(self, x):
        return torch.relu(self.proj(torch.flatten(x)[None]))


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []
'''

CONV = '''
import torch
import torch.nn as nn

batch_size = 2
channels = 3
size = 6


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(channels, 4, 3, padding=1)
        self.head = nn.Linear(4 * size * size, 5)

    def forward(self, x):
        h = torch.relu(self.conv(x))
        return self.head(torch.flatten(h, 1))


def get_inputs():
    return [torch.randn(batch_size, channels, size, size)]


def get_init_inputs():
    return []
'''


# get_inputs() itself gives an expanded tensor (a padding mask broadcast over the batch, as users write
# attention_mask = (...).long().expand(batch, seq)): found by the README's BERT example, whose composed
# model failed with "more than one element of the written-to tensor refers to a single memory location"
EXPANDED_EXAMPLE = '''
import torch
import torch.nn as nn

batch_size = 4
seq_len = 8


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(seq_len, seq_len)

    def forward(self, x, mask):
        bias = (1.0 - mask[:, None, :].to(x.dtype)) * -10000.0
        return torch.softmax(self.proj(x)[:, :, None, :].squeeze(2) + bias, dim=-1) * mask[:, None, :]


def get_inputs():
    mask = (torch.arange(seq_len) < seq_len - 2).long().expand(batch_size, seq_len)
    return [torch.randn(batch_size, 3, seq_len), mask]


def get_init_inputs():
    return []
'''


def optimized(tmp_path_factory, name, source):
    folder = tmp_path_factory.mktemp(name)
    path = write_model(folder, name, source)
    proc = optimize_cli(path, folder / "out")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return load_optimized(folder / "out")


@pytest.fixture(scope="module")
def flatten_model(tmp_path_factory):
    return optimized(tmp_path_factory, "flatten", FLATTEN)


@pytest.fixture(scope="module")
def conv_model(tmp_path_factory):
    return optimized(tmp_path_factory, "conv_nchw", CONV)


def same_as_eager(module, x):
    model, new = fresh_pair(module)
    with torch.no_grad():
        expected = model(x)
        torch.testing.assert_close(new(x), expected, atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(new(x.contiguous()), expected, atol=1e-4, rtol=1e-4)


def test_transposed_input_of_the_optimized_shape(flatten_model):
    """The reported case: optimized on a contiguous 6x8 tensor, called with randn(8, 6).t()."""
    x = torch.randn(8, 6).t()
    assert x.shape == (6, 8) and not x.is_contiguous()
    same_as_eager(flatten_model, x)


def test_sliced_inputs(flatten_model):
    """Every other column of a 6x16 tensor (stride (16, 2)) and every other row of a 12x8 one."""
    for x in (torch.randn(6, 16)[:, ::2], torch.randn(12, 8)[::2]):
        assert x.shape == (6, 8) and not x.is_contiguous()
        same_as_eager(flatten_model, x)


def test_expanded_stride_zero_input(flatten_model):
    """One row broadcast to six (stride (0, 1)) and one column broadcast to eight (stride (1, 0))."""
    for x in (torch.randn(1, 8).expand(6, 8), torch.randn(6, 1).expand(6, 8)):
        assert 0 in x.stride()
        same_as_eager(flatten_model, x)


def test_channels_last_input_to_a_model_optimized_in_nchw(conv_model):
    """A conv + flatten model optimized on NCHW inputs, called with a channels-last one (the
    conv then returns NHWC, whose flatten the plan's view cannot take), and with a
    channels-last slice of a larger batch."""
    x = torch.randn(2, 3, 6, 6).contiguous(memory_format=torch.channels_last)
    assert not x.is_contiguous()
    same_as_eager(conv_model, x)
    sliced = torch.randn(4, 3, 6, 6).contiguous(memory_format=torch.channels_last)[::2]
    same_as_eager(conv_model, sliced)


def test_a_model_whose_example_input_is_expanded_is_optimized_and_takes_expanded_and_dense_inputs(tmp_path_factory):
    """The optimizer densifies an example input whose elements share memory (problem.cast_input);
    ModelNew then copies an expanded input into the dense layout, and a dense one goes as it is."""
    module = optimized(tmp_path_factory, "expanded_example", EXPANDED_EXAMPLE)
    model, new = fresh_pair(module)
    for seed in range(3):
        torch.manual_seed(seed)
        x, mask = module.get_inputs()
        assert mask.stride() == (0, 1)
        with torch.no_grad():
            expected = model(x, mask)
            torch.testing.assert_close(new(x, mask), expected, atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(new(x, mask.contiguous()), expected, atol=1e-5, rtol=1e-5)
        assert new.lego_last_forward == "plan"
