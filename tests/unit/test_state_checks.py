"""State a forward writes where torch.export would lose it or bake it in is
refused by name, with what to change (``lego_core.load.state_checks``); the same
layouts read but not written are optimized as usual.

Before these checks each case ended either in a silently wrong plan (state
baked in as a constant) or in an internal error far from its cause: a fake
tensor left in a helper object ("GuardOnDataDependentSymNode" in the
end-to-end judge), torch.export's "fake tensor in the exported program
constant's list" for ``.data``, "expected compiled_fn to be GraphModule"
for a tensor registered in two modules, or a write silently dropped.
"""
import pytest
import torch

from faithful_support import MODEL_HEAD, fresh_pair, load_optimized, optimize_api, write_model
from lego_core.load.capture import capture_graph
from lego_core.load.problem import ProblemSpec, load_problem
from lego_core.load.spec import ProblemError

HEAD = MODEL_HEAD

GLOBAL_DICT = HEAD + '''
CACHE = {}


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(width, width)

    def forward(self, x):
        y = self.fc(x)
        if "h" in CACHE:
            y = y + CACHE["h"]
        CACHE["h"] = y.detach()
        return y
'''

GLOBAL_COUNTER = HEAD + '''
calls = 0


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(width, width)

    def forward(self, x):
        global calls
        calls += 1
        return self.fc(x) * calls
'''

GLOBAL_TENSOR = HEAD + '''
TOTAL = torch.zeros(width)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(width, width)

    def forward(self, x):
        y = self.fc(x)
        TOTAL.add_(y.sum(0))
        return y + TOTAL
'''

HELPER_OBJECT = HEAD + '''
class Memory:
    def __init__(self):
        self.h = torch.zeros(batch_size, width)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(width, width)
        self.memory = Memory()

    def forward(self, x):
        y = torch.tanh(self.fc(x) + self.memory.h)
        self.memory.h = y.detach()
        return y
'''

CLASS_COUNTER = HEAD + '''
class Model(nn.Module):
    counter = 0

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(width, width)

    def forward(self, x):
        Model.counter += 1
        return self.fc(x) * Model.counter
'''

TYPE_SELF_COUNTER = CLASS_COUNTER.replace("Model.counter += 1", "type(self).counter += 1")

CLASS_TENSOR = HEAD + '''
class Model(nn.Module):
    acc = torch.zeros(width)

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(width, width)

    def forward(self, x):
        y = self.fc(x)
        Model.acc = Model.acc + y.mean(0)
        return y + Model.acc
'''

CLASS_TENSOR_IN_PLACE = CLASS_TENSOR.replace("Model.acc = Model.acc + y.mean(0)", "self.acc.add_(y.mean(0))").replace(
    "return y + Model.acc", "return y + self.acc")

def capture_refusal(tmp_path, name: str, source: str) -> ProblemError:
    """The ProblemError capture_graph raises for the model ``source`` (which loads)."""
    problem = load_problem(ProblemSpec(str(write_model(tmp_path, name, source)), {}))
    with pytest.raises(ProblemError) as caught:
        capture_graph(problem)
    return caught.value


AT_LOAD = {
    "class_counter": (CLASS_COUNTER, "the class attribute Model.counter (int)"),
    "type_self_counter": (TYPE_SELF_COUNTER, "the class attribute Model.counter (int)"),
    "class_tensor": (CLASS_TENSOR, "the class attribute Model.acc (Tensor)"),
    "class_tensor_in_place": (CLASS_TENSOR_IN_PLACE, "the class attribute Model.acc (Tensor)"),
    "global_dict": (GLOBAL_DICT, "the global CACHE of the model file (dict)"),
    "global_counter": (GLOBAL_COUNTER, "the global calls of the model file (int)"),
    "global_tensor": (GLOBAL_TENSOR, "the global TOTAL of the model file (Tensor)"),
    "helper_object": (HELPER_OBJECT, "self.memory (a Memory object, not a module)"),
}


@pytest.mark.parametrize("case", sorted(AT_LOAD))
def test_state_kept_outside_the_models_modules_is_refused_at_load_by_name(tmp_path, case):
    source, named = AT_LOAD[case]
    with pytest.raises(ProblemError) as caught:
        load_problem(ProblemSpec(str(write_model(tmp_path, case, source)), {}))
    error = caught.value
    assert error.kind == "stateful forward"
    assert named in error.message and "outside the model's modules" in error.message, error.message
    assert "register_buffer" in error.hint and "copy_" in error.hint


DATA_ASSIGN = HEAD + '''
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(width, width)
        self.register_buffer("ema", torch.zeros(width))

    def forward(self, x):
        y = self.fc(x)
        self.ema.data = 0.9 * self.ema.data + 0.1 * y.mean(0)
        return y + self.ema
'''

DATA_IN_PLACE = DATA_ASSIGN.replace("self.ema.data = 0.9 * self.ema.data + 0.1 * y.mean(0)",
                                    "self.ema.data.mul_(0.9).add_(0.1 * y.mean(0))")

