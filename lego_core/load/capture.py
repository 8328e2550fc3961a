"""Graph capture: torch.export into core ATen, with shapes, strides and module paths.

``capture_graph(problem)`` exports the model at its example inputs (static
shapes), decomposes to the core ATen op set, and wraps the result in a
:class:`Graph` that answers the questions the rest of the optimizer asks:
what is each value's shape, dtype and stride, which module did a node come
from (``nn_module_stack``), and what concrete tensor feeds each placeholder.

Op facts (which ops are kept whole: ``KEPT_WHOLE``) come from the op
registry, ``lego_core.ops``.  :func:`op_name` here names a node's op in
full (``"aten.add.Tensor"``); ``ops.op_name`` is the short name (``"add"``).

Usage: ``python -m lego_core.load.capture MODEL.py [k=v ...]`` prints the graph
(and the ops kept whole, ``lego_core.load.decompose``).
"""
from __future__ import annotations

import contextlib
import dataclasses
import io
import logging
import re
import sys
import warnings
from typing import Any, Callable

import torch
import torch.fx as fx
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind

from lego_core import ops
from lego_core.load import capture_errors, state, state_checks
from lego_core.load.decompose import KeptWhole, decompose
from lego_core.load.faithful_capture import check_fast_paths, check_stateless
from lego_core.load.problem import Problem, ProblemError, check_repeatable, load_problem
from lego_core.load.spec import ProblemSpec, parse_overrides


@dataclasses.dataclass(frozen=True)
class ValueInfo:
    """Shape, dtype and stride of one tensor value (stride in elements)."""

    shape: tuple
    dtype: torch.dtype
    stride: tuple

    @property
    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def nbytes(self) -> int:
        return self.numel * self.dtype.itemsize

    def describe(self) -> str:
        return f"{str(self.dtype).removeprefix('torch.')}{list(self.shape)}"


@dataclasses.dataclass(frozen=True)
class PlaceholderSource:
    """Where a placeholder's tensor comes from: ``kind`` is ``parameter``,
    ``buffer``, ``constant`` (``target`` is the FQN / constant name) or
    ``input`` (``index`` into the forward's arguments)."""

    kind: str
    target: str | None = None
    index: int | None = None


