"""What a candidate ran during one call: a self-contained trace for the judge.

The verifier (``lego_core.judge.verify``) decides whether a candidate is right; this
module only records what the candidate *did* while it was called, as plain
data, so that the same context manager can run in whichever process calls the
candidate (in the judge's own process today; in a separate executor process,
which then returns the summary dict with the outputs).  It needs only the
standard library, torch and triton.

usage::

    with CallTrace() as trace:
        outputs = launch(*inputs, out=out)
    summary = trace.summary()   # a dict of plain data, see CallTrace.summary

What it records:

* every ATen op dispatched on the calling thread (a ``TorchDispatchMode``),
  by name and count: host code that computes with PyTorch shows up here
  whatever Python spelling it used (an alias, ``getattr``, a module
  ``__dict__``, a decomposition such as ``var_mean`` or ``clamp``);
* Triton kernel launches (``JITFunction.run`` on a GPU, plus triton 3.x's
  ``knobs.runtime.launch_enter_hook`` for launches that bypass it;
  ``GridExecutor`` under ``TRITON_INTERPRET=1``), the kernels' names, and
  launches on a CUDA stream other than the one current when the trace began;
* every ``tl.dot``: per kernel, the dtypes of its two operands, of its
  accumulator (the result) and its input precision (:func:`dot_record`; the
  interpreter's ``create_dot`` sees the resolved values; on a GPU the TTIR
  of the kernel ``JITFunction.run`` compiled says them, :func:`ttir_dots`;
  a launch that bypasses ``run``, seen only by the launch hook, is not
  read), and the kernels with a ``tl.dot`` of fp32 operands in TF32 among
  them; the verifier judges them against the problem's dtype
  (``verify_policy.dot_problem``);
* global torch state (:func:`torch_state`): flags, default dtype and device,
  grad mode, RNG states; changes are reported and undone on exit;
* files opened for writing and processes started on the calling thread (a
  ``sys.audit`` hook, installed once and idle outside a trace), except
  Triton's own compiler work inside a launch (its cache and temporary files).

It is a tripwire, not a sandbox: code in the same process can always undo a
trace (``_disable_current_modes``, another thread, ctypes).  The static
check (``verify.calls_back_into_reference``) rejects those spellings, and
the separate executor process keeps such code away from the reference.
A trace patches process-wide hooks: one trace at a time (the search's lane).
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import re
import sys
import threading

import torch
# The first call of a dispatch mode's ``__torch_dispatch__`` imports
# torch._dynamo (torch wraps it in ``torch._disable_dynamo``): about 1.5 s of
# CPU.  Imported here, with this module, so that the processes forked after it
# was imported (every candidate executor and composed-model process, forked
# from the fork server, which imports lego_core.judge.verify) do not each pay it at
# their first trace (:func:`_warm_up`).  It does not initialise CUDA.
import torch._dynamo  # noqa: F401
from torch.utils._python_dispatch import TorchDispatchMode

# --------------------------------------------------------------------------
# Global torch state
# --------------------------------------------------------------------------

from lego_core.load.torch_settings import FLAGS as _FLAGS, apply, read_flags  # noqa: E402 - the global settings a candidate must leave alone


def _cuda_ready() -> bool:
    return torch.cuda.is_available() and torch.cuda.is_initialized()


def _rng_states() -> dict:
    """The RNG states (tensors), CPU and every initialised CUDA device."""
    states = {"cpu": torch.random.get_rng_state()}
    if _cuda_ready():
        states["cuda"] = torch.cuda.get_rng_state_all()
    return states


def _digest(states: dict) -> dict:
    out = {}
    for key, value in states.items():
        tensors = value if isinstance(value, (list, tuple)) else [value]
        h = hashlib.sha1()
        for t in tensors:
            h.update(t.numpy().tobytes())
        out[f"RNG state ({key})"] = h.hexdigest()[:16]
    return out


def torch_state() -> dict:
    """Global torch settings as plain data (name -> value, ``torch_settings.read_flags``), RNG states as digests."""
    state = read_flags()
    state.update(_digest(_rng_states()))
    return state


def state_changes(before: dict, after: dict) -> dict:
    """``{name: [before, after]}`` for every setting that differs."""
    return {k: [_plain(before.get(k)), _plain(after.get(k))] for k in sorted(set(before) | set(after)) if before.get(k) != after.get(k)}


def _plain(value):
    return list(value) if isinstance(value, tuple) else value


def _restore(before: dict, rng: dict) -> None:
    """Put back the settings of a :func:`torch_state` snapshot and the RNG states."""
    now = torch_state()
    apply({name: before[name] for name in _FLAGS if name in before and now.get(name) != before[name]})
    torch.random.set_rng_state(rng["cpu"])
    if "cuda" in rng and _cuda_ready():
        torch.cuda.set_rng_state_all(rng["cuda"])


# --------------------------------------------------------------------------
# ATen ops
# --------------------------------------------------------------------------


class _OpRecorder(TorchDispatchMode):
    """Counts every ATen op (``aten._softmax.default``) dispatched while active."""

    def __init__(self, counts: dict):
        super().__init__()
        self.counts = counts

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = str(func)  # "aten._softmax.default"
        self.counts[name] = self.counts.get(name, 0) + 1
        return func(*args, **(kwargs or {}))


# --------------------------------------------------------------------------
# Triton launches
# --------------------------------------------------------------------------

# Dtype names a dot record uses: torch's spelling (``float16``), from Triton's
# (``tl.float16.name == "fp16"``) and from MLIR's element types in TTIR (``f16``).
_TL_NAMES = {
    "fp64": "float64", "fp32": "float32", "fp16": "float16", "bf16": "bfloat16",
    "fp8e4nv": "float8_e4m3fn", "fp8e5": "float8_e5m2", "fp8e4b8": "float8_e4m3fnuz",
    "fp8e5b16": "float8_e5m2fnuz", "fp8e4b15": "float8_e4b15",
    "int8": "int8", "uint8": "uint8", "int16": "int16", "int32": "int32", "int64": "int64",
}  # fmt: skip
_MLIR_NAMES = {
    "f64": "float64", "f32": "float32", "f16": "float16", "bf16": "bfloat16", "tf32": "tfloat32",
    "f8E4M3FN": "float8_e4m3fn", "f8E5M2": "float8_e5m2", "f8E4M3FNUZ": "float8_e4m3fnuz",
    "f8E5M2FNUZ": "float8_e5m2fnuz", "f8E4M3B11FNUZ": "float8_e4b15",
    "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64", "ui8": "uint8",
}  # fmt: skip
# Input precisions by name (TTIR's custom form, the interpreter's enum) and by
# number (TTIR's generic form ``inputPrecision = 0 : i32``: triton's InputPrecision enum).
_PRECISIONS = {"tf32": "tf32", "tf32x3": "tf32x3", "ieee": "ieee", "bf16x3": "bf16x3", "bf16x6": "bf16x6",
               "0": "tf32", "1": "tf32x3", "2": "ieee", "3": "bf16x3", "4": "bf16x6"}
_PRECISION = re.compile(r"inputPrecision\s*=\s*(\w+)")
_TENSOR = re.compile(r"tensor<(?:\d+x)+(\w+)")  # the element type of a ranked tensor type (an encoding may follow)
_SCALED_FORMAT = re.compile(r"\b(lhs|rhs)\s*=\s*(\w+)")
MAX_DOT_RECORDS = 32  # distinct (kernel, dtypes, precision) records a summary keeps


def dot_record(kernel: str, a: str, b: str, acc: str, precision: str, scaled: bool = False) -> dict:
    """One ``tl.dot`` as plain data: ``kernel`` (the Triton function's name),
    ``a`` / ``b`` (operand dtypes), ``acc`` (the accumulator's and result's
    dtype), all in torch's spelling (``float16``, ``bfloat16``, ``float32``,
    ``float8_e4m3fn``, ``int8``; ``?`` when unknown), and ``precision``
    (``ieee``, ``tf32``, ``tf32x3``, ``bf16x3``, ``bf16x6``; TTIR leaves IEEE
    unprinted).  ``scaled``: a ``tl.dot_scaled`` (microscaled fp8/fp4
    operands; ``a`` / ``b`` are then their formats, ``e2m1``, ``e4m3``...)."""
    record = {"kernel": kernel, "a": a, "b": b, "acc": acc, "precision": precision}
    if scaled:
        record["scaled"] = True
    return record


def _element_type(element: str) -> str:
    """An MLIR element type (``f16``, ``bf16``, ``f8E4M3FN``, ``i8``) in torch's spelling."""
    return _MLIR_NAMES.get(element, element)


