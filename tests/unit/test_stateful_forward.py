"""A forward that writes module state is optimized with the state update
carried by ModelNew exactly as eager does it (``lego_core.load.state``).

Three stateful forwards: an RNN cell whose hidden state is a plain tensor
attribute reassigned on every call (``self.hidden = ...``), the same cell
with a registered hidden buffer reassigned, and a normalizer with running
statistics and a call counter updated in place.  Each is optimized, its
ModelNew loaded from the output folder as a user loads it, and compared with
eager over five consecutive calls on fresh inputs: the outputs, and the
state after every call; buffers updated in place stay the same tensor
objects in both.  Writes LEGO cannot carry (a parameter, an input) are
still refused with their named message.
"""
import pytest
import torch

from faithful_support import MODEL_HEAD, fresh_pair, load_optimized, optimize_api, write_model
from lego_core.load.capture import capture_graph
from lego_core.load.problem import ProblemSpec, load_problem
from lego_core.load.spec import ProblemError

pytestmark = pytest.mark.slow

HEAD = MODEL_HEAD

RNN_ATTRIBUTE = HEAD + '''
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.ih = nn.Linear(width, width)
        self.hh = nn.Linear(width, width)
        self.hidden = torch.zeros(batch_size, width)  # a plain tensor attribute, reassigned in forward

    def forward(self, x):
        self.hidden = torch.tanh(self.ih(x) + self.hh(self.hidden))
        return self.hidden * 2.0
'''

RNN_BUFFER = HEAD + '''
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.ih = nn.Linear(width, width)
        self.hh = nn.Linear(width, width)
        self.register_buffer("hidden", torch.zeros(batch_size, width))

    def forward(self, x):
        h = torch.tanh(self.ih(x) + self.hh(self.hidden))
        self.hidden.copy_(h)
        return h + 1.0
'''

RUNNING_STATS = HEAD + '''
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("running_mean", torch.zeros(width))
        self.register_buffer("running_var", torch.ones(width))
        self.register_buffer("calls", torch.zeros((), dtype=torch.long))
        self.fc = nn.Linear(width, width)

    def forward(self, x):
        mean, var = x.mean(0), x.var(0, unbiased=False)
        self.running_mean.mul_(0.9).add_(0.1 * mean)
        self.running_var.mul_(0.9).add_(0.1 * var)
        self.calls += 1
        normed = (x - self.running_mean) * torch.rsqrt(self.running_var + 1e-5)
        return self.fc(normed) * self.calls
'''

ATTRIBUTE_IN_PLACE = HEAD + '''
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.ih = nn.Linear(width, width)
        self.hidden = torch.zeros(batch_size, width)  # a plain tensor attribute, written in place

    def forward(self, x):
        self.hidden.copy_(torch.tanh(self.ih(x) + self.hidden))
        return self.hidden * 3.0
'''

BUFFER_REASSIGNED = HEAD + '''
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(width, width)
        self.register_buffer("total", torch.zeros(width))
        self.register_buffer("seen", torch.zeros(()))

    def forward(self, x):
        self.total = self.total + x.sum(0)  # a registered buffer given a new tensor
        self.seen = self.seen + x.shape[0]
        return self.fc(x - self.total / self.seen)
'''

NESTED = HEAD + '''
class Cell(nn.Module):
    def __init__(self):
        super().__init__()
        self.ih = nn.Linear(width, width)
        self.hidden = torch.zeros(batch_size, width)  # reassigned, in a submodule
        self.register_buffer("trace", torch.zeros(width))  # written in place, in a submodule
        self.register_buffer("steps", torch.zeros(()))  # a buffer reassigned in a submodule (torch.export drops it)

    def forward(self, x):
        self.hidden = torch.tanh(self.ih(x) + self.hidden)
        self.trace.mul_(0.5).add_(x.mean(0))
        self.steps = self.steps + 1
        return self.hidden


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.cells = nn.ModuleList([Cell(), Cell()])

    def forward(self, x):
        for cell in self.cells:
            x = cell(x)
        return x + self.cells[0].trace * self.cells[1].steps
'''

LSTM_PAIR = HEAD + '''
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.cell = nn.LSTMCell(width, width)
        self.h = torch.zeros(batch_size, width)  # two plain attributes, reassigned together from a tuple
        self.c = torch.zeros(batch_size, width)

    def forward(self, x):
        self.h, self.c = self.cell(x, (self.h, self.c))
        return self.h
'''

KV_RING = HEAD + '''
class Model(nn.Module):
    """A decoding-style cache: each call's key shifted into a ring of the last 3, a step counter."""
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(width, width)
        self.register_buffer("cache", torch.zeros(batch_size, 3, width))
        self.register_buffer("pos", torch.zeros((), dtype=torch.long))

    def forward(self, x):
        self.cache = torch.roll(self.cache, shifts=-1, dims=1)  # a new tensor ...
        self.cache[:, -1] = self.proj(x)  # ... then a slice of it written in place
        self.pos += 1
        weights = torch.softmax(self.cache @ x.unsqueeze(-1), dim=1)
        return (weights * self.cache).sum(1) * self.pos
'''

