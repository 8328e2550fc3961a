"""Sub-problems as plain JSON: context isolation made literal.

An agent may run in another process or on another machine (the web app's
Celery fan-out).  ``sub_to_payload(sub)`` turns a sub-problem into a dict of
plain JSON values: its id, label, module path and kinds, its reference
implementation as source text (``SubProblem.reference_source``: one function
of ``torch.ops.aten`` calls), the spec (shape, stride, dtype, device) of
every boundary input and its canonical signature.  ``sub_from_payload(data)``
rebuilds an equivalent SubProblem from that alone:

1. the reference source is checked to be one function of ATen calls
   (nothing else is accepted) and turned into an fx graph, one node per
   statement, named as in the source;
2. every node's ``meta["val"]`` is filled by running the graph under
   ``FakeTensorMode`` on inputs made with ``torch.empty_strided`` per spec
   (shapes, dtypes and strides come out as the captured graph had them);
3. the fusion group is formed again from the nodes (``partition`` for
   pointwise / row-reduction / layout / heavy groups, ``gemm_epilogue_group``
   for GEMM epilogues, ``attention_group`` for attention,
   ``depthwise_conv1d_group`` / ``scan_group`` for sequence-mixer groups);
4. the rebuilt sub-problem's signature must equal the payload's.

The graph is built from the parsed source rather than by executing and
tracing it: the payload crosses a broker, so it is never run as Python, and
ops with no tensor argument (``aten.scalar_tensor``) stay nodes instead of
being folded into constants by a tracer.

Usage: python -m lego_core.agents.payload MODEL.py [k=v ...]  (prints every leaf's payload, rebuilt once)
"""
from __future__ import annotations

import ast
import json
import math
import operator
import sys
from typing import Any

import torch
import torch.fx as fx
from torch._subclasses import FakeTensorMode

from lego_core.load.spec import syntax_error_text
from lego_core.tree.subproblem import SubProblem

FORMAT = 1
PARTITIONED_KINDS = ("pointwise", "row_reduction", "layout", "heavy")
_CONSTANT_NAMES = {"inf": math.inf, "nan": math.nan}
_ATTRIBUTE_TYPES = (torch.dtype, torch.layout, torch.memory_format)


class PayloadError(ValueError):
    """A payload that does not describe a valid sub-problem."""


# ---------------------------------------------------------------------------
# SubProblem -> payload
# ---------------------------------------------------------------------------


def sub_to_payload(sub: SubProblem) -> dict:
    """Plain JSON data describing ``sub`` completely (see the module docstring)."""
    return {
        "format": FORMAT,
        "id": sub.id,
        "label": sub.label,
        "module_path": sub.module_path,
        "kind": sub.kind,
        "group_kind": sub.group.kind if sub.group is not None else None,
        "reference": sub.reference_source("reference"),
        "inputs": [{"name": n.name, "value": _encode_value(n.meta.get("val"))} for n in sub.inputs],
        "signature": sub.signature,
    }


def _encode_value(val: Any) -> Any:
    """A boundary value's spec: a tensor's shape, stride, dtype and device, a
    sequence of specs, a Python scalar, or None."""
    if isinstance(val, torch.Tensor):
        return {
            "tensor": {
                "shape": [int(s) for s in val.shape],
                "stride": [int(s) for s in val.stride()],
                "dtype": str(val.dtype).removeprefix("torch."),
                "device": str(val.device),
            }
        }
    if isinstance(val, (list, tuple)):
        return {"items": [_encode_value(v) for v in val]}
    if isinstance(val, (bool, int, float)):
        return {"scalar": val}
    if val is None:
        return None
    raise ValueError(f"cannot describe a boundary value of type {type(val).__name__} as JSON")


# ---------------------------------------------------------------------------
# payload -> SubProblem
# ---------------------------------------------------------------------------