class Graph:
    """A captured core-ATen graph of one problem.

    ``ep`` is the ExportedProgram; ``fx_graph`` its graph (placeholders for
    parameters, buffers, constants and user inputs, in that order);
    ``compute_nodes`` the ``call_function`` nodes in topological order;
    ``output_nodes`` the values the model returns, flattened (one for a
    tensor; a tuple, list or dict of tensors, nested too, gives its leaves
    in ``torch.utils._pytree`` order); ``out_spec`` the pytree TreeSpec that
    puts them back into the structure forward returns (a leaf for a tensor).

    A stateful forward's writes (``state_updates``: ``lego_core.load.state.
    StateUpdate``, one per buffer or reassigned plain tensor attribute, in
    torch.export's order) are extra outputs: ``output_nodes`` holds the
    user's outputs (``user_outputs``, which ``out_spec`` describes) followed
    by the new state values, so the plan computes and the verifier checks
    them like any output.  ``reassigned``: the dotted names of the plain
    tensor attributes that were registered as buffers for the export
    (written back by reassignment; every other buffer in place).

    ``kept_whole``: the ops the graph holds un-decomposed, each run as one
    library (ATen) call (``lego_core.load.decompose.KeptWhole``: op, node count,
    cause, reason): those whose core-ATen decomposition failed
    (``decompose.decompose``, e.g. HF GPT-2's SDPA) and the whole recurrent
    layers LEGO keeps by policy (``KEPT_WHOLE``).  For the report.
    """

    def __init__(self, ep: ExportedProgram, reassigned: list[str] = (), kept_whole: list[KeptWhole] = ()):
        self.ep = ep
        self.kept_whole: list[KeptWhole] = list(kept_whole) + _kept_by_policy(ep, kept_whole)
        self.fx_graph: fx.Graph = ep.graph
        self.placeholders: list[fx.Node] = [n for n in ep.graph.nodes if n.op == "placeholder"]
        self.compute_nodes: list[fx.Node] = [n for n in ep.graph.nodes if n.op == "call_function"]
        out = next(n for n in ep.graph.nodes if n.op == "output")
        leaves = list(torch.utils._pytree.tree_leaves(out.args[0]))
        specs = list(ep.graph_signature.output_specs)
        buffer_input = {str(s.target): s.arg.name for s in ep.graph_signature.input_specs if s.kind == InputKind.BUFFER}
        # buffer writes (torch.export lists them first): the state the plan computes and ModelNew writes back
        self.state_updates: list[state.StateUpdate] = []
        user: list = []
        for k, leaf in enumerate(leaves):
            spec = specs[k] if k < len(specs) else None
            if spec is not None and spec.kind.name == "BUFFER_MUTATION" and isinstance(leaf, fx.Node):
                target = str(spec.target)
                kind = "reassigned" if target in reassigned else "in place"
                self.state_updates.append(state.StateUpdate(target, kind, leaf.name, buffer_input.get(target)))
            else:
                user.append(leaf)
        self.user_outputs = [a for a in user if isinstance(a, fx.Node)]
        # the user's outputs first (``output_nodes[:len(user_outputs)]``), then the new state values
        by_name = {n.name: n for n in ep.graph.nodes}
        self.output_nodes: list[fx.Node] = self.user_outputs + [by_name[u.node] for u in self.state_updates]
        self.out_spec = ep.call_spec.out_spec  # None in no torch we support; a leaf spec for a single tensor
        self.sources: dict[str, PlaceholderSource] = {}
        user_index = 0
        for spec in ep.graph_signature.input_specs:
            name = spec.arg.name
            if spec.kind == InputKind.PARAMETER:
                self.sources[name] = PlaceholderSource("parameter", spec.target)
            elif spec.kind == InputKind.BUFFER:
                self.sources[name] = PlaceholderSource("buffer", spec.target)
            elif spec.kind == InputKind.CONSTANT_TENSOR:
                self.sources[name] = PlaceholderSource("constant", spec.target)
            elif spec.kind == InputKind.USER_INPUT:
                self.sources[name] = PlaceholderSource("input", index=user_index)
                user_index += 1
            else:
                raise ProblemError(f"unsupported graph input kind {spec.kind.name} for {name}.")

    def placeholder_values(self, model: torch.nn.Module, inputs: list) -> dict[str, Any]:
        """Concrete tensors for every placeholder: parameters and buffers from
        ``model`` (so loaded weights are used), constants from the export,
        user inputs from ``inputs`` (only tensor inputs are graph inputs)."""
        user = [n for n in self.placeholders if self.sources[n.name].kind == "input"]
        # torch.export makes non-tensor arguments placeholders too in recent
        # versions, and drops them (specialised) in older ones
        tensors = list(inputs) if len(user) == len(inputs) else [x for x in inputs if isinstance(x, torch.Tensor)]
        values: dict[str, Any] = {}
        for node in self.placeholders:
            src = self.sources[node.name]
            if src.kind == "parameter":
                values[node.name] = model.get_parameter(src.target)
            elif src.kind == "buffer":  # a registered buffer, or a plain tensor attribute forward writes
                values[node.name] = state.read(model, src.target)
            elif src.kind == "constant":
                values[node.name] = self.ep.constants[src.target]
            else:
                values[node.name] = tensors[src.index]
        return values

    def run(self, model: torch.nn.Module, inputs: list) -> dict[str, Any]:
        """Run the graph eagerly and return every node's value by name
        (the reference activations that sub-problems are checked on)."""
        env = self.placeholder_values(model, inputs)
        interp = _RecordingInterpreter(self.ep.graph_module)
        with torch.no_grad():
            interp.run(*[env[n.name] for n in self.placeholders])
        env.update(interp.values)
        return env


    def values(self, model: torch.nn.Module, inputs: list, names: set[str], optional: set[str] = frozenset(), accept: Callable[[str, Any], bool] | None = None) -> dict[str, Any]:
        """Run the graph eagerly and return only the values named in ``names``
        (and those in ``optional`` that ``accept(name, value)`` takes when they
        are computed; all of them when ``accept`` is None).

        Unlike :meth:`run`, every other intermediate is freed after its last
        use and the run stops once nothing more can be recorded, so the peak
        is about the model's own activation memory plus the kept values.
        Placeholders (weights, inputs) are returned as is."""
        env = self.placeholder_values(model, inputs)
        kept = {name: env[name] for name in set(names) | set(optional) if name in env}
        pending = set(names) - set(env)
        maybe = set(optional) - set(env)
        if pending or maybe:
            interp = _RecordingInterpreter(self.ep.graph_module, keep=pending, optional=maybe, accept=accept)
            with torch.no_grad():
                try:
                    interp.run(*[env[n.name] for n in self.placeholders])
                except _AllRecorded:
                    pass
            kept.update(interp.values)
        return kept


