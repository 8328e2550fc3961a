"""Composition: turn the chosen plan into an output folder.

Writes, under ``out_dir``:

- ``reference_model.py``: the user's file, unchanged;
- ``reference_modules/``: only when the model imports modules of its own
  folder, copies of them (``lego_core.load.local_modules``), which
  ``lego_overrides.load_reference`` puts first on ``sys.path``;
- ``lego_overrides.py``: ``lego_core/load/overrides.py``, by which
  ``optimized_model.py`` imports ``reference_model.py`` (with the overrides
  in force, so constants built from an overridden one follow them);
- ``kernels/<name>.py``: one readable Triton file per generated kernel;
- ``tests/test_<name>.py``: each kernel's sub-problem test (its reference
  source and random inputs by spec), runnable with pytest;
- ``optimized_model.py``: ``class ModelNew(Model)`` whose ``forward`` runs
  the plan in schedule order: runs of library leaves as plain ATen code
  (generated from the graph), Triton leaves as ``launch`` calls.  Because it
  subclasses the original ``Model``, ``ModelNew(*get_init_inputs())`` has the
  same ``state_dict()`` keys and ``load_state_dict(model.state_dict())``
  carries the weights.

``out_dir`` is the run's staging folder (``lego_core.runtime.output``): the pipeline
moves it into the user's folder only after the end-to-end check passed.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import torch
import torch.fx as fx

from lego_core.templating import code_templates
from lego_core.load import local_modules
from lego_core.compose.baked_globals import baked_globals, global_tensors
from lego_core.load.capture import Graph, ValueInfo, dense_order, value_info
from lego_core.load.module_attributes import baked_attributes, baked_fields
from lego_core.load.spec import format_override
from lego_core.tree.subproblem import boundary, function_source, region_graph
from lego_core.tree.fusion_tree import OrNode
from lego_core.dtypes import tolerances

RUNTIME = Path(__file__).parent / "templates" / "lego_runtime.py"
# ModelNew's source is rendered from templates/model_new.py.j2
_MODEL_NEW = code_templates(Path(__file__).parent / "templates")
OVERRIDES_SOURCE = Path(__file__).parent.parent / "load" / "overrides.py"  # shipped as lego_overrides.py: stdlib only
# How ModelNew's forward runs until a measurement chooses (``lego_core.judge.end_to_end.launch``):
# the plan, launched directly (the only choice on a CPU).
DEFAULT_LAUNCH = {"forward": "plan", "cuda_graph": False, "channels_last": False}
_LAUNCH_MARK = "LAUNCH = "


def launch_line(launch: dict) -> str:
    """The ``LAUNCH = {...}`` line of ``optimized_model.py``: ``forward`` is
    ``"plan"`` (LEGO's kernels and library calls) or ``"original"`` (the
    user's own forward), ``cuda_graph`` whether it is replayed as a CUDA graph,
    ``channels_last`` whether the original forward runs in NHWC memory order
    (``lego_runtime.channels_last_forward``)."""
    value = {"forward": launch["forward"], "cuda_graph": bool(launch["cuda_graph"]), "channels_last": bool(launch.get("channels_last", False))}
    return f"\n# how the forward runs, chosen by measurement (report.json, \"launch\")\n{_LAUNCH_MARK}{value!r}\n"


def set_launch(out_dir: Path, launch: dict) -> None:
    """Rewrite the ``LAUNCH`` line of ``out_dir/optimized_model.py``.

    Raises ValueError when the file has no such line (not written by this version)."""
    path = Path(out_dir) / "optimized_model.py"
    lines = path.read_text().split("\n")
    index = next((k for k, line in enumerate(lines) if line.startswith(_LAUNCH_MARK)), None)
    if index is None:
        raise ValueError(f"{path} has no LAUNCH line; compose it again with this version of LEGO")
    lines[index] = launch_line(launch).strip("\n").split("\n")[-1]
    path.write_text("\n".join(lines))

def state_note(graph: Graph) -> str:
    """The header's paragraph on the module state forward writes (``STATE``
    below it), or ``""`` for a stateless forward."""
    updates = list(getattr(graph, "state_updates", ()))
    if not updates:
        return ""
    listed = ", ".join(f"{u.target} ({u.kind})" for u in updates[:6]) + (", ..." if len(updates) > 6 else "")
    return ("\n\nForward writes module state, as eager does (``STATE`` below):\n    " + listed + ".\n"
            "Each call reads the current state and writes the new one back, in place into the\n"
            "same tensor or by reassigning the attribute.  Outputs are new tensors: where eager\n"
            "returns the very buffer it updated, the values agree but the output is not that buffer.")


HEADER = '''"""Optimized by LEGO: {model} ({settings}).

