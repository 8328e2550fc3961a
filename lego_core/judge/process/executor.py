"""The judge's side of a candidate executor: start it, talk to it, restart it.

:class:`Executor` owns one executor process (its main function
``lego_core.judge.process.child.serve``, or the caller's own ``serve``) and a
two-way pipe to it.  :meth:`Executor.load` imports a kernel file
*there* and returns a :class:`RemoteModule`, whose ``launch(*inputs, out=None)``
runs the kernel there on tensors shared with this process
(``torch.multiprocessing``: CPU shared memory, CUDA IPC), so
``verify.verify(module.run, ...)`` works unchanged while no candidate code
runs here.

Every request waits at most ``call_timeout_s``.  A request that gets no
answer (the process died, ran past the limit, changed shared functions, or
replied outside the protocol) raises a :class:`~lego_core.judge.process.wire.JudgeError`
with the reason; the process is killed and a fresh one started in the
background, so the search goes on.  An exception the candidate raised comes
back as a :class:`~lego_core.judge.process.wire.CandidateRaised` named like the
original (``ValueError``) and leaves the process running; the caller decides
whether to restart it (:meth:`Executor.restart`; the search does after every
candidate that fails).
"""
from __future__ import annotations

import multiprocessing as mp
import os
import signal
import sys
import threading
import weakref
from pathlib import Path
from typing import Any, Sequence

import torch

from lego_core.judge.process import child, wire
from lego_core.judge.process.forkserver import context as _context, warm_up  # noqa: F401 - warm_up: re-exported
from lego_core.judge.process.wire import BadReply, ExecutorDied, ExecutorTampered, ExecutorTimeout, JudgeError

# seconds one request may take (import, one launch, one timing, ...); a candidate past it fails
CALL_TIMEOUT_S = float(os.environ.get("LEGO_JUDGE_CALL_TIMEOUT_S", "300"))
# LEGO_DEBUG_MEMORY_MB=N: print every executor request whose peak reached N MiB (stderr)
DEBUG_MEMORY_BYTES = int(float(os.environ["LEGO_DEBUG_MEMORY_MB"]) * 2**20) if os.environ.get("LEGO_DEBUG_MEMORY_MB") else None
START_TIMEOUT_S = float(os.environ.get("LEGO_JUDGE_START_TIMEOUT_S", "300"))

_WHAT = {
    "load": "importing the kernel file",
    "call": "launch",
    "time": "timing",
    "getattr": "reading a module attribute",
    "setattr": "setting a module attribute",
    "composed": "the composed model's forward",
    "choose_launch": "measuring the launch variants",
    "time_models": "timing the models",
}


# torch flags the model file set when imported (``Problem.torch_settings``): every executor
# started after :func:`use_model_file_settings` applies them first, as the user's process has them
_MODEL_FILE_SETTINGS: dict = {}


def use_model_file_settings(settings: dict) -> None:
    """Have executors started from now on apply ``settings`` (name -> value,
    ``lego_core.load.torch_settings``) before anything runs in them: the flags a
    model file sets at import are part of how its user's process computes,
    and candidates and the composed model are judged in that setting."""
    _MODEL_FILE_SETTINGS.clear()
    _MODEL_FILE_SETTINGS.update(settings)


def _kill(process) -> None:
    """Kill ``process`` if it runs and reap it (never raises)."""
    try:
        if process.is_alive():
            process.kill()
        process.join(timeout=10)
    except Exception:  # noqa: BLE001 - best effort at shutdown
        pass


