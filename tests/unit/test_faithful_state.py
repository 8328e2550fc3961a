"""A forward that writes state in place is refused at capture (issue 10, section 2).

LEGO optimizes stateless forwards: the plan computes outputs only.  Before
this change a forward that updated a buffer failed only after the whole
search, with "output 0: shape () != expected" (the plan returned the
mutated buffer as its output).  Now ``capture_graph`` raises a ProblemError
naming each buffer/input written and the line (``faithful_capture.
check_stateless``).  Each case failed before this change (an OptimizeError
at the end-to-end check, or no error) and passes now.
"""
import pytest

from faithful_support import optimize_api, write_model
from lego_core.errors import OptimizeError
from lego_core.spec import ProblemError

pytestmark = pytest.mark.faithful

COMMON = '''
import torch
import torch.nn as nn

batch_size = 4
width = 8


def get_inputs():
    return [torch.randn(batch_size, width)]


def get_init_inputs():
    return []
'''

CASES = {
    "counter": ('''
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(width, width)
        self.register_buffer("calls", torch.zeros((), dtype=torch.long))

    def forward(self, x):
        self.calls += 1
        return self.proj(x)
''', "buffer 'calls'", "self.calls += 1"),
    "running_mean": ('''
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("running_mean", torch.zeros(width))
        self.register_buffer("seen", torch.zeros(()))

    def forward(self, x):
        self.running_mean.mul_(0.9).add_(0.1 * x.mean(0))
        self.seen = self.seen + x.shape[0]
        return torch.relu(x - self.running_mean)
''', "buffer 'running_mean', buffer 'seen'", "self.running_mean.mul_(0.9)"),
    "input": ('''
class Model(nn.Module):
    def forward(self, x):
        x.clamp_(min=0.0)
        return x * 2.0
''', "input 'x'", "x.clamp_(min=0.0)"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_forward_that_writes_state_is_refused_at_capture(tmp_path, case):
    """A call counter buffer, running statistics updated in forward (two buffers, in place
    and by reassignment), and an input changed in place: each a ProblemError that names
    what is written, says LEGO optimizes stateless forwards, and points at the line."""
    model_class, named, line_text = CASES[case]
    path = write_model(tmp_path, f"state_{case}", COMMON + model_class)
    try:
        optimize_api(path, tmp_path / "out", mutation=False)
    except ProblemError as err:
        assert named in err.message, err.message
        assert "stateless forwards" in err.message
        assert err.hint and "separate method" in err.hint
        assert err.line is not None and line_text in path.read_text().splitlines()[err.line - 1]
    except OptimizeError as err:  # before this change: after the whole search, unexplained
        pytest.fail(f"refused only after the search: {err}")
    else:
        pytest.fail("a forward that writes state was optimized as if it were stateless")