class _AllRecorded(Exception):
    """Raised inside the interpreter when every wanted value is computed."""


class _RecordingInterpreter(fx.Interpreter):
    """Records node values: all of them (``keep=None``; nothing is freed), or
    only those in ``keep`` and those in ``optional`` that ``accept`` takes
    (others are freed after their last use, and the run stops once nothing
    more can be recorded)."""

    def __init__(self, gm: fx.GraphModule, keep: set[str] | None = None, optional: set[str] = frozenset(), accept=None):
        super().__init__(gm, garbage_collect_values=keep is not None)
        self.values: dict[str, Any] = {}
        self.keep = None if keep is None else set(keep)
        self.optional = set(optional)
        self.accept = accept

    def run_node(self, n: fx.Node) -> Any:
        result = super().run_node(n)
        if self.keep is None:
            self.values[n.name] = result
            return result
        if n.name in self.keep:
            self.values[n.name] = result
            self.keep.discard(n.name)
        elif n.name in self.optional:
            self.optional.discard(n.name)
            if self.accept is None or self.accept(n.name, result):
                self.values[n.name] = result
        if not self.keep and not self.optional:
            raise _AllRecorded
        return result


def _user_line(exc: BaseException, path: str) -> int | None:
    """The last line of the user's file named in the exception (``capture_errors.user_line``)."""
    return capture_errors.user_line(exc, path)


def dense_order(spec: ValueInfo, shape: tuple) -> tuple | None:
    """The dimensions of size > 1, outermost first, in which ``spec`` (of
    ``shape``) is dense: the innermost has stride 1 and each next one the
    product of the sizes inside it (no gaps, no overlaps).  ``(0, 1, 2, 3)``
    for a contiguous NCHW tensor of sizes > 1, ``(0, 2, 3, 1)`` for a
    channels-last one; None when ``spec`` is not dense in any permutation
    (a slice, an expanded or broadcast view)."""
    if tuple(spec.shape) != tuple(shape):
        return None
    dims = [d for d, size in enumerate(shape) if size != 1]
    order = sorted(dims, key=lambda d: -spec.stride[d])
    expected = 1
    for d in reversed(order):
        if spec.stride[d] != expected:
            return None
        expected *= shape[d]
    return tuple(order)


def value_info(node: fx.Node) -> ValueInfo | None:
    """ValueInfo of a node with one tensor value, else None."""
    val = node.meta.get("val")
    if isinstance(val, torch.Tensor):
        return ValueInfo(tuple(int(s) for s in val.shape), val.dtype, tuple(int(s) for s in val.stride()))
    return None


def module_path(node: fx.Node) -> str:
    """Dotted path of the innermost module a node came from ('' = the root)."""
    stack = node.meta.get("nn_module_stack") or {}
    if not stack:
        return ""
    path, _type = list(stack.values())[-1]
    return path if isinstance(path, str) else ""


def module_type(node: fx.Node) -> str:
    """Class name of the innermost module a node came from."""
    stack = node.meta.get("nn_module_stack") or {}
    if not stack:
        return "Model"
    _path, typ = list(stack.values())[-1]
    return str(getattr(typ, "__name__", typ)).rsplit(".", 1)[-1]


def op_name(node: fx.Node) -> str:
    """``aten.add.Tensor``-style name of a call_function node."""
    target = node.target
    if target.__class__.__name__ == "builtin_function_or_method":
        return target.__name__
    return str(target)


def _kept_by_policy(ep: ExportedProgram, already: list) -> list[KeptWhole]:
    """KeptWhole records for the ops of ``ep``'s graph that ``KEPT_WHOLE``
    names (whole recurrent layers), besides those in ``already``."""
    known = {k.op for k in already}
    counts: dict[str, int] = {}
    for node in ep.graph.nodes:
        name = op_name(node) if node.op == "call_function" else ""
        if name.startswith(KEPT_WHOLE) and name not in known:
            counts[name] = counts.get(name, 0) + 1
    return [KeptWhole(op, n, "policy", "a whole recurrent layer stays one library call (cuDNN on a GPU): decomposed, it "
                      "would be thousands of tiny ops per sequence") for op, n in sorted(counts.items())]