def sub_from_payload(data: Any) -> SubProblem:
    """Rebuild the SubProblem that ``sub_to_payload`` described.

    Raises ValueError (``PayloadError``) saying what is wrong when ``data``
    is not such a payload: missing or mistyped fields, a reference that is
    not one function of ATen calls, input specs that do not fit it, a fusion
    group that does not form again, or a signature that does not match.
    """
    sub_id = data.get("id") if isinstance(data, dict) else None
    try:
        return _rebuild(data)
    except PayloadError as exc:
        raise PayloadError(f"sub-problem payload {sub_id!r}: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - torch raises many types for bad specs
        raise PayloadError(f"sub-problem payload {sub_id!r}: {type(exc).__name__}: {exc}") from exc


def _rebuild(data: Any) -> SubProblem:
    _check_fields(data)
    graph = graph_from_source(data["reference"])  # parsed, never executed
    inputs = [n for n in graph.nodes if n.op == "placeholder"]
    names = [spec["name"] for spec in data["inputs"]]
    if [n.name for n in inputs] != names:
        raise PayloadError(f"the reference takes {[n.name for n in inputs]} but the input specs name {names}")
    _fill_values(graph, [spec["value"] for spec in data["inputs"]])  # meta["val"] under FakeTensorMode
    nodes = [n for n in graph.nodes if n.op == "call_function"]
    outputs = list(next(n for n in graph.nodes if n.op == "output").args[0])
    sub = SubProblem(data["id"], data["label"], data["module_path"], data["kind"], nodes, inputs, outputs)
    sub.group = _regroup(nodes, data["group_kind"])  # the fusion group, formed again
    if sub.signature != data["signature"]:
        raise PayloadError(
            f"the rebuilt sub-problem has signature {sub.signature}, the payload says {data['signature']}: "
            "the payload was changed or comes from a different LEGO version"
        )
    return sub


_FIELDS = {
    "format": int, "id": str, "label": str, "module_path": str, "kind": str,
    "group_kind": (str, type(None)), "reference": str, "inputs": list, "signature": str,
}  # fmt: skip


def _check_fields(data: Any) -> None:
    if not isinstance(data, dict):
        raise PayloadError(f"expected a JSON object, got {type(data).__name__}")
    missing = [k for k in _FIELDS if k not in data]
    if missing:
        raise PayloadError(f"missing field(s) {', '.join(missing)}")
    for key, types in _FIELDS.items():
        if not isinstance(data[key], types):
            raise PayloadError(f"field {key!r} has type {type(data[key]).__name__}")
    if data["format"] != FORMAT:
        raise PayloadError(f"payload format {data['format']} is not the supported format {FORMAT}")
    for k, spec in enumerate(data["inputs"]):
        if not isinstance(spec, dict) or not isinstance(spec.get("name"), str) or "value" not in spec:
            raise PayloadError(f"input {k} must be an object with 'name' and 'value'")


def graph_from_source(source: str) -> fx.Graph:
    """The fx graph of a reference function: one placeholder per argument,
    one call_function node per ``name = torch.ops.aten.<op>.<overload>(...)``
    or ``name = value[k]`` statement (named ``name``), one output returning
    the tuple.  Anything else in the source raises PayloadError."""
    try:
        module = ast.parse(source)
    except SyntaxError as exc:
        raise PayloadError(f"the reference source does not parse: {syntax_error_text(exc)}") from None
    if len(module.body) != 1 or not isinstance(module.body[0], ast.FunctionDef):
        raise PayloadError("the reference source must be exactly one function definition")
    func = module.body[0]
    args = func.args
    if args.vararg or args.kwarg or args.kwonlyargs or args.posonlyargs or args.defaults or func.decorator_list:
        raise PayloadError("the reference function must take plain positional arguments")
    graph = fx.Graph()
    env: dict[str, fx.Node] = {}
    for arg in args.args:
        env[arg.arg] = _named(graph.placeholder(arg.arg), arg.arg)
    builder = _NodeBuilder(graph, env)
    for statement in func.body:
        builder.statement(statement)
    if not builder.returned:
        raise PayloadError("the reference function returns nothing")
    return graph


def _named(node: fx.Node, name: str) -> fx.Node:
    if node.name != name:
        raise PayloadError(f"{name!r} is not usable as a node name (a duplicate or reserved name)")
    return node


class _NodeBuilder:
    """Turns the statements of a reference function into graph nodes."""

    def __init__(self, graph: fx.Graph, env: dict[str, fx.Node]):
        self.graph, self.env, self.returned = graph, env, False

    def statement(self, st: ast.stmt) -> None:
        if self.returned:
            raise PayloadError(f"line {st.lineno}: statements after return")
        if isinstance(st, ast.Assign) and isinstance(st.value, ast.Constant) and st.value.value is None:
            return  # FX's `x = y = None` (frees memory in generated code)
        if isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name):
            name = st.targets[0].id
            if name in self.env:
                raise PayloadError(f"line {st.lineno}: {name!r} is assigned twice")
            self.env[name] = _named(self._node(st.value, name), name)
        elif isinstance(st, ast.Return) and isinstance(st.value, (ast.Tuple, ast.List)):
            self.graph.output(tuple(self._value_node(e) for e in st.value.elts))
            self.returned = True
        else:
            raise PayloadError(f"line {st.lineno}: only `name = torch.ops.aten...(...)` and `return (...)` are allowed")

    def _node(self, expr: ast.expr, name: str) -> fx.Node:
        if isinstance(expr, ast.Subscript):  # getitem of a multi-output op
            index = self._arg(expr.slice)
            if not isinstance(index, int):
                raise PayloadError(f"{name}: only integer indexing is allowed")
            return self.graph.call_function(operator.getitem, (self._value_node(expr.value), index), name=name)
        if not isinstance(expr, ast.Call):
            raise PayloadError(f"{name}: expected a call of a torch.ops operator")
        target = _resolve(expr.func)
        if not isinstance(target, torch._ops.OpOverload) or target.namespace != "aten":
            raise PayloadError(f"{name}: {ast.unparse(expr.func)} is not a torch.ops.aten operator overload")
        args = tuple(self._arg(a) for a in expr.args)
        kwargs = {kw.arg: self._arg(kw.value) for kw in expr.keywords if kw.arg is not None}
        if len(kwargs) != len(expr.keywords):
            raise PayloadError(f"{name}: **kwargs are not allowed")
        return self.graph.call_function(target, args, kwargs, name=name)

    def _value_node(self, expr: ast.expr) -> fx.Node:
        if isinstance(expr, ast.Name) and expr.id in self.env:
            return self.env[expr.id]
        raise PayloadError(f"{ast.unparse(expr)} is not a value defined earlier")

    def _arg(self, expr: ast.expr) -> Any:
        """An argument: an earlier value, a constant, a list of arguments,
        a torch dtype / layout / memory format, or ``device(...)``."""
        if isinstance(expr, ast.Name):
            if expr.id in self.env:
                return self.env[expr.id]
            if expr.id in _CONSTANT_NAMES:
                return _CONSTANT_NAMES[expr.id]
            raise PayloadError(f"unknown name {expr.id!r}")
        if isinstance(expr, ast.Constant) and isinstance(expr.value, (int, float, str, bool, type(None))):
            return expr.value
        if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.USub):
            value = self._arg(expr.operand)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                return -value
        if isinstance(expr, (ast.List, ast.Tuple)):
            items = [self._arg(e) for e in expr.elts]
            return items if isinstance(expr, ast.List) else tuple(items)
        if isinstance(expr, ast.Attribute):
            value = _resolve(expr)
            if isinstance(value, _ATTRIBUTE_TYPES):
                return value
        if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id == "device":
            args = [self._arg(a) for a in expr.args]
            kwargs = {kw.arg: self._arg(kw.value) for kw in expr.keywords}
            if all(isinstance(v, (str, int)) for v in args + list(kwargs.values())):
                return torch.device(*args, **kwargs)
        raise PayloadError(f"argument {ast.unparse(expr)!r} is not allowed in a reference")


