"""Problem loading: a KernelBench-style model file, its overrides, dtype, device.

The file defines ``class Model(nn.Module)``, ``get_inputs()``,
``get_init_inputs()`` and module-level constants (``batch_size = 32``) that
the user may override.  Loading runs the user's code, so callers run it in a
child process (``lego_core.runtime.sandbox``); this module itself only loads and
checks, and turns every way a file can be broken into a :class:`ProblemError`
that names the file, the line where there is one, and what to fix.

Usage: ``python -m lego_core.load.problem MODEL.py [k=v ...]`` prints what loads.
"""
from __future__ import annotations

import dataclasses
import sys
import traceback
import types
from pathlib import Path
from typing import Any, Callable

import torch

from lego_core.load import torch_settings
from lego_core.load.local_modules import LocalModules, explain_import_error, imported_modules, put_on_path
from lego_core.load.module_attributes import baked_fields
from lego_core.load.override_checks import override_type_error, unknown_constant_error
from lego_core.load.overrides import OverrideError, exec_with_overrides, is_constant_value
from lego_core.load.spec import DEVICES, DTYPE_NAMES, ProblemError, ProblemSpec, decode_source, parse_overrides, read_source  # noqa: F401 - re-exported
from lego_core.load.spec import format_override, shorten, syntax_problem
from lego_core.load.state import hooks_error, plain_values, preserved, python_state_error, uncarried_state_error
from lego_core.load.state_checks import outside_fingerprints

REQUIRED_NAMES = ("Model", "get_inputs", "get_init_inputs")


@dataclasses.dataclass
class Problem:
    """A loaded, checked problem.

    ``model`` is in eval mode on ``spec.device`` with floating parameters in
    ``spec.torch_dtype``; ``make_inputs(seed)`` returns fresh example inputs
    drawn under ``torch.manual_seed(seed)`` (floating tensors cast to the
    dtype, all moved to the device); ``constants`` holds the module-level
    constants after overrides; ``moved_attributes`` names the plain tensor
    attributes (``self.mask = torch.tril(...)``, neither parameter nor
    buffer) that loading moved to the device (:func:`move_plain_tensor_attributes`);
    ``state_targets`` the module state a stateful forward writes (dotted
    names, set by ``capture.capture_graph``, None until then; ``lego_core.load.state``);
    ``torch_settings`` the global torch flags the file set when imported or
    when it built the model (``torch.backends.cudnn.benchmark = True``,
    ``torch.set_float32_matmul_precision("high")``): the user's, kept in
    force, applied in LEGO's other processes and reported
    (``lego_core.load.torch_settings``); ``local_modules`` the modules and
    packages the model imported from its own folder
    (``lego_core.load.local_modules``; the output ships them).
    """

    spec: ProblemSpec
    module: types.ModuleType
    model: torch.nn.Module
    init_inputs: list
    constants: dict
    source: str
    moved_attributes: list[str] = dataclasses.field(default_factory=list)
    # the module state forward writes (dotted names), set by ``capture_graph`` (None before); the judge compares it too
    state_targets: list[str] | None = None
    # global torch settings the file set at import or while building the model (``torch_settings``): name -> value
    torch_settings: dict = dataclasses.field(default_factory=dict)
    # the modules the model imported from its own folder (``local_modules``), shipped in the output's reference_modules/
    local_modules: LocalModules | None = None
    # plain attributes ("path.name") the first forward created: not baked settings (``module_attributes.baked_attributes``)
    created_attributes: list[str] = dataclasses.field(default_factory=list)
    # fields of settings objects ("path.attribute.field") that forward writes without changing its outputs: not guarded
    written_fields: list[str] = dataclasses.field(default_factory=list)
    # plain tensor attributes ("path.name") the first forward made where there was None or nothing: constants made once
    lazy_tensors: list[str] = dataclasses.field(default_factory=list)

    def make_inputs(self, seed: int) -> list:
        torch.manual_seed(seed)
        raw = _call_user(self.spec.path, "get_inputs()", self.module.get_inputs)
        return [cast_input(x, self.spec) for x in _as_list(raw, self.spec.path, "get_inputs()")]