CASES = {
    "lstm_pair": (LSTM_PAIR, {"h": "reassigned", "c": "reassigned"}),
    "kv_ring": (KV_RING, {"cache": "reassigned", "pos": "in place"}),
    "nested": (NESTED, {f"cells.{k}.{n}": how for k in (0, 1) for n, how in
                        (("hidden", "reassigned"), ("trace", "in place"), ("steps", "reassigned"))}),
    "attribute_in_place": (ATTRIBUTE_IN_PLACE, {"hidden": "in place"}),
    "buffer_reassigned": (BUFFER_REASSIGNED, {"total": "reassigned", "seen": "reassigned"}),
    "rnn_attribute": (RNN_ATTRIBUTE, {"hidden": "reassigned"}),
    "rnn_buffer": (RNN_BUFFER, {"hidden": "in place"}),
    "running_stats": (RUNNING_STATS, {"running_mean": "in place", "running_var": "in place", "calls": "in place"}),
}


def _get(model, name):
    for part in name.split("."):
        model = getattr(model, part)
    return model


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_stateful_forward_is_optimized_and_carries_its_state_over_five_calls(tmp_path, case):
    source, kinds = CASES[case]
    path = write_model(tmp_path, case, source)
    graph = capture_graph(load_problem(ProblemSpec(str(path), {})))
    assert {u.target: u.kind for u in graph.state_updates} == kinds
    report = optimize_api(path, tmp_path / "out", mutation=False)
    assert report["end_to_end"]["passed"], report["end_to_end"]
    text = (tmp_path / "out" / "optimized_model.py").read_text()
    assert "lego_runtime.write_state(self, STATE" in text

    model, new = fresh_pair(load_optimized(tmp_path / "out"))
    in_place = [name for name, kind in kinds.items() if kind == "in place"]
    ptrs_eager = {n: _get(model, n).data_ptr() for n in in_place}
    ptrs_new = {n: _get(new, n).data_ptr() for n in in_place}
    objects_new = {n: _get(new, n) for n in in_place}
    objects_before = {n: _get(new, n) for n in kinds}
    torch.manual_seed(1)
    import warnings
    with torch.no_grad(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for call in range(5):  # five consecutive calls, fresh inputs each
            x = torch.randn(2, 4)
            out_eager, out_new = model(x), new(x)
            torch.testing.assert_close(out_new, out_eager, atol=1e-5, rtol=1e-5, msg=f"output of call {call}")
            for name in kinds:
                got, want = _get(new, name), _get(model, name)
                torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5, msg=f"{name} after call {call}")
    assert not [w for w in caught if "LEGO" in str(w.message)], [str(w.message) for w in caught]  # the plan ran every time
    for name in in_place:  # updated in place: the same tensor objects in both
        assert _get(model, name).data_ptr() == ptrs_eager[name]
        assert _get(new, name).data_ptr() == ptrs_new[name] and _get(new, name) is objects_new[name]
    for name, kind in kinds.items():  # a plain attribute stays one, a buffer stays registered
        owner, _, leaf = name.rpartition(".")
        assert (name in dict(new.named_buffers())) == (name in dict(model.named_buffers()))
        assert (leaf in vars(_get(new, owner) if owner else new)) == (leaf in vars(_get(model, owner) if owner else model))
        if kind == "reassigned":
            assert _get(new, name) is not objects_before[name]  # a new tensor, as eager stores
    if "calls" in kinds:
        assert int(new.calls) == int(model.calls) == 5


def test_capture_leaves_the_model_as_it_was(tmp_path):
    """Capturing registers the reassigned attribute as a buffer only while it
    exports; the problem's model keeps a plain attribute and its state."""
    path = write_model(tmp_path, "rnn_attribute", RNN_ATTRIBUTE)
    problem = load_problem(ProblemSpec(str(path), {}))
    before = problem.model.hidden
    capture_graph(problem)
    assert problem.model.hidden is before and "hidden" not in dict(problem.model.named_buffers())
    assert torch.equal(before, torch.zeros(2, 4))  # the loader's check run was undone too


PARAMETER_WRITE = HEAD + '''
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(width))

    def forward(self, x):
        with torch.no_grad():
            self.scale.mul_(0.5)
        return x * self.scale
'''

INPUT_WRITE = HEAD + '''
class Model(nn.Module):
    def forward(self, x):
        x.clamp_(min=0.0)
        return x * 2.0
'''