``ModelNew`` subclasses the original ``Model``, so it has the same parameters
and buffers:

    new = ModelNew(*get_init_inputs()).to({device!r}{dtype_arg})
    new.load_state_dict(model.state_dict())

Its forward runs the chosen plan: {n_triton} sub-problem(s) as generated
Triton kernels (see kernels/), the rest as ATen library calls.  It is
specialised to the input shapes it was optimized for ({shapes}) and to
device {device!r} and dtype {dtype}; other shapes raise ValueError.{state_note}
"""
import importlib.util
import os
import sys
from pathlib import Path

import torch
from torch import device
{interpret}
inf = float("inf")
nan = float("nan")
_HERE = Path(__file__).resolve().parent


def _load(name, relative_path):
    """Import a file of this folder as a module."""
    spec = importlib.util.spec_from_file_location(name, _HERE / relative_path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


{reference}
lego_runtime = _load("{runtime_module}", "lego_runtime.py")
Model = reference_model.Model
get_inputs = reference_model.get_inputs
get_init_inputs = reference_model.get_init_inputs
'''


def _segments(leaves: list[OrNode]) -> list[tuple[str, list[OrNode]]]:
    """Consecutive library leaves merged; each Triton leaf alone."""
    segments: list[tuple[str, list[OrNode]]] = []
    for leaf in leaves:
        kind = leaf.chosen.implementation
        if kind == "library" and segments and segments[-1][0] == "library":
            segments[-1][1].append(leaf)
        else:
            segments.append((kind, [leaf]))
    return segments


def write_output(out_dir: Path, graph: Graph, items: list[OrNode], problem, run_id: str, layout: dict | None = None) -> list[str]:
    """Write the output folder for a plan whose ``items`` (OR nodes with
    ``chosen`` set, in schedule order: ``search.plan.Plan.items``) cover the
    graph; returns the kernel file paths (relative).

    ``layout``: ``channels_last`` (the graph was captured with 4-D inputs in
    channels-last: the plan converts them at entry) and ``output_strides``
    (eager's output strides, which the plan's output is given when they
    differ from the captured ones); None: neither."""
    out_dir.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(problem.spec.path, out_dir / "reference_model.py")
    shutil.copyfile(RUNTIME, out_dir / "lego_runtime.py")
    shutil.copyfile(OVERRIDES_SOURCE, out_dir / "lego_overrides.py")  # how optimized_model.py imports the model file
    local_modules.copy_into(out_dir, getattr(problem, "local_modules", None))  # reference_modules/: the model's own modules
    kernels_dir = out_dir / "kernels"
    if kernels_dir.exists():
        shutil.rmtree(kernels_dir)
    kernels_dir.mkdir()
    tests_dir = out_dir / "tests"
    shutil.rmtree(tests_dir, ignore_errors=True)
    kernel_files: list[str] = []
    tol = tolerances(problem.spec.torch_dtype)
    for leaf in items:
        cand = leaf.chosen
        if cand.implementation == "triton" and f"kernels/{cand.kernel_name}.py" not in kernel_files:
            (kernels_dir / f"{cand.kernel_name}.py").write_text(cand.source)
            kernel_files.append(f"kernels/{cand.kernel_name}.py")
            tests_dir.mkdir(exist_ok=True)
            test = leaf.sub.test_source(f"{cand.kernel_name}.py", problem.spec.device, tol.atol, tol.rtol)
            (tests_dir / f"test_{cand.kernel_name}.py").write_text(test)
    (out_dir / "optimized_model.py").write_text(model_source(graph, items, problem, run_id, kernel_files, layout=layout))
    _write_constants(out_dir, graph)
    return kernel_files


def _write_constants(out_dir: Path, graph: Graph) -> None:
    constants = {name: graph.ep.constants[src.target] for name, src in graph.sources.items() if src.kind == "constant"}
    if constants:
        torch.save({k: v.detach().cpu() for k, v in constants.items()}, out_dir / "constants.pt")
    else:
        (out_dir / "constants.pt").unlink(missing_ok=True)  # from an earlier run into the same folder


def _plan_strides(graph: Graph, k: int, example: torch.Tensor) -> tuple:
    """Strides (elements) the plan expects of tensor input ``k``: its
    placeholder's captured strides (NHWC after a channels-last capture), else
    the example input's."""
    placeholders = [n for n in graph.placeholders if graph.sources[n.name].kind == "input"]
    info = value_info(placeholders[k]) if k < len(placeholders) else None
    if info is None or tuple(info.shape) != tuple(example.shape):
        return tuple(example.stride())
    return tuple(info.stride)


