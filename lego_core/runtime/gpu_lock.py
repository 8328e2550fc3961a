"""One GPU shared by several processes: a timing runs alone, other GPU work side by side.

Several searches may share one GPU (the bench's lanes, two run workers on
one card).  A kernel timed while another process's kernels run beside it
measures the other process's load: a search once timed eager at 0.061 ms
against a plan's 0.035 ms under load, and shipped a plan slower than eager.
So every timing (:func:`lego_core.runtime.timing.time_gpu`) holds the GPU's lock
**exclusively**, and the search's other GPU work (verifying a candidate,
running the reference) holds it **shared**: a timing waits until no process
is verifying on the card, and verifications wait while one times; CPU work
(compiling kernels, capture, agents) never waits.

The lock is a readers-writer lock of ``flock(2)`` on
``<LEGO_GPU_LOCK_DIR>/<GPU uuid>.lock`` (default folder:
``/tmp/lego-gpu-locks``), so it is shared by every process on the machine
that sees the same card, and the kernel releases it when a process dies; a
``.turnstile`` file beside it, which a waiting timing holds, keeps a stream
of verifications from starving the timing.  Within a process the holds nest: a timing inside
shared work converts the lock to exclusive and back.  A candidate
executor's timing runs under :func:`held_elsewhere`: the optimizer, which
asked for it, already holds the lock exclusively (waiting for it there
would deadlock).  A hold waits at most ``LEGO_GPU_LOCK_WAIT_S`` (600 s) and
then goes on without the lock, with a warning (a process that hangs on the
card must not stop every other).
"""
from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import threading
import time
import warnings
from pathlib import Path
from typing import Iterator

LOCK_DIR_ENV = "LEGO_GPU_LOCK_DIR"
DEFAULT_LOCK_DIR = "/tmp/lego-gpu-locks"
WAIT_S = float(os.environ.get("LEGO_GPU_LOCK_WAIT_S", "600"))
_POLL_S = 0.002

_state = threading.Lock()
_holds: dict[str, list[int]] = {}  # lock path -> stack of LOCK_SH / LOCK_EX held by this process
_files: dict[str, int] = {}  # lock path -> open file descriptor
_elsewhere = threading.local()


def _reset_after_fork() -> None:
    """A forked child holds nothing: it drops its copies of the descriptors (the parent's lock stays)."""
    global _state
    _state = threading.Lock()
    for fd in _files.values():
        with contextlib.suppress(OSError):
            os.close(fd)
    _files.clear()
    _holds.clear()


os.register_at_fork(after_in_child=_reset_after_fork)


def lock_path(device=None) -> Path:
    """The lock file of a CUDA device (default: the current one), named by
    the card's UUID so that processes with other ``CUDA_VISIBLE_DEVICES``
    orders share it."""
    import torch

    index = torch.cuda.current_device() if device is None else torch.device(device).index
    index = torch.cuda.current_device() if index is None else index
    props = torch.cuda.get_device_properties(index)
    name = str(getattr(props, "uuid", "") or f"{getattr(props, 'pci_bus_id', index)}-{index}")
    folder = Path(os.environ.get(LOCK_DIR_ENV) or DEFAULT_LOCK_DIR)
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"{name.replace('/', '_')}.lock"


def _effective(stack: list[int]) -> int:
    if not stack:
        return fcntl.LOCK_UN
    return fcntl.LOCK_EX if fcntl.LOCK_EX in stack else fcntl.LOCK_SH


def _wait(fd: int, mode: int, deadline: float) -> bool:
    """Take ``mode`` on ``fd``, polling until ``deadline``; whether it was taken."""
    while True:
        try:
            fcntl.flock(fd, mode | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() > deadline:
                return False
            time.sleep(_POLL_S)


def _apply(fd: int, mode: int, turnstile: int) -> None:
    """Set this process's hold on the lock to ``mode``.  Every taker first
    passes the turnstile (a second lock file: a timing holds it exclusively
    while it waits for the card), so a stream of verifications cannot keep
    a waiting timing out for ever."""
    # whatever this process holds is given up before it waits in the
    # turnstile: a process that kept its hold there (shared, waiting to time;
    # exclusive, going back to shared) and one in the turnstile waiting for
    # that hold to end would wait for each other for ever
    fcntl.flock(fd, fcntl.LOCK_UN)
    if mode == fcntl.LOCK_UN:
        return
    deadline = time.monotonic() + WAIT_S
    through = _wait(turnstile, fcntl.LOCK_EX if mode == fcntl.LOCK_EX else fcntl.LOCK_SH, deadline)
    try:
        if through and _wait(fd, mode, deadline):
            return
    finally:
        if through:
            fcntl.flock(turnstile, fcntl.LOCK_UN)
    warnings.warn(f"LEGO: the GPU lock was held by another process for over {WAIT_S:.0f} s; going on without it (timings may be disturbed)", stacklevel=4)


def create_lock_file(path: str) -> None:
    """Make the lock file ``path`` (readable and writable by every user of
    the machine) unless it exists; never through a symbolic link (OSError).
    The trusted parent makes them before a jailed run, which sees the folder
    read-only (``lego_core.runtime.gpu_probe``, ``jail.for_run``)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o666)
    try:
        if os.fstat(fd).st_uid == os.geteuid():
            os.fchmod(fd, 0o666)  # the umask took some bits: other users' runs share the card too
    finally:
        os.close(fd)


def _open(path: str) -> int:
    """This process's descriptor of the lock file ``path``, opened once,
    never through a symbolic link.  Read-only where the folder is (the jail
    shows it so): ``flock(2)`` needs no write access."""
    fd = _files.get(path)
    if fd is None:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o666)
        except OSError as exc:
            if exc.errno not in (errno.EROFS, errno.EACCES, errno.EPERM):
                raise
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        _files[path] = fd
    return fd


@contextlib.contextmanager
def _hold(mode: int, device=None, path=None) -> Iterator[None]:
    if getattr(_elsewhere, "depth", 0):
        yield
        return
    path = str(path or lock_path(device))
    with _state:
        fd, turnstile = _open(path), _open(path + ".turnstile")
        stack = _holds.setdefault(path, [])
        before = _effective(stack)
        stack.append(mode)
        after = _effective(stack)
    try:
        if after != before:
            _apply(fd, after, turnstile)
        yield
    finally:
        with _state:
            stack.remove(mode)
            now = _effective(stack)
        if now != after:
            _apply(fd, now, turnstile)


def exclusive(device=None, path=None):
    """Hold the GPU alone (a timing): waits for every other process's hold
    on the card to end.  ``device``: a CUDA device or index (default: the
    current one); ``path``: a lock file instead of the device's (tests)."""
    return _hold(fcntl.LOCK_EX, device, path)


def shared(device=None, path=None):
    """Hold the GPU beside others' shared holds (verification, reference
    runs): waits only while another process times."""
    return _hold(fcntl.LOCK_SH, device, path)


@contextlib.contextmanager
def held_elsewhere() -> Iterator[None]:
    """Within this block (this thread), holds are no-ops: the process that
    asked for this work holds the lock for it (a candidate executor timing
    for the optimizer)."""
    _elsewhere.depth = getattr(_elsewhere, "depth", 0) + 1
    try:
        yield
    finally:
        _elsewhere.depth -= 1
