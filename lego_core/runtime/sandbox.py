"""Run a function in a child process and forward its events to a sink.

Uploaded model code must never run in the caller's process (the web
process, a Celery worker that serves other runs).  ``run_in_child`` starts a
fresh interpreter (``lego_core.runtime.sandbox_child``), inside
bubblewrap when given a :class:`lego_core.runtime.jail.Jail` (a private view of the
file system, no network, no capabilities: see ``jail.py``), else as a plain
child that only cuts its own network where the OS allows it.  The child
applies resource limits (``config.SandboxLimits``), then runs
``target(*args, emit)``.  Events the child emits arrive at the parent's
sink in order.  The child's return value is returned; an exception raised
in the child is raised again in the parent (ProblemError keeps its file,
line and hint; built-in exceptions keep their type; others become
RuntimeError with the child's traceback); a child that dies (signal, out of
memory, ``os._exit``) becomes a :class:`ChildCrashed` with a message that
says how it died.

Everything the child sends is JSON, read with limits on its size, its
number of values and its nesting (a message beyond them is a ChildCrashed):
the parent never unpickles what a process running uploaded code wrote
(``sandbox_child``).  Messages of other kinds go to ``handlers`` (the
kernel cache's writes: ``lego_core.api``).  The parent reads the pipe itself
(:class:`_MessageReader`), never blocking on a message the child began and
did not finish, and bounds the stream: an event of at most
:data:`MAX_EVENT_BYTES`, at most :data:`MAX_STREAM_MESSAGES` messages and
:data:`MAX_STREAM_BYTES` bytes in all (a child flooding events fails the run
saying so; the parent holds at most one message and one read at a time).

Stage limits (``config.StageLimits``) are enforced here, outside the jail:
the parent notes when each ``stage_started`` event arrives and, when the
current stage has run past its limit, kills the child's whole process group
(the child starts a session of its own) and raises :class:`StageTimeLimit`
naming the stage, its limit and how to raise it.

The child's stdout and stderr are one pipe the parent reads
(:class:`_OutputRelay`): its first :data:`MAX_OUTPUT_HEAD` bytes go to the
parent's stderr as they come, then only the last :data:`MAX_OUTPUT_TAIL` are
kept and written when the child ends, after a line that says how many bytes
were cut (an upload that printed 128 MB filled the worker's log).
"""
from __future__ import annotations

import builtins
import json
import logging
import os
import pickle
import re
import select
import signal
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

from lego_core.runtime import sandbox_child
from lego_core.config import STAGE_WORK, STAGES
from lego_core.errors import OptimizeError
from lego_core.events import event_from_dict, Sink, null_sink
from lego_core.load.spec import ProblemError

log = logging.getLogger(__name__)

MAX_MESSAGE_BYTES = 256 << 20  # one message from the child (an event, the report, a cache entry)
# A message's shape, bounded before and after it is parsed: 256 MiB of tiny
# nested lists would cost the parent about 22 times that in Python objects,
# and deep nesting overflows any recursive reader of it.
MAX_MESSAGE_VALUES = 1_000_000  # JSON values (numbers, strings, lists, objects...) in one message
MAX_MESSAGE_DEPTH = 100  # lists and objects nested in one another
_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')  # a JSON string, escapes included
_PACKAGE_PARENT = str(Path(__file__).resolve().parents[2])  # the folder lego_core/ is in
# The stream of messages as a whole: the parent forwards every event to its
# sink (the web app stores each one), so a child that floods events must end
# its run, not fill the database.  A run of a 430-sub-problem model sends
# some ten thousand events; the report (the last message) is below 16 MiB.
MAX_EVENT_BYTES = 16 << 20  # one event (a node's reference source, a transcript)
MAX_STREAM_MESSAGES = 500_000  # messages in one run
MAX_STREAM_BYTES = 1 << 30  # bytes of all messages of one run
_READ_BYTES = 1 << 20  # read from the pipe at most this much at a time
MAX_OUTPUT_HEAD = 64 << 10  # bytes of the child's stdout + stderr forwarded as they come
MAX_OUTPUT_TAIL = 64 << 10  # bytes of the rest kept (its last ones) and forwarded when it ends


