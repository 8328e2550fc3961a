"""The executor's side: a process that imports candidate files and runs them.

:func:`serve` is the process's main function (``lego_core.judge.process.executor``
forks it from multiprocessing's fork server, which ran :func:`preload`; with
no fork server it is spawned and preloads itself).  It applies the
sandbox's limits (``lego_core.runtime.sandbox``: no core dumps, capped open files,
no network where the OS allows), exits when the judge's process ends (a
lifeline pipe), takes a :class:`Snapshot` of the functions candidates share,
says it is ready and answers requests one at a time until its pipe closes.

Every reply is ``(seq, status, value)``: ``ok``; ``raised`` with the
exception's type name, first lines and traceback text; or ``tampered`` with
the names of the shared functions that no longer are what they were at
start (checked after every request that ran candidate code).  Tensors in
a reply stay referenced here until the next request arrives, so a CUDA
tensor is not freed before the judge has copied it (torch.multiprocessing,
"CUDA in multiprocessing": the producer keeps a shared tensor alive while
the consumer uses it).
"""
from __future__ import annotations

import os
import sys
import time
import traceback
import types
from pathlib import Path
from typing import Any

from lego_core.cost import costing
from lego_core.judge import verify  # noqa: F401 - not used here: imported first so that a candidate patching it shows
from lego_core.judge.inputs import load_module
from lego_core.judge.process import user_view, wire
from lego_core.judge.verify_trace import CallTrace, module_state_digest
from lego_core.load.torch_settings import apply as apply_torch_settings
from lego_core.runtime import gpu_lock, sandbox, sandbox_child
from lego_core.runtime.memory import LiveBytes
from lego_core.runtime.timing import time_cpu
from lego_core.runtime.triton_interpreter import skip_nested_repatching

# modules whose functions candidates share and could replace; lego modules
# are imported here first (a candidate that imports lego_core.judge.verify and
# patches it is then caught as a change, not as a new module)
WATCHED_MODULES = (
    "builtins",
    "math",
    "operator",
    "torch",
    "torch.nn.functional",
    "torch.linalg",
    "torch.special",
    "torch.fft",
    "torch.cuda",
    "torch.testing",
    "torch.multiprocessing.reductions",
    "triton",
    "triton.language",
    "triton.language.core",
    "triton.language.math",
    "triton.runtime.interpreter",
    "lego_core.judge.verify",
    "lego_core.cost.costing",
    "lego_core.runtime.timing",
    "lego_core.runtime.memory",
    "lego_core.judge.process.child",
    "lego_core.judge.process.wire",
)
_MISSING = object()


class Snapshot:
    """The identities of the watched modules' functions, classes and
    submodules, of ``torch.Tensor``'s and the op classes' attributes, and of
    the ``torch.ops.aten`` overloads already looked up, at executor start.
    :meth:`changed` names what no longer is the same object (``torch.softmax``,
    ``torch.Tensor.add_``, ``torch.ops.aten._softmax.default``, a module in
    ``sys.modules`` replaced).  It is a cheap check for accidents and plain
    monkey-patching, not a defence against code that sets out to hide: such
    code can restore what it changed before the check or patch this class."""

    def __init__(self) -> None:
        import torch

        self.modules: dict[str, types.ModuleType] = {}
        self.entries: list[tuple[str, dict, str, Any]] = []
        for name in WATCHED_MODULES:
            module = sys.modules.get(name)
            if module is None:
                continue
            self.modules[name] = module
            for attr, value in list(vars(module).items()):
                if not attr.startswith("__") and (callable(value) or isinstance(value, types.ModuleType)):
                    self.entries.append((f"{name}.{attr}", vars(module), attr, value))
        classes = [torch.Tensor, torch._C.TensorBase, torch._ops.OpOverload, torch._ops.OpOverloadPacket, torch.nn.Module]
        # every nn module class a model can hold (nn.Softmax.forward patched at a kernel's first
        # call turns every Softmax in the process to zeros): their own methods
        classes += sorted({v for v in vars(torch.nn).values() if isinstance(v, type) and issubclass(v, torch.nn.Module)} - {torch.nn.Module},
                          key=lambda c: f"{c.__module__}.{c.__qualname__}")
        for cls in classes:
            for attr, value in list(vars(cls).items()):
                if attr not in ("__doc__", "__dict__", "__weakref__", "__annotations__"):
                    self.entries.append((f"{cls.__module__}.{cls.__qualname__}.{attr}", vars(cls), attr, value))
        self.aten = dict(vars(torch.ops.aten))
        self._seen: tuple = ()
        self._remember_aten(torch)
        import threading

        self.threads = {t.ident for t in threading.enumerate()}  # threads after this point are the candidates'
        self._threading = threading

    def _remember_aten(self, torch) -> None:
        """The namespaces of ``torch.ops.aten`` as last checked (a fast path:
        when nothing there changed, nothing needs validating)."""
        packets = vars(torch.ops.aten)
        self._seen = (dict(packets), [(p, dict(vars(p))) for p in packets.values() if isinstance(p, torch._ops.OpOverloadPacket)])

    def changed(self) -> list[str]:
        """Names of watched objects replaced since the snapshot (empty: none)."""
        import torch

        names = [name for name, module in self.modules.items() if sys.modules.get(name) is not module]
        started = [t.name for t in self._threading.enumerate() if t.ident not in self.threads and t.is_alive() and not _sharer_thread(t)]
        if started:  # work on another thread is invisible to the call trace, and could change outputs later
            names.append(f"the process's threads (started {', '.join(started[:3])}, still running)")
        for name, namespace, attr, value in self.entries:
            now = namespace.get(attr, _MISSING)
            if now is not value and not (name.startswith("triton.language") and _interpreter_made(now)) and not _dynamo_made(name, now, value):
                names.append(name)
        packets, dicts = self._seen
        if vars(torch.ops.aten) != packets or any(vars(p) != d for p, d in dicts):
            aten = _aten_changes(torch, self.aten)
            if not aten:
                self._remember_aten(torch)  # overloads looked up since: genuine
            names += aten
        return names


