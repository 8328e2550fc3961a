"""LEGO's runtime for an optimized model: bound tensors and CUDA-graph replay.

Shipped beside ``optimized_model.py`` (plain torch, no LEGO needed).  Two
things make a composed forward cost what its kernels cost:

* **Bind once** (:class:`BoundTensors`): the forward reads its parameters,
  buffers and constants from a tuple resolved once, not by dotted path on
  every call.  The tuple is resolved again after anything that could replace
  a tensor: ``.to()``/``.cuda()``/``.half()`` (``Module._apply``),
  ``load_state_dict``, or assigning a new ``Parameter``/buffer anywhere
  (PyTorch's global registration hooks bump :data:`GENERATION`).  In-place
  updates (``load_state_dict``'s copy, an optimizer step) keep the tensors
  and need nothing.
* **Replay as a CUDA graph** (:class:`GraphReplayer`): with static shapes,
  the whole forward is captured once into a CUDA graph and replayed, which
  removes the CPU's per-kernel launch cost (about 5 us per ATen op and 20-50
  us per Triton launch from Python).  Inputs are copied into the graph's
  static input tensors; the output is cloned, so a tensor returned by one
  call never changes when the model is called again.  Capture follows the
  rules of ``torch.cuda.graphs`` (warm-up on a side stream first, so Triton
  compiles and cuBLAS creates its handles outside the capture; a fresh
  stream per captured graph, so two graphs never share cuBLAS's workspace:
  pytorch issue 193402).  A forward that cannot be captured (a host sync, a
  data-dependent shape) falls back to the direct forward with one warning.
* **The original forward in channels-last** (:func:`channels_last_forward`):
  when the launch stage measured it faster, the user's own forward runs with
  4-D inputs and convolution weights in NHWC memory order (cuDNN's fast
  layout for tensor cores), as torch.compile's layout optimisation does for
  convolution networks; weights are copied once and again only when they
  change, and the output comes back in eager's layout.
"""
from __future__ import annotations

import copy
import operator
import os
import warnings

import torch

# bumped whenever a Parameter, buffer or submodule is (re)assigned on any
# module, so a bound tuple resolved before is resolved again.  One list per
# process, shared by every optimized model loaded in it.
_MODULE = torch.nn.modules.module
if not hasattr(_MODULE, "_lego_generation"):
    _MODULE._lego_generation = [0]
GENERATION = _MODULE._lego_generation


def _bump(*_args):
    _MODULE._lego_generation[0] += 1
    return None


def _install_hooks() -> None:
    """Register the global parameter/buffer/module registration hooks once per process."""
    module = _MODULE
    if getattr(module, "_lego_runtime_hooks", False):
        return
    for name in ("register_module_parameter_registration_hook", "register_module_buffer_registration_hook",
                 "register_module_module_registration_hook"):
        register = getattr(module, name, None)
        if register is not None:  # all three exist since torch 2.0
            register(_bump)
    module._lego_runtime_hooks = True


_install_hooks()


class _Cache:
    """Per-model runtime state that is never copied or pickled: a copy of the
    model (``copy.deepcopy``, ``torch.save``) starts with an empty one."""

    def __getstate__(self):
        return {}

    def __setstate__(self, state):
        self.__init__()

    def __deepcopy__(self, memo):
        return type(self)()