# Whole recurrent layers have no fused replacement here; decomposed, an LSTM
# becomes thousands of tiny ops per sequence.  They stay one library call
# (cuDNN on a GPU).  Cells (aten.lstm_cell) still decompose and can fuse.
KEPT_WHOLE = ops.kept_whole_prefixes()  # every overload of lstm, gru, rnn_tanh, rnn_relu


def decomposition_table() -> dict:
    """torch.export's core-ATen decompositions, minus the ops in ``KEPT_WHOLE``."""
    table = torch.export.default_decompositions()
    for op in list(table):
        if str(op).startswith(KEPT_WHOLE):
            del table[op]
    return table


def has_conv2d(problem: Problem) -> bool:
    """Whether the model holds a 2-D convolution (where channels-last pays on a
    GPU).  ``problem``: a ``Problem``, or a ``judge.end_to_end.served.ProblemView``
    (the composed model's process, which has the weights but not the modules)."""
    if hasattr(problem, "holds_conv2d"):
        return bool(problem.holds_conv2d)
    return any(isinstance(m, torch.nn.Conv2d) for m in problem.model.modules())


def to_channels_last(value: Any) -> Any:
    """A 4-D tensor in channels-last (NHWC) memory format; anything else unchanged."""
    if isinstance(value, torch.Tensor) and value.dim() == 4:
        return value.contiguous(memory_format=torch.channels_last)
    return value


def use_channels_last(setting, problem: Problem) -> bool:
    """Whether to capture ``problem`` in channels-last: ``setting`` True or
    False as given; ``"auto"`` when the problem runs on CUDA and its model
    holds a 2-D convolution (``has_conv2d``).  Raises ValueError on any other
    setting."""
    if setting is True or setting is False:
        return setting
    if setting != "auto":
        raise ValueError(f"channels_last must be 'auto', True or False, got {setting!r}")
    return problem.spec.device == "cuda" and has_conv2d(problem)


def layout_inputs(make_inputs: Callable[[int], list], channels_last: bool) -> Callable[[int], list]:
    """``make_inputs`` whose 4-D tensors come in channels-last when
    ``channels_last`` (the layout a channels-last capture was made with)."""
    if not channels_last:
        return make_inputs

    def made(seed: int) -> list:
        return [to_channels_last(x) for x in make_inputs(seed)]

    return made