def _sharer_thread(thread) -> bool:
    """Whether ``thread`` is multiprocessing's resource sharer (started the first
    time a CPU tensor's file descriptor goes back to the judge), not the candidate's."""
    target = getattr(thread, "_target", None)
    return getattr(target, "__qualname__", "") == "_ResourceSharer._serve" and getattr(target, "__module__", "") == "multiprocessing.resource_sharer"


def _interpreter_made(value: Any) -> bool:
    """Whether ``value`` is a wrapper Triton's interpreter put on ``triton.language``
    (``TRITON_INTERPRET=1``: it patches the language for each kernel it runs and
    does not undo what a call of a ``@triton.jit`` helper patched)."""
    if value is print:  # its static_print
        return True
    func = getattr(value, "func", value)  # functools.partial
    return getattr(func, "__module__", None) == "triton.runtime.interpreter"


def _dynamo_made(name: str, now: Any, before: Any) -> bool:
    """Whether ``now`` is the wrapper importing torch._dynamo puts around
    ``torch.manual_seed`` (torch imports it lazily, on the first call of many
    functions; this process does not import it up front: a second per start)."""
    return name == "torch.manual_seed" and getattr(now, "__wrapped__", None) is before


def _aten_changes(torch, before: dict) -> list[str]:
    """``torch.ops.aten`` packets and overloads that are not the genuine ones:
    a packet replaced, or an overload attribute that is not that op's overload."""
    names = []
    ops = torch._ops
    for name, packet in list(vars(torch.ops.aten).items()):
        if name.startswith("_") and name.startswith("__"):
            continue
        if name in before and before[name] is not packet:
            names.append(f"torch.ops.aten.{name}")
            continue
        if not isinstance(packet, ops.OpOverloadPacket):
            if name not in before and not name.startswith("_"):
                names.append(f"torch.ops.aten.{name}")
            continue
        if type(packet) is not ops.OpOverloadPacket or getattr(packet, "_qualified_op_name", "") != f"aten::{name}":
            names.append(f"torch.ops.aten.{name}")
            continue
        for attr, overload in list(vars(packet).items()):
            if attr.startswith("_") and attr != "_":
                continue
            if isinstance(overload, ops.OpOverload):
                if type(overload) is not ops.OpOverload or overload._overloadpacket is not packet or overload._overloadname != attr:
                    names.append(f"torch.ops.aten.{name}.{attr}")
            elif attr in ("default",) or attr in getattr(packet, "_overload_names", ()):
                names.append(f"torch.ops.aten.{name}.{attr}")
    return names


class State:
    """What the executor holds between requests."""

    def __init__(self) -> None:
        self.modules: dict[int, types.ModuleType] = {}
        self.next_handle = 1
        self.snapshot: Snapshot | None = None
        self.keep: Any = None  # the last reply's tensors, alive until the next request
        self.counter = None  # a lego_core.runtime.memory.LiveBytes while a CPU call is counted
        self.private = user_view.PrivateTensors()  # what candidates get instead of the judge's shared CPU tensors
        self.earlier: dict[int, user_view.EarlierOutputs] = {}  # per module handle: outputs of its last calls