class _OutputRelay:
    """Reads the child's stdout + stderr (one pipe, ``fd``) in a thread and
    forwards it to ``out_fd`` (the parent's stderr), bounded: the first
    :data:`MAX_OUTPUT_HEAD` bytes as they come, then only the last
    :data:`MAX_OUTPUT_TAIL`, written by :meth:`close` after a line saying
    how many bytes between were cut.  ``close`` stops reading once the pipe
    is empty, even if a process left behind still holds it open."""

    def __init__(self, fd: int, out_fd: int = 2) -> None:
        self.fd, self.out_fd = fd, out_fd
        self.forwarded = 0
        self.tail = bytearray()
        self.cut = 0
        self._stop = threading.Event()
        self._give_up = 0.0
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _write(self, data: bytes) -> None:
        try:
            while data:
                data = data[os.write(self.out_fd, data):]
        except OSError:
            pass

    def _read(self) -> None:
        try:
            while True:
                ready, _, _ = select.select([self.fd], [], [], 0.2)
                if self._stop.is_set() and (not ready or time.monotonic() > self._give_up):
                    return
                if not ready:
                    continue
                data = os.read(self.fd, 1 << 16)
                if not data:
                    return
                room = max(0, MAX_OUTPUT_HEAD - self.forwarded)
                if room:
                    self._write(data[:room])
                    self.forwarded += min(room, len(data))
                    data = data[room:]
                if data:
                    self.tail += data
                    if len(self.tail) > MAX_OUTPUT_TAIL:
                        self.cut += len(self.tail) - MAX_OUTPUT_TAIL
                        del self.tail[:-MAX_OUTPUT_TAIL]
        except (OSError, ValueError):
            return

    def close(self) -> None:
        """Read what is left (a second at most), write the kept tail, close the pipe."""
        self._give_up = time.monotonic() + 1
        self._stop.set()
        self._thread.join(timeout=2)
        if self.cut:
            self._write(f"\n[lego: {self.cut:,} bytes of the optimizer process's output cut here; "
                        f"its first {self.forwarded:,} and last {len(self.tail):,} are kept]\n".encode())
        self._write(bytes(self.tail))
        if not self._thread.is_alive():
            os.close(self.fd)


class ChildCrashed(RuntimeError):
    """The child process ended without a result (killed, crashed, timed out,
    or it broke the message protocol)."""


class StageTimeLimit(ChildCrashed):
    """A stage of the run (``config.STAGES``) ran past its limit (``config.StageLimits``);
    the child's process group was killed.  ``stage``, ``limit_s``: which, and its limit."""

    def __init__(self, stage: str, limit_s: float):
        self.stage, self.limit_s = stage, limit_s
        super().__init__(stage_limit_message(stage, limit_s))

    def __reduce__(self):
        return type(self), (self.stage, self.limit_s)


def stage_limit_message(stage: str, limit_s: float) -> str:
    """What a user reads when ``stage`` ran past ``limit_s`` seconds: the stage, the limit, what ran then, how to raise it."""
    return (f"the {stage} stage ran past its limit of {limit_s:g} s and was stopped ({STAGE_WORK.get(stage, stage)}). "
            f"If the model needs longer there, raise the limit: --stage-limit {stage}=SECONDS on the command line, "
            f"LEGO_STAGE_LIMIT_{stage.upper()}_S on the server (StageLimits.{stage}_s from Python).")


class _StageClock:
    """The current stage of the child and when the parent heard it began,
    against ``limits`` (``{stage: seconds or None}``).  The first stage
    counts from ``started`` (the child's start); only a later stage of
    :data:`config.STAGES` starts a new clock (a repeated, earlier or unknown
    one changes nothing: a child cannot buy itself time)."""

    def __init__(self, limits: dict, started: float):
        self.limits, self.stage, self.since = dict(limits), STAGES[0], started

    def saw(self, event) -> None:
        if event.type == "stage_started" and event.stage in STAGES and STAGES.index(event.stage) > STAGES.index(self.stage):
            self.stage, self.since = event.stage, time.monotonic()

    def overrun(self) -> StageTimeLimit | None:
        limit = self.limits.get(self.stage)
        if limit is not None and time.monotonic() - self.since > limit:
            return StageTimeLimit(self.stage, limit)
        return None