class BoundTensors(_Cache):
    """The tensors a plan reads, resolved by ``model._lego_bind(device)`` and
    cached until :data:`GENERATION` or the device changes.  Holds no
    reference to the model (no cycle: a deleted model's memory is freed at
    once)."""

    def __init__(self):
        self._key = None
        self._tensors = ()
        self._fits = True
        self._submodules_key = None
        self._submodules = ()
        self._attributes_key = None
        self._attributes_changed = ""
        self._attribute_slots = ((), (), ())
        self._fields_key = None
        self._field_slots = ()
        self._constants_key = None
        self._constant_slots = ()
        self._constants_changed = ""
        self._globals_slots = None

    def get(self, model, device) -> tuple:
        """The bound tensors for inputs on ``device``."""
        self._refresh(model, device)
        return self._tensors

    def fits(self, model, device) -> bool:
        """Whether the bound tensors still have the dtypes the plan was made
        for (``model._lego_bound_dtypes``): false after ``.double()``,
        ``.half()`` or loading tensors of another dtype with ``assign=True``."""
        self._refresh(model, device)
        return self._fits

    def _refresh(self, model, device) -> None:
        key = (GENERATION[0], device)
        if key != self._key:
            self._tensors = tuple(model._lego_bind(device))
            wanted = model._lego_bound_dtypes
            self._fits = all(str(t.dtype) == want for t, want in zip(self._tensors, wanted))
            self._key = key

    def training(self, model) -> bool:
        """Whether ``model`` or any of its submodules is in train mode (reads
        every module's ``training`` flag: ``model.eval(); model.block.train()``
        counts).  The submodules are listed once per :data:`GENERATION` (a
        module assigned anywhere lists them again); the root itself is not
        kept, so no reference cycle."""
        if model.training:
            return True
        if self._submodules_key != GENERATION[0]:
            self._submodules = tuple(m for m in model.modules() if m is not model)
            self._submodules_key = GENERATION[0]
        return any(map(_TRAINING, self._submodules))  # C speed: hundreds of modules in a few microseconds

    def attributes_fit(self, model) -> str:
        """``""`` when every plain attribute the plan baked in
        (``model._lego_baked``: module path, name, value) still has its value,
        else the first that changed, as ``"path.name"``.  Per call this reads
        each attribute once from its module's ``__dict__`` and compares one
        tuple (about 40 ns an attribute); the modules are looked up again once
        per :data:`GENERATION` (a module replaced anywhere)."""
        baked = getattr(model, "_lego_baked", ())
        if self._attributes_key != GENERATION[0]:
            modules = dict(model.named_modules())
            by_module: dict = {}
            for p, n, v in baked:
                by_module.setdefault(p, []).append((n, v))
            readers, dicts, expected = [], [], []
            for p, named in by_module.items():
                d = vars(modules[p]) if p in modules else {}
                names = tuple(n for n, _v in named)
                # the baked values, held as the model holds them when equal (a list for a tuple; a copy of a
                # list or dict, so that one edited in place no longer equals it)
                values = tuple(_held_copy(now) if _same(now, v) else v for n, v in named for now in (d.get(n, _MISSING),))
                readers.append(operator.itemgetter(*names, names[0]))  # one C call a module
                dicts.append(d)
                expected.append(values + values[:1])
            self._attribute_slots = (tuple(readers), tuple(dicts), tuple(expected))
            self._attributes_key = GENERATION[0]
        readers, dicts, expected = self._attribute_slots
        try:
            same = tuple(map(_call, readers, dicts)) == expected  # no Python frame per module
        except KeyError:  # an attribute deleted
            same = False
        if not same:
            return _changed_attribute(model, baked)
        return ""

    def fields_fit(self, model) -> str:
        """``""`` when every field of a settings object the plan baked in
        (``model._lego_baked_fields``: module path, attribute, field, value;
        a Hugging Face ``config``) still has its value, else the first that
        changed, as ``"path.attribute.field"``.  The object is looked up on
        its module at every call (another object may have been assigned),
        then one tuple of its fields is compared."""
        baked = getattr(model, "_lego_baked_fields", ())
        if not baked:
            return ""
        if self._fields_key != GENERATION[0]:
            modules = dict(model.named_modules())
            holders: dict = {}
            for path, attribute, field, value in baked:
                holders.setdefault((path, attribute), []).append((field, value))
            slots = []
            for (p, a), fv in holders.items():
                slot = vars(modules[p]) if p in modules else {}
                held = _own_dict(slot.get(a))
                # the baked values, held as the object holds them when equal (a list for a tuple)
                values = tuple(_held_copy(now) if _same(now, v) else v for f, v in fv for now in (held.get(f, _MISSING),))
                fields = tuple(f for f, _v in fv)
                read = operator.itemgetter(*fields, fields[0])  # a tuple even for one field: C speed, ~40 fields in 1 us
                slots.append((slot, p, a, fields, read, values + values[:1], tuple(v for _f, v in fv)))
            self._field_slots, self._fields_key = tuple(slots), GENERATION[0]
        for slot, path, attribute, fields, read, values, baked_values in self._field_slots:
            held = _own_dict(slot.get(attribute))
            try:
                same = read(held) == values
            except KeyError:  # a field deleted
                same = False
            if not same:
                for field, value in zip(fields, baked_values):
                    if not _same(held.get(field, _MISSING), value):
                        return ".".join(p for p in (path, attribute, field) if p)
        return ""

    def constants_fit(self, model) -> str:
        """``""`` while every plain tensor attribute the plan reads as a saved
        constant (``model._lego_constant_attributes``: module path, name,
        constant) holds the values the plan was optimized with, else the
        first that changed, as ``"path.name"`` (reassigned, edited in place,
        deleted).  Per call: an identity and a version-counter check each;
        the values are compared again (``torch.equal``) only after one moved."""
        specs = getattr(model, "_lego_constant_attributes", ())
        if not specs:
            return ""
        if self._constants_key == GENERATION[0] and all(
                d.get(n, _MISSING) is t and _version_of(t) == v for d, n, t, v in self._constant_slots):
            return self._constants_changed
        modules = dict(model.named_modules())
        lazy = set(getattr(model, "_lego_lazy_constants", ()))
        slots, changed = [], ""
        for path, name, constant in specs:
            slot = vars(modules[path]) if path in modules else {}
            now = slot.get(name, _MISSING)
            saved = model._lego_constants[constant]
            # a constant the first eager call makes: not made yet, the plan's saved copy is what that call makes
            not_made = (path, name) in lazy and (now is None or now is _MISSING)
            same = not_made or (isinstance(now, torch.Tensor) and now.shape == saved.shape and now.dtype == saved.dtype
                                and torch.equal(now.detach().to(saved.device), saved))
            if not same and not changed:
                changed = f"{path}.{name}" if path else name
            slots.append((slot, name, now, _version_of(now)))
        self._constant_slots, self._constants_changed, self._constants_key = tuple(slots), changed, GENERATION[0]
        return changed

    def globals_fit(self, model) -> str:
        """``""`` while the model file's globals and class attributes the plan
        baked in (``model._lego_baked_globals``) keep their values and the
        tensors they hold (``model._lego_global_tensors``) are the same
        tensors, unedited since this check first ran (the first call); else
        what changed, in words.  Per call: one dictionary read and compare
        per value, an identity and version check per tensor."""
        baked = getattr(model, "_lego_baked_globals", ())
        tensors = getattr(model, "_lego_global_tensors", ())
        if not baked and not tensors:
            return ""
        if self._globals_slots is None:
            namespace = vars(model._lego_reference)

            def slot(where, cls):
                owner = namespace.get(cls) if where == "class" else None
                return namespace if where == "global" else (vars(owner) if isinstance(owner, type) else {})

            # an "object" field's dictionary is found at each call (None here), the global named in the last item
            self._globals_slots = tuple((None, n, v, (_global_name(w, c, n), c)) if w == "object" else
                                        (slot(w, c), n, v, _global_name(w, c, n)) for w, c, n, v in baked)
            self._tensor_slots = tuple((d, n, now, _version_of(now), _global_name(w, c, n))
                                       for w, c, n in tensors for d in (slot(w, c),) for now in (d.get(n, _MISSING),))
        for d, n, value, said in self._globals_slots:
            if d is None:  # a field of a global object: looked up again, the global may hold another object now
                d = getattr(vars(model._lego_reference).get(said[1]), "__dict__", {})
                said = said[0]
            if not _same(d.get(n, _MISSING), value):
                return said
        for d, n, obj, version, said in self._tensor_slots:
            now = d.get(n, _MISSING)
            if now is not obj or _version_of(now) != version:
                return said
        return ""

    def invalidate(self) -> None:
        """Resolve again on the next call."""
        self._key = None
        self._submodules_key = None
        self._attributes_key = None
        self._fields_key = None
        self._constants_key = None