def serve(conn, options: dict, handlers: dict | None = None) -> None:
    """The executor's main loop (runs in the executor process): answers the
    requests of :data:`OPS` and those of ``handlers`` (``{op: handler(state,
    payload)}``, the caller's own: the composed model's process adds the
    end-to-end checks', ``lego_core.judge.end_to_end.served``)."""
    ops = {**OPS, **(handlers or {})}
    sandbox_child.die_with_parent()
    _watch(options.get("lifeline"))
    sandbox.limit_executor_resources()
    sandbox.isolate_executor_network()
    sys.dont_write_bytecode = True  # no bytecode of candidate (or shipped) files written from here
    import warnings
    import logging

    warnings.filterwarnings("ignore", message=".*LeafSpec.*")
    logging.getLogger("torch").setLevel(logging.ERROR)
    state = State()
    try:
        preload()
        apply_torch_settings(options.get("torch_settings") or {})  # the model file's own flags, before any judging (executor.use_model_file_settings)
        if options.get("warm_cuda"):  # the CUDA context now, while the judge works on (Executor.prestart), not in a candidate's call
            import torch

            if torch.cuda.is_available():
                torch.empty(1, device="cuda")
        if options.get("snapshot", True):
            state.snapshot = Snapshot()
        conn.send_bytes(wire.dumps((0, "ok", os.getpid())))
    except BaseException as exc:  # noqa: BLE001 - the judge must hear why the executor cannot start
        conn.send_bytes(wire.dumps((0, "raised", (type(exc).__name__, str(exc)[:2000], traceback.format_exc()[-20000:]))))
        os._exit(1)
    while True:
        try:
            data = conn.recv_bytes()
        except (EOFError, OSError):
            os._exit(0)
        state.keep = None
        import pickle

        seq, op, payload = pickle.loads(data)  # from the judge: trusted
        try:
            value = ops[op](state, payload)
            reply = (seq, "ok", value)
        except BaseException as exc:  # noqa: BLE001 - SystemExit from a candidate is a result too
            lines = str(exc).strip().splitlines()
            reply = (seq, "raised", (type(exc).__name__, "\n".join(lines[:5])[:2000], traceback.format_exc()[-20000:]))
        if op in CANDIDATE_OPS and state.snapshot is not None:
            changed = state.snapshot.changed()
            if changed:
                reply = (seq, "tampered", sorted(set(changed))[:20])
        try:
            out = wire.dumps(reply)
        except Exception as exc:  # noqa: BLE001 - something in the value cannot be shared
            out = wire.dumps((seq, "raised", ("TypeError", f"the result cannot be sent back to the judge: {type(exc).__name__}: {exc}"[:2000], "")))
        state.keep = reply
        conn.send_bytes(out)
        del reply, out, data, payload


def _watch(lifeline) -> None:
    """Exit when the judge's process ends: it holds the only writing end of
    ``lifeline``, so reading it ends (EOFError) exactly then.  (The fork
    server is this process's parent, so PR_SET_PDEATHSIG does not cover the
    judge; a candidate stuck in a loop must not outlive it.)"""
    if lifeline is None:
        return
    import threading

    def wait() -> None:
        try:
            lifeline.recv_bytes()
        except BaseException:  # noqa: BLE001 - EOF or anything else: the judge is gone
            pass
        os._exit(70)

    threading.Thread(target=wait, name="lego-lifeline", daemon=True).start()


def preload() -> None:
    """Import what candidates use before the snapshot (and so they are not
    charged to the first candidate's time limit); the fork server runs it
    once for all executors (``lego_core.judge.process.preload``)."""
    import warnings

    import torch  # noqa: F401
    import torch.multiprocessing  # noqa: F401 - tensor reductions
    import torch.nn.functional  # noqa: F401

    # Triton's interpreter (TRITON_INTERPRET=1: CPU runs) computes masked-off
    # lanes too; numpy's overflow / invalid-value warnings about them are noise
    # on the user's console, not a finding (verification judges the values)
    warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"triton\.runtime\.interpreter")

    try:
        import triton  # noqa: F401
        import triton.language  # noqa: F401
    except Exception:  # noqa: BLE001 - no triton: candidates that need it fail to import
        pass
    # under the interpreter, a kernel's calls to @triton.jit functions (tl.sum,
    # tl.max, helpers) no longer re-patch triton.language each time
    skip_nested_repatching()


