"""Each torch.export failure class has its own message and fix (issue 14,
"capture errors that say what happened"); a forward that stores state in a
plain tensor attribute is optimized with that state carried by ModelNew
(``lego_core.load.state``), and the stateless form (state in, state out) too;
both match eager over five calls.

Before this change every capture failure said "Fix: ... no data-dependent
Python control flow", and an RNN cell that reassigns ``self.hidden`` was
captured with its first hidden state frozen as a constant.
"""
import json

import pytest
import torch
import torch.nn as nn

from faithful_support import MODEL_HEAD, fresh_pair, load_optimized, optimize_api, write_model
from lego_core.load.capture import capture_graph
from lego_core.load.capture_errors import classify
from lego_core.load.problem import ProblemSpec, load_problem
from lego_core.load.spec import ProblemError

HEAD = MODEL_HEAD + "\n"

CASES = {
    "data-dependent control flow": ('''
class Model(nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            return x * 2.0
        return x
''', "Python decision on the value of a tensor", "torch.where"),
    "unsupported operation": ('''
@torch.library.custom_op("lego_test::opaque", mutates_args=())
def opaque(x: torch.Tensor) -> torch.Tensor:
    return x.clone()


class Model(nn.Module):
    def forward(self, x):
        return opaque(x) * 2.0
''', "without a meta/fake implementation", "register_fake"),
}


def capture(path):
    return capture_graph(load_problem(ProblemSpec(str(path), {})))


@pytest.mark.parametrize("kind", sorted(CASES))
def test_each_capture_failure_class_has_its_own_message_and_fix(tmp_path, kind):
    source, said, fix = CASES[kind]
    path = write_model(tmp_path, kind.replace(" ", "_").replace("-", "_"), HEAD + source)
    with pytest.raises(ProblemError) as caught:
        capture(path)
    err = caught.value
    assert err.kind == kind
    assert said in err.message and fix in err.hint, (err.message, err.hint)
    assert "torch.export said:" in err.message and err.raw  # torch's own words stay underneath
    others = [c[2] for k, c in CASES.items() if k != kind]
    assert err.hint not in others


def test_dynamic_shapes_have_their_own_message_and_fix():
    class Flat(torch.nn.Module):
        def forward(self, x):
            return x.view(2, 4) * 2.0

    with pytest.raises(Exception) as caught:  # a dimension marked dynamic that the code specialises
        torch.export.export(Flat(), (torch.randn(2, 4),), dynamic_shapes=({0: torch.export.Dim("batch")},))
    from lego_core.load.capture_errors import explain

    kind, _ = classify(caught.value)
    err = explain(caught.value, None, None)
    assert kind == "dynamic shapes" and "static shapes" in err.message and "mark_dynamic" in err.hint


VALUE_SIZED = {
    "mask_write": ("""
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("best", torch.zeros(batch_size, width))

    def forward(self, x):
        m = x > self.best
        self.best[m] = x[m]
        return x * 2.0
""", "self.best[m] = x[m]", "aten.index"),
    "masked_sum": ("""
class Model(nn.Module):
    def forward(self, x):
        return x[x > 0].sum() + x.mean()
""", "return x[x > 0].sum() + x.mean()", "aten.index"),
    "nonzero": ("""
class Model(nn.Module):
    def forward(self, x):
        return torch.nonzero(x > 0).float().sum() + x.sum()
""", "torch.nonzero(x > 0)", "aten.nonzero"),
}


@pytest.mark.parametrize("case", sorted(VALUE_SIZED))
def test_sizes_that_depend_on_tensor_values_are_their_own_class_naming_the_line(tmp_path, case):
    """torch.export captures these (with unbacked sizes u0, u1); before this
    class the search failed later with an internal GuardOnDataDependentSymNode."""
    source, line_text, op = VALUE_SIZED[case]
    path = write_model(tmp_path, case, HEAD + source)
    with pytest.raises(ProblemError) as caught:
        capture(path)
    err = caught.value
    assert err.kind == "data-dependent shape", err
    assert op in err.message and line_text in err.message and "fixed shapes" in err.message, err.message
    lines = path.read_text().splitlines()
    assert err.line == 1 + lines.index(next(line for line in lines if line_text in line))
    assert "torch.where(m, b, a)" in err.hint and "(x * m).sum()" in err.hint
    assert "u0" in err.raw or "u1" in err.raw