def cast_input(value: Any, spec: ProblemSpec) -> Any:
    """Move a tensor to ``spec.device``; floating tensors also take ``spec.dtype``.

    A tensor whose elements share memory (an ``expand``-ed mask: a stride of
    0 along a dimension of size > 1) is made contiguous: the values are the
    same, but the plan's kernels and ``out=`` library calls write results in
    the layout they were captured with, and no buffer may be written in a
    layout where several elements are one memory location.  ``ModelNew``
    copies such an input into the dense layout the plan expects
    (``lego_runtime.with_strides``), as it does a transposed one."""
    if not isinstance(value, torch.Tensor):
        return value
    if any(stride == 0 and size > 1 for stride, size in zip(value.stride(), value.shape)):
        value = value.contiguous()
    if value.is_floating_point():
        return value.to(device=spec.device, dtype=spec.torch_dtype)
    return value.to(device=spec.device)


def load_problem(spec: ProblemSpec) -> Problem:
    """Import the file, apply overrides, build the model and run it once.

    The file's folder goes first on ``sys.path`` (``local_modules.put_on_path``),
    so the model may import its sibling modules and packages; those it
    imported are listed in ``Problem.local_modules``.

    Raises ProblemError naming the file and line for: a missing or unreadable
    file, a syntax error, an exception at import (a module not found names
    it, what the import path holds and where to put it), a missing ``Model`` /
    ``get_inputs`` / ``get_init_inputs``, an override naming no module-level
    constant, an exception while building the model or its inputs, an
    unavailable device, a forward output that is not a tensor or a (nested) tuple, list or dict of tensors
    or a library's output class of them (``_check_output_structure``; a transformers key/value cache in the
    output is refused with the ``use_cache=False`` fix), and modules of the model's folder that cannot be
    shipped (compiled, or beyond ``local_modules``' limits).
    """
    try:
        return _load_problem(spec)
    except ProblemError as exc:
        if not spec.overrides:
            exc.hint = _without_override(exc.hint)  # no override to blame
        raise


def _load_problem(spec: ProblemSpec) -> Problem:
    path = str(Path(spec.path).resolve())
    source = _read_source(path)
    put_on_path(path)  # the model's folder first on the import path, as `python model.py` has it: its sibling modules import
    before = set(sys.modules)
    settings: dict = {}
    with torch_settings.recorded(settings):  # flags the file sets at import or while building the model: the user's
        module, constants = _import_source(path, source, spec.overrides)
        problem = _build(spec, path, source, module, constants)
    problem.torch_settings = settings
    _check_forward(problem)
    problem.local_modules = imported_modules(path, before, module)  # what the output ships in reference_modules/
    return problem


def _build(spec: ProblemSpec, path: str, source: str, module: types.ModuleType, constants: dict) -> Problem:
    """The checked module's model built on the device and dtype, and its inputs' recipe."""
    for name in REQUIRED_NAMES:
        if not hasattr(module, name):
            raise ProblemError(
                f"the file defines no `{name}`.",
                path,
                hint="a problem file needs `class Model(nn.Module)`, `get_inputs()` and `get_init_inputs()`.",
            )
    if not (isinstance(module.Model, type) and issubclass(module.Model, torch.nn.Module)):
        raise ProblemError("`Model` is not a subclass of torch.nn.Module.", path, hint="define `class Model(nn.Module)`.")
    if spec.device == "cuda" and not torch.cuda.is_available():
        raise ProblemError("device cuda was asked for, but this machine has no usable CUDA GPU.", path, hint="choose device cpu.")
    init_inputs = _as_list(_call_user(path, "get_init_inputs()", module.get_init_inputs), path, "get_init_inputs()")
    torch.manual_seed(0)
    model = _call_user(path, "Model(*get_init_inputs())", lambda: module.Model(*init_inputs))
    model = model.to(device=spec.device, dtype=spec.torch_dtype).eval()
    moved = move_plain_tensor_attributes(model, spec.device)
    return Problem(dataclasses.replace(spec, path=path), module, model, init_inputs, constants, source, moved)


def move_plain_tensor_attributes(model: torch.nn.Module, device: str | torch.device, dtype: torch.dtype | None = None) -> list[str]:
    """Move the plain tensor attributes of ``model`` and its submodules to
    ``device`` (floating ones also to ``dtype`` when given), in place.

    ``Module.to`` moves parameters and buffers only: a tensor stored as a
    plain attribute (``self.mask = torch.tril(torch.ones(n, n))``, a
    ``self.hidden`` initial state) stays on the CPU, and the model, run on a
    GPU, fails with "Expected all tensors to be on the same device" although
    the user asked for that device.  LEGO runs the model where the user
    asked; the dtype stays the user's own unless ``dtype`` is given (the
    float64 truth of ``lego_core.judge.end_to_end.e2e_judge`` casts them too).  Returns the
    dotted names of the attributes changed ("hidden", "blocks.0.mask")."""
    device = torch.device(device)
    changed = []
    for prefix, module in model.named_modules():
        owned = set(module._parameters) | set(module._buffers)
        for name, value in list(vars(module).items()):
            if name in owned or not isinstance(value, torch.Tensor) or isinstance(value, torch.nn.Parameter):
                continue
            cast = dtype if dtype is not None and value.is_floating_point() else value.dtype
            if value.device.type == device.type and (device.index is None or value.device == device) and value.dtype == cast:
                continue
            setattr(module, name, value.to(device=device, dtype=cast))
            changed.append(f"{prefix}.{name}" if prefix else name)
    return changed