# ---------------------------------------------------------------- operations


def _load(state: State, payload: dict) -> int:
    # imported as at a user's: no lego_core module in sys.modules while the file's code runs
    module = load_module(Path(payload["path"]), payload["name"], around=user_view.hidden_judge)
    handle = state.next_handle
    state.next_handle += 1
    state.modules[handle] = module
    return handle


def _module(state: State, handle: int) -> types.ModuleType:
    module = state.modules.get(handle)
    if module is None:
        raise KeyError(f"no module loaded as handle {handle}")
    return module


def sync(*values) -> None:
    """Wait for the GPU when CUDA is in use (so a kernel's error surfaces in this call)."""
    import torch

    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def memory_start(state: State, count: bool) -> None:
    """Start counting the bytes this process holds for one request (when
    ``count``): CUDA's peak statistics reset, or a ``LiveBytes`` on a CPU."""
    import torch

    state.counter = None
    if not count:
        return
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.reset_peak_memory_stats()
    else:
        state.counter = _counter()


def _counter():
    """A ``memory.LiveBytes`` for this process.  Its ``__torch_dispatch__`` is
    not wrapped in ``torch._disable_dynamo`` (``_should_skip_dynamo``), which
    would import torch._dynamo (over a second) in every executor; nothing
    here compiles under it."""
    global _Counter
    if _Counter is None:
        raw = LiveBytes.__dict__["__torch_dispatch__"]

        class Counter(LiveBytes):
            __torch_dispatch__ = getattr(raw, "__wrapped__", raw)

            @classmethod
            def _should_skip_dynamo(cls) -> bool:
                return False

        _Counter = Counter
    return _Counter()


_Counter = None


def memory_peak(state: State, count: bool) -> int:
    """Bytes the executor itself held at the call's peak (0 when not counted)."""
    import torch

    if not count:
        return 0
    if state.counter is not None:
        return int(state.counter.peak)
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        return int(torch.cuda.max_memory_allocated())
    return 0


def counted(state: State, count: bool):
    """The context a counted request's work runs in (the CPU counter, else nothing)."""
    import contextlib

    return state.counter if (count and state.counter is not None) else contextlib.nullcontext()


_INTERNED_MAX = 64


def _interned(state: State, args: list) -> list:
    """``args`` with each tensor replaced by the one object this executor
    already holds for the same memory (address, shape, strides, dtype): the
    verifier passes the same input buffers call after call, refilled, and a
    kernel that memoises by tensor identity must see that identity again, as
    it would in a user's process (so it is caught returning stale values)."""
    import collections
    import weakref

    import torch

    table = getattr(state, "interned", None)
    if table is None:
        table = state.interned = collections.OrderedDict()
    result = []
    for x in args:
        if isinstance(x, torch.Tensor):
            key = (x.data_ptr(), tuple(x.shape), x.stride(), x.dtype, x.device)
            ref = table.get(key)
            held = ref() if ref is not None else None  # weak: only what the kernel itself keeps stays interned
            if held is not None and held.untyped_storage().data_ptr() == x.untyped_storage().data_ptr():
                table.move_to_end(key)
                x = held
            else:
                table[key] = weakref.ref(x)
                while len(table) > _INTERNED_MAX:
                    table.popitem(last=False)
        result.append(x)
    return result


def _call(state: State, payload: dict) -> tuple:
    """One ``launch(*args, out=out)`` of a loaded module, seen by the candidate
    as a user's call (``user_view``: private tensors, no lego_core module in
    ``sys.modules``); what it returned is refused unless it is plain tensors
    in memory no earlier call handed out (``user_view.returned_problem``,
    ``EarlierOutputs``: raised as ``TypeError`` / ``RuntimeError``, which the
    verifier reports as the candidate's failure)."""
    import torch

    module = _module(state, payload["handle"])
    state.private.begin()
    out = None if payload["out"] is None else _interned(state, state.private.private(list(payload["out"])))  # the same buffers, the same objects
    args, count = _interned(state, state.private.private(payload["args"])), payload.get("memory", False)
    memory_start(state, count)
    if payload.get("trace"):  # what the call runs, recorded here and judged by the verifier (verify_policy)
        with counted(state, count), torch.no_grad():
            with CallTrace() as call_trace:
                with user_view.hidden_judge():
                    returned = module.launch(*args, out=out)
                    sync()
        summary = call_trace.summary()
        # what the kernel file keeps between calls, judged call after call by the verifier (verify.state_kept)
        summary["module_state"] = module_state_digest(module, [*args, *(out or ())])
    else:
        with counted(state, count), torch.no_grad(), user_view.hidden_judge():
            returned = module.launch(*args, out=out)
            sync()
        summary = None
    problem = user_view.returned_problem(returned)
    if problem:
        raise TypeError(problem)
    earlier = state.earlier.get(payload["handle"])
    if earlier is None:
        cuda = torch.cuda.is_available() and torch.cuda.is_initialized()
        earlier = state.earlier[payload["handle"]] = user_view.EarlierOutputs(
            user_view.EARLIER_CALLS_KEPT_CUDA if cuda else user_view.EARLIER_CALLS_KEPT)
    problem = earlier.check(returned, [*args, *(out or ())])
    if problem:
        raise RuntimeError(problem)
    state.private.write_back()  # what the call wrote into its (private) inputs and out buffers reaches the judge
    encoded = wire.encode(_sendable(returned, out), out)
    del returned
    return encoded, memory_peak(state, count), summary