def model_source(graph: Graph, items: list[OrNode], problem, run_id: str, kernel_files: list[str], launch: dict | None = None, layout: dict | None = None) -> str:
    """Source of ``optimized_model.py`` (``layout``: see ``write_output``)."""
    spec = problem.spec
    user_inputs = [n for n in graph.placeholders if graph.sources[n.name].kind == "input"]
    example = problem.make_inputs(0)
    inputs_decl = [
        ("tensor", tuple(x.shape), str(x.dtype), _plan_strides(graph, k, x)) if isinstance(x, torch.Tensor) else ("value", x)
        for k, x in enumerate(example)
    ]
    shapes = [tuple(x.shape) for x in example if isinstance(x, torch.Tensor)]
    reference = _reference_lines(spec.overrides, run_id)
    settings = ", ".join([f"{k}={format_override(v)}" for k, v in spec.overrides.items()] + [spec.dtype, spec.device])
    dtype_arg = f", {problem.spec.torch_dtype}"  # always: a model file may change torch's default dtype at import
    parts = [
        HEADER.format(
            model=spec.name,
            settings=settings,
            device=spec.device,
            dtype=spec.dtype,
            dtype_arg=dtype_arg,
            n_triton=sum(1 for leaf in items if leaf.chosen.implementation == "triton"),
            shapes=", ".join(str(list(s)) for s in shapes),
            state_note=state_note(graph),
            runtime_module=f"lego_runtime_{run_id}",
            reference=reference,
            interpret=('\nif not torch.cuda.is_available():  # optimized for the CPU: Triton\'s interpreter runs the kernels (nothing compiles without a GPU)\n'
                       '    os.environ.setdefault("TRITON_INTERPRET", "1")\n')
            if spec.device == "cpu"
            else "",
        )
    ]
    for path in kernel_files:
        name = Path(path).stem
        parts.append(f'{name} = _load("lego_kernel_{run_id}_{name}", "{path}")\n')
    parts.append(f"\n# what the plan was made for: (\"tensor\", shape, dtype, strides) or (\"value\", the Python value)\nINPUTS = {inputs_decl!r}\n")
    eager_strides = (layout or {}).get("output_strides")
    parts.append(f"# the strides of eager's output when the model was optimized (None: not one tensor)\nEAGER_OUTPUT_STRIDES = {tuple(eager_strides) if eager_strides is not None else None!r}\n")
    parts.append(f"# the structure forward returns its tensors in (torch.utils._pytree; None: one tensor)\nOUTPUT_SPEC = {output_spec_text(graph)!r}\n")
    parts.append("# plain attributes of the model's modules when it was captured (module path, name, value): torch.export baked them in\n"
                 f"BAKED_ATTRIBUTES = {baked_attributes(problem.model, getattr(problem, 'created_attributes', ()))!r}\n")
    parts.append("# plain fields of the settings objects modules hold (module path, attribute, field, value; a Hugging Face config):\n"
                 "# torch.export baked what forward read of them; a change runs the original forward\n"
                 f"BAKED_FIELDS = {baked_fields(problem.model, getattr(problem, 'written_fields', ()))!r}\n")
    parts.append("# plain values of the model file's globals that forward reads and of its classes' attributes (\"global\" or \"class\", class, name, value):\n"
                 "# torch.export baked them in; a change runs the original forward (lego_core.compose.baked_globals)\n"
                 f"BAKED_GLOBALS = {baked_globals(problem.model, problem.module)!r}\n")
    parts.append("# tensors held by those globals and class attributes (\"global\" or \"class\", class, name): the plan keeps their values;\n"
                 "# reassigned or edited in place after the first call, the original forward runs\n"
                 f"GLOBAL_TENSORS = {global_tensors(problem.model, problem.module)!r}\n")
    constants = constant_attributes(graph, problem.model)
    parts.append("# plain tensor attributes the plan reads as constants (module path, name, constant): a change runs the original forward\n"
                 f"CONSTANT_ATTRIBUTES = {constants!r}\n")
    lazy = [c for c in constants if (f"{c[0]}.{c[1]}" if c[0] else c[1]) in getattr(problem, "lazy_tensors", ())]
    parts.append("# those the model's first forward makes (None or absent before it): a ModelNew whose plan runs never makes them\n"
                 f"LAZY_CONSTANTS = {tuple((p, n) for p, n, _c in lazy)!r}\n")
    parts.append("# module state forward writes (dotted name, how eager writes it: \"in place\" or \"reassigned\", shape, dtype): read and written back at every call\n"
                 f"STATE = {state_text(graph)!r}\n")
    parts.append(f"PLAN_DEVICE = {spec.device!r}\n")
    parts.append(launch_line(launch or DEFAULT_LAUNCH))
    parts.append(CHECKS)
    body, functions = _forward_body(graph, items)
    parts += ["\n\n" + f for f in functions]
    parts.append(_model_class(graph, user_inputs, [isinstance(x, torch.Tensor) for x in example], body, layout or {}))
    return "".join(parts)