class _MessageReader:
    """The child's messages from the pipe ``fd``, in
    ``multiprocessing.connection``'s framing (a 4-byte big-endian length, or
    -1 and an 8-byte length, then the bytes), read without ever waiting
    longer than asked: a child that sends half a message and stops cannot
    hold the parent (``Connection.recv_bytes`` waits for the whole of it).
    Holds at most one message and one read; raises ChildCrashed for a
    message over :data:`MAX_MESSAGE_BYTES` (on its length, before reading
    it) or a stream beyond :data:`MAX_STREAM_MESSAGES` /
    :data:`MAX_STREAM_BYTES`."""

    def __init__(self, fd: int):
        self.fd = fd
        self.buffer = bytearray()
        self.start = 0  # where the part of buffer not yet handed out begins
        self.messages = self.bytes = 0
        self.eof = False
        self._poll = select.poll()  # not select(): a worker's descriptors may be numbered past 1023
        self._poll.register(fd, select.POLLIN)

    def wait(self, timeout_s: float) -> None:
        """Read what the pipe holds, waiting up to ``timeout_s`` for it; ``eof`` once the child closed it."""
        if not self._poll.poll(int(timeout_s * 1000)):
            return
        data = os.read(self.fd, _READ_BYTES)
        if not data:
            self.eof = True
            return
        self.bytes += len(data)
        if self.bytes > MAX_STREAM_BYTES:
            raise ChildCrashed(f"the optimizer process sent more than {MAX_STREAM_BYTES >> 20:,} MiB of messages in all "
                               "and was stopped.")
        if self.start:
            del self.buffer[:self.start]
            self.start = 0
        self.buffer += data

    def next(self) -> bytes | None:
        """The next whole message read, or None."""
        available = len(self.buffer) - self.start
        if available < 4:
            return None
        (size,), header = struct.unpack_from("!i", self.buffer, self.start), 4
        if size == -1:
            if available < 12:
                return None
            (size,), header = struct.unpack_from("!Q", self.buffer, self.start + 4), 12
        elif size < 0:
            raise ChildCrashed("the optimizer process sent a message outside the protocol and was stopped.")
        if size > MAX_MESSAGE_BYTES:
            raise ChildCrashed(f"the optimizer process sent a message over {MAX_MESSAGE_BYTES >> 20} MiB and was stopped.")
        if available < header + size:
            return None
        begin = self.start + header
        data = bytes(self.buffer[begin:begin + size])
        self.start = begin + size
        self.messages += 1
        if self.messages > MAX_STREAM_MESSAGES:
            raise ChildCrashed(f"the optimizer process sent more than {MAX_STREAM_MESSAGES:,} messages and was stopped.")
        return data