TIED = HEAD + '''
class Counter(nn.Module):
    def __init__(self, count):
        super().__init__()
        self.register_buffer("count", count)

    def forward(self, x):
        self.count.add_(1)
        return x * 2


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        shared = torch.zeros(1)
        self.a, self.b = Counter(shared), Counter(shared)

    def forward(self, x):
        return self.b(self.a(x))
'''

VIEW = HEAD + '''
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(width, width)
        self.register_buffer("store", torch.zeros(2, width))
        self.register_buffer("first", self.store[0])

    def forward(self, x):
        y = self.fc(x)
        self.first.add_(y.mean(0))
        return y + self.store.sum(0)
'''

MODULE_IN_A_DICT = HEAD + '''
class Accumulate(nn.Module):
    def __init__(self):
        super().__init__()
        self.total = torch.zeros(width)

    def forward(self, y):
        self.total = self.total + y.mean(0)
        return y + self.total


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(width, width)
        self.parts = {"acc": Accumulate()}

    def forward(self, x):
        return self.parts["acc"](self.fc(x))
'''

AT_CAPTURE = {
    "module_in_a_dict": (MODULE_IN_A_DICT, ["self.parts['acc'].total", "while torch.export traced it"], "nn.ModuleDict"),
    "data_assign": (DATA_ASSIGN, ["self.ema through .data"], "self.ema.copy_(new_value)"),
    "data_in_place": (DATA_IN_PLACE, ["self.ema through .data"], "self.ema.copy_(new_value)"),
    "tied": (TIED, ["self.a.count", "self.b.count", "registered under two names"], "register a copy"),
    "view": (VIEW, ["self.store", "self.first", "a view of another"], "give the state one name"),
}


@pytest.mark.parametrize("case", sorted(AT_CAPTURE))
def test_writes_torch_export_cannot_capture_are_refused_by_name_before_it_runs(tmp_path, case):
    source, named, fix = AT_CAPTURE[case]
    error = capture_refusal(tmp_path, case, source)
    assert error.kind == "stateful forward", error
    for words in named:
        assert words in error.message, (words, error.message)
    assert fix in error.hint, error.hint


READ_ONLY = HEAD + '''
import logging

LOG = logging.getLogger(__name__)  # fills a level cache as it is used: not state (a fresh-user trial found it refused)
SCALE = torch.linspace(0.5, 1.5, width)
SETTINGS = {"shift": 0.25}
MEMO = {}


class Table:
    def __init__(self):
        self.offset = torch.full((width,), 0.5)


class Shared(nn.Module):
    def __init__(self, bias):
        super().__init__()
        self.register_buffer("bias", bias)

    def forward(self, x):
        return x + self.bias


class Model(nn.Module):
    """Globals, a helper object, a tied buffer and a view buffer, all read
    only; a global memo filled once on the first call; class attributes read; a logger used."""
    factor = 2.0
    offsets = torch.full((width,), 0.125)

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(width, width)
        self.table = Table()
        bias = torch.ones(width)
        self.a, self.b = Shared(bias), Shared(bias)
        self.register_buffer("store", torch.arange(2.0 * width).view(2, width))
        self.register_buffer("row", self.store[1])

    def forward(self, x):
        LOG.debug("forward on %s", tuple(x.shape))
        if "mask" not in MEMO:
            MEMO["mask"] = torch.ones(width)
        y = self.fc(x) * SCALE + SETTINGS["shift"] + self.table.offset
        return self.b(self.a(y)) * MEMO["mask"] * self.factor + self.row + Model.offsets
'''


def test_the_same_layouts_read_but_not_written_are_captured(tmp_path):
    problem = load_problem(ProblemSpec(str(write_model(tmp_path, "read_only", READ_ONLY)), {}))
    graph = capture_graph(problem)
    assert graph.state_updates == [] and problem.state_targets == []


@pytest.mark.slow
def test_a_model_reading_those_layouts_is_optimized_and_matches_eager(tmp_path):
    path = write_model(tmp_path, "read_only", READ_ONLY)
    report = optimize_api(path, tmp_path / "out", mutation=False)
    assert report["end_to_end"]["passed"], report["end_to_end"]
    model, new = fresh_pair(load_optimized(tmp_path / "out"))
    torch.manual_seed(3)
    with torch.no_grad():
        for call in range(3):
            x = torch.randn(2, 4)
            torch.testing.assert_close(new(x), model(x), atol=1e-5, rtol=1e-5, msg=f"call {call}")


CLOSURE = HEAD + '''
def make_accumulator():
    total = torch.zeros(width)

    def accumulate(y):
        total.add_(y.mean(0))
        return y + total
    return accumulate


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(width, width)
        self.accumulate = make_accumulator()

    def forward(self, x):
        return self.accumulate(self.fc(x))
'''

