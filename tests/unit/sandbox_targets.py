"""Module-level targets for ``lego_core.runtime.sandbox.run_in_child`` (test_sandbox.py).

``spawn`` pickles a target by reference (module + name), so the targets must
live in an importable module, not inside a test function.  The spawned child
gets the parent's ``sys.path`` (multiprocessing's preparation data), and
pytest puts this folder on ``sys.path`` when it imports the test modules
here (rootdir-based "prepend" import mode, tests/ is not a package), so
``import sandbox_targets`` works in the child too.
"""
from __future__ import annotations

import os
import signal
import sys
import time

from lego_core.events import Progress, StageStarted
from lego_core.load.spec import ProblemError


def add_and_report_pid(a, b, emit):
    """Returns a value computed in the child, with the child's pid."""
    return {"sum": a + b, "pid": os.getpid()}


def emit_sequence(n, emit):
    """Emits a stage start then ``n`` numbered progress events, returns ``n``."""
    emit(StageStarted(stage="load", total=n))
    for i in range(n):
        emit(Progress(stage="load", done=i + 1, total=n, message=f"step {i + 1}"))
    return n


def raise_problem_error(path, line, emit):
    emit(StageStarted(stage="load"))
    raise ProblemError("the file defines no `Model`.", path, line, hint="define class Model(nn.Module).")


def raise_value_error(emit):
    raise ValueError("plain failure in the child")


class NeedsTwoArgs(Exception):
    """Pickles but cannot be unpickled: ``__reduce__`` passes only ``args``."""

    def __init__(self, what, code):
        super().__init__(f"{what} (code {code})")
        self.code = code


def raise_unpicklable(emit):
    _deep_helper_that_fails()


def _deep_helper_that_fails():
    raise NeedsTwoArgs("weird failure", 42)


def exit_hard(code, emit):
    """Dies without a result and without flushing anything (os._exit)."""
    os._exit(code)


def kill_self(emit):
    """Dies by SIGKILL, as the OOM killer would do it."""
    os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(30)


def emit_then_exit_hard(n, emit):
    """Emits ``n`` events, waits until they are flushed, then dies."""
    for i in range(n):
        emit(Progress(stage="search", done=i + 1, total=n))
    time.sleep(0.5)  # the queue's feeder thread sends in the background
    os._exit(5)


def sleep_forever(emit):
    emit(Progress(stage="search", done=0, total=1, message=str(os.getpid())))
    time.sleep(120)
    return "woke up"


def chatty_sleeper(seconds, emit):
    """Emits an event every 50 ms for ``seconds`` seconds, then returns."""
    end = time.monotonic() + seconds
    i = 0
    while time.monotonic() < end:
        i += 1
        emit(Progress(stage="search", done=i, total=0))
        time.sleep(0.05)
    return "finished"


def return_unpicklable(emit):
    return lambda: None


def read_limits(emit):
    import resource

    return {"core": resource.getrlimit(resource.RLIMIT_CORE), "nofile": resource.getrlimit(resource.RLIMIT_NOFILE)}


def network_view(emit):
    """The child's network namespace and its interfaces."""
    import socket

    return {"netns": os.readlink("/proc/self/ns/net"), "interfaces": sorted(name for _, name in socket.if_nameindex())}


class _RunsOnUnpickle:
    """Unpickling this runs ``open(path, "w")``: what a hostile child would
    send to a parent that unpickles its messages."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def send_a_pickle_bomb(path, emit):
    """Writes a pickle that creates ``path`` when unpickled straight onto the
    pipe to the parent, in each framing the parent could read."""
    import pickle

    from lego_core.runtime import sandbox_child

    payload = pickle.dumps(("done", _RunsOnUnpickle(path)))
    if sandbox_child._out is not None:  # the JSON pipe
        sandbox_child._out.send_bytes(payload)
    else:  # an older parent's multiprocessing pipe: find it among the target's caller frames
        import sys

        frame = sys._getframe()
        while frame is not None and "sender" not in frame.f_locals:
            frame = frame.f_back
        frame.f_locals["sender"].send_bytes(payload)
    time.sleep(5)
    return "sent"


def send_a_huge_event(emit):
    emit(Progress(stage="search", done=1, total=1, message="x" * (300 << 20)))
    return "sent"


def read_all_limits(emit):
    import resource

    names = {"data": resource.RLIMIT_DATA, "cpu": resource.RLIMIT_CPU, "nproc": resource.RLIMIT_NPROC, "fsize": resource.RLIMIT_FSIZE}
    return {name: list(resource.getrlimit(which)) for name, which in names.items()}


def write_bytes(path, n, emit):
    import signal as _signal

    _signal.signal(_signal.SIGXFSZ, _signal.SIG_IGN)  # the write then fails with EFBIG instead of killing the process
    with open(path, "wb") as fh:
        fh.write(b"\0" * n)
    return n


def send_raw_message(data, emit):
    """Writes ``data`` (bytes) onto the pipe to the parent as one message,
    bypassing the child's JSON encoder (an upload can do the same)."""
    from lego_core.runtime import sandbox_child

    sandbox_child._out.send_bytes(data)
    time.sleep(5)  # the parent stops this process; it must not have to wait for it
    return "sent"


def print_a_lot(mib, emit):
    """Writes ``mib`` MiB to stdout and as much to stderr, with markers at the start and the end."""
    sys.stdout.write("FIRST-LINE\n")
    sys.stdout.flush()
    chunk = "y" * (1 << 20)
    for _ in range(mib):
        sys.stdout.write(chunk)
        sys.stderr.write(chunk)
    sys.stdout.write("\nLAST-LINE\n")
    sys.stdout.flush()
    return mib
