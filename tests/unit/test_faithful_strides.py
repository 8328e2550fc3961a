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
