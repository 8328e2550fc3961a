"""Sub-problems: context-isolated regions of the graph.

A :class:`SubProblem` is a connected set of graph nodes with explicit
boundary inputs (values it reads from outside) and outputs (values read
outside it or returned by the model).  It carries its own reference (an FX
GraphModule of exactly its ATen ops, with readable source), its input and
output specs, and a canonical signature, so an agent needs nothing else to
solve it.
"""
from __future__ import annotations

import dataclasses
import hashlib
import re
from pathlib import Path
from typing import Any

import torch
import torch.fx as fx

from lego_core.load.capture import ValueInfo, module_path, op_name, value_info


@dataclasses.dataclass
class SubProblem:
    """One region of the graph.

    ``nodes``: the region's call_function nodes in schedule order;
    ``inputs`` / ``outputs``: boundary values (fx nodes of the whole graph);
    ``input_specs`` / ``output_specs``: their ValueInfo (None for non-tensor
    values); ``kind``: ``pointwise``, ``row_reduction``, ``layout``, ``heavy``
    or ``region`` (a module region above the fusion groups); ``group``: the
    FusionGroup for leaves; ``reference``: the region as a GraphModule taking
    the inputs in order and returning a tuple of the outputs.
    """

    id: str
    label: str
    module_path: str
    kind: str
    nodes: list[fx.Node]
    inputs: list[fx.Node]
    outputs: list[fx.Node]
    group: Any = None

    def __post_init__(self) -> None:
        self.input_specs: list[ValueInfo | None] = [value_info(n) for n in self.inputs]
        self.output_specs: list[ValueInfo | None] = [value_info(n) for n in self.outputs]
        self._reference: fx.GraphModule | None = None
        self._signature: str | None = None

    @property
    def ops(self) -> list[str]:
        return [op_name(n) for n in self.nodes if op_name(n) != "getitem"]

    @property
    def reference(self) -> fx.GraphModule:
        if self._reference is None:
            self._reference = fx.GraphModule(torch.nn.Module(), region_graph(self.nodes, self.inputs, self.outputs))
        return self._reference

    def reference_source(self, name: str = "reference") -> str:
        """Readable PyTorch source of the region: ``def name(inputs...)`` returning a tuple."""
        return function_source(self.reference.graph, name)

    def run_reference(self, inputs: list) -> list:
        with torch.no_grad():
            return list(self.reference(*inputs))

    @property
    def signature(self) -> str:
        """Canonical structural signature: ops, argument structure, constants,
        shapes, dtypes and strides; not node names or parameter identity."""
        if self._signature is None:
            self._signature = self._compute_signature()
        return self._signature

    def _compute_signature(self) -> str:
        local = {n.name: f"i{k}" for k, n in enumerate(self.inputs)}
        local.update({n.name: f"n{k}" for k, n in enumerate(self.nodes)})

        def canon(a: Any) -> Any:
            if isinstance(a, fx.Node):
                return local.get(a.name, "?")
            if isinstance(a, (list, tuple)):
                return [canon(x) for x in a]
            if isinstance(a, dict):
                return {k: canon(v) for k, v in sorted(a.items())}
            return repr(a)

        parts = [repr([(s.shape, str(s.dtype), s.stride) if s else None for s in self.input_specs])]
        parts += [f"{op_name(n)}{canon(list(n.args))}{canon(dict(n.kwargs))}" for n in self.nodes]
        parts.append(repr([local[n.name] for n in self.outputs]))
        return hashlib.sha1("|".join(parts).encode()).hexdigest()[:16]

    def test_source(self, kernel_file: str, device: str, atol: float, rtol: float) -> str:
        """A standalone pytest file checking ``kernels/<kernel_file>`` against
        this region's reference on random inputs drawn by spec (the
        sub-problem's own test, shipped in the output folder)."""
        import jinja2

        env = jinja2.Environment(loader=jinja2.FileSystemLoader(Path(__file__).parent / "templates"), keep_trailing_newline=True)
        inputs = "[" + ", ".join(f"({s.shape!r}, {s.stride!r}, {s.dtype})" for s in self.input_specs) + "]"
        return env.get_template("subproblem_test.py.j2").render(
            sub_id=self.id,
            label=self.label,
            kernel_file=kernel_file,
            device=device,
            inputs=inputs,
            atol=atol,
            rtol=rtol,
            reference=self.reference_source("reference"),
        )

    def summary(self) -> dict:
        return {
            "id": self.id,
            "label": self.label,
            "module_path": self.module_path,
            "kind": self.kind,
            "ops": self.ops,
            "input_shapes": [list(s.shape) if s else None for s in self.input_specs],
            "output_shapes": [list(s.shape) if s else None for s in self.output_specs],
            "signature": self.signature,
        }


def boundary(nodes: list[fx.Node], graph_outputs: list[fx.Node]) -> tuple[list[fx.Node], list[fx.Node]]:
    """Boundary inputs (first-use order) and outputs (schedule order) of a node set."""
    inside = {n.name for n in nodes}
    inputs: list[fx.Node] = []
    seen: set[str] = set()
    for n in nodes:
        for a in n.all_input_nodes:
            if a.name not in inside and a.name not in seen:
                seen.add(a.name)
                inputs.append(a)
    out_names = {n.name for n in graph_outputs}
    outputs = [n for n in nodes if n.name in out_names or any(u.name not in inside for u in n.users)]
    return inputs, outputs


def make_subproblem(sp_id: str, nodes: list[fx.Node], graph_outputs: list[fx.Node], kind: str, label: str = "", group: Any = None) -> SubProblem:
    """Build a SubProblem for ``nodes`` (a region of one captured graph)."""
    inputs, outputs = boundary(nodes, graph_outputs)
    paths = [module_path(n) for n in nodes if module_path(n)]
    path = _common_prefix(paths)
    return SubProblem(sp_id, label or _default_label(path, nodes), path, kind, nodes, inputs, outputs, group)


def region_graph(nodes: list[fx.Node], inputs: list[fx.Node], outputs: list[fx.Node]) -> fx.Graph:
    """A fresh fx.Graph with a placeholder per input, copies of ``nodes`` and
    one output returning a tuple of ``outputs``."""
    graph = fx.Graph()
    env: dict[str, fx.Node] = {}
    for n in inputs:
        ph = graph.placeholder(n.name)
        ph.meta = dict(n.meta)
        env[n.name] = ph
    for n in nodes:
        env[n.name] = graph.node_copy(n, lambda a: env[a.name])
    graph.output(tuple(env[n.name] for n in outputs))
    return graph


def function_source(graph: fx.Graph, name: str) -> str:
    """Python source of ``graph`` as a plain function ``name(...)``, without
    FX's memory-freeing ``x = None`` tails."""
    src = graph.python_code(root_module="self").src.strip()
    src = src.replace("def forward(self, ", f"def {name}(", 1).replace("def forward(self)", f"def {name}()", 1)
    return re.sub(r";\s+[\w ]+= None$", "", src, flags=re.M)


def _common_prefix(paths: list[str]) -> str:
    if not paths:
        return ""
    parts = [p.split(".") for p in paths]
    common: list[str] = []
    for column in zip(*parts):
        if len(set(column)) != 1:
            break
        common.append(column[0])
    return ".".join(common)


def _default_label(path: str, nodes: list[fx.Node]) -> str:
    ops = [op_name(n).split(".")[1] for n in nodes if op_name(n) != "getitem"]
    shown = ", ".join(dict.fromkeys(ops[:4])) + (" …" if len(ops) > 4 else "")
    return f"{path or 'model'} · {shown}"