def constant_attributes(graph: Graph, model: torch.nn.Module) -> tuple:
    """``((module path, name, constant placeholder), ...)``: the constants of
    the captured graph (saved in constants.pt) that are plain tensor
    attributes of ``model`` (``self.mask = torch.tril(...)``).  ``ModelNew``
    checks them on every call (``lego_runtime.BoundTensors.constants_fit``):
    reassigned or edited in place, the plan's saved copy is stale, and the
    original forward runs instead, with a warning."""
    modules = dict(model.named_modules())
    found = []
    for node in graph.placeholders:
        src = graph.sources[node.name]
        if src.kind != "constant" or not src.target:
            continue
        path, _, name = str(src.target).rpartition(".")
        module = modules.get(path)
        if module is not None and isinstance(vars(module).get(name), torch.Tensor):
            found.append((path, name, node.name))
    return tuple(found)


def _reference_lines(overrides: dict, run_id: str) -> str:
    """How ``optimized_model.py`` imports ``reference_model.py``: through
    ``lego_overrides.load_reference`` (``lego_core/load/overrides.py``, shipped as
    ``lego_overrides.py``), which runs the file with each override in force
    from the constant's own assignment on, as ``lego_core.load.problem`` loaded
    it (so constants built from an overridden one follow it), and reuses the
    module when this process already imported it so.  ``REFERENCE_MODULE``
    and ``OVERRIDES`` are plain literals: LEGO's judge reads them
    (``lego_core.judge.end_to_end.shipped.reference_import``) to import the user's file before
    it judges the generated ones."""
    return (
        f'lego_overrides = _load("lego_overrides_{run_id}", "lego_overrides.py")\n'
        f"REFERENCE_MODULE = {f'lego_reference_{run_id}'!r}\n"
        f"OVERRIDES = {dict(overrides)!r}  # --set when optimizing; what is built from them follows\n"
        "reference_model = lego_overrides.load_reference(_HERE, REFERENCE_MODULE, OVERRIDES)"
    )