_MISSING = object()


_TRAINING = operator.attrgetter("training")
_call = getattr(operator, "call", lambda function, *args: function(*args))  # operator.call: Python 3.11+


def _held_copy(value):
    """``value`` as a baked value to compare against: a deep copy of a list
    or dict (the live one may be edited in place), anything else itself."""
    return copy.deepcopy(value) if isinstance(value, (list, dict)) else value


def _own_dict(value) -> dict:
    """``value.__dict__`` read past any ``__getattribute__`` of its class (a
    Hugging Face config maps attribute names in Python: 4 us a read), or {}."""
    try:
        held = object.__getattribute__(value, "__dict__")
    except (AttributeError, TypeError):
        return {}
    return held if isinstance(held, dict) else {}


def _version_of(value):
    """A tensor's version counter (bumped by every in-place write), None for anything else."""
    try:
        return value._version if isinstance(value, torch.Tensor) else None
    except RuntimeError:  # an inference-mode tensor keeps none
        return None


def _same(now, value) -> bool:
    """Whether attribute value ``now`` is the baked ``value`` (a list equals its tuple)."""
    if isinstance(now, list):
        now = tuple(now)
    return now is not _MISSING and type(now) is type(value) and now == value


def _global_name(where, cls, name) -> str:
    if where == "object":
        return f"the field {cls}.{name} of a global of the model file"
    return f"the global {name} of the model file" if where == "global" else f"the class attribute {cls}.{name}"