@pytest.mark.parametrize("source, named", [(PARAMETER_WRITE, "parameter 'scale'"), (INPUT_WRITE, "input 'x'")])
def test_a_parameter_or_input_write_is_still_refused_by_name(tmp_path, source, named):
    path = write_model(tmp_path, "writes", source)
    with pytest.raises(ProblemError) as caught:
        capture_graph(load_problem(ProblemSpec(str(path), {})))
    assert named in caught.value.message and "never writes parameters or the caller's input tensors back" in caught.value.message
    assert "register_buffer" in caught.value.hint


GROWING = HEAD + '''
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = torch.zeros(batch_size, width, dtype=torch.float64)

    def forward(self, x):
        self.hidden = torch.tanh(x + self.hidden.to(x.dtype))
        return self.hidden
'''


def test_state_that_changes_dtype_between_calls_is_refused_with_the_fix(tmp_path):
    path = write_model(tmp_path, "growing", GROWING)
    with pytest.raises(ProblemError) as caught:
        capture_graph(load_problem(ProblemSpec(str(path), {})))
    message = caught.value.message
    assert "self.hidden" in message and "float32[2, 4]" in message and "float64[2, 4]" in message
    assert ".to(self.hidden.dtype)" in caught.value.hint


def test_the_end_to_end_judge_checks_the_state_written_back(tmp_path):
    """The judge compares the state after the call with eager's, not only the
    outputs: a ModelNew that computes the right outputs and forgets to write
    its running statistics back fails it."""
    from lego_core.judge.end_to_end import e2e

    path = write_model(tmp_path, "running_stats", RUNNING_STATS)
    out = tmp_path / "out"
    optimize_api(path, out, mutation=False)
    problem = load_problem(ProblemSpec(str(path), {}))
    capture_graph(problem)
    assert problem.state_targets == ["running_mean", "running_var", "calls"]
    assert e2e.check_end_to_end(out, problem, seed=5)["passed"]
    runtime = out / "lego_runtime.py"
    runtime.write_text(runtime.read_text().replace('            if kind == "in place":\n                if new is not now:\n                    now.copy_(new)',
                                                   '            if kind == "in place":\n                pass  # forgets the state'))
    verdict = e2e.check_end_to_end(out, problem, seed=5)
    assert not verdict["passed"] and "against fp64" in verdict["reason"], verdict
    assert "state self.running_mean" in verdict["reason"] and "output 0" not in verdict["reason"], verdict["reason"]


PYTHON_COUNTER = HEAD + '''
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(width, width)
        self.steps = 0

    def forward(self, x):
        self.steps += 1
        return self.fc(x) * self.steps
'''


def test_a_python_number_kept_as_state_is_refused_naming_it_and_the_fix(tmp_path):
    """A plain int attribute changed in forward cannot be carried (torch.export bakes its value)."""
    path = write_model(tmp_path, "python_counter", PYTHON_COUNTER)
    with pytest.raises(ProblemError) as caught:
        load_problem(ProblemSpec(str(path), {}))
    err = caught.value
    assert err.kind == "stateful forward" and "self.steps (int: 0 before the call, 1 after)" in err.message
    assert "register_buffer('steps', torch.tensor(0))" in err.hint