def _forward_body(graph: Graph, items: list[OrNode]) -> tuple[list[str], list[str]]:
    lines: list[str] = []
    functions: list[str] = []
    order = {n.name: k for k, n in enumerate(graph.ep.graph_module.graph.nodes)}
    for kind, leaves in _segments(items):
        nodes = [n for leaf in leaves for n in _in_graph_order(leaf.sub.nodes, order)]
        inputs, outputs = boundary(nodes, graph.output_nodes)
        if not outputs:
            continue
        targets = ", ".join(n.name for n in outputs) + ("," if len(outputs) == 1 else "")
        args = ", ".join(n.name for n in inputs)
        if kind == "triton":
            leaf = leaves[0]
            inputs, outputs = leaf.sub.inputs, leaf.sub.outputs
            args = ", ".join(n.name for n in inputs)
            targets = ", ".join(n.name for n in outputs) + ("," if len(outputs) == 1 else "")
            lines.append(f"{targets} = {leaf.chosen.kernel_name}.launch({args})  # {leaf.sub.label}")
        else:
            name = f"library_{leaves[0].sub.id}"
            ids = ", ".join(leaf.sub.id for leaf in leaves)
            src = function_source(region_graph(nodes, inputs, outputs), name)
            functions.append(f'{src.splitlines()[0]}\n    """ATen ops of sub-problem(s) {ids}."""\n' + "\n".join(src.splitlines()[1:]) + "\n")
            lines.append(f"{targets} = {name}({args})")
    return lines, functions


def _in_graph_order(nodes: list, order: dict) -> list:
    """A fused item's nodes come from several leaves: emit them in graph order."""
    return sorted(nodes, key=lambda n: order[n.name])


def state_text(graph: Graph) -> tuple:
    """``((target, kind, shape, dtype), ...)``: the state a stateful forward
    writes (``Graph.state_updates``), as ``optimized_model.py``'s ``STATE``:
    the dotted name, ``"in place"`` (written in place) or ``"reassigned"``
    (reassigned), and the shape and dtype the plan reads and writes."""
    by_name = {n.name: n for n in graph.fx_graph.nodes}
    found = []
    for update in getattr(graph, "state_updates", ()):
        info = value_info(by_name[update.node])
        found.append((update.target, update.kind, tuple(info.shape) if info else (), str(info.dtype) if info else ""))
    return tuple(found)


def output_spec_text(graph: Graph) -> str | None:
    """The pytree spec of forward's output as ``treespec_dumps`` text (JSON),
    or None when forward returns one tensor (the plan returns it as is).
    Containers are tuples, lists, dicts and library output classes that
    register themselves with pytree under ``module.Class`` (transformers'
    ``ModelOutput``s); ``lego_runtime.unflatten_output`` rebuilds them,
    importing such a class's module when nothing registered it yet.  What
    cannot be written down is refused at load (``problem._check_output_structure``)."""
    spec = getattr(graph, "out_spec", None)
    if spec is None or spec.num_leaves == 1 and spec.type is None:
        return None
    return torch.utils._pytree.treespec_dumps(spec)


def output_layout(graph: Graph, eager_strides: tuple | None) -> tuple | None:
    """The strides the plan's output must be given: eager's (``eager_strides``,
    recorded when the model was optimized) when they are dense and differ from
    the captured output's in a dimension of size > 1; else None (the plan's
    output already has them, or eager's output is a view LEGO does not copy into)."""
    info = value_info(graph.output_nodes[0]) if graph.output_nodes else None
    if info is None or eager_strides is None or len(eager_strides) != len(info.shape):
        return None
    if dense_order(ValueInfo(info.shape, info.dtype, tuple(eager_strides)), info.shape) is None:
        return None
    if all(s == e for n, s, e in zip(info.shape, info.stride, eager_strides) if n != 1):
        return None
    return tuple(eager_strides)


