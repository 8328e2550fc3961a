"""Run a function in a child process and forward its events to a sink.

Uploaded model code must never run in the caller's process (the web
process, a Celery worker that serves other runs).  ``run_in_child`` starts a
fresh interpreter (multiprocessing ``spawn``), applies resource limits and,
where the OS allows it, cuts the child off the network, then runs
``target(*args, emit)``.  Events the child emits arrive at the parent's sink
in order.  The child's return value is returned; an exception raised in the
child is raised again in the parent (ProblemError keeps its file and line);
a child that dies (signal, out of memory, ``os._exit``) becomes a
:class:`ChildCrashed` with a message that says how it died.
"""
from __future__ import annotations

import ctypes
import logging
import multiprocessing as mp
import os
import resource
import signal
import time
import traceback
import warnings
from typing import Any, Callable

from lego_core.events import Event, Sink, null_sink

_DONE, _EVENT, _ERROR = "done", "event", "error"


class ChildCrashed(RuntimeError):
    """The child process ended without a result (killed, crashed, timed out)."""


def run_in_child(
    target: Callable[..., Any],
    args: tuple,
    sink: Sink | None = None,
    timeout_s: float | None = None,
    watchdog: Callable[[], BaseException | None] | None = None,
) -> Any:
    """Call ``target(*args, emit)`` in a spawned child process.

    ``emit`` is a callable the child uses for events; each is delivered to
    ``sink`` in the parent.  ``timeout_s`` (seconds, None for no limit) kills
    the child and raises ChildCrashed when exceeded.  ``watchdog()`` is
    called several times a second; when it returns an exception the child is
    killed and that exception raised (a per-stage time limit, say).
    Exceptions from the
    child are re-raised with their type when they pickle, else as
    RuntimeError with the child's traceback text.
    """
    sink = sink or null_sink
    ctx = mp.get_context("spawn")
    receiver, sender = ctx.Pipe(duplex=False)  # a pipe: no semaphores to leak
    child = ctx.Process(target=_child_main, args=(target, args, sender), daemon=False)
    child.start()
    sender.close()  # the parent keeps only the reading end
    try:
        return _pump(child, receiver, sink, timeout_s, watchdog)
    finally:
        if child.is_alive():
            child.kill()
        child.join(timeout=10)
        receiver.close()


def _pump(child: mp.Process, receiver: Any, sink: Sink, timeout_s: float | None, watchdog) -> Any:
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        if deadline is not None and time.monotonic() > deadline:
            raise ChildCrashed(f"the optimizer ran past its time limit of {timeout_s:g} s and was stopped.")
        alarm = watchdog() if watchdog is not None else None
        if alarm is not None:
            raise alarm
        if not receiver.poll(0.2):
            continue
        try:
            kind, payload = receiver.recv()
        except EOFError:  # the child closed its end without a result: it died
            child.join(timeout=10)
            raise ChildCrashed(_death_message(child.exitcode)) from None
        if kind == _EVENT:
            sink(payload)
        elif kind == _DONE:
            return payload
        elif kind == _ERROR:
            raise payload


def _death_message(exitcode: int | None) -> str:
    if exitcode is not None and exitcode < 0:
        name = signal.Signals(-exitcode).name
        return f"the optimizer process was killed by {name} (out of memory or a crash in native code)."
    return f"the optimizer process exited with code {exitcode} without a result."


def _child_main(target: Callable[..., Any], args: tuple, sender: Any) -> None:
    _die_with_parent()
    _limit_resources()
    _isolate_network()
    stacks_every = os.environ.get("LEGO_DEBUG_STACKS_S")
    if stacks_every:  # a run that seems stuck shows where it is: every thread's stack on stderr, repeatedly
        import faulthandler

        faulthandler.dump_traceback_later(float(stacks_every), repeat=True)
    warnings.filterwarnings("ignore", message=".*LeafSpec.*")  # torch.export's own deprecation noise
    logging.getLogger("torch").setLevel(logging.ERROR)  # torch.export's warnings are not the user's business

    def emit(event: Event) -> None:
        sender.send((_EVENT, event))

    try:
        result = target(*args, emit)
        sender.send((_DONE, result))
    except BaseException as exc:  # noqa: BLE001 - everything must reach the parent
        if not isinstance(exc, Exception):  # SystemExit, KeyboardInterrupt: not the parent's to obey
            exc = RuntimeError(f"the optimizer process stopped: {type(exc).__name__}({exc})")
        sender.send((_ERROR, _picklable(exc)))
    finally:
        sender.close()


def _picklable(exc: BaseException) -> BaseException:
    import pickle

    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:  # noqa: BLE001
        text = "".join(traceback.format_exception(exc))
        return RuntimeError(f"{type(exc).__name__}: {exc}\n{text}")


def _die_with_parent() -> None:
    """Ask Linux to SIGKILL this process when its parent dies (a killed
    worker must not leave a model running); a no-op elsewhere."""
    pr_set_pdeathsig = 1
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL)
    except (OSError, AttributeError):
        pass


def _limit_resources() -> None:
    """No core dumps; cap open files. Memory is left to the OS: CUDA maps
    far more virtual memory than it uses, so an address-space cap breaks it."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(4096, hard), hard))


def _isolate_network() -> None:
    """Move the child into a new, empty network namespace when permitted
    (root, or unprivileged user namespaces); otherwise carry on.  Set
    ``LEGO_SANDBOX_NETWORK=1`` to keep the network."""
    if os.environ.get("LEGO_SANDBOX_NETWORK") == "1":
        return
    clone_newnet = 0x40000000
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.unshare(clone_newnet)
    except (OSError, AttributeError):
        pass