def run_in_child(
    target: Callable[..., Any],
    args: tuple,
    sink: Sink | None = None,
    timeout_s: float | None = None,
    watchdog: Callable[[], BaseException | None] | None = None,
    *,
    jail=None,
    limits: dict | None = None,
    handlers: dict[str, Callable[[dict], None]] | None = None,
    stage_limits: dict[str, float | None] | None = None,
) -> Any:
    """Call ``target(*args, emit)`` in a child process.

    ``target`` and ``args`` must pickle (by reference: module-level
    functions).  ``emit`` is a callable the child uses for events; each is
    delivered to ``sink`` in the parent.  ``timeout_s`` (seconds, None for no
    limit) kills the child and raises ChildCrashed when exceeded.
    ``watchdog()`` is called several times a second; when it returns an
    exception the child is killed and that exception raised (a flooded
    agent relay, say).  ``jail``: a ``lego_core.runtime.jail.Jail`` to run the child
    in (None: a plain child).  ``limits``: ``SandboxLimits.as_dict()``.
    ``handlers``: ``{kind: f(message)}`` for the child's other messages
    (``sandbox_child.forwarder``).  ``stage_limits``: ``{stage: seconds or
    None}`` (``StageLimits.for_run``): when the child's current stage (its
    ``stage_started`` events, the first stage from its start) runs past its
    limit, its process group is killed and :class:`StageTimeLimit` raised.
    The result must be JSON-ready data.
    """
    sink = sink or null_sink
    job = {
        "call": pickle.dumps((target, args)),
        "sys_path": [p for p in sys.path if p] if jail is None else [],
        "limits": dict(limits or {}),
        "isolate_network": jail is None and os.environ.get("LEGO_SANDBOX_NETWORK") != "1",
    }
    job_read, job_write = os.pipe()
    out_read, out_write = os.pipe()
    print_read, print_write = os.pipe()  # the child's stdout and stderr
    argv = [sys.executable, "-c", sandbox_child.ENTRY, str(job_read), str(out_write)]
    if jail is not None:
        # bwrap itself gets the scrubbed environment too: it stays in the
        # jail's pid namespace as its pid 1, whose /proc/1/environ the child
        # can read (with the worker's environment it held the secret key)
        command, env = jail.command(argv), dict(jail.env)
    else:
        command, env = argv, dict(os.environ, PYTHONPATH=os.pathsep.join([_PACKAGE_PARENT, *filter(None, [os.environ.get("PYTHONPATH")])]))
        env.pop("LEGO_IMPORT_VIEW", None)  # set by the jail only (local_modules.VIEW_ENV): this child is not jailed
    clock = _StageClock(stage_limits, time.monotonic()) if stage_limits else None
    try:
        # a session (and process group) of its own: a stage past its limit kills the group, whatever the child started
        child = subprocess.Popen(command, pass_fds=(job_read, out_write), env=env, stdin=subprocess.DEVNULL,
                                 stdout=print_write, stderr=print_write, close_fds=True, start_new_session=True)
    except BaseException:
        os.close(print_read)
        os.close(out_read)
        raise
    finally:
        os.close(job_read)
        os.close(out_write)
        os.close(print_write)
    printed = _OutputRelay(print_read)
    writer = threading.Thread(target=_send_job, args=(job_write, pickle.dumps(job)), daemon=True)
    writer.start()  # in a thread: a child that never reads must not block the parent
    try:
        return _pump(child, _MessageReader(out_read), sink, timeout_s, watchdog, handlers or {}, jail is not None, clock)
    finally:
        _kill_group(child)
        try:
            child.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        os.close(out_read)
        writer.join(timeout=1)
        printed.close()


def _kill_group(child: subprocess.Popen) -> None:
    """SIGKILL the child's process group (its session's: ``start_new_session``)
    while the child lives (not yet reaped, so its group id is still its own);
    in the jail, bwrap's death takes its pid namespace, all of it, along."""
    if child.poll() is not None:
        return
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except OSError:
        child.kill()


def _send_job(fd: int, data: bytes) -> None:
    try:
        with os.fdopen(fd, "wb") as pipe:
            pipe.write(data)
    except OSError:  # the child died before reading it: the pump reports how
        pass


def _pump(child: subprocess.Popen, reader: _MessageReader, sink: Sink, timeout_s: float | None, watchdog, handlers: dict,
          jailed: bool, clock: _StageClock | None) -> Any:
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        if deadline is not None and time.monotonic() > deadline:
            raise ChildCrashed(f"the optimizer ran past its time limit of {timeout_s:g} s and was stopped.")
        alarm = watchdog() if watchdog is not None else None
        if alarm is None and clock is not None:
            alarm = clock.overrun()
        if alarm is not None:
            raise alarm
        data = reader.next()
        if data is None:
            if reader.eof:  # the child closed its end without a result: it died
                try:
                    code = child.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    code = None
                raise ChildCrashed(_death_message(code, jailed))
            reader.wait(0.2)
            continue
        kind, message = _decode(data)
        if kind == "event":
            if len(data) > MAX_EVENT_BYTES:
                raise ChildCrashed(f"the optimizer process sent an event over {MAX_EVENT_BYTES >> 20} MiB and was stopped.")
            try:
                event = event_from_dict(message["event"])
            except (KeyError, TypeError, ValueError) as exc:
                raise ChildCrashed(f"the optimizer process sent an event outside the protocol ({type(exc).__name__}: {exc}) and was stopped.") from None
            if clock is not None:
                clock.saw(event)
            sink(event)
        elif kind == "done":
            return message.get("result")
        elif kind == "error":
            raise rebuild_error(message.get("error"))
        elif kind in handlers:
            try:
                handlers[kind](message)
            except Exception:  # noqa: BLE001 - a bad message of the child's must not end the parent's run
                log.exception("the optimizer process's %s message could not be handled", kind)
        else:
            raise ChildCrashed(f"the optimizer process sent a message of unknown kind {str(kind)[:40]!r} and was stopped.")