def _read_source(path: str) -> str:
    """The model file's text (``spec.decode_source``: UTF-8, else a
    ProblemError that says so, with the line of the first bad byte)."""
    return read_source(path)


def _import_source(path: str, source: str, overrides: dict | None = None) -> tuple[types.ModuleType, dict]:
    """Execute the file as a fresh module with ``overrides`` in force from each
    constant's own assignment on (``lego_core.load.overrides``), so that module-level
    values built from an overridden constant (``input_shape = (batch_size, 16)``,
    default arguments, class attributes) follow it.  Returns the module and its
    constants (module-level numbers, true/false values, and lists and tuples of
    them, overrides applied).

    Raises ProblemError for a syntax error, an exception at import, an override
    naming no module-level constant, an override of another kind than the
    constant's value (``override_checks.override_type_error``: an integer
    given a float, a list of integers given a tuple or a list of floats...),
    and a constant whose final value is not the override (rebound by something
    other than an assignment)."""
    overrides = dict(overrides or {})
    error = syntax_problem(source, path)  # what the upload form and the command line say before a run
    if error is not None:
        raise error
    not_constant: list[str] = []

    def check(name: str, original: Any, value: Any, line: int) -> None:
        if not _is_constant(original):
            not_constant.append(name)
            raise _NotAConstant(name)
        error = override_type_error(name, original, value, path, line)  # a list takes a list of the same kind of numbers...
        if error is not None:
            raise error

    module = _new_module(path)
    try:
        _call_user(path, "importing the file", lambda: exec_with_overrides(module, source, path, overrides, check))
    except (_NotAConstant, OverrideError) as exc:
        name = exc.name if isinstance(exc, OverrideError) else exc.args[0]
        if isinstance(exc, OverrideError) and _is_constant(getattr(module, name, None)) and name not in not_constant:
            raise ProblemError(
                f"override {name}={shorten(format_override(overrides[name]))}: {exc.message}.",
                path,
                exc.line,
                hint=f"set `{name}` with one plain module-level assignment (`{name} = ...`) so that LEGO can replace it.",
            ) from None
        raise unknown_constant_error(name, overrides[name], _constants(_plain_module(path, source)), path) from None
    return module, _constants(module)


class _NotAConstant(Exception):
    """An override names a module-level value that is not a constant (``_is_constant``)."""


def _new_module(path: str) -> types.ModuleType:
    name = f"lego_problem_{abs(hash(path))}"
    module = types.ModuleType(name)
    module.__file__ = path
    sys.modules[name] = module
    return module


def _plain_module(path: str, source: str) -> types.ModuleType:
    """The file executed without overrides (to list its constants in an error)."""
    module = _new_module(path)
    _call_user(path, "importing the file", lambda: exec(compile(source, path, "exec"), module.__dict__))
    return module


def _is_constant(value: Any) -> bool:
    """A number, true/false, or a list or tuple of them (``overrides.is_constant_value``)."""
    return is_constant_value(value)


def _constants(module: types.ModuleType) -> dict:
    return {key: value for key, value in vars(module).items() if not key.startswith("_") and _is_constant(value)}


FIX_THE_LINE = "fix the code at that line."
NO_KERNEL_FOR_DTYPE = ("PyTorch itself has no kernel for this op at this dtype on this device (eager fails too): "
                       "choose another dtype (--dtype, or the form's dtype), or run on a GPU (--device cuda).")
