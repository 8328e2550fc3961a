"""The sandboxed child's side of ``lego_core.runtime.sandbox``: :func:`main` (``ENTRY``).

The parent (``sandbox.run_in_child``) starts ``python -c ENTRY IN OUT``, inside bubblewrap
where it can (``lego_core.runtime.jail``), with two inherited pipe descriptors: ``IN``
carries one pickled job from the parent (``{"call": pickled (target,
args), "sys_path", "limits", "isolate_network"}``: the parent is trusted, so pickle is fine in
this direction), ``OUT`` carries this process's messages back.

Everything on ``OUT`` is JSON (``multiprocessing.connection`` framing), never
pickle: the child runs the user's code, so the parent must not unpickle
anything it sends.  Messages: ``{"kind": "event", "event": Event.to_dict()}``,
``{"kind": "done", "result": ...}``, ``{"kind": "error", "error": {...}}``
and ``{"kind": "cache", ...}`` (a kernel cache entry the parent stores, see
:func:`forwarder`).
"""
from __future__ import annotations

import ctypes
import json
import logging
import os
import pickle
import resource
import signal
import sys
import threading
import traceback
import warnings
from multiprocessing.connection import Connection
from typing import Any, Callable

from lego_core.load.spec import ProblemError

# run with -c, not -m: this module must be imported as itself (pipeline reads its _out)
ENTRY = "import sys; from lego_core.runtime.sandbox_child import main; sys.exit(main(sys.argv[1:]))"
_out: Connection | None = None
_out_lock = threading.Lock()


def send(message: dict) -> None:
    """Send one JSON message to the parent.  Raises TypeError / ValueError
    when ``message`` is not JSON-ready, OSError when the parent is gone."""
    data = json.dumps(message).encode()
    with _out_lock:
        if _out is None:
            raise RuntimeError("not running as a sandboxed child")
        _out.send_bytes(data)


def in_child() -> bool:
    """Whether this process is a sandboxed run child (``main`` is running)."""
    return _out is not None


def forwarder(kind: str) -> Callable[[dict], None] | None:
    """In a sandboxed child: a function that sends ``{"kind": kind, **data}``
    to the parent (the kernel cache's writes go this way: the parent writes
    them).  Elsewhere (``optimize(isolate=False)``): None."""
    if not in_child():
        return None

    def forward(data: dict) -> None:
        send({**data, "kind": kind})

    return forward


def error_data(exc: BaseException) -> dict:
    """An exception as JSON-ready data the parent rebuilds (``sandbox.rebuild_error``)."""
    if not isinstance(exc, Exception):  # SystemExit, KeyboardInterrupt: not the parent's to obey
        exc = RuntimeError(f"the optimizer process stopped: {type(exc).__name__}({exc})")
    data = {"type": type(exc).__name__, "message": str(exc), "traceback": "".join(traceback.format_exception(exc))[-20000:]}
    if isinstance(exc, ProblemError):
        data.update(message=exc.message, path=exc.path, line=exc.line, hint=exc.hint)
    return data


def main(argv: list[str]) -> int:
    """Read the job from fd ``argv[0]``, run it, report on fd ``argv[1]``."""
    global _out
    job_fd, out_fd = int(argv[0]), int(argv[1])
    with os.fdopen(job_fd, "rb") as job_file:
        job = pickle.load(job_file)  # from the trusted parent
    die_with_parent()
    limit_resources(job.get("limits") or {})
    if job.get("isolate_network"):
        isolate_network()
    _out = Connection(out_fd, readable=False)
    for entry in reversed(job.get("sys_path", [])):
        if entry not in sys.path:
            sys.path.insert(0, entry)
    stacks_every = os.environ.get("LEGO_DEBUG_STACKS_S")
    if stacks_every:  # a run that seems stuck shows where it is: every thread's stack on stderr, repeatedly
        import faulthandler

        faulthandler.dump_traceback_later(float(stacks_every), repeat=True)
    warnings.filterwarnings("ignore", message=".*LeafSpec.*")  # torch.export's own deprecation noise
    warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"triton\.runtime\.interpreter")  # masked-off lanes (judge.process.child.preload)
    logging.getLogger("torch").setLevel(logging.ERROR)  # torch.export's warnings are not the user's business

    def emit(event) -> None:
        send({"kind": "event", "event": event.to_dict()})

    try:
        target, args = pickle.loads(job["call"])
        result = target(*args, emit)
        try:
            send({"kind": "done", "result": result})
        except (TypeError, ValueError) as exc:
            raise TypeError(f"the result cannot be sent to the parent as JSON data: {exc}") from None
    except BaseException as exc:  # noqa: BLE001 - everything must reach the parent
        send({"kind": "error", "error": error_data(exc)})
    finally:
        _out.close()
    return 0


def die_with_parent() -> None:
    """Ask Linux to SIGKILL this process when its parent dies (a killed
    worker must not leave a model running); a no-op elsewhere."""
    pr_set_pdeathsig = 1
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL)
    except (OSError, AttributeError):
        pass


_RLIMITS = {
    "memory_mb": (resource.RLIMIT_DATA, 1 << 20),
    "cpu_s": (resource.RLIMIT_CPU, 1),
    "processes": (resource.RLIMIT_NPROC, 1),
    "file_mb": (resource.RLIMIT_FSIZE, 1 << 20),
}


def limit_resources(limits: dict[str, Any]) -> None:
    """No core dumps; at most 4096 open files; and each of ``limits``
    (``config.SandboxLimits.as_dict()``: ``memory_mb`` -> RLIMIT_DATA,
    ``cpu_s`` -> RLIMIT_CPU, ``processes`` -> RLIMIT_NPROC, ``file_mb`` ->
    RLIMIT_FSIZE; None leaves that one as it is).  A limit above the hard
    limit already set is lowered to it.  Processes this one starts (the
    candidate executors) inherit the limits, each its own (not a total)."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(4096, hard), hard))
    for name, (which, unit) in _RLIMITS.items():
        value = limits.get(name)
        if value is None:
            continue
        _, hard = resource.getrlimit(which)
        wanted = int(value) * unit
        if hard != resource.RLIM_INFINITY:
            wanted = min(wanted, hard)
        resource.setrlimit(which, (wanted, wanted))


def isolate_network() -> None:
    """Move this process into a new, empty network namespace when permitted
    (root, or unprivileged user namespaces); otherwise carry on.  Inside
    bubblewrap the namespace is already new and empty."""
    clone_newnet = 0x40000000
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.unshare(clone_newnet)
    except (OSError, AttributeError):
        pass