def ttir_dots(text: str, kernel: str = "kernel") -> list[dict]:
    """The ``tl.dot`` records (:func:`dot_record`) of a kernel's TTIR text.

    Reads each ``tt.dot`` line, in the custom form::

        %c = tt.dot %a, %b, %acc, inputPrecision = tf32 : tensor<16x32xf32> * tensor<32x32xf32> -> tensor<16x32xf32>

    or the generic one (``"tt.dot"(%a, %b, %acc) <{inputPrecision = 0 : i32}> :
    (tensor<...>, tensor<...>, tensor<...>) -> tensor<...>``): the first two
    ``tensor<...>`` types are the operands, the last one the result (the
    accumulator's type); a missing ``inputPrecision`` is IEEE (the printer
    leaves the default out).  ``tt.dot_scaled`` lines are recorded with their
    ``lhs`` / ``rhs`` formats and ``scaled``.  Lines it cannot read are
    skipped; never raises."""
    found: list[dict] = []
    for line in (text if isinstance(text, str) else "").splitlines():
        scaled = "tt.dot_scaled" in line
        if not scaled and not re.search(r'(?:^|[\s"])tt\.dot["\s(]', line):
            continue
        body = line.split(" loc(", 1)[0]
        types = _TENSOR.findall(body.split(" : ", 1)[-1] if " : " in body else body)
        if len(types) < 3:
            continue
        a, b, acc = _element_type(types[0]), _element_type(types[1]), _element_type(types[-1])
        if scaled:
            formats = dict(_SCALED_FORMAT.findall(body))
            a, b = formats.get("lhs", a), formats.get("rhs", b)
            found.append(dot_record(kernel, a, b, acc, "scaled", scaled=True))
            continue
        precision = _PRECISION.search(body)
        found.append(dot_record(kernel, a, b, acc, _PRECISIONS.get(precision.group(1), precision.group(1)) if precision else "ieee"))
    return found