def _changed_attribute(model, baked) -> str:
    """The first baked attribute (``"path.name"``) whose value is not the baked one, or ``""``."""
    modules = dict(model.named_modules())
    for path, name, value in baked:
        module = modules.get(path)
        if not _same(vars(module).get(name, _MISSING) if module is not None else _MISSING, value):
            return f"{path}.{name}" if path else name
    return ""


def _state_owner(model, target):
    path, _, name = target.rpartition(".")
    return (model.get_submodule(path) if path else model), name


def read_state(model, target):
    """The current tensor of state ``target`` (dotted): a registered buffer or
    a plain tensor attribute, read at every call (a reassigned attribute is a
    new tensor after each call)."""
    module, name = _state_owner(model, target)
    return module._buffers[name] if name in module._buffers else vars(module)[name]


def write_state(model, state, values) -> None:
    """Write a stateful forward's new state back as eager does: for each
    ``(target, kind, shape, dtype)`` of ``state`` and its new value in
    ``values`` (computed by the plan), ``"in place"``: copied into the
    tensor the model holds (the same object: ``buffer.copy_(new)``);
    ``"reassigned"``: the attribute (or buffer) set to the new tensor.  A new value
    that shares memory with a tensor written in place is copied first, so
    the order of the writes never changes what is written."""
    current = [read_state(model, target) for target, *_ in state]
    in_place = {t.untyped_storage().data_ptr() for t, (_target, kind, *_rest) in zip(current, state) if kind == "in place"}
    news = []
    for (target, kind, *_), now, new in zip(state, current, values):
        shared = new is not now and new.untyped_storage().data_ptr() in in_place
        news.append(new.clone() if shared else new)
    with torch.no_grad():
        for (target, kind, *_), now, new in zip(state, current, news):
            if kind == "in place":
                if new is not now:
                    now.copy_(new)
            else:
                module, name = _state_owner(model, target)
                setattr(module, name, new)


def state_fits(model) -> str:
    """``""`` when every state tensor the plan reads and writes
    (``model._lego_state``: target, kind, shape, dtype) has the shape and
    dtype the plan was made for, else the first that does not, as
    ``"target (dtype[shape])"``."""
    for target, _kind, shape, dtype in getattr(model, "_lego_state", ()):
        try:
            now = read_state(model, target)
        except (AttributeError, KeyError):
            return f"{target} (missing)"
        if not isinstance(now, torch.Tensor) or tuple(now.shape) != tuple(shape) or str(now.dtype) != dtype:
            got = f"{str(now.dtype).removeprefix('torch.')}{list(now.shape)}" if isinstance(now, torch.Tensor) else type(now).__name__
            return f"{target} ({got}, optimized for {dtype.removeprefix('torch.')}{list(shape)})"
    return ""