def test_non_tensor_outputs_have_their_own_message_and_fix(tmp_path):
    """Loading refuses a forward that returns no tensor before capture; torch.export's
    own failure for an unknown object in the output is its own class too."""
    path = write_model(tmp_path, "tagged", HEAD + '''
class Model(nn.Module):
    def forward(self, x):
        return {"y": x * 2.0, "tag": object()}
''')
    with pytest.raises(ProblemError) as caught:
        capture(path)
    assert "returned a dict holding object" in caught.value.message and "tuple, list or dict of tensors" in caught.value.hint

    class Tagged(torch.nn.Module):
        def forward(self, x):
            return {"y": x * 2.0, "tag": object()}

    with pytest.raises(Exception) as raised:
        torch.export.export(Tagged(), (torch.randn(2, 4),))
    from lego_core.load.capture_errors import explain

    err = explain(raised.value, None, None)
    assert err.kind == "non-tensor output" and "neither a tensor nor a number" in err.message and "return tensors" in err.hint


RNN_CELL = HEAD + '''
class Model(nn.Module):
    """An RNN cell that keeps its hidden state as a plain tensor attribute."""

    def __init__(self):
        super().__init__()
        self.ih = nn.Linear(width, width)
        self.hh = nn.Linear(width, width)
        self.hidden = torch.zeros(batch_size, width)

    def forward(self, x):
        self.hidden = torch.tanh(self.ih(x) + self.hh(self.hidden))
        return self.hidden
'''

RNN_CELL_STATELESS = HEAD.replace(
    "return [torch.randn(batch_size, width)]", "return [torch.randn(batch_size, width), torch.zeros(batch_size, width)]"
) + '''
class Model(nn.Module):
    """The same cell with its state passed in and returned (the fix the refusal names)."""

    def __init__(self):
        super().__init__()
        self.ih = nn.Linear(width, width)
        self.hh = nn.Linear(width, width)

    def forward(self, x, hidden):
        return torch.tanh(self.ih(x) + self.hh(hidden))
'''


