"""Sub-problems for the adversarial corpus, and one way to judge a candidate.

Each sub-problem is captured from a tiny ``nn.Module`` the way a run captures
a user's model (``load_problem`` -> ``capture_graph`` -> ``build_tree``), and
judged by a real ``Search``'s judge (``lego_core.judge.candidate``): :func:`judge_candidate`
hands a kernel file's source to ``CandidateJudge.judge``, the same entry the search
uses for an agent's candidate (static check, import, verification; timing is
estimated on the CPU).  When candidate execution moves into its own process,
repoint :func:`judge_candidate` at the new entry; the corpus does not change.
"""
from __future__ import annotations

import dataclasses
import itertools
import os
import textwrap
from pathlib import Path

os.environ.setdefault("TRITON_INTERPRET", "1")

import torch

from lego_core.agents.template.agent import TemplateAgent
from lego_core.load.capture import capture_graph
from lego_core.config import OptimizeConfig
from lego_core.load.problem import ProblemSpec, load_problem
from lego_core.search.engine import Search
from lego_core.tree.fusion_tree import Candidate, build_tree

PUBLIC_SEEDS = (101, 202, 303)  # the seeds every run used before they were drawn per run

HEAD = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n"

# name -> (model body, get_inputs() expression, ops of the node to judge)
MODELS = {
    "softmax": (
        """
        class Model(nn.Module):
            def forward(self, x):
                return torch.softmax(x, dim=-1)
        """,
        "[torch.randn(4, 4096)]",
        ["aten._softmax.default"],
    ),
    "add_relu": (
        """
        class Model(nn.Module):
            def forward(self, x, y):
                return torch.relu(x + y)
        """,
        "[torch.randn(8, 256), torch.randn(8, 256)]",
        ["aten.add.Tensor", "aten.relu.default"],
    ),
    "layer_norm": (
        """
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.norm = nn.LayerNorm(256)

            def forward(self, x):
                return self.norm(x)
        """,
        "[torch.randn(8, 256)]",
        ["aten.native_layer_norm.default"],
    ),
    "linear_relu": (
        """
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(64, 64)

            def forward(self, x):
                return torch.relu(self.fc(x))
        """,
        "[torch.randn(16, 64)]",
        ["aten.permute.default", "aten.addmm.default", "aten.relu.default"],
    ),
    "masked_fill": (
        """
        class Model(nn.Module):
            def forward(self, scores, mask):
                return scores.masked_fill(mask, -1e9)
        """,
        "[torch.randn(8, 128), torch.rand(8, 128) < 0.3]",
        ["aten.scalar_tensor.default", "aten.where.self"],
    ),
}

_unique = itertools.count()


@dataclasses.dataclass
class Case:
    """One captured sub-problem and the search that judges candidates for it."""

    name: str
    problem: object
    graph: object
    tree: object
    node: object
    work: Path
    device: str = "cpu"
    searches: dict = dataclasses.field(default_factory=dict)

    def search(self, seeds: tuple | None = None) -> Search:
        """A ``Search`` over this sub-problem's tree whose config has ``seeds``
        (None: drawn at random, as a run's default config does), with the
        boundary values of each seed (one per config, cached)."""
        key = seeds or "drawn"
        if key not in self.searches:
            config = OptimizeConfig(cache=False, verify_seeds=seeds)
            activations = [self.graph.run(self.problem.model, self.problem.make_inputs(s)) for s in config.verify_seeds]
            parameters = {name for name, src in self.graph.sources.items() if src.kind == "parameter"}
            work = self.work / f"search_{next(_unique)}"
            work.mkdir(parents=True)
            self.searches[key] = Search(self.tree, activations, parameters, TemplateAgent(), config, torch.float32, self.device, work, lambda event: None)
        return self.searches[key]


def build_case(name: str, folder: Path, device: str = "cpu", inputs: str | None = None) -> Case:
    """Capture ``MODELS[name]`` (on ``device``; ``inputs``: another
    ``get_inputs()`` expression, larger shapes for timing) and find the OR node
    whose ops are the listed ones."""
    body, default_inputs, ops = MODELS[name]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}_model.py"
    path.write_text(HEAD + textwrap.dedent(body) + f"\n\ndef get_inputs():\n    return {inputs or default_inputs}\n\n\ndef get_init_inputs():\n    return []\n")
    problem = load_problem(ProblemSpec(str(path), device=device))
    graph = capture_graph(problem)
    tree = build_tree(graph)
    matches = sorted((n for n in tree.or_nodes() if list(n.sub.ops) == ops), key=lambda n: not n.is_leaf)
    assert matches, f"no node with ops {ops}: {[n.sub.ops for n in tree.or_nodes()]}"
    return Case(name, problem, graph, tree, matches[0], folder, device)  # a leaf when there is one


def judge_candidate(source: str, case: Case, seeds: tuple | None = None) -> Candidate:
    """Judge a kernel file's ``source`` for ``case``'s sub-problem the way the
    search judges an agent's candidate (``CandidateJudge.judge``); returns the
    candidate (``usable``, ``rejected_reason``, ``verified``)."""
    search = case.search(seeds)
    number = next(_unique)
    cand = Candidate(f"{case.node.id}-hack-{number}", case.node.id, "hack", "triton", source, f"{case.node.sub.id}_hack_{number}")
    search.judge.judge(case.node, cand)
    return cand


def model_file(name: str, folder: Path) -> Path:
    """``MODELS[name]`` written as a model file in ``folder`` (as :func:`build_case` writes it), for a whole run."""
    body, inputs, _ = MODELS[name]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}_model.py"
    path.write_text(HEAD + textwrap.dedent(body) + f"\n\ndef get_inputs():\n    return {inputs}\n\n\ndef get_init_inputs():\n    return []\n")
    return path
