"""bench/models: every bench model loads with the project's loader at its tiny
sizes, is deterministic in eval mode and captures with torch.export."""
import json
from pathlib import Path

import pytest
import torch

from lego_core.load.capture import capture_graph, op_name
from lego_core.load.problem import ProblemSpec, load_problem

MODELS = Path(__file__).resolve().parents[2] / "bench" / "models"
TINY = json.loads((MODELS / "tiny.json").read_text())
# the heavy op each model is about, as it appears in the CPU capture
HEAVY = {
    "resnet18_style.py": "aten.convolution.default",
    "mobilenetv2_style.py": "aten.convolution.default",
    "lstm2.py": "aten.lstm.input",
    "llama_decoder.py": "aten.mm.default",
    "gpt2_block.py": "aten.addmm.default",
    "long_seq_attention.py": "aten.bmm.default",
    "resnet101_style.py": "aten.convolution.default",
    "densenet121_style.py": "aten.cat.default",
    "efficientnet_b0_style.py": "aten.convolution.default",
    "transformer12.py": "aten.bmm.default",
}


def test_every_model_file_has_tiny_sizes():
    assert sorted(TINY) == sorted(p.name for p in MODELS.glob("*.py")) == sorted(HEAVY)


@pytest.mark.parametrize("name", sorted(HEAVY))
def test_model_loads_is_deterministic_and_captures(name):
    problem = load_problem(ProblemSpec(str(MODELS / name), TINY[name]))
    assert not problem.model.training and all(not m.training for m in problem.model.modules())
    assert {k: problem.constants[k] for k in TINY[name]} == TINY[name]
    inputs = problem.make_inputs(7)
    with torch.no_grad():
        first, second = problem.model(*inputs), problem.model(*inputs)
    assert torch.equal(first, second) and torch.isfinite(first).all()
    graph = capture_graph(problem)
    assert HEAVY[name] in {op_name(n) for n in graph.compute_nodes}