class Executor:
    """One candidate executor process, started on first use (or by :meth:`start`).

    ``call_timeout_s``: the per-request limit; ``meter``: a
    ``lego_core.runtime.memory.MemoryMeter`` that is told the bytes the executor held
    at each call's peak (``MemoryMeter.note_external``); ``snapshot``: take
    the tamper snapshot at start (off for one-shot processes that run a
    composed model).  ``serve``: the process's main function, a module-level
    ``serve(conn, options)`` (it is started by name in the new process);
    default ``child.serve``, which answers the candidate requests; the
    composed model's process adds handlers of its own
    (``lego_core.judge.end_to_end.served.serve``).  ``generation`` counts the
    processes started: a :class:`RemoteModule` belongs to one."""

    def __init__(self, *, call_timeout_s: float | None = None, start_timeout_s: float = START_TIMEOUT_S, meter=None, snapshot: bool = True,
                 serve=child.serve, warm_cuda: bool = False):
        self.serve = serve
        self.warm_cuda = warm_cuda  # the process creates its CUDA context before it says it is ready
        self.call_timeout_s = CALL_TIMEOUT_S if call_timeout_s is None else call_timeout_s
        self.start_timeout_s = start_timeout_s
        self.meter = meter
        self.snapshot = snapshot
        self.generation = 0
        self.restarts = 0
        self.pid: int | None = None
        self._process = None
        self._conn = None
        self._ready = False
        self._seq = 0
        self._lock = threading.RLock()
        self._finalizer = None

    # ------------------------------------------------------------ lifecycle

    def start(self) -> "Executor":
        """Get ready to start (returns at once): the fork server starts
        importing torch in the background (:func:`warm_up`); the process itself
        is forked at the first request, in milliseconds."""
        with self._lock:
            if warm_up() == "spawn" and self._process is None:
                self._launch()  # no fork server: spawn now, it imports in the background
            return self

    def _launch(self) -> None:
        ctx = _context()
        mine, theirs = ctx.Pipe(duplex=True)
        # the executor's parent is the fork server, so it cannot ask to die with
        # this process (PR_SET_PDEATHSIG): it watches this pipe instead, whose
        # only writing end this process holds (closed when it exits or dies)
        lifeline, held = ctx.Pipe(duplex=False)
        process = ctx.Process(target=self.serve, args=(theirs, {"snapshot": self.snapshot, "lifeline": lifeline, "torch_settings": dict(_MODEL_FILE_SETTINGS), "warm_cuda": self.warm_cuda}), daemon=False, name="lego-executor")
        process.start()
        theirs.close()
        lifeline.close()
        self._process, self._conn, self._ready, self.pid = process, mine, False, None
        self.generation += 1
        self._finalizer = weakref.finalize(self, _shutdown, process, mine, held)

    def close(self) -> None:
        """Stop the process (a later request starts a fresh one)."""
        with self._lock:
            if self._finalizer is not None:
                self._finalizer()
                self._finalizer = None
            self._process = self._conn = None
            self._ready, self.pid = False, None

    def restart(self) -> None:
        """Kill the process; the next request gets a fresh one (after a
        candidate that failed: whatever it changed in the process goes with it)."""
        with self._lock:
            if self._process is None:
                return
            self.close()
            self.restarts += 1

    def prestart(self) -> None:
        """Start the next process now, when there is none, so that it imports,
        and with ``warm_cuda`` creates its CUDA context, while the caller does
        other work (the judge after each candidate: every candidate gets a
        fresh process, and one started at its first request would charge
        that start to the next candidate's wall time).  Never raises: a
        process that cannot be started is reported at the next request."""
        with self._lock:
            if self._process is None:
                try:
                    self._launch()
                except Exception:  # noqa: BLE001 - the next request starts one and says why not
                    self.close()

    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.is_alive()

    def _ensure_ready(self) -> None:
        if self._process is not None and not self._process.is_alive():
            self.close()  # died while idle (nobody's request): start again without blame
        if self._process is None:
            try:
                self._launch()
            except Exception as exc:  # noqa: BLE001 - no process (fork server gone, out of processes): every candidate fails, the run goes on
                self.close()
                raise JudgeError(f"the candidate executor could not be started: {type(exc).__name__}: {exc}") from None
        if self._ready:
            return
        try:
            pid = self._receive(0, self.start_timeout_s, "start")
        except wire.CandidateRaised as exc:
            self.close()
            raise JudgeError(f"the candidate executor did not start: {type(exc).__name__}: {exc}") from None
        except JudgeError as exc:
            raise JudgeError(f"the candidate executor did not start: {exc}") from None
        self._ready, self.pid = True, pid if isinstance(pid, int) else None

    # ------------------------------------------------------------ requests

    def request(self, op: str, payload: Any = None, timeout_s: float | None = None) -> Any:
        """Send one request and return its answer.  Raises CandidateRaised for
        an exception raised there, JudgeError (the process is then replaced)
        for no answer."""
        with self._lock:
            self._ensure_ready()
            self._seq += 1
            seq = self._seq
            try:
                data = wire.dumps((seq, op, payload))
            except Exception as exc:  # noqa: BLE001 - our own payload: a bug, not the candidate's
                raise RuntimeError(f"cannot send {op} to the executor: {type(exc).__name__}: {exc}") from exc
            try:
                self._conn.send_bytes(data)
            except (OSError, ValueError):
                self._fail()
                raise ExecutorDied(f"the executor process was gone before {_WHAT.get(op, op)}") from None
            del data
            return self._receive(seq, self.call_timeout_s if timeout_s is None else timeout_s, op)

    def _receive(self, seq: int, timeout_s: float | None, op: str) -> Any:
        what = _WHAT.get(op, op)
        try:
            ready = self._conn.poll(timeout_s)
        except (OSError, ValueError):
            ready = True
        if not ready:
            self._fail()
            raise ExecutorTimeout(f"no answer within {timeout_s:g} s during {what} (the per-call limit); the executor was stopped")
        try:
            data = self._conn.recv_bytes(wire.MAX_REPLY_BYTES)
        except (EOFError, OSError):
            how = self._death()
            self._fail()
            raise ExecutorDied(f"the executor process died during {what} ({how})") from None
        try:
            reply = wire.loads(data)
        except BadReply:
            self._fail()
            raise
        if not (isinstance(reply, tuple) and len(reply) == 3 and reply[0] == seq and reply[1] in ("ok", "raised", "tampered")):
            self._fail()
            raise BadReply(f"the executor answered {what} outside the protocol")
        _, status, value = reply
        if status == "ok":
            return value
        if status == "tampered":
            names = [str(n)[:120] for n in value][:20] if isinstance(value, list) else ["(unknown)"]
            self._fail()
            raise ExecutorTampered(f"the candidate changed {', '.join(names)} in the executor")
        if not (isinstance(value, tuple) and len(value) == 3):
            self._fail()
            raise BadReply(f"the executor reported an exception outside the protocol during {what}")
        raise wire.raised(*value)

    def _death(self) -> str:
        process = self._process
        process.join(timeout=5)
        code = process.exitcode
        if code is None:
            return "it closed its end of the pipe"
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            return f"killed by {name}"
        return f"exit code {code}"

    def _fail(self) -> None:
        """The process gave no proper answer: stop it (the next request gets a fresh one)."""
        self.close()
        self.restarts += 1

    # ------------------------------------------------------------ candidates

    def load(self, path: Path, name: str) -> "RemoteModule":
        """Import the kernel file at ``path`` as module ``name`` in the executor."""
        handle = self.request("load", {"path": str(path), "name": name})
        if not isinstance(handle, int):
            self._fail()
            raise BadReply("the executor answered a load without a handle")
        return RemoteModule(self, handle, name, self.generation)

    def _note_memory(self, nbytes: Any, what: str = "") -> None:
        if self.meter is not None and isinstance(nbytes, int) and not isinstance(nbytes, bool) and nbytes > 0:
            if DEBUG_MEMORY_BYTES is not None and nbytes >= DEBUG_MEMORY_BYTES:  # where a broken bound comes from
                print(f"[lego memory] executor {what}: {nbytes / 2**20:.0f} MiB at its peak, "
                      f"{self.meter.allocated() / 2**20:.0f} MiB held here, stage {self.meter.stage}", file=sys.stderr, flush=True)
            self.meter.note_external(nbytes)

    def _collect(self) -> None:
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            torch.cuda.ipc_collect()  # blocks the executor has let go of (CUDA IPC)