def _resolve(expr: ast.expr) -> Any:
    """The object a dotted name ``torch.a.b.c`` names (only under ``torch``)."""
    parts: list[str] = []
    while isinstance(expr, ast.Attribute):
        parts.append(expr.attr)
        expr = expr.value
    if not isinstance(expr, ast.Name) or expr.id != "torch":
        raise PayloadError(f"{ast.unparse(expr)} is not under torch")
    value: Any = torch
    for part in reversed(parts):
        if part.startswith("__"):
            raise PayloadError(f"attribute {part!r} is not allowed")
        try:
            value = getattr(value, part)
        except (AttributeError, RuntimeError):
            raise PayloadError(f"torch has no {'.'.join(['torch'] + parts[::-1])}") from None
    return value


def _fill_values(graph: fx.Graph, specs: list) -> None:
    """Set ``meta["val"]`` of every node: fake inputs per spec, then each
    op run on fake tensors (shapes, strides and dtypes, no data)."""
    with FakeTensorMode(allow_non_fake_inputs=False):
        placeholders = [n for n in graph.nodes if n.op == "placeholder"]
        for node, spec in zip(placeholders, specs):
            node.meta["val"] = _decode_value(spec, node.name)
        for node in graph.nodes:
            if node.op == "call_function":
                args = fx.node.map_arg(node.args, lambda n: n.meta["val"])
                kwargs = fx.node.map_arg(node.kwargs, lambda n: n.meta["val"])
                node.meta["val"] = node.target(*args, **kwargs)