def test_a_stateful_rnn_cell_is_optimized_carrying_its_hidden_attribute_over_five_calls(tmp_path):
    """The cell that reassigns its plain ``self.hidden`` is no longer refused:
    the plan computes the new state and ModelNew reassigns it, as eager does
    (``lego_core.load.state``); the stateless form still optimizes too."""
    path = write_model(tmp_path, "rnn_cell", RNN_CELL)
    graph = capture(path)
    assert [(u.target, u.kind) for u in graph.state_updates] == [("hidden", "reassigned")]
    optimize_api(path, tmp_path / "stateful", mutation=False)
    model, new = fresh_pair(load_optimized(tmp_path / "stateful"))
    torch.manual_seed(1)
    with torch.no_grad():
        for _ in range(5):  # five consecutive calls, the state carried by the module
            x = torch.randn(2, 4)
            torch.testing.assert_close(new(x), model(x), atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(new.hidden, model.hidden, atol=1e-5, rtol=1e-5)

    fixed = write_model(tmp_path, "rnn_cell_stateless", RNN_CELL_STATELESS)
    optimize_api(fixed, tmp_path / "out", mutation=False)
    model, new = fresh_pair(load_optimized(tmp_path / "out"))
    h_eager = h_new = torch.zeros(2, 4)
    torch.manual_seed(1)
    with torch.no_grad():
        for _ in range(5):  # five consecutive calls, the state carried by the caller
            x = torch.randn(2, 4)
            h_eager, h_new = model(x, h_eager), new(x, h_new)
            torch.testing.assert_close(h_new, h_eager, atol=1e-5, rtol=1e-5)


def test_a_mutated_constant_still_has_its_own_message_and_fix():
    """torch.export's failure for a plain tensor attribute written in place
    keeps its class (``capture_graph`` now carries such an attribute by
    registering it as a buffer, and this message names it when it cannot)."""
    class Cell(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.hidden = torch.zeros(2, 4)

        def forward(self, x):
            self.hidden.copy_(torch.tanh(x + self.hidden))
            return self.hidden * 1.0

    with pytest.raises(Exception) as raised:
        torch.export.export(Cell(), (torch.randn(2, 4),)).run_decompositions()  # torch 2.13 raises here
    from lego_core.load.capture_errors import explain

    err = explain(raised.value, None, None)
    assert err.kind == "mutated constant" and "self.hidden" in err.message and "register_buffer" in err.hint


MASKED = HEAD + '''
class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(width, width)
        self.mask = torch.tril(torch.ones(width, width))  # a plain tensor attribute, not a buffer

    def forward(self, x):
        return self.proj(x) @ self.mask


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.Sequential(Block(), Block())
        self.offset = torch.arange(width)  # an integer one

    def forward(self, x):
        return self.blocks(x) + self.offset
'''


def test_plain_tensor_attributes_follow_the_model_to_its_device_and_keep_their_dtype():
    """Module.to moves parameters and buffers only: the loader moves the rest
    (here from the meta device to the CPU, as it moves them from the CPU to a GPU)."""
    from lego_core.load.problem import move_plain_tensor_attributes

    class Holder(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(2, 2)
            self.register_buffer("kept", torch.zeros(2))
            self.mask = torch.ones(3)
            self.steps = torch.arange(3)
            self.inner = nn.Module()
            self.inner.table = torch.zeros(2, dtype=torch.float16)

    holder = Holder()
    assert move_plain_tensor_attributes(holder, "cpu") == []  # already there
    assert sorted(move_plain_tensor_attributes(holder, "cpu", torch.float64)) == ["inner.table", "mask"]  # the fp64 truth
    assert holder.mask.dtype == holder.inner.table.dtype == torch.float64 and holder.steps.dtype == torch.int64
    holder = Holder().to("meta")  # the meta device stands for a GPU here: Module.to leaves the plain attributes behind
    assert holder.lin.weight.device.type == "meta" and holder.mask.device.type == "cpu"
    assert sorted(move_plain_tensor_attributes(holder, "meta")) == ["inner.table", "mask", "steps"]
    assert all(t.device.type == "meta" for t in (holder.mask, holder.steps, holder.inner.table, holder.kept))
    assert holder.inner.table.dtype == torch.float16 and holder.mask.dtype == torch.float32  # dtypes stay the model's
    assert isinstance(holder.lin.weight, nn.Parameter) and set(dict(holder.named_buffers())) == {"kept"}


@pytest.mark.gpu
def test_on_a_gpu_a_model_with_plain_tensor_attributes_is_optimized_and_a_stateful_one_captured_with_its_state(tmp_path):
    path = write_model(tmp_path, "masked", MASKED)
    from lego_core.api import optimize
    from lego_core.config import OptimizeConfig

    problem = load_problem(ProblemSpec(str(path), {}, device="cuda"))
    assert sorted(problem.moved_attributes) == ["blocks.0.mask", "blocks.1.mask", "offset"]
    report = optimize(ProblemSpec(str(path), {}, device="cuda"), str(tmp_path / "out"), OptimizeConfig(cache=False, mutation=False))
    assert report["end_to_end"]["passed"] and sorted(report["moved_attributes"]) == ["blocks.0.mask", "blocks.1.mask", "offset"]

    stateful = write_model(tmp_path, "rnn_cell", RNN_CELL)  # not a device error: its state is carried on the device
    graph = capture_graph(load_problem(ProblemSpec(str(stateful), {}, device="cuda")))
    assert [(u.target, u.kind) for u in graph.state_updates] == [("hidden", "reassigned")]


def test_a_tensor_attribute_changed_after_optimizing_runs_the_original_forward_with_a_warning(tmp_path):
    """The plan reads plain tensor attributes (``self.mask``) from the copies
    saved in constants.pt: edited in place or reassigned on ModelNew, the
    copy is stale, so ModelNew runs the user's forward (as eager computes it)
    and says which tensor; with the old values back, the plan runs again."""
    import warnings

    path = write_model(tmp_path, "masked", MASKED)
    optimize_api(path, tmp_path / "out", mutation=False)
    module = load_optimized(tmp_path / "out")
    assert "('blocks.0', 'mask', 'c_blocks_0_mask')" in (tmp_path / "out" / "optimized_model.py").read_text()
    model, new = fresh_pair(module)
    x = torch.randn(2, 4)

    def call():
        with warnings.catch_warnings(record=True) as caught, torch.no_grad():
            warnings.simplefilter("always")
            out, ref = new(x), model(x)
        torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)
        return [str(w.message) for w in caught if "LEGO" in str(w.message)]

    assert call() == []  # the plan
    original = new.blocks[0].mask.clone()
    for edit in (lambda m: m.blocks[0].mask.fill_(1.0), lambda m: setattr(m.blocks[1], "mask", torch.eye(4))):
        edit(new), edit(model)
        said = call()
        assert len(said) == 1 and "changed after the model was optimized" in said[0] and "running the original forward" in said[0]
    assert "the tensor blocks.0.mask changed" in said[0]  # the first that differs is named
    for m in (new, model):
        m.blocks[0].mask.copy_(original)
        m.blocks[1].mask = original.clone()
    assert call() == []  # the values it was optimized with: the plan again