_TTIR_DOTS: dict = {}  # a compiled kernel's TTIR read once: (kernel name, its hash) -> dot records


def _kernel_dots(kernel, name: str) -> list[dict]:
    """The dot records of a compiled kernel (``CompiledKernel.asm["ttir"]``);
    ``[]`` when it kept no TTIR."""
    key = (name, getattr(kernel, "hash", None) or id(kernel))
    if key in _TTIR_DOTS:
        return _TTIR_DOTS[key]
    asm = getattr(kernel, "asm", None)
    try:
        text = asm["ttir"] if asm is not None else ""
    except Exception:  # noqa: BLE001 - no TTIR kept: nothing to say
        text = ""
    dots = ttir_dots(text, name)
    if getattr(kernel, "hash", None) is not None and len(_TTIR_DOTS) < 4096:
        _TTIR_DOTS[key] = dots
    return dots


def is_tf32(record: dict) -> bool:
    """Whether a dot record multiplies fp32 operands in TF32 (10 mantissa bits)."""
    return record.get("precision") == "tf32" and record.get("a") == "float32" and record.get("b") == "float32"


class _TritonPatches:
    """Counts launches while installed: patches ``JITFunction.run`` (GPU),
    ``GridExecutor.__call__`` and ``InterpreterBuilder.create_dot``
    (interpreter), and adds a triton 3.x launch-enter hook."""

    def __init__(self, trace: "CallTrace"):
        self.trace = trace
        self.undo: list = []

    def install(self) -> None:
        self._patch_torch_files()
        try:
            import triton  # noqa: F401
        except ImportError:
            return
        self._patch_jit()
        self._patch_interpreter()
        self._add_launch_hook()

    def remove(self) -> None:
        while self.undo:
            self.undo.pop()()

    def _patch(self, owner, name: str, wrapper_factory) -> None:
        original = owner.__dict__.get(name)
        if original is None:
            return
        setattr(owner, name, wrapper_factory(original))
        self.undo.append(lambda: setattr(owner, name, original))

    def _patch_torch_files(self) -> None:
        """``torch.save`` and ``torch.from_file`` write or map files from C++,
        where Python's audit hook sees no ``open``: each call during the trace
        is recorded as a write (put back before the trace compares torch's
        functions, so the wrapper is never taken for a patch)."""
        trace = self.trace

        def factory(original, what):
            def recorded(*args, **kwargs):
                if threading.get_ident() == trace._thread and not trace._launcher_depth:
                    target = args[1] if what == "torch.save" and len(args) > 1 else (args[0] if args else kwargs.get("f", kwargs.get("filename", "")))
                    trace.writes.append(f"{what} {target if isinstance(target, (str, bytes, os.PathLike)) else type(target).__name__}")
                return original(*args, **kwargs)

            return recorded

        for what in ("save", "from_file"):
            original = torch.__dict__.get(what)
            if original is not None:
                setattr(torch, what, factory(original, f"torch.{what}"))
                self.undo.append(lambda what=what, original=original: setattr(torch, what, original))

    def _patch_jit(self) -> None:
        from triton.runtime import jit

        trace = self.trace

        def factory(original):
            def run(fn_self, *args, grid, warmup, **kwargs):
                if warmup:
                    return original(fn_self, *args, grid=grid, warmup=warmup, **kwargs)
                trace._launch(getattr(fn_self, "__name__", "kernel"), hooked=False)
                with trace._in_launcher():
                    kernel = original(fn_self, *args, grid=grid, warmup=warmup, **kwargs)
                for record in _kernel_dots(kernel, getattr(fn_self, "__name__", "kernel")):
                    trace._dot(record)
                return kernel

            return run

        self._patch(jit.JITFunction, "run", factory)

    def _patch_interpreter(self) -> None:
        try:
            from triton.runtime import interpreter
        except ImportError:
            return
        trace = self.trace

        def call_factory(original):
            def call(executor, *args, **kwargs):
                name = getattr(executor.fn, "__name__", "kernel")
                trace._launch(name, hooked=False)
                trace._kernel_stack.append(name)
                try:
                    with trace._in_launcher():
                        return original(executor, *args, **kwargs)
                finally:
                    trace._kernel_stack.pop()

            return call

        def dot_factory(original):
            def create_dot(builder, a, b, d, input_precision, max_num_imprecise_acc):
                trace._dot(_interp_dot(trace._kernel_stack[-1] if trace._kernel_stack else "kernel", a, b, d, input_precision))
                return original(builder, a, b, d, input_precision, max_num_imprecise_acc)

            return create_dot

        self._patch(interpreter.GridExecutor, "__call__", call_factory)
        self._patch(interpreter.InterpreterBuilder, "create_dot", dot_factory)

    def _add_launch_hook(self) -> None:
        try:
            from triton import knobs
        except ImportError:
            return
        chain = getattr(knobs.runtime, "launch_enter_hook", None)
        if not hasattr(chain, "add"):
            return  # triton before 3.4: launches are counted through JITFunction.run only
        trace = self.trace

        def hook(metadata) -> None:
            data = metadata.data if hasattr(metadata, "data") else (metadata or {})
            trace._hooked_launch(data.get("name", "kernel"), data.get("stream"))

        chain.add(hook)
        self.undo.append(lambda: chain.remove(hook))
        trace.hook_installed = True


