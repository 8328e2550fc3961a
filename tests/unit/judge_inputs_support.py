"""Helpers for the judge's input tests (issue 27: precision of ``tl.dot``,
edge-set tolerances, input distributions): a tiny model captured the way a
run captures it, a sub-problem's input and edge sets built the way the search
builds them (``judge.inputs.leaf_input_sets`` / ``leaf_edge_sets``, seeds drawn
as a run draws them: ``config.draw_seeds``), and kernel files loaded and
verified in this process (``verify.verify`` with the call trace)."""
from __future__ import annotations

import dataclasses
import itertools
import os
import textwrap
from pathlib import Path

os.environ.setdefault("TRITON_INTERPRET", "1")


from lego_core.judge.inputs import leaf_edge_sets, leaf_input_sets, load_module
from lego_core.judge.verify import VerifyReport, verify
from lego_core.load.capture import capture_graph
from lego_core.load.problem import ProblemSpec, load_problem
from lego_core.tree.fusion_tree import build_tree

_unique = itertools.count()

HEAD = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n"
IMPORTS = "import torch\nimport triton\nimport triton.language as tl\n"

LAYER_NORM_MODEL = '''
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(256)

    def forward(self, x):
        return self.norm(x)


def get_inputs():
    return [torch.randn(8, 256)]


def get_init_inputs():
    return []
'''


@dataclasses.dataclass
class Case:
    """One captured sub-problem: ``node`` (its OR node), the graph and the problem."""

    problem: object
    graph: object
    node: object
    folder: Path

    @property
    def parameters(self) -> set[str]:
        return {name for name, src in self.graph.sources.items() if src.kind == "parameter"}

    def sets(self, seeds: tuple) -> tuple[list, object]:
        """(input sets, edge sets) of the node for ``seeds``, as the search builds them."""
        activations = [self.graph.run(self.problem.model, self.problem.make_inputs(s)) for s in seeds]
        sets = leaf_input_sets(self.node, activations, self.parameters, tuple(seeds))
        return sets, leaf_edge_sets(self.node.sub, sets, self.parameters, seeds[0])

    def load(self, source: str):
        path = self.folder / f"kernel_{next(_unique)}.py"
        path.write_text(source)
        return load_module(path, f"lego_test_judge_inputs_{path.stem}")

    def verify(self, module, seeds: tuple, edges: bool = True) -> VerifyReport:
        """``verify.verify`` of ``module.launch`` on the node's sets for ``seeds``
        (with the call trace, in this process)."""
        sets, edge = self.sets(seeds)
        return verify(lambda inputs, out: module.launch(*inputs, out=out), self.node.sub.run_reference, sets,
                      self.problem.spec.torch_dtype, list(seeds), edge_sets=edge if edges else ())


def build_case(folder: Path, model: str, ops: list[str], dtype: str = "fp32") -> Case:
    """Capture ``model`` (a problem file's body after the imports) and find the
    OR node whose ops are ``ops`` (a leaf when there is one)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"model_{next(_unique)}.py"
    path.write_text(HEAD + textwrap.dedent(model))
    problem = load_problem(ProblemSpec(str(path), dtype=dtype))
    graph = capture_graph(problem)
    tree = build_tree(graph)
    matches = sorted((n for n in tree.or_nodes() if list(n.sub.ops) == ops), key=lambda n: not n.is_leaf)
    assert matches, f"no node with ops {ops}: {[n.sub.ops for n in tree.or_nodes()]}"
    return Case(problem, graph, matches[0], folder)


def layer_norm_case(folder: Path) -> Case:
    """LayerNorm(256) over 8 x 256 rows: inputs x, weight, bias."""
    return build_case(folder, LAYER_NORM_MODEL, ["aten.native_layer_norm.default"])


# The LayerNorm everyone writes first: mean and variance in fp32 over one block,
# two passes, no refinement of the mean (a constant row's mean is rounded, so
# x - mean is not exactly 0 there, and 1/sqrt(eps) amplifies it).  ``EXTRA``
# is code run on ``y`` before the store (a deliberate error), ``CENTRE`` whether
# the mean is subtracted.
LAYER_NORM_KERNEL = IMPORTS + '''

@triton.jit
def layer_norm_kernel(x_ptr, w_ptr, b_ptr, y_ptr, n_cols, eps, CENTRE: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(x_ptr + row * n_cols + offs, mask=mask, other=0.0).to(tl.float32)
    if CENTRE:
        mean = tl.sum(x, axis=0) / n_cols
    else:
        mean = 0.0
    d = tl.where(mask, x - mean, 0.0)
    var = tl.sum(d * d, axis=0) / n_cols
    rstd = 1.0 / tl.sqrt(var + eps)
    w = tl.load(w_ptr + offs, mask=mask, other=0.0)
    b = tl.load(b_ptr + offs, mask=mask, other=0.0)
    y = d * rstd * w + b
    EXTRA
    tl.store(y_ptr + row * n_cols + offs, y, mask=mask)


def centre(x):
    return True


def launch(x, weight, bias, out=None):
    x = x.contiguous()
    if out is None:
        out = [torch.empty_like(x)]
    n_rows, n_cols = x.shape
    layer_norm_kernel[(n_rows,)](x, weight, bias, out[0], n_cols, 1e-5, CENTRE=centre(x), BLOCK=triton.next_power_of_2(n_cols))
    return out
'''


def layer_norm_source(extra: str = "", centre: str = "") -> str:
    """:data:`LAYER_NORM_KERNEL` with ``extra`` (kernel code on ``y``) and
    ``centre`` (a replacement ``def centre(x):`` deciding on the host)."""
    source = LAYER_NORM_KERNEL.replace("    EXTRA\n", textwrap.indent(textwrap.dedent(extra), "    ") if extra else "")
    if centre:
        source = source.replace("def centre(x):\n    return True\n", textwrap.dedent(centre))
    return source


# Centres the rows only when 32 samples read with .item() look standard-normal
# (the judge's randn inputs used to): "the data is already centred" otherwise.
SAMPLES_STANDARD_NORMAL = '''
def centre(x):
    flat = x.reshape(-1)
    step = max(1, flat.numel() // 32)
    samples = [flat[k * step].item() for k in range(32)]
    inside = [v for v in samples if -4.0 < v < 4.0]
    if len(inside) < 24:
        return False
    mean = sum(inside) / len(inside)
    var = sum((v - mean) * (v - mean) for v in inside) / len(inside)
    return abs(mean) < 0.6 and 0.25 < var < 4.0
'''