def _decode_value(spec: Any, where: str) -> Any:
    if spec is None:
        return None
    if not isinstance(spec, dict) or len(spec) != 1:
        raise PayloadError(f"input {where}: a value spec is null or an object with one of 'tensor', 'items', 'scalar'")
    (tag, body), = spec.items()
    if tag == "scalar" and isinstance(body, (bool, int, float)):
        return body
    if tag == "items" and isinstance(body, list):
        return tuple(_decode_value(v, where) for v in body)
    if tag == "tensor" and isinstance(body, dict):
        shape, stride = body.get("shape"), body.get("stride")
        if not (_int_list(shape) and _int_list(stride) and len(shape) == len(stride)):
            raise PayloadError(f"input {where}: shape and stride must be lists of integers of one length")
        dtype = getattr(torch, str(body.get("dtype")), None)
        if not isinstance(dtype, torch.dtype):
            raise PayloadError(f"input {where}: unknown dtype {body.get('dtype')!r}")
        return torch.empty_strided(shape, stride, dtype=dtype, device=torch.device(str(body.get("device", "cpu"))))
    raise PayloadError(f"input {where}: malformed value spec {json.dumps(spec)[:200]}")


def _int_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value)


# group kinds formed by a constructor of their own: kind -> (module, function, what it is)
GROUP_CONSTRUCTORS = {
    "gemm_epilogue": ("lego_core.tree.fusion.gemm", "gemm_epilogue_group", "a GEMM-epilogue group"),
    "conv_bn": ("lego_core.tree.fusion.conv_bn", "conv_bn_group", "a conv + BatchNorm group"),
    "attention": ("lego_core.tree.fusion.attention", "attention_group", "an attention group"),
    "depthwise_conv1d": ("lego_core.tree.fusion.sequence", "depthwise_conv1d_group", "a depthwise conv1d group"),
    "scan": ("lego_core.tree.fusion.sequence", "scan_group", "a scan group"),
}


def _regroup(nodes: list[fx.Node], group_kind: str | None):
    """The sub-problem's fusion group, formed again from its nodes.

    Raises PayloadError when the nodes do not form a group of that kind."""
    if group_kind is None:
        return None
    if group_kind in GROUP_CONSTRUCTORS:
        import importlib

        module, function, what = GROUP_CONSTRUCTORS[group_kind]  # imported when needed: written alongside
        group, reason = getattr(importlib.import_module(module), function)(nodes)
        if group is None:
            raise PayloadError(f"the nodes do not form {what}: {reason}")
        return group
    if group_kind not in PARTITIONED_KINDS:
        raise PayloadError(f"unknown group kind {group_kind!r}")
    from lego_core.tree.fusion.groups import partition

    groups = partition(nodes)
    if len(groups) != 1:
        raise PayloadError(f"the nodes form {len(groups)} fusion groups, not one")
    if groups[0].kind != group_kind:
        raise PayloadError(f"the nodes form a {groups[0].kind} group, the payload says {group_kind}")
    return groups[0]


def main(argv: list[str]) -> int:
    from lego_core.load.capture import capture_graph
    from lego_core.load.problem import ProblemSpec, load_problem, parse_overrides
    from lego_core.tree.fusion_tree import build_tree

    if not argv:
        print(__doc__.strip().splitlines()[-1])
        return 2
    tree = build_tree(capture_graph(load_problem(ProblemSpec(argv[0], parse_overrides(argv[1:])))))
    for leaf in tree.leaves():
        payload = json.loads(json.dumps(sub_to_payload(leaf.sub)))
        sub_from_payload(payload)
        print(json.dumps(payload, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