OVERRIDE_NOTE = " (an override may have made a size invalid)"
FIX_THE_LINE_OR_OVERRIDE = f"fix the code at that line{OVERRIDE_NOTE}."
# no line of the file in the traceback (the call itself failed: a wrong number of arguments, an input
# torch's own code refused): what that call needs, never "at that line"
CALL_FIXES = {
    "running Model.forward on get_inputs()": "make get_inputs() return a list of what Model.forward takes, one item per "
                                             "argument (tensors, or the numbers it expects)",
    "Model(*get_init_inputs())": "make get_init_inputs() return a list of what Model.__init__ takes, one item per argument",
    "get_inputs()": "make get_inputs() return a list of the inputs of Model.forward",
    "get_init_inputs()": "make get_init_inputs() return a list of the arguments of Model.__init__",
}


def _call_user(path: str, what: str, fn: Callable[[], Any]) -> Any:
    """Run user code; turn any exception into a ProblemError at the user's line."""
    try:
        return fn()
    except (ProblemError, OverrideError, _NotAConstant):
        raise
    except SystemExit as exc:
        raise ProblemError(
            f"the file called sys.exit({exc.code!r}) while {what}.",
            path,
            _user_line(exc, path),
            hint="remove the exit call; a problem file only defines Model, get_inputs and get_init_inputs.",
        ) from None
    except (Exception, KeyboardInterrupt) as exc:  # noqa: BLE001 - any failure of user code is the user's to fix
        explained = explain_import_error(exc, path) if isinstance(exc, ImportError) else None
        if explained is not None:  # a module not found: which, what the import path holds, where to put it
            raise ProblemError(f"{type(exc).__name__} while {what}: {explained.message}", path, _user_line(exc, path),
                               hint=explained.hint) from None
        text = one_line(str(exc))  # MemoryError(), KeyboardInterrupt(): no text
        line = _user_line(exc, path)
        raise ProblemError(
            f"{type(exc).__name__} while {what}" + (f": {text}" if text else ""),
            path,
            line,
            hint=NO_KERNEL_FOR_DTYPE if _no_kernel_for_dtype(exc) else _fix_hint(what, line),
        ) from None


def _fix_hint(what: str, line: int | None) -> str:
    """How to fix an exception of user code: "at that line" only where the
    error names a line of the file; else what the failed call needs
    (:data:`CALL_FIXES`)."""
    if line is not None:
        return FIX_THE_LINE_OR_OVERRIDE
    return CALL_FIXES.get(what, f"fix what the file does while {what}") + OVERRIDE_NOTE + "."


def _without_override(hint: str) -> str:
    """``hint`` without "(an override may have made a size invalid)": for a
    run with no override."""
    return hint.replace(OVERRIDE_NOTE, "")


def _no_kernel_for_dtype(exc: BaseException) -> bool:
    """Whether ``exc`` is PyTorch saying an op has no kernel for a dtype (or
    backend): ``"avg_pool3d_out_frame" not implemented for 'BFloat16'``,
    ``Could not run 'aten::...' with arguments from the 'CPU' backend``."""
    text = str(exc)
    return isinstance(exc, (NotImplementedError, RuntimeError)) and (
        " not implemented for '" in text or ("Could not run 'aten::" in text and "backend" in text))