def _shutdown(process, *conns) -> None:
    for conn in conns:
        try:
            conn.close()
        except Exception:  # noqa: BLE001
            pass
    _kill(process)


def _share(value: Any, copy_cpu: bool) -> Any:
    """A value to send: tensors detached (CPU tensors copied first when
    ``copy_cpu``, so sharing does not move the caller's own storage)."""
    if isinstance(value, torch.Tensor):
        value = value.detach()
        if copy_cpu and value.device.type == "cpu" and not value.is_shared():
            value = value.clone()
        return value
    if type(value) in (list, tuple):
        return type(value)(_share(v, copy_cpu) for v in value)
    return value


class _Candidate:
    """``RemoteModule.candidate``: the verifier's view of a remote kernel."""

    def __init__(self, module: "RemoteModule"):
        self.module = module

    def __call__(self, inputs: Sequence, out: list | None):
        return self.module._call(list(inputs), out, copy_cpu=False)

    def traced(self, inputs: Sequence, out: list | None) -> tuple:
        return self.module._call(list(inputs), out, copy_cpu=False, trace=True)


class RemoteModule:
    """A kernel file imported in an executor, used from the judge.

    ``launch(*inputs, out=None)``: runs there; inputs are copied into shared
    memory on the CPU (the caller's tensors stay as they are), ``out``
    buffers are shared so the kernel's writes land in them.  ``run(inputs,
    out)``: the verifier's candidate signature; ``inputs`` are the
    verifier's fresh clones, shared without another copy.  ``time(sets)``:
    the kernel's time there (``costing.measure_ms``).  Plain-data module
    attributes (``CONFIG``, ``TUNE_CONFIGS``) read and set like a module's."""

    def __init__(self, executor: Executor, handle: int, name: str, generation: int):
        object.__setattr__(self, "_executor", executor)
        object.__setattr__(self, "_handle", handle)
        object.__setattr__(self, "_generation", generation)
        object.__setattr__(self, "__name__", name)

    def _request(self, op: str, payload: dict) -> Any:
        executor = self._executor
        if executor.generation != self._generation or not executor._ready:
            raise ExecutorDied("the executor that imported this kernel was replaced (an earlier failure)")
        return executor.request(op, dict(payload, handle=self._handle))

    def launch(self, *inputs, out=None):
        return self._call(list(inputs), out, copy_cpu=True)

    def run(self, inputs: Sequence, out: list | None):
        """``verify``'s candidate: ``inputs`` are fresh clones the verifier made for this call."""
        return self._call(list(inputs), out, copy_cpu=False)

    @property
    def candidate(self) -> "_Candidate":
        """What ``verify()`` calls: ``candidate(inputs, out)`` runs the kernel in
        the executor, ``candidate.traced(inputs, out) -> (outputs, summary)``
        runs it there under ``verify_trace.CallTrace`` and returns the trace's
        summary (plain data) for the verifier to judge."""
        return _Candidate(self)

    def _call(self, inputs: list, out: list | None, copy_cpu: bool, trace: bool = False):
        executor = self._executor
        payload = {"args": _share(inputs, copy_cpu), "out": None if out is None else [o.detach() for o in out], "memory": executor.meter is not None, "trace": trace}
        try:
            reply = self._request("call", payload)
        finally:
            del payload
            executor._collect()
        if not (isinstance(reply, tuple) and len(reply) == 3 and (reply[2] is None or isinstance(reply[2], dict))):
            executor._fail()
            raise BadReply("the executor answered a launch outside the protocol")
        value, nbytes, summary = reply
        executor._note_memory(nbytes, f"launch of {self.__name__}")
        try:
            decoded = wire.decode(value, out)
        except BadReply:
            executor._fail()
            raise
        return (decoded, summary) if trace else decoded

    def time(self, input_sets: Sequence[Sequence], *, outs: Sequence[Sequence] | None = None, warmup_ms: float | None = None,
             rep: int | None = None, clock: str = "gpu") -> float:
        """ms of ``launch`` on ``input_sets`` in the executor: ``costing.measure_ms``
        (CUDA-graph replay on a GPU); ``clock="cpu"`` times with ``timing.time_cpu``
        (the same path without a GPU, for tests).  ``outs``: one list of output
        buffers per set, shared so the timed calls write into them
        (``launch(*set, out=outs[k])``; ``timing_guard`` then checks what
        they hold); None: ``launch(*set)``."""
        executor = self._executor
        sets = [_share(list(s), copy_cpu=True) for s in input_sets]
        shared_outs = None if outs is None else [[o.detach() for o in out] for out in outs]
        payload = {"sets": sets, "outs": shared_outs, "warmup_ms": warmup_ms, "rep": rep, "clock": clock, "memory": executor.meter is not None}
        try:
            reply = self._request("time", payload)
        finally:
            del sets, shared_outs, payload
            executor._collect()
        if not (isinstance(reply, tuple) and len(reply) == 2):
            executor._fail()
            raise BadReply("the executor answered a timing outside the protocol")
        executor._note_memory(reply[1], f"timing of {self.__name__}")
        return wire.finite_ms(reply[0])

    def forget(self) -> None:
        """Drop the module in the executor (never raises)."""
        executor = self._executor
        if executor.generation == self._generation and executor.alive and executor._ready:
            try:
                executor.request("forget", {"handle": self._handle})
            except Exception:  # noqa: BLE001 - best effort
                pass

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        value = self._request("getattr", {"name": name})
        if not wire.plain(value):
            raise BadReply(f"the executor answered {name} with something that is not plain data")
        return value

    def __setattr__(self, name: str, value: Any) -> None:
        if not wire.plain(value):
            raise TypeError(f"only plain data can be set on a remote module, not {type(value).__name__}")
        self._request("setattr", {"name": name, "value": value})

    def __repr__(self) -> str:
        return f"<RemoteModule {self.__name__} in executor pid {self._executor.pid}>"