def positional(forward, model, inputs, kwargs, count: int) -> tuple:
    """``(inputs, kwargs)`` of a call ``model(*inputs, **kwargs)`` as
    ``forward`` (the user's ``Model.forward``) binds it: keyword arguments
    moved to their positions and defaults filled in, the first ``count``
    (the inputs the plan was optimized with) kept; what only a ``**kwargs``
    parameter takes stays in ``kwargs``.  A parameter past ``count`` kept
    its default when the model was optimized (torch.export baked it in):
    another value raises ValueError.  Raises TypeError as the user's forward
    would for a call that does not fit its signature."""
    import inspect

    signature = inspect.signature(forward)
    bound = signature.bind(model, *inputs, **kwargs)
    given = set(bound.arguments)
    bound.apply_defaults()
    args = tuple(bound.args[1:])
    names = [n for n in list(signature.parameters)[1:]]
    for k in range(count, len(args)):
        name = names[k] if k < len(names) else f"#{k}"
        default = signature.parameters[name].default if name in signature.parameters else inspect.Parameter.empty
        if name in given and args[k] is not default and not (type(args[k]) is type(default) and args[k] == default):
            raise ValueError(f"argument {name!r} was {default!r} when ModelNew was optimized and is baked into its kernels; "
                             f"got {args[k]!r}. Run LEGO again with this value")
    return args[:count] if len(args) > count else args, dict(bound.kwargs)


def forward_mode(model, inputs) -> str:
    """``"plan"`` or ``"original"``: what this call of ``model`` runs.

    ``model.lego_forward`` asks for one; the plan falls back to the user's
    own forward (with one warning each) when it cannot compute what eager
    would: the model or any submodule in train mode (the plan is the
    eval-mode forward captured by torch.export: dropout, functional
    ``F.dropout(training=self.training)``, an LSTM's inter-layer dropout,
    batch statistics and any branch on ``self.training`` are gone from it, so
    train mode always runs the user's forward, exactly as eager does),
    gradients wanted (LEGO's kernels record no autograd history), or
    parameters no longer of the dtype the plan was made for, and when a
    value the plan baked in changed (:func:`fallback_reason`).  What ran and
    why is kept on the model (:func:`note_forward`).  Raises ValueError for
    another ``lego_forward`` value."""
    requested = model.lego_forward
    if requested == "original":
        note_forward(model, "original", None)
        return "original"
    if requested != "plan":
        raise ValueError(f"ModelNew.lego_forward must be 'plan' or 'original', got {requested!r}")
    why = fallback_reason(model, inputs)
    if why:
        warnings.warn(f"LEGO: {why}", stacklevel=3)
        note_forward(model, "original", why)
        return "original"
    note_forward(model, "plan", None)
    return "plan"


def note_forward(model, ran: str, why) -> None:
    """Keep on ``model`` what its last call ran: ``model.lego_last_forward``
    (``"plan"`` or ``"original"``) and ``model.lego_fallback`` (why the plan
    did not run although ``lego_forward`` asked for it, else None).  LEGO's
    end-to-end judge and its timing read them, so that a speedup is never
    reported for a plan that did not run."""
    state = model.__dict__
    state["lego_last_forward"] = ran
    state["lego_fallback"] = why