ITEM_SCALE = HEAD + '''
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(width, width)
        self.register_buffer("scale", torch.tensor(2.0))

    def forward(self, x):
        return self.fc(x) * self.scale.item()
'''


def test_a_tensor_no_module_holds_written_in_place_is_named_for_what_it_is(tmp_path):
    """torch.export calls it lifted_tensor_0; the message used to call that a
    plain tensor attribute, and the fix said such attributes are carried."""
    error = capture_refusal(tmp_path, "closure", CLOSURE)
    assert error.kind == "mutated constant"
    assert "neither a buffer, a parameter nor an attribute" in error.message and "a closure" in error.message
    assert "register the tensor as a buffer of the module that writes it" in error.hint and "nn.ModuleDict" in error.hint


def test_item_used_as_a_number_is_named_as_such_not_as_a_size(tmp_path):
    error = capture_refusal(tmp_path, "item_scale", ITEM_SCALE)
    assert error.kind == "data-dependent control flow" and "turns a tensor into a Python number" in error.message
    assert "self.scale.item()" in error.message and "keep the value a tensor" in error.hint


# --- settings objects and dicts a module holds (a fresh-user trial of issue 24, 2026-12-03) --------------------

COUNTING_PROPERTY = HEAD + '''
import itertools


class Settings:
    def __init__(self):
        self._n = itertools.count(1)
        self.scale = 2.0

    @property
    def jitter(self):
        return float(next(self._n))


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.config = Settings()
        self.fc = nn.Linear(width, width)

    def forward(self, x):
        return torch.relu(self.fc(x)) * self.config.scale + self.config.jitter
'''

CONFIG_COUNTER = HEAD + '''
import types


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.config = types.SimpleNamespace(calls=0, scale=2.0)  # a library's config object (transformers' PretrainedConfig)
        self.fc = nn.Linear(width, width)

    def forward(self, x):
        self.config.calls += 1
        return torch.relu(self.fc(x)) * self.config.scale * self.config.calls
'''

LOGGING_COUNTER = CONFIG_COUNTER.replace("* self.config.scale * self.config.calls", "* self.config.scale")

SETTINGS_DICT = HEAD + '''
class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.hparams = {"shift": 0.5, "sizes": [1, 2]}
        self.fc = nn.Linear(width, width)

    def forward(self, x):
        return self.fc(x) + self.hparams["shift"] * len(self.hparams["sizes"])


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.head = Head()

    def forward(self, x):
        return torch.tanh(self.head(x))
'''


@pytest.mark.parametrize("source, named", [(COUNTING_PROPERTY, ""), (CONFIG_COUNTER, "self.config.calls")],
                         ids=["property-that-counts", "config-field-written-in-forward"])
def test_a_forward_whose_output_changes_between_identical_calls_is_refused_at_load(tmp_path, source, named):
    """Before: delivered with 'speedup 4.00x' (the judge's eager reference had drifted as much as the plan),
    or failed after the search blaming the user for changing config.calls after optimizing."""
    caught = capture_refusal(tmp_path, "counting", source)
    text = str(caught)
    assert "gives other outputs when called twice on the same inputs" in text and named in text, text
    assert "registered buffer" in caught.hint


def test_a_config_field_forward_writes_without_changing_outputs_is_not_guarded(tmp_path):
    """A logging counter in a config object: loaded, and left out of what ModelNew guards (its plan never counts)."""
    problem = load_problem(ProblemSpec(str(write_model(tmp_path, "logging_counter", LOGGING_COUNTER)), {}))
    capture_graph(problem)
    assert problem.written_fields == ["config.calls"]
    from lego_core.load.module_attributes import baked_fields

    fields = baked_fields(problem.model, problem.written_fields)
    assert ("", "config", "scale", 2.0) in fields and not any(f == "calls" for _p, _a, f, _v in fields)


@pytest.mark.slow
def test_a_settings_dict_on_a_module_changed_or_edited_after_optimizing_runs_the_original_forward(tmp_path):
    """Before: the plan kept running with the old values, 1.7 away from eager, and no warning."""
    report = optimize_api(write_model(tmp_path, "settings_dict", SETTINGS_DICT), tmp_path / "out")
    assert report["end_to_end"]["passed"]
    module = load_optimized(tmp_path / "out")
    for change in (lambda m: m.head.hparams.__setitem__("shift", 3.0), lambda m: m.head.hparams["sizes"].append(3),
                   lambda m: setattr(m.head, "hparams", {"shift": -1.0, "sizes": [1]})):
        model, new = fresh_pair(module)
        x = torch.randn(2, 4)
        with torch.no_grad():
            torch.testing.assert_close(new(x), model(x), atol=1e-5, rtol=1e-5)
            assert new.lego_last_forward == "plan"
            change(model), change(new)
            with pytest.warns(UserWarning, match="head.hparams changed after the model was optimized"):
                got = new(x)
            torch.testing.assert_close(got, model(x), atol=1e-5, rtol=1e-5)
        assert new.lego_last_forward == "original"