def _sendable(value: Any, out: list | None) -> Any:
    """``value`` with each CPU tensor that is not one of the ``out`` buffers
    replaced by a copy: sending a tensor moves its storage into shared memory
    in place, and the candidate may still hold it (then its next call would
    meet shared memory again).  Copies keep shape, strides and storage offset
    (``wire.owned``)."""
    import torch

    outs = {id(o) for o in (out or ()) if isinstance(o, torch.Tensor)}
    if isinstance(value, torch.Tensor):
        if value.device.type == "cpu" and id(value) not in outs and not any(
                value.data_ptr() == o.data_ptr() and value.shape == o.shape for o in (out or ()) if isinstance(o, torch.Tensor)):
            return wire.owned(value)
        return value
    if type(value) in (list, tuple):
        return type(value)(_sendable(v, out) for v in value)
    if isinstance(value, dict):
        return {k: _sendable(v, out) for k, v in dict.items(value)}
    return value


def _time(state: State, payload: dict) -> tuple:
    module = _module(state, payload["handle"])
    count = payload.get("memory", False)
    memory_start(state, count)
    launch = module.launch
    state.private.begin()
    sets = [_interned(state, state.private.private(list(s))) for s in payload["sets"]]
    if payload.get("outs") is not None:  # each set writes into its own buffers (timing_guard reads them after)
        by_inputs = {tuple(id(x) for x in xs): _interned(state, state.private.private(list(out))) for xs, out in zip(sets, payload["outs"])}

        def fn(xs):
            return launch(*xs, out=by_inputs[tuple(id(x) for x in xs)])
    else:
        def fn(xs):
            return launch(*xs)
    with counted(state, count), user_view.hidden_judge():
        if payload.get("clock") == "cpu":  # the same path on a machine without a GPU (tests)
            ms = time_cpu(fn, sets, payload.get("warmup_ms") or 1.0, payload.get("rep") or 5).median_ms
        else:
            with gpu_lock.held_elsewhere():  # the optimizer that asked holds the GPU alone for this timing
                ms = costing.measure_ms(fn, sets, payload.get("warmup_ms"), payload.get("rep"))
        sync()
    state.private.write_back()
    return float(ms), memory_peak(state, count)


def _getattr(state: State, payload: dict) -> Any:
    value = getattr(_module(state, payload["handle"]), payload["name"])
    if not wire.plain(value):
        raise TypeError(f"{payload['name']} is a {type(value).__name__}, not plain data")
    return value


def _setattr(state: State, payload: dict) -> None:
    setattr(_module(state, payload["handle"]), payload["name"], payload["value"])


def _forget(state: State, payload: dict) -> None:
    state.earlier.pop(payload["handle"], None)
    module = state.modules.pop(payload["handle"], None)
    if module is not None and sys.modules.get(module.__name__) is module:
        del sys.modules[module.__name__]


def _ping(state: State, payload: Any) -> int:
    return os.getpid()


def _sleep(state: State, payload: dict) -> None:  # tests: a request that outlives the per-call limit
    time.sleep(float(payload))


OPS = {
    "load": _load,
    "call": _call,
    "time": _time,
    "getattr": _getattr,
    "setattr": _setattr,
    "forget": _forget,
    "ping": _ping,
    "sleep": _sleep,
}
# requests after which the executor's shared functions are checked
CANDIDATE_OPS = frozenset({"load", "call", "time", "getattr", "setattr"})