def fallback_reason(model, inputs) -> str:
    """Why the plan cannot run this call (one sentence with what to do), or
    ``""`` when it can; see :func:`forward_mode`."""
    if model._lego_bound.training(model):
        return ("the model is in train mode and LEGO's plan is the eval-mode forward (no dropout, BatchNorm "
                "running statistics, eval branches of self.training): running the original forward (call .eval() "
                "on the whole model to run the optimized plan)")
    if torch.is_grad_enabled() and (
        any(isinstance(x, torch.Tensor) and x.requires_grad for x in inputs) or any(p.requires_grad for p in model.parameters())
    ):
        return ("gradients are wanted and LEGO's kernels are inference-only: running the original forward "
                "(call the model under torch.no_grad() or torch.inference_mode() to run the optimized plan)")
    device = next((x.device for x in inputs if isinstance(x, torch.Tensor)), None)
    if not model._lego_bound.fits(model, device):
        want = sorted({d.removeprefix("torch.") for d in model._lego_bound_dtypes if d})
        got = sorted({str(p.dtype).removeprefix("torch.") for p in model.parameters()})
        return (f"the model's parameters are {', '.join(got)} and the plan was optimized for {', '.join(want)}: "
                f"running the original forward (build it as the file's docstring says, "
                f"ModelNew(...).to(device, dtype), or optimize again for this dtype)")
    changed_tensor = model._lego_bound.constants_fit(model)
    if changed_tensor:
        return (f"the tensor {changed_tensor} changed after the model was optimized and the plan reads the "
                "values it had then: running the original forward (optimize again with the new values)")
    unfit = state_fits(model)
    if unfit:
        return (f"the state {unfit} is not what the plan was optimized for: running the original "
                "forward (optimize again for this state)")
    changed = model._lego_bound.attributes_fit(model) or model._lego_bound.fields_fit(model) or model._lego_bound.globals_fit(model)
    if changed:
        return (f"{changed} changed after the model was optimized and its old value is baked into the plan: "
                "running the original forward (optimize again with the new value)")
    if getattr(model, "_lego_plan_device", None) == "cpu" and torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1":
        return ("this plan was optimized on a CPU and its kernels run only in Triton's interpreter "
                "(TRITON_INTERPRET=1): running the original forward (optimize again with --device cuda)")
    return ""


def to_channels_last(x):
    """A 4-D tensor in channels-last (NHWC) memory order (no copy when it
    already is); anything else unchanged.  The plan of a model optimized in
    channels-last converts its 4-D inputs so at entry."""
    if isinstance(x, torch.Tensor) and x.dim() == 4:
        return x.contiguous(memory_format=torch.channels_last)
    return x


_OUTPUT_SPECS = {}


def unflatten_output(leaves, spec_text):
    """The plan's output tensors ``leaves`` (pytree order) in the structure
    forward returns (``spec_text``: ``torch.utils._pytree.treespec_dumps``
    of the captured output spec): a tuple, list or dict, nested too, or a
    library's output class that registers itself with pytree (transformers'
    ``ModelOutput``: ``CausalLMOutput(logits=...)``, rebuilt as that class).
    Raises RuntimeError when such a class cannot be found (``_load_spec``)."""
    spec = _OUTPUT_SPECS.get(spec_text)
    if spec is None:
        spec = _OUTPUT_SPECS[spec_text] = _load_spec(spec_text)
    return torch.utils._pytree.tree_unflatten(list(leaves), spec)


def _load_spec(spec_text):
    """``treespec_loads(spec_text)``; a container class the text names by
    ``module.Class`` that is not registered yet (transformers registers a
    ``ModelOutput`` class when its module is imported, and the model file may
    import only part of the library) has its module imported first."""
    import importlib
    import json

    pytree = torch.utils._pytree
    try:
        return pytree.treespec_loads(spec_text)
    except NotImplementedError:  # "Deserializing transformers.modeling_outputs.X in pytree is not registered"
        pass
    registered = getattr(pytree, "SERIALIZED_TYPE_TO_PYTHON_TYPE", {})
    missing, stack = [], [json.loads(spec_text)[1]]
    while stack:
        node = stack.pop()
        name = node.get("type")
        if name and name not in registered and name not in missing:
            missing.append(name)
        stack += node.get("children_spec") or []
    for name in missing:
        module = name.rpartition(".")[0]
        try:
            importlib.import_module(module)
        except Exception as exc:  # noqa: BLE001 - said below with the class it was for
            raise RuntimeError(f"the optimized model returns a {name}, as Model.forward does, and importing its module "
                               f"{module} failed ({type(exc).__name__}: {exc}); install it where the model runs") from None
    try:
        return pytree.treespec_loads(spec_text)
    except NotImplementedError:
        raise RuntimeError(f"the optimized model returns {', '.join(missing)}, as Model.forward does, and importing "
                           "its module did not register it with torch.utils._pytree: return a plain tuple or dict from "
                           "Model.forward and optimize it again") from None