def _decode(data: bytes) -> tuple[str, dict]:
    """One message of the child's as ``(kind, message)``.  Raises ChildCrashed
    when it is not JSON, not an object with a ``kind``, holds more than
    :data:`MAX_MESSAGE_VALUES` values (counted before parsing, so the parent
    never builds them) or nests lists and objects deeper than
    :data:`MAX_MESSAGE_DEPTH`."""
    if value_bound(data) > MAX_MESSAGE_VALUES:
        raise ChildCrashed(f"the optimizer process sent a message of more than {MAX_MESSAGE_VALUES:,} JSON values and was stopped.")
    try:
        message = json.loads(data)
    except RecursionError:
        raise ChildCrashed(f"the optimizer process sent a message nested deeper than {MAX_MESSAGE_DEPTH} levels and was stopped.") from None
    except (ValueError, UnicodeDecodeError):
        raise ChildCrashed("the optimizer process sent a message that is not JSON and was stopped.") from None
    if _depth_over(message, MAX_MESSAGE_DEPTH):
        raise ChildCrashed(f"the optimizer process sent a message nested deeper than {MAX_MESSAGE_DEPTH} levels and was stopped.")
    if not isinstance(message, dict) or not isinstance(message.get("kind"), str):
        raise ChildCrashed("the optimizer process sent a message outside the protocol and was stopped.")
    return message["kind"], message


def value_bound(data: bytes) -> int:
    """An upper bound on the number of JSON values in ``data``: every value
    but the first of a list or object follows a comma, the first an opening
    bracket.  Commas and brackets inside strings are not counted (strings
    are blanked first); a malformed string only makes the bound larger."""
    def bound(text: bytes) -> int:
        return text.count(b",") + text.count(b"[") + text.count(b"{") + 1

    rough = bound(data)  # strings counted too: most messages are far below the limit with them
    return rough if rough <= MAX_MESSAGE_VALUES else bound(_JSON_STRING.sub(b'""', data))


def _depth_over(value: Any, limit: int) -> bool:
    """Whether lists and objects nest deeper than ``limit`` in ``value`` (without recursion)."""
    stack = [(value, 1)] if isinstance(value, (list, dict)) else []
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        children = item.values() if isinstance(item, dict) else item
        stack.extend((child, depth + 1) for child in children if isinstance(child, (list, dict)))
    return False


def rebuild_error(data: Any) -> Exception:
    """The exception ``sandbox_child.error_data`` described: ProblemError
    with its path, line and hint; OptimizeError and ChildCrashed; a built-in
    exception type with its message; anything else RuntimeError("Type:
    message" and the child's traceback)."""
    if not isinstance(data, dict):
        return ChildCrashed("the optimizer process reported an error outside the protocol.")
    name, message = str(data.get("type", "Exception"))[:100], str(data.get("message", ""))
    if name == "ProblemError":
        line = data.get("line")
        path = data.get("path")
        return ProblemError(message, str(path) if path is not None else None, line if isinstance(line, int) else None, str(data.get("hint") or ""))
    known = {"OptimizeError": OptimizeError, "ChildCrashed": ChildCrashed}
    cls = known.get(name) or getattr(builtins, name, None)
    if isinstance(cls, type) and issubclass(cls, Exception):
        try:
            return cls(message)
        except Exception:  # noqa: BLE001 - a built-in that wants other arguments
            pass
    return RuntimeError(f"{name}: {message}\n{data.get('traceback', '')}")


def _death_message(exitcode: int | None, jailed: bool) -> str:
    if jailed and exitcode is not None and exitcode > 128:  # bwrap exits 128 + N for a child killed by signal N
        exitcode = 128 - exitcode
    if exitcode is not None and exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        return f"the optimizer process was killed by {name} (out of memory, a resource limit or a crash in native code)."
    return (f"the optimizer process exited with code {exitcode} without a result "
            "(code it ran, such as the model file, ended it: os._exit, or a closed output).")


# used by the candidate executors (lego_core.judge.process.child), which start below the child
def limit_executor_resources() -> None:
    """No core dumps; cap open files (the other limits are inherited from the child)."""
    sandbox_child.limit_resources({})


def isolate_executor_network() -> None:
    """A new, empty network namespace where permitted; ``LEGO_SANDBOX_NETWORK=1`` keeps the network."""
    if os.environ.get("LEGO_SANDBOX_NETWORK") != "1":
        sandbox_child.isolate_network()