def _model_class(graph: Graph, user_inputs: list[fx.Node], is_tensor: list[bool], body: list[str], layout: dict | None = None) -> str:
    """Source of ``optimized_model.py``'s ``class ModelNew(Model)`` (``templates/model_new.py.j2``):
    ``user_inputs`` the graph's input placeholders, ``is_tensor`` which example
    inputs are tensors, ``body`` the plan's statements (``_forward_body``),
    ``layout`` as in ``write_output``."""
    # torch.export keeps non-tensor arguments as placeholders in recent
    # versions and drops them (specialised) in older ones
    if len(user_inputs) == len(is_tensor):
        positions = list(range(len(is_tensor)))
    else:
        positions = [k for k, tensor in enumerate(is_tensor) if tensor]
    updates = list(getattr(graph, "state_updates", ()))
    state_inputs = {u.placeholder: u.target for u in updates if u.placeholder}
    bound = [n for n in graph.placeholders if graph.sources[n.name].kind in ("parameter", "buffer", "constant") and n.name not in state_inputs]
    layout = layout or {}
    by_name = {n.name: n for n in graph.fx_graph.nodes}
    out = getattr(graph, "user_outputs", graph.output_nodes)
    strides = output_layout(graph, layout.get("output_strides"))
    returns = "structure" if output_spec_text(graph) is not None else "strided" if strides is not None else "tensor"
    return "\n\n" + _MODEL_NEW.get_template("model_new.py.j2").render(
        bound_dtypes=repr(tuple(str(value_info(n).dtype) if value_info(n) is not None else "" for n in bound)),
        has_constants=any(graph.sources[n.name].kind == "constant" for n in bound),
        bound_tensors=[_bound_tensor(graph, node) for node in bound],
        bound_names=[n.name for n in bound],
        bound_device=f"inputs[{is_tensor.index(True)}].device" if any(is_tensor) else "None",
        state_reads=[(n.name, repr(state_inputs[n.name])) for n in graph.placeholders if n.name in state_inputs],  # forward writes them (STATE)
        user_inputs=[n.name for n in user_inputs],
        input_positions=[f"inputs[{k}]" for k in positions],
        channels_last_inputs=[n.name for n in user_inputs if layout.get("channels_last") and value_info(n) is not None and len(value_info(n).shape) == 4],
        body=body,
        state_writes=[by_name[u.node].name for u in updates],  # written back as eager writes them (in place, or the attribute reassigned)
        returns=returns,
        outputs=[n.name for n in out],
        output_strides=repr(strides),
    )


def _bound_tensor(graph: Graph, node: fx.Node) -> str:
    """How ``ModelNew._lego_bind`` reaches the parameter, buffer or constant of placeholder ``node``."""
    src = graph.sources[node.name]
    if src.kind == "parameter":
        return f"self.get_parameter({src.target!r})"
    if src.kind == "buffer":
        return f"self.get_buffer({src.target!r})"
    return f"self._lego_constants[{node.name!r}].to(device)"


CHECKS = '''

def check_call(model, inputs):
    """``inputs`` as the plan reads them, or ValueError unless they are what
    the plan was made for: same count, tensor shapes and dtypes, the same
    Python values (torch.export specialised them).  A tensor of the right
    shape in another memory layout (a transposed or sliced view,
    channels-last) is copied into the layout the plan was captured with, as
    the plan's views need.  (Train mode never gets here: ``forward_mode``
    runs the original forward then.)"""
    if len(inputs) != len(INPUTS):
        raise ValueError(f"ModelNew takes {len(INPUTS)} inputs, got {len(inputs)}")
    laid_out = list(inputs)
    for k, (x, (kind, *spec)) in enumerate(zip(inputs, INPUTS)):
        if kind == "value":
            if x != spec[0]:
                raise ValueError(f"input {k} was {spec[0]!r} when ModelNew was optimized and is baked into its kernels; got {x!r}. Run LEGO again with this value")
            continue
        if not isinstance(x, torch.Tensor) or tuple(x.shape) != spec[0] or str(x.dtype) != spec[1]:
            got = f"{str(x.dtype).removeprefix('torch.')}{list(x.shape)}" if isinstance(x, torch.Tensor) else repr(x)
            raise ValueError(f"input {k} must be {spec[1].removeprefix('torch.')}{list(spec[0])} as optimized, got {got}; optimize it again with other constants (the upload form's constant fields, or --set on the command line) for other sizes, or cast the input")
        laid_out[k] = lego_runtime.with_strides(x, spec[2])
    return laid_out
'''