def with_strides(x, strides):
    """``x`` with ``strides`` (elements) in every dimension of size > 1: ``x``
    itself when it has them, else a copy.  The plan returns its output in the
    layout eager returned when the model was optimized."""
    if all(s == want for n, s, want in zip(x.shape, x.stride(), strides) if n != 1):
        return x
    return torch.empty_strided(x.shape, strides, dtype=x.dtype, device=x.device).copy_(x)


def _clone_output(value):
    """Every tensor of ``value`` (a tensor, or a tuple, list or dict of them, nested) cloned out of the graph's memory."""
    return torch.utils._pytree.tree_map(lambda v: v.clone() if isinstance(v, torch.Tensor) else v, value)


class GraphReplayer(_Cache):
    """Runs ``model._lego_run(*inputs)`` through one captured CUDA graph.

    ``__call__(model, inputs)`` returns the forward's output (cloned out of
    the graph's memory), or ``None`` when this call cannot use the graph (CPU
    inputs, train mode anywhere in the model, gradients wanted, another
    capture in progress, or capture failed once: ``failure`` then says why); the caller then runs the forward
    directly.  The graph is captured again when the inputs' shapes, strides,
    dtypes or device change or :data:`GENERATION` moves (a tensor the graph
    reads may have been replaced), and, for a channels-last original forward,
    when a convolution weight changes in place (its NHWC copy is made again:
    :class:`ChannelsLastWeights`).  Holds no reference to the model.
    """

    def __init__(self):
        self._state = None  # (key, graph, static inputs, static output)
        self.failure: str | None = None

    def invalidate(self) -> None:
        """Drop the captured graph (captured again on the next call)."""
        self._state = None

    def __call__(self, model, inputs):
        if self.failure is not None:
            return None
        tensors = [x for x in inputs if isinstance(x, torch.Tensor)]
        if not tensors or not all(x.is_cuda for x in tensors):
            return None
        if torch.cuda.is_current_stream_capturing():
            return None  # the caller captures its own graph around this model
        if model._lego_bound.training(model):
            return None  # a replay repeats one dropout mask and updates no statistics: train mode runs directly
        if torch.is_grad_enabled() and (any(x.requires_grad for x in tensors) or any(p.requires_grad for p in model.parameters())):
            return None  # a replayed graph records no autograd history
        nhwc = getattr(model, "lego_channels_last", False) and model.lego_forward == "original"
        key = (GENERATION[0], model.lego_forward, model._lego_nhwc.signature(model) if nhwc else None) + tuple(
            (tuple(x.shape), x.stride(), x.dtype, x.device) if isinstance(x, torch.Tensor) else x for x in inputs
        )
        state = self._state
        if state is None or state[0] != key:
            self._state = None
            try:
                state = self._capture(model, inputs, key)
            except Exception as exc:  # noqa: BLE001 - any capture failure means: run directly
                self.failure = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
                warnings.warn(f"LEGO: this forward cannot be replayed as a CUDA graph ({self.failure}); running it directly", stacklevel=3)
                torch.cuda.synchronize()
                return None
            self._state = state
        _, graph, static_inputs, static_output = state
        for static, x in zip(static_inputs, inputs):
            if isinstance(static, torch.Tensor) and static.data_ptr() != x.data_ptr():
                static.copy_(x)
        graph.replay()
        return _clone_output(static_output)

    def _capture(self, model, inputs, key):
        device = next(x for x in inputs if isinstance(x, torch.Tensor)).device
        static_inputs = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
        with torch.cuda.device(device), torch.no_grad():
            warm = torch.cuda.Stream(device)
            warm.wait_stream(torch.cuda.current_stream(device))
            with torch.cuda.stream(warm):  # compile, autotune and create handles outside the capture
                for _ in range(2):
                    model._lego_run(*static_inputs)
            torch.cuda.current_stream(device).wait_stream(warm)
            torch.cuda.synchronize(device)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, stream=torch.cuda.Stream(device)):
                static_output = model._lego_run(*static_inputs)
            torch.cuda.synchronize(device)
        return key, graph, static_inputs, static_output