def one_line(text: str, limit: int = 300) -> str:
    """``text`` with its whitespace collapsed to single spaces, cut at ``limit`` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _user_line(exc: BaseException, path: str) -> int | None:
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == path]
    return frames[-1].lineno if frames else None


def _as_list(value: Any, path: str, what: str) -> list:
    if isinstance(value, (list, tuple)):
        return list(value)
    raise ProblemError(f"{what} returned {type(value).__name__}, not a list.", path, hint=f"make {what} return a list.")


OUTPUT_HINT = ("return a tensor, or a tuple, list or dict of tensors (nested ones too: an RNN's out, (h, c)); "
               "compute other values (counts, strings, None) outside forward.")
USE_CACHE_HINT = ("pass use_cache=False where forward calls the Hugging Face model (e.g. `self.model(input_ids, "
                  "use_cache=False)`, or set use_cache=False in its config), and return the tensors you need (`.logits`, "
                  "`.last_hidden_state`) or the output object without its cache: LEGO optimizes one forward pass at fixed "
                  "shapes, not decoding step by step with a growing key/value cache.")


def kv_cache_class(value: Any) -> str | None:
    """The class name of ``value`` when it is a transformers key/value cache
    (``transformers.cache_utils.Cache``: ``DynamicCache``, ``StaticCache``,
    ...), else None.  Told by class name and module, so that LEGO never
    imports transformers."""
    for cls in type(value).__mro__:
        if cls.__module__.split(".")[0] == "transformers" and cls.__name__.endswith("Cache"):
            return type(value).__name__
    return None


def _container_types(spec: Any) -> list[type]:
    """Every container class of a pytree spec (tuple, dict, a ModelOutput class, ...), outermost first."""
    found, stack = [], [spec]
    while stack:
        node = stack.pop(0)
        if node.type is not None and node.type not in found:
            found.append(node.type)
        # children() since torch 2.13 (children_specs deprecated there); the dataclass field before
        stack += list(node.children() if callable(getattr(node, "children", None)) else node.children_specs)
    return found


def _check_output_structure(out: Any, path: str, module_name: str | None = None) -> None:
    """ProblemError unless ``out`` (not a tensor) is a structure ModelNew can
    return too: a tuple, list or dict of tensors, nested or not, or a
    library's output class registered with ``torch.utils._pytree`` (transformers'
    ``ModelOutput``: ``CausalLMOutput``, ``BaseModelOutputWithPast``), holding
    at least one tensor and nothing else.

    Refused, each with its fix: anything else (a number, a string); a
    transformers key/value cache among the values (``use_cache=True``, the
    Hugging Face default: :data:`USE_CACHE_HINT`); other non-tensor values;
    no tensor at all; a container class defined in the model file itself
    (``module_name``: the module the file was loaded as; the optimized model
    imports the file under another name and could not find the class
    again); a structure ``treespec_dumps`` cannot write down (a namedtuple),
    from which ``compose.folder.output_spec_text`` writes ``OUTPUT_SPEC``."""
    kind = type(out).__name__
    pytree = torch.utils._pytree
    if not isinstance(out, (tuple, list, dict)) and type(out) not in pytree.SUPPORTED_NODES:
        raise ProblemError(f"Model.forward returned {kind}, not a tensor (nor a tuple, list or dict of tensors).", path, hint=OUTPUT_HINT)
    leaves, spec = pytree.tree_flatten(out)
    caches = sorted({name for name in map(kv_cache_class, leaves) if name})
    if caches:
        raise ProblemError(f"Model.forward returned a {kind} holding a {', '.join(caches)}: transformers' key/value cache, which a "
                           "Hugging Face model returns when use_cache is on (its default); LEGO optimizes a forward that "
                           "returns tensors only.", path, hint=USE_CACHE_HINT)
    others = sorted({type(leaf).__name__ for leaf in leaves if not isinstance(leaf, torch.Tensor)})
    if others:
        raise ProblemError(f"Model.forward returned a {kind} holding {', '.join(others)}: LEGO optimizes a forward that returns "
                           "tensors only.", path, hint=OUTPUT_HINT)
    if not leaves:
        raise ProblemError(f"Model.forward returned an empty {kind}: there is no tensor to optimize.", path, hint=OUTPUT_HINT)
    own = [t.__name__ for t in _container_types(spec) if module_name and getattr(t, "__module__", None) == module_name]
    if own:
        raise ProblemError(f"Model.forward returned a {own[0]}, a class defined in the model file: the optimized model loads "
                           "the file under another module name and could not rebuild it.", path,
                           hint="return a plain tuple or dict of its tensors (dict(out) for a ModelOutput, dataclasses.asdict(out) "
                           "for a dataclass), or an output class of an installed library (transformers' ModelOutput classes "
                           "work).")
    try:  # ModelNew rebuilds the structure from this text (compose.output_spec_text)
        pytree.treespec_dumps(spec)
    except Exception:  # noqa: BLE001 - a namedtuple or another container type that cannot be written down
        what = f"the namedtuple {kind}" if hasattr(out, "_fields") else f"a {kind} holding a namedtuple or another container type"
        raise ProblemError(f"Model.forward returned {what}, which LEGO cannot rebuild in the optimized model: it returns plain "
                           "tuples, lists and dicts of tensors, and output classes of installed libraries.", path,
                           hint="return a plain tuple or dict (tuple(out) or out._asdict() for a namedtuple).") from None


def _check_forward(problem: Problem) -> None:
    inputs = problem.make_inputs(seed=0)
    error = hooks_error(problem.model, problem.spec.path)
    if error is not None:  # captured into the plan, and run again by ModelNew's call
        raise error
    before = plain_values(problem.model)
    tensors_before = _tensor_attributes(problem.model)

    def call():
        return _call_user(problem.spec.path, "running Model.forward on get_inputs()", lambda: problem.model(*inputs))

    with torch.no_grad(), preserved(problem.model):  # a stateful forward's tensor writes are undone: the model stays as built
        out, error = uncarried_state_error(problem.model, call, problem.spec.path,
                                           outside=lambda: outside_fingerprints(problem.model, problem.module))
    if error is not None:  # containers, None-initialised, first-call or outside state: torch.export would bake it in
        raise error
    after = plain_values(problem.model)
    # plain attributes the first call created (a library's "hooks installed" flag): bookkeeping, not settings to guard
    problem.created_attributes = sorted(set(after) - set(before))
    # tensors the first call made where there was None or nothing (a constant made once, lazily)
    problem.lazy_tensors = sorted(set(_tensor_attributes(problem.model)) - set(tensors_before))
    error = python_state_error(before, after, problem.spec.path)
    if error is not None:  # a Python number kept as state: torch.export bakes it in, LEGO cannot carry it
        raise error
    if not isinstance(out, torch.Tensor):
        _check_output_structure(out, problem.spec.path, problem.module.__name__)
    for k, x in enumerate(inputs):
        if isinstance(x, torch.Tensor) and x.numel() == 0:
            raise ProblemError(
                f"get_inputs() gives input {k} the empty shape {list(x.shape)}: there is nothing to optimize.",
                problem.spec.path,
                hint="give every size constant a value of at least 1.",
            )


def _tensor_attributes(model: torch.nn.Module) -> list[str]:
    """``"path.name"`` of every plain tensor attribute of ``model``'s modules
    (neither parameter nor buffer)."""
    found = []
    for prefix, module in model.named_modules():
        owned = set(module._parameters) | set(module._buffers)
        found += [f"{prefix}.{name}" if prefix else name for name, value in vars(module).items()
                  if name not in owned and isinstance(value, torch.Tensor)]
    return found


def check_repeatable(problem: Problem) -> None:
    """Refuse a forward that, called twice on the same inputs from the same
    module state and RNG seed, gives other outputs: it keeps state that
    LEGO cannot see (a counter in a settings object, a property that changes
    at each read, a field of ``self.config`` written in forward), which
    torch.export reads once and bakes, so the plan would keep the first
    value.  The fields of settings objects (``module_attributes.baked_fields``) that
    the calls wrote are named; written ones that change no output are
    recorded in ``Problem.written_fields`` (not guarded: ModelNew's plan
    never writes them).  Run after capture (``capture.capture_graph``), so
    that the kinds of hidden state capture names more precisely (a tensor in
    a closure, a helper object of the model file) are said in their own words.
    Raises ProblemError."""
    inputs = problem.make_inputs(seed=0)

    def call():
        return _call_user(problem.spec.path, "running Model.forward on get_inputs()", lambda: problem.model(*inputs))

    def fields() -> dict:
        return {".".join(p for p in (path, attr, field) if p): value for path, attr, field, value in baked_fields(problem.model)}

    before = fields()
    outputs = []
    for _ in range(2):
        torch.manual_seed(12345)  # a forward that draws random numbers draws the same ones both times
        with torch.no_grad(), preserved(problem.model):
            outputs.append(call())
    after = fields()
    written = sorted(name for name in set(before) | set(after) if before.get(name, _GONE) != after.get(name, _GONE))
    problem.written_fields = written
    first, second = (torch.utils._pytree.tree_leaves(o) for o in outputs)
    same = len(first) == len(second) and all(
        isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape
        and (torch.allclose(a, b, rtol=1e-3, atol=1e-5, equal_nan=True) if a.is_floating_point() else torch.equal(a, b))
        for a, b in zip(first, second))
    if same:
        return
    changed = f" It wrote {', '.join('self.' + n for n in written[:4])} meanwhile." if written else ""
    raise ProblemError(
        "Model.forward gives other outputs when called twice on the same inputs, from the same module state and "
        f"random seed: it keeps state outside its tensors.{changed} torch.export reads such a value once and bakes it "
        "into the captured graph, so an optimized model would keep the first value on every call",
        problem.spec.path,
        None,
        hint="keep state that forward updates in a registered buffer, updated in place (LEGO carries those); read "
        "settings, not counters, from config objects; compute per-call values from the inputs.",
    )


_GONE = object()


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip().splitlines()[-1])
        return 2
    try:
        problem = load_problem(ProblemSpec(argv[0], parse_overrides(argv[1:])))
    except ProblemError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    shapes = [tuple(x.shape) for x in problem.make_inputs(0) if isinstance(x, torch.Tensor)]
    print(f"{problem.spec.name}: constants {problem.constants}, input shapes {shapes}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