def capture_graph(problem: Problem, channels_last: bool = False) -> Graph:
    """Export ``problem.model`` at ``problem.make_inputs(0)`` into core ATen
    (recurrent layers kept whole, see ``KEPT_WHOLE``; an op whose
    decomposition makes the program fail to decompose, such as HF GPT-2's
    SDPA, kept whole too, ``lego_core.load.decompose``; both listed in the
    graph's ``kept_whole``).

    ``channels_last``: convert the 4-D example inputs to channels-last
    (``to_channels_last``) first, so convolutions (which follow their input's
    layout) and every value after them carry NHWC strides in their ValueInfo
    (cuDNN's bf16 convs are much faster so).  ``problem.model`` is never
    modified: its weights keep the user's layout (cuDNN converts a
    convolution's small weight itself).  Generated kernels read through
    strides and write the captured layout; whoever runs the graph or the plan
    must hand 4-D inputs in channels-last too (``layout_inputs``) for the
    layout to pay off.

    ``nn.MultiheadAttention``'s fused fast path is turned off while capturing
    (pytorch issue 115511) so attention decomposes into ATen ops.  Raises
    ProblemError when torch.export cannot capture the model, with a message
    and fix per failure class (``capture_errors``: data-dependent control
    flow, a mutated constant, dynamic shapes, a non-tensor output, an
    unsupported operation; ``decomposition`` when only the core-ATen
    decomposition fails, whatever is kept whole) and torch's message
    underneath; when the graph's
    sizes depend on tensor values (``data-dependent shape``); and when the
    capture could not compute what eager does (``faithful_capture``: a
    forward that writes into parameters or inputs; a fast path that gives
    other values than the captured ordinary path; ``check_state_fits``:
    state whose shape or dtype changes between calls).

    A stateful forward is carried (``lego_core.load.state``): the plain tensor
    attributes it reassigns (torch.export's warning) or writes in place
    (torch.export's "Constant ... is mutated") are registered as
    non-persistent buffers while it exports again (``problem.model`` is given
    back as it was), so every state write is a buffer write; one eager
    forward (its writes undone) tells which registered buffers it reassigns
    rather than writes into.  The graph's ``state_updates`` name them, and
    ``problem.state_targets`` is set to their names (the end-to-end judge
    compares the state after a call too).
    """
    inputs = problem.make_inputs(seed=0)
    # what one eager forward writes (undone): the state the graph must carry.  On the user's layout,
    # which the loader ran (a model whose views need NCHW fails in eager on channels-last inputs)
    probe = state.probe_writes(problem.model, inputs)
    # writes torch.export would drop or fail on: through .data, into a tensor that has another name
    error = state_checks.data_write_error(probe, problem.spec.path) or state_checks.alias_error(problem.model, list(probe), problem.spec.path)
    if error is not None:
        raise error
    outside_before = state_checks.outside_fingerprints(problem.model, problem.module)
    if channels_last:
        inputs = [to_channels_last(x) for x in inputs]
    path = problem.spec.path
    # plain tensor attributes forward writes are exported as buffers, so their new values are graph
    # outputs; reassignments are exported as copies into the buffer (torch.export drops a buffer
    # reassigned in a submodule).  Torch's own reports (a reassigned attribute's warning, a constant
    # written in place) add what the probe missed.
    attributes = [t for t, (what, _how) in probe.items() if what == "attribute"]
    reassigned = [t for t, (_what, how) in probe.items() if how == "reassigned"]
    mismatched: list = []
    tensors = sum(isinstance(v, torch.Tensor) for m in problem.model.modules() for v in vars(m).values())
    for _attempt in range(tensors + 2):  # one more export per attribute torch reports
        mismatched.clear()
        try:
            with state.as_buffers(problem.model, attributes), state.reassign_as_copy(problem.model, reassigned, mismatched):
                ep, seen, kept_whole = _export(problem.model, inputs, path)
        except ProblemError as error:
            name = getattr(error, "mutated_constant", None)
            if name and name not in attributes and not state.not_tensors(problem.model, [name]):
                attributes.append(name)
                _add_reassigned(problem.model, getattr(error, "warnings", []), attributes, reassigned, path)
                continue
            raise
        if not _add_reassigned(problem.model, seen, attributes, reassigned, path):
            break
    else:
        raise capture_errors.state_error(attributes, path)
    if mismatched:
        target, shape, dtype = mismatched[0]
        raise _state_changes_error(target, f"{str(dtype).removeprefix('torch.')}{list(shape)}",
                                   ValueInfo(tuple(state.read(problem.model, target).shape), state.read(problem.model, target).dtype, ()).describe(), path)
    moved = state_checks.changed(outside_before, state_checks.outside_fingerprints(problem.model, problem.module))
    moved += [f"{where} (a value stored while traced)" for where in state_checks.fake_tensor_holders(problem.model, problem.module)]
    if moved:  # torch.export wrote (fake) values into state outside the model's modules
        raise state_checks.outside_state_error(moved, path, during="while torch.export traced it")
    error = capture_errors.data_dependent_shape_error(ep.graph_module, path)
    if error is not None:  # sizes known only at run time (boolean indexing, nonzero): plans are for static shapes
        raise error
    # what eager computes and the graph cannot: parameters or inputs written, fast paths
    check_stateless(ep, path)
    with state.preserved(problem.model):  # the fast-path check runs eager twice: its state writes are undone
        check_fast_paths(problem.model, inputs, problem.spec.torch_dtype, path)
    graph = Graph(ep, reassigned=reassigned, kept_whole=kept_whole)
    check_state_fits(graph, path)
    captured = {u.target for u in graph.state_updates}
    missing = [t for t in probe if t not in captured]
    if missing:
        listed = ", ".join(f"self.{t} ({probe[t][0]} {probe[t][1]})" for t in missing)
        raise ProblemError(
            f"Model.forward writes {listed}, and torch.export did not capture that write, so an optimized model "
            "would lose the update",
            path,
            None,
            hint=f"keep the state in a registered buffer and write into it in place (self.{missing[0].rpartition('.')[2]}"
            ".copy_(new_value)), which LEGO carries.",
        )
    problem.state_targets = [u.target for u in graph.state_updates]  # the end-to-end judge compares them too
    check_repeatable(problem)  # state no tensor holds (a settings object's counter): the same call twice, other outputs
    return graph