def _nhwc_slots(model) -> list:
    """(module, parameter name) of every 4-D weight of a 2-D (transposed)
    convolution in ``model``: the tensors a channels-last forward reads in
    NHWC order."""
    convs = (torch.nn.Conv2d, torch.nn.ConvTranspose2d)
    return [(m, "weight") for m in model.modules()
            if isinstance(m, convs) and isinstance(m._parameters.get("weight"), torch.Tensor) and m._parameters["weight"].dim() == 4]


class ChannelsLastWeights(_Cache):
    """Channels-last (NHWC) copies of a model's 2-D convolution weights,
    swapped in for the length of one forward (:meth:`applied`).

    The copies are made again when anything they were made from changes:
    :data:`GENERATION` (a Parameter assigned, ``.to()``), the device, or a
    weight's ``_version`` (an in-place update: ``load_state_dict``'s copy, an
    optimizer step, ``weight.mul_()``), so a forward never reads stale
    weights.  :meth:`signature` is that key, which a captured CUDA graph
    (reading the copies' memory) is keyed on too.  Holds no reference to the
    model.  Costs one copy of the convolution weights in memory.
    """

    def __init__(self):
        self._key = None
        self._slots = ()  # (module, name) pairs, listed once per GENERATION
        self._slots_key = None
        self._copies = ()

    def _weights(self, model) -> list:
        if self._slots_key != GENERATION[0]:
            self._slots = tuple(_nhwc_slots(model))
            self._slots_key = GENERATION[0]
        return [m._parameters[name] for m, name in self._slots]

    def signature(self, model) -> tuple:
        """What the copies depend on: generation, devices, dtypes and in-place versions of the weights."""
        return (GENERATION[0],) + tuple((w.device, w.dtype, w._version) for w in self._weights(model))

    def applied(self, model):
        """A context manager: inside it, every convolution of ``model`` reads
        its weight's channels-last copy (its own Parameter is restored on exit,
        also on an exception)."""
        return _Swapped(self, model)


class _Swapped:
    def __init__(self, cache: ChannelsLastWeights, model):
        self.cache, self.model = cache, model

    def __enter__(self):
        cache = self.cache
        key = cache.signature(self.model)
        if key != cache._key:
            cache._copies = ()  # free the old copies before making new ones
            cache._copies = tuple(w.detach().contiguous(memory_format=torch.channels_last) for w in cache._weights(self.model))
            cache._key = key
        self.saved = [m._parameters[name] for m, name in cache._slots]
        for (m, name), copy in zip(cache._slots, cache._copies):
            m._parameters[name] = copy
        return self

    def __exit__(self, *exc):
        for (m, name), original in zip(self.cache._slots, self.saved):
            m._parameters[name] = original
        return False


def channels_last_forward(model, forward, inputs, output_strides=None):
    """``forward(*inputs)`` (the user's own forward) run in channels-last
    memory order: 4-D inputs converted to NHWC and every 2-D convolution
    reading an NHWC copy of its weight (:class:`ChannelsLastWeights`), so
    cuDNN runs its NHWC kernels; the output is returned in eager's layout
    (``output_strides``, recorded when the model was optimized; else a 4-D
    channels-last output is made contiguous).  The same values as eager up to
    the convolution algorithm's rounding (the launch stage checks it).

    Runs ``forward`` unchanged (eager exactly) in train mode anywhere in the
    model or when gradients are wanted: the copies carry no autograd link to
    the user's Parameters."""
    if model._lego_bound.training(model) or (torch.is_grad_enabled() and (
            any(isinstance(x, torch.Tensor) and x.requires_grad for x in inputs) or any(p.requires_grad for p in model.parameters()))):
        return forward(*inputs)
    with model._lego_nhwc.applied(model):
        out = forward(*[to_channels_last(x) for x in inputs])
    if isinstance(out, torch.Tensor):
        if output_strides is not None and len(output_strides) == out.dim():
            return with_strides(out, output_strides)
        if out.dim() == 4 and not out.is_contiguous():
            return out.contiguous()
    return out