def test_preserved_undoes_every_kind_of_state_write():
    """``state.preserved``: in-place buffer writes are copied back into the same
    tensor, a reassigned buffer or attribute gets its old tensor back (and its
    old values, when written in place); ``targets`` limits it, [] does nothing."""
    from lego_core.load.state import preserved

    class Stateful(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("calls", torch.zeros((), dtype=torch.long))
            self.register_buffer("total", torch.zeros(3))
            self.hidden = torch.zeros(3)
            self.mask = torch.ones(3)

        def forward(self, x):
            self.calls += 1
            self.total = self.total + x
            self.hidden = torch.tanh(x + self.hidden)
            self.mask.mul_(2.0)
            return x

    m = Stateful()
    objects = {n: getattr(m, n) for n in ("calls", "total", "hidden", "mask")}
    with preserved(m):
        m(torch.ones(3))
        assert int(m.calls) == 1 and m.total is not objects["total"]
    assert all(getattr(m, n) is t for n, t in objects.items())
    assert int(m.calls) == 0 and torch.equal(m.total, torch.zeros(3)) and torch.equal(m.mask, torch.ones(3))
    assert "total" in dict(m.named_buffers()) and "hidden" in vars(m)
    with preserved(m, ["calls"]):
        m(torch.ones(3))
    assert int(m.calls) == 0 and m.hidden is not objects["hidden"] and torch.equal(m.mask, torch.full((3,), 2.0))
    with preserved(m, []):
        m(torch.ones(3))
    assert int(m.calls) == 1


# ------------------------------------------------------ state LEGO cannot carry

TUPLE_STATE = HEAD + '''
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.cell = nn.LSTMCell(width, width)
        self.state = (torch.zeros(batch_size, width), torch.zeros(batch_size, width))

    def forward(self, x):
        h, c = self.cell(x, self.state)
        self.state = (h.detach(), c.detach())
        return h
'''

LIST_ITEMS = HEAD + '''
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(width, width)
        self.state = [torch.zeros(batch_size, width), torch.zeros(batch_size, width)]

    def forward(self, x):
        h = torch.tanh(self.fc(x) + self.state[0])
        self.state[1] = self.state[0]
        self.state[0] = h
        return h
'''

HISTORY = HEAD + '''
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(width, width)
        self.history = []

    def forward(self, x):
        y = self.fc(x)
        self.history.append(y.detach().mean())
        return y * 2
'''

DICT_CACHE = HEAD + '''
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(width, width)
        self.cache = {"h": torch.zeros(batch_size, width)}

    def forward(self, x):
        self.cache["h"] = torch.tanh(self.fc(x) + self.cache["h"])
        return self.cache["h"]
'''

NONE_HIDDEN = HEAD + '''
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.GRU(width, width, batch_first=True)
        self.hidden = None  # the tutorial pattern: no state before the first call

    def forward(self, x):
        out, h = self.rnn(x[:, None], self.hidden)
        self.hidden = h.detach()
        return out[:, 0]
'''

NONE_BUFFER = HEAD + '''
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(width, width)
        self.register_buffer("h", None)

    def forward(self, x):
        previous = self.h if self.h is not None else torch.zeros_like(x)
        self.h = torch.tanh(self.fc(x) + previous)
        return self.h * 1.0
'''

FIRST_CALL = HEAD + '''
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(width, width)

    def forward(self, x):
        if not hasattr(self, "h"):
            self.h = torch.zeros_like(x)
        self.h = torch.tanh(self.fc(x) + self.h)
        return self.h
'''

TOP_HOOK = HEAD + '''
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(width, width)
        self.register_buffer("count", torch.zeros((), dtype=torch.long))
        self.register_forward_hook(lambda module, args, out: module.count.add_(1))

    def forward(self, x):
        return self.fc(x) + self.count
'''

UNCARRIED = {
    "tuple_state": (TUPLE_STATE, ["self.state (a tuple)", "keep each tensor of self.state in a buffer"]),
    "list_items": (LIST_ITEMS, ["self.state (a list)"]),
    "history": (HISTORY, ["self.history (a list)"]),
    "dict_cache": (DICT_CACHE, ["self.cache (a dict)"]),
    "none_hidden": (NONE_HIDDEN, ["self.hidden (None before the first call)", "create self.hidden in __init__ as a tensor"]),
    "none_buffer": (NONE_BUFFER, ["self.h (None before the first call)"]),
    "first_call": (FIRST_CALL, ["self.h (created during the call)"]),
    "top_hook": (TOP_HOOK, ["a forward hook on the model", "applying it twice", "register the hook on a submodule"]),
}


@pytest.mark.parametrize("case", sorted(UNCARRIED))
def test_state_lego_cannot_carry_is_refused_at_load_by_name(tmp_path, case):
    """Before these were refused, each was optimized with its state baked
    into the plan as constants (or a hook applied twice): ModelNew silently
    differed from eager from the second call on."""
    source, words = UNCARRIED[case]
    with pytest.raises(ProblemError) as caught:
        load_problem(ProblemSpec(str(write_model(tmp_path, case, source)), {}))
    text = f"{caught.value} {caught.value.hint}"
    for w in words:
        assert w in text, (w, text)
    assert caught.value.kind in ("stateful forward", "forward hook")


LAZY_CONSTANTS = HEAD + '''
class Model(nn.Module):
    """Values made on the first call and kept: not state."""
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(width, width)
        self._scale = None
        self.memo = {}

    def forward(self, x):
        if self._scale is None:
            self._scale = torch.linspace(0.5, 1.5, width)
        if "offset" not in self.memo:
            self.memo["offset"] = torch.full((width,), 0.25)
        return self.fc(x) * self._scale + self.memo["offset"]
'''


def test_values_made_once_on_the_first_call_are_not_state(tmp_path):
    path = write_model(tmp_path, "lazy_constants", LAZY_CONSTANTS)
    load_problem(ProblemSpec(str(path), {}))  # not refused
    report = optimize_api(path, tmp_path / "out", mutation=False)
    assert report["end_to_end"]["passed"], report["end_to_end"]
    model, new = fresh_pair(load_optimized(tmp_path / "out"))
    torch.manual_seed(2)
    with torch.no_grad():
        for call in range(3):
            x = torch.randn(2, 4)
            torch.testing.assert_close(new(x), model(x), atol=1e-5, rtol=1e-5, msg=f"call {call}")