def _export(model: torch.nn.Module, inputs: list, path: str | None) -> tuple[ExportedProgram, list, list[KeptWhole]]:
    """``model`` exported at ``inputs`` and decomposed to core ATen, with the
    warnings torch.export gave and the ops kept whole because their
    decomposition failed (``decompose.decompose``); raises ProblemError
    (``capture_errors.explain``, or ``decomposition_error`` when only the
    decomposition fails)."""
    previous = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)
    # a failed export prints its partial FX graph to stderr and symbolic_shapes logs one at WARNING ("Unable to
    # find user code corresponding to {u0}"); the ProblemError below says what happened, the graph goes into its raw
    shapes_log = logging.getLogger("torch.fx.experimental.symbolic_shapes")
    shapes_level = shapes_log.level
    shapes_log.setLevel(logging.ERROR)
    printed = io.StringIO()
    seen: list = []
    try:
        with warnings.catch_warnings(record=True) as seen, contextlib.redirect_stderr(printed):
            warnings.simplefilter("always")
            ep = torch.export.export(model, tuple(inputs))
        ep, kept_whole = decompose(ep, decomposition_table(), path)
    except ProblemError as error:  # the decomposition failed with every table tried (class "decomposition")
        error.mutated_constant = None
        error.warnings = list(seen)
        raise
    except Exception as exc:  # noqa: BLE001 - torch.export raises many types: sorted into classes
        error = capture_errors.explain(exc, path, _user_line(exc, path))
        if printed.getvalue().strip():
            error.raw += f"\n\ntorch.export printed:\n{printed.getvalue()}"
        found = re.search(r"Constant (?P<name>[\w.]+) is mutated", str(exc))
        error.mutated_constant = found["name"] if found else None
        error.warnings = list(seen)
        raise error from None
    finally:
        torch.backends.mha.set_fastpath_enabled(previous)
        shapes_log.setLevel(shapes_level)
    return ep, seen, kept_whole


def _add_reassigned(model, seen: list, attributes: list, reassigned: list, path: str | None) -> bool:
    """Add the plain tensor attributes torch.export warned were reassigned
    (``seen``: its warnings) to ``attributes`` and ``reassigned``; whether
    any was new.  Raises ProblemError (``capture_errors.state_error``) for a
    name that is not a plain tensor attribute."""
    found = [n for n in capture_errors.reassigned_attributes(seen) if n not in attributes]
    if not found:
        return False
    bad = state.not_tensors(model, found)
    if bad:
        raise capture_errors.state_error(bad, path)
    attributes += found
    reassigned += [n for n in found if n not in reassigned]
    return True


def _state_changes_error(target: str, after: str, before: str, path: str | None) -> ProblemError:
    return ProblemError(
        f"Model.forward stores a {after} tensor in self.{target}, which holds a {before} tensor when the model "
        "is captured: the state changes shape or dtype between calls, and LEGO's plan is specialised to one "
        "shape and dtype of each tensor it reads",
        path,
        None,
        hint=f"make self.{target} start with the shape and dtype forward stores in it (create it so in "
        f"__init__, or convert the new value back: .to(self.{target}.dtype)).",
    )


def check_state_fits(graph: Graph, path: str | None) -> None:
    """Raise ProblemError when a state tensor forward writes gets another
    shape or dtype than it had when captured (the plan is specialised to
    one; the next call would not fit it)."""
    by_name = {n.name: n for n in graph.fx_graph.nodes}
    for update in graph.state_updates:
        before = value_info(by_name[update.placeholder]) if update.placeholder in by_name else None
        after = value_info(by_name[update.node]) if update.node in by_name else None
        if before is None or after is None or (before.shape, before.dtype) == (after.shape, after.dtype):
            continue
        raise _state_changes_error(update.target, after.describe(), before.describe(), path)


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip().splitlines()[-1])
        return 2
    graph = capture_graph(load_problem(ProblemSpec(argv[0], parse_overrides(argv[1:]))))
    for node in graph.compute_nodes:
        info = value_info(node)
        print(f"{node.name:24} {op_name(node):40} {info.describe() if info else '':24} {module_path(node)}")
    for kept in graph.kept_whole:  # ops whose decomposition failed (lego_core.load.decompose)
        print(f"kept whole: {kept.op:56} {kept.nodes:4} node(s)  {kept.cause}: {kept.reason}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