def _tl_name(dtype) -> str:
    """Torch's spelling of a Triton dtype (a scalar type, or a block type's element type)."""
    scalar = getattr(dtype, "scalar", dtype)
    name = getattr(scalar, "name", None) or str(scalar)
    return _TL_NAMES.get(name, name)


def _interp_dot(kernel: str, a, b, d, input_precision) -> dict:
    """The interpreter's ``create_dot(a, b, d, input_precision, ...)`` as a
    :func:`dot_record`: ``a`` / ``b`` / ``d`` are its ``TensorHandle`` operands
    and accumulator (``.dtype`` a Triton dtype), ``input_precision`` triton's
    ``ir.INPUT_PRECISION``."""
    try:
        precision = getattr(input_precision, "name", None) or str(input_precision)
        precision = _PRECISIONS.get(str(precision).lower(), str(precision).lower())
    except Exception:  # noqa: BLE001
        precision = "?"
    names = []
    for handle in (a, b, d):
        try:
            names.append(_tl_name(handle.dtype))
        except Exception:  # noqa: BLE001
            names.append("?")
    return dot_record(kernel, names[0], names[1], names[2], precision)


# --------------------------------------------------------------------------
# Files and processes
# --------------------------------------------------------------------------

_ACTIVE: "CallTrace | None" = None
_HOOK_LOCK = threading.Lock()
_HOOK_INSTALLED = False
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC
_BYTECODE = re.compile(r"__pycache__[/\\][^/\\]+\.pyc(\.\d+)?$")  # Python caching an imported module
_PATH_EVENTS = {"os.remove", "os.rename", "os.rmdir", "os.mkdir", "os.chmod", "os.truncate", "shutil.rmtree", "shutil.copyfile", "shutil.move"}
_PROCESS_EVENTS = {"os.system", "subprocess.Popen", "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "os.forkpty", "ctypes.dlopen", "socket.connect"}


def _audit(event: str, args: tuple) -> None:
    trace = _ACTIVE
    if trace is None or trace._launcher_depth or threading.get_ident() != trace._thread:
        # no trace; Triton compiling inside a launch (its cache, ptxas temporaries); or
        # another thread of the judge's process (agents calling an LLM, the event sink)
        return
    if event == "open":
        path, mode, flags = (tuple(args) + (None, None, None))[:3]
        writes = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (mode is None and isinstance(flags, int) and flags & _WRITE_FLAGS)
        if writes and not isinstance(path, int):
            name = os.fsdecode(path) if isinstance(path, bytes) else str(path)
            if name != os.devnull and not _BYTECODE.search(name):
                trace.writes.append(name)
    elif event in _PATH_EVENTS:
        trace.writes.append(f"{event} {args[0] if args else ''}")
    elif event in _PROCESS_EVENTS:
        trace.processes.append(event)


def _install_audit_hook() -> None:
    global _HOOK_INSTALLED
    with _HOOK_LOCK:
        if not _HOOK_INSTALLED:
            sys.addaudithook(_audit)
            _HOOK_INSTALLED = True


# --------------------------------------------------------------------------
# The trace
# --------------------------------------------------------------------------


class CallTrace:
    """Context manager around one candidate call; see the module docstring.

    Not re-entrant and not thread-safe: one trace at a time per process."""

    def __init__(self, record_ops: bool = True):
        self.record_ops = record_ops
        self.replaced: list[str] = []
        self.ops: dict[str, int] = {}
        self.launches = 0
        self.hooked_launches = 0
        self.hook_installed = False
        self.kernels: list[str] = []
        self.foreign_streams = 0
        self.tf32_dots: set[str] = set()
        self.dots: dict[tuple, dict] = {}
        self.writes: list[str] = []
        self.processes: list[str] = []
        self.changes: dict = {}
        self._launcher_depth = 0
        self._kernel_stack: list[str] = []
        self._stream = None
        self._thread = threading.get_ident()
        self._patches = _TritonPatches(self)
        self._mode = None

    def __enter__(self) -> "CallTrace":
        global _ACTIVE
        if _ACTIVE is not None:
            raise RuntimeError("a CallTrace is already active in this process")
        _warm_up()
        self._api = api_fingerprint()
        self._before = torch_state()
        self._rng = _rng_states()
        if _cuda_ready():
            self._stream = torch.cuda.current_stream().cuda_stream
        self._patches.install()
        _ACTIVE = self
        if self.record_ops:
            self._mode = _OpRecorder(self.ops)
            self._mode.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        global _ACTIVE
        try:
            if self._mode is not None:
                self._mode.__exit__(*exc)
        finally:
            _ACTIVE = None
            self._patches.remove()
            self.replaced = restore_api(self._api)
            after = torch_state()
            self.changes = state_changes(self._before, after)
            if self.changes:
                _restore(self._before, self._rng)  # leave the judge's process as it was

    # called by the patches -------------------------------------------------
    def _launch(self, name: str, hooked: bool) -> None:
        self.launches += 1
        self.kernels.append(name)
        if self._stream is not None and torch.cuda.current_stream().cuda_stream != self._stream:
            self.foreign_streams += 1

    def _hooked_launch(self, name: str, stream) -> None:
        self.hooked_launches += 1
        if stream is not None and self._stream is not None and int(stream) != int(self._stream):
            self.foreign_streams += 1

    def _dot(self, record: dict) -> None:
        key = tuple(sorted(record.items()))
        if key not in self.dots and len(self.dots) < MAX_DOT_RECORDS:
            self.dots[key] = record
        if is_tf32(record):
            self.tf32_dots.add(record["kernel"])

    @contextlib.contextmanager
    def _in_launcher(self):
        self._launcher_depth += 1
        try:
            yield
        finally:
            self._launcher_depth -= 1

    # the result ------------------------------------------------------------
    def summary(self) -> dict:
        """Plain data (JSON-able): ``ops`` {ATen op name: count}, ``launches``
        (Triton kernel launches; on a GPU with triton >= 3.4 the larger of the
        ``JITFunction.run`` count and the launch-hook count), ``kernels``
        (names, in launch order, at most 32), ``foreign_streams`` (launches on
        another CUDA stream than the caller's current one), ``dots`` (every
        distinct ``tl.dot`` as a :func:`dot_record`: kernel, operand and
        accumulator dtypes, input precision; at most :data:`MAX_DOT_RECORDS`),
        ``tf32_dots`` (kernels with an fp32 ``tl.dot`` in TF32), ``state_changes`` ({name:
        [before, after]}), ``writes`` (files opened for writing, removed or
        renamed), ``processes`` (processes started, libraries loaded, sockets
        connected), ``replaced`` (torch / lego_core functions rebound during
        the call, see :func:`api_fingerprint`; put back on exit)."""
        return {
            "ops": dict(self.ops),
            "launches": max(self.launches, self.hooked_launches),
            "kernels": self.kernels[:32],
            "foreign_streams": self.foreign_streams,
            "dots": list(self.dots.values()),
            "tf32_dots": sorted(self.tf32_dots),
            "state_changes": dict(self.changes),
            "writes": list(self.writes[:16]),
            "processes": list(self.processes[:16]),
            "replaced": list(self.replaced[:16]),
        }


@contextlib.contextmanager
def import_guard():
    """Around importing a candidate's file: yields a dict that, on exit, holds
    the :meth:`CallTrace.summary` of the import (ops are not recorded: a
    module may build constants at import).  Global state and replaced
    functions are put back on exit."""
    result: dict = {}
    with CallTrace(record_ops=False) as trace:
        yield result
    result.update(trace.summary())


_WARM = False


def _warm_up() -> None:
    """Install the audit hook, and enter a dispatch mode once: the first one
    imports parts of torch (and creates their cache folders), which must
    not count as the first candidate's doing."""
    global _WARM
    _install_audit_hook()
    if not _WARM:
        with _OpRecorder({}):
            torch.empty(0)
        _WARM = True


# Namespaces whose functions the reference or the verifier call: a candidate
# that rebinds one at import changes what the judge computes.
def _namespaces() -> list[tuple[str, object]]:
    spaces = [("torch", torch), ("torch.nn.functional", torch.nn.functional), ("torch.Tensor", torch.Tensor),
              ("torch._C.TensorBase", torch._C.TensorBase), ("torch.linalg", torch.linalg), ("torch.special", torch.special),
              ("torch._ops.OpOverload", torch._ops.OpOverload), ("torch._ops.OpOverloadPacket", torch._ops.OpOverloadPacket),
              ("torch.fx.GraphModule", torch.fx.GraphModule), ("torch.nn.Module", torch.nn.Module)]
    for name, module in list(sys.modules.items()):
        if name.startswith("lego_core") and module is not None and name != __name__:
            spaces.append((name, module))
    for packet_name, packet in list(vars(torch.ops.aten).items()):
        if isinstance(packet, torch._ops.OpOverloadPacket):
            spaces.append((f"torch.ops.aten.{packet_name}", packet))
    return spaces


def api_fingerprint() -> dict:
    """``{namespace: (owner, {attribute: object})}`` of every callable attribute of
    the namespaces the reference and the verifier use (``torch``,
    ``torch.nn.functional``, ``torch.Tensor``, the materialised
    ``torch.ops.aten`` packets and their overloads, ``lego_core`` modules)."""
    prints = {}
    for space, owner in _namespaces():
        try:
            items = dict(vars(owner))
        except TypeError:
            continue
        prints[space] = (owner, {k: v for k, v in items.items() if _is_function(v)})
    return prints


def _is_function(value) -> bool:
    return callable(value) or isinstance(value, (staticmethod, classmethod, property))


def restore_api(before: dict) -> list[str]:
    """Put back every function of ``before`` (:func:`api_fingerprint`) that was
    rebound or deleted, and remove functions added to a class or an ATen
    packet (where they shadow the real method or overload); their names."""
    replaced = []
    for space, (owner, functions) in before.items():
        current = dict(vars(owner))
        for attr, value in functions.items():
            if current.get(attr, _MISSING) is not value:
                replaced.append(f"{space}.{attr}")
                with contextlib.suppress(Exception):
                    setattr(owner, attr, value)
        if isinstance(owner, type) or isinstance(owner, torch._ops.OpOverloadPacket):
            for attr, value in current.items():
                if attr in functions or not _is_function(value) or isinstance(value, torch._ops.OpOverload):
                    continue
                replaced.append(f"{space}.{attr}")
                with contextlib.suppress(Exception):
                    delattr(owner, attr)
    return replaced


_MISSING = object()


# ----------------------------------------------------------- state between calls

# how deep module_state_digest follows containers and objects, and how many
# values it reads in all (a kernel file's state is a few dicts and lists)
STATE_DEPTH = 8
STATE_MAX_VALUES = 100_000


def module_state_digest(module, extra=()) -> str:
    """A fingerprint of the state a kernel file could carry from one call to
    the next: its module's globals and what they hold, followed through
    lists, tuples, dicts, sets, deques, the attributes of instances and
    classes the file defines, its functions' default arguments, keyword
    defaults, closure cells and function attributes, generators' locals and
    position, ``functools.partial`` arguments, iterators such as
    ``itertools.count`` (by ``repr``), and the contents of tensors (shape,
    dtype, strides, address and bits).  ``extra``: the call's input and
    output tensors; the executor hands the kernel the same objects call
    after call, so one kept by the file counts by identity, not by the
    values the verifier refilled it with, and a Python attribute set on one
    is state too.  Modules, Triton's objects (their compile caches fill on
    the first launch), classes and functions from elsewhere and code are
    atoms (their identity, not their contents).  Returns a hex string; two
    calls that leave the same state give the same string.

    The verifier calls a candidate twice on the same, unrefilled inputs and
    requires the same digest after both (``verify.state_kept``): a kernel
    that counts its calls changes its state on every call, so it is caught
    whatever number of calls it is right for, while a cache keyed by what
    it is given (a launch configuration per shape, a mask checked once per
    tensor version) stays as it was.  Not seen: state parked outside the
    file's reach (another module's namespace, C-level caches such as
    ``functools.lru_cache``'s), which the static check keeps closed, and a
    counter of *distinct* inputs, which a repeated call does not move."""
    import collections
    import functools
    import inspect
    import types

    digest = hashlib.blake2b(digest_size=16)
    seen: dict[int, int] = {}
    alive: list = []
    budget = [STATE_MAX_VALUES]
    own = getattr(module, "__name__", None)
    call_tensors = {id(x): k for k, x in enumerate(extra) if isinstance(x, torch.Tensor)}

    def feed(*parts) -> None:
        digest.update(repr(parts).encode())

    def walk(value, depth: int) -> None:
        budget[0] -= 1
        if budget[0] < 0 or depth > STATE_DEPTH:
            feed("deep", type(value).__name__)
            return
        if value is None or isinstance(value, (bool, int, float, complex, str, bytes, torch.dtype, torch.device, range, slice)):
            feed(type(value).__name__, value)
            return
        key = id(value)
        if key in seen:  # a cycle or a shared object: where it was first met
            feed("seen", seen[key])
            return
        seen[key] = len(seen)
        alive.append(value)  # a temporary (a dict of attributes) must not free its id for another object
        if key in call_tensors:  # the verifier's buffers, refilled between calls: the same object is the same state
            feed("call tensor", call_tensors[key])
            walk_attrs(value, depth)
            return
        if isinstance(value, torch.Tensor):
            feed("tensor", tuple(value.shape), value.dtype, value.stride(), value.data_ptr() if value.numel() else 0, _tensor_bits(value))
            walk_attrs(value, depth)
            return
        if isinstance(value, (types.ModuleType, types.CodeType, types.BuiltinFunctionType)) or _foreign(value, own):
            feed("atom", type(value).__name__, key)
            return
        if isinstance(value, (list, tuple, collections.deque)):
            feed(type(value).__name__, len(value))
            for item in list(value):
                walk(item, depth + 1)
            return
        if isinstance(value, (set, frozenset)):
            feed(type(value).__name__, len(value))
            for item in sorted(value, key=repr):
                walk(item, depth + 1)
            return
        if isinstance(value, dict):
            feed(type(value).__name__, len(value))
            for k, v in list(value.items()):
                walk(k, depth + 1)
                walk(v, depth + 1)
            return
        if isinstance(value, types.FunctionType):
            feed("function", value.__qualname__)
            walk(value.__defaults__, depth + 1)
            walk(value.__kwdefaults__, depth + 1)
            walk([cell.cell_contents for cell in value.__closure__ or () if _cell_full(cell)], depth + 1)
            walk(dict(vars(value)), depth + 1)
            return
        if isinstance(value, types.MethodType):
            walk(value.__self__, depth + 1)
            walk(value.__func__, depth + 1)
            return
        if isinstance(value, functools.partial):
            walk((value.func, value.args, value.keywords), depth + 1)
            return
        if isinstance(value, types.GeneratorType):
            feed("generator", inspect.getgeneratorstate(value), value.gi_frame.f_lasti if value.gi_frame else -1)
            walk(inspect.getgeneratorlocals(value), depth + 1)
            return
        if isinstance(value, type):
            feed("class", value.__qualname__)
            walk({k: v for k, v in vars(value).items() if not k.startswith("__")}, depth + 1)
            return
        feed("object", type(value).__qualname__, _state_repr(value))
        walk_attrs(value, depth)

    def walk_attrs(value, depth: int) -> None:
        attrs = getattr(value, "__dict__", None)
        if isinstance(attrs, dict):
            walk(dict(attrs), depth + 1)
        slots = [s for c in type(value).__mro__ for s in _slot_names(c)]
        for name in slots:
            try:
                walk(object.__getattribute__(value, name), depth + 1)
            except AttributeError:
                feed("unset", name)

    walk({k: v for k, v in vars(module).items() if not (k.startswith("__") and k.endswith("__"))}, 0)
    for value in extra:
        if isinstance(value, torch.Tensor) and id(value) not in seen:
            seen[id(value)] = len(seen)
            walk_attrs(value, 0)
    return digest.hexdigest()


def _tensor_bits(t: torch.Tensor) -> tuple:
    """Sums of a tensor's bit patterns (plain and position-weighted), as
    ``verify.bits_digest`` computes them, without the piecewise reading
    (a kernel file's own tensors are small)."""
    t = t.detach()
    if t.numel() == 0:
        return (0, 0)
    if t.is_complex():
        t = torch.view_as_real(t)
    bits = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}.get(t.element_size())
    flat = t.contiguous().reshape(-1)
    if bits is not None and flat.dtype != bits:
        flat = flat.view(bits)
    values = flat.to(torch.int64)
    weights = torch.arange(1, values.numel() + 1, device=values.device, dtype=torch.int64)
    return int(values.sum()), int((values * weights).sum())


def _foreign(value, own: str | None) -> bool:
    """Objects whose insides are not the kernel file's state: Triton's (a
    ``JITFunction`` fills its compile cache on its first launch) and classes
    or functions defined in another module (a ``torch`` function, ``math.sqrt``)."""
    import types

    kind = type(value)
    module = getattr(kind, "__module__", "") or ""
    if module.split(".")[0] == "triton":
        return True
    if isinstance(value, (type, types.FunctionType)):
        return getattr(value, "__module__", None) != own
    return False


def _slot_names(cls) -> list[str]:
    slots = getattr(cls, "__slots__", ())
    return [slots] if isinstance(slots, str) else [s for s in slots if isinstance(s, str)]


def _cell_full(cell) -> bool:
    try:
        cell.cell_contents
    except ValueError:
        return False
    return True


def _state_repr(value) -> str:
    """``repr`` of an object whose type LEGO does not open (``itertools.count(5)``
    shows its position), without the object's address, which says nothing
    of its state; "" when ``repr`` fails."""
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - a repr that raises is no state we can read
        return ""
    return re.sub(r" at 0x[0-9a-fA-F]+", "", text)[:200]
