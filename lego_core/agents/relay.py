"""Agent calls from the jailed optimizer child to its parent, which has the network.

The optimizer child (``lego_core.runtime.sandbox``) runs in a jail with no network
and an environment without secrets, so an LLM agent cannot run there: its
endpoint and API key stay in the parent; and a caller's own agent pools
(``OptimizeConfig.agent_pool``, an ``agents.pool.AgentPoolFactory``: the web
app's Celery fan-out) live in the caller's process, never in the child.
``AgentServer`` (the parent: ``lego_core.api``) listens on a Unix socket in a
private folder (a file: the jail's network namespace does not cut it off;
``lego_core.runtime.jail.for_run`` mounts the folder named by
``$LEGO_AGENT_RELAY``) and answers each call with the pool it serves for
that agent; ``RelayPool`` (the child: ``agents.pool.make_pool`` for an agent
named in ``OptimizeConfig.agent_relay``, through ``relay_pool``) sends the
calls through the socket.

Protocol, one connection per call: the request ``{"agent", "payload",
"feedback"}`` (``payload``: ``agents.payload.sub_to_payload``, rebuilt in
the parent by ``sub_from_payload``, never executed), then the answer
``{"proposal": {...}}`` or ``{"error": "..."}``.  The key is never in either.

``RelayServer`` holds the mechanics of the parent's side (the socket, its
threads, the environment the child inherits; a subclass says what a call
does); ``exchange`` / ``proposal_of`` are one call from the child.

Bounded (issue 28): code in an upload runs in the child and can write to the
socket, so every read here has a limit.  One message (a request, an answer)
is at most :data:`MAX_MESSAGE_BYTES` and :data:`MAX_MESSAGE_VALUES` JSON
values, read incrementally (never buffered whole first); the requests of
all calls in progress together at most :data:`MAX_PENDING_BYTES`; at most
:data:`MAX_CALLS` connections at once (more are answered with an error at
once); a request must arrive whole within :data:`READ_TIMEOUT_S` of its
connection and the answer leave within :data:`SEND_TIMEOUT_S`.  A message
or pending requests over their limit drop the connection and stop the run
(``RelayServer.alarm``, the run's watchdog in ``lego_core.api``: a
ChildCrashed "the agent relay received more than 16 MiB in one message
from the jailed run ..."); a stalled request or one call too many is only
refused, as the child's own call.  Real messages are far smaller: a request
carries one sub-problem's reference source, its inputs' specs and the
reasons earlier candidates failed; an answer one kernel file and the agent's
transcript (its prompts, which hold the reference source and earlier
kernels): kilobytes to a few hundred.
"""
from __future__ import annotations

import concurrent.futures
import json
import os
import shutil
import socket
import tempfile
import threading
import time

from lego_core.agents.base import Proposal
from lego_core.runtime.sandbox import ChildCrashed, value_bound

RELAY_ENV = "LEGO_AGENT_RELAY"  # the socket's path (lego_core.runtime.jail mounts its folder)
TIMEOUT_ENV = "LEGO_AGENT_RELAY_TIMEOUT_S"  # the longest the parent's pools take to answer, in seconds
DEFAULT_TIMEOUT_S = 3600.0  # the child's wait for an answer when the parent names no timeout
GRACE_S = 60.0  # the child waits this much longer than the parent's own timeout
NETWORK_AGENTS = ("llm",)  # agents that run in the parent even without a caller's pools
MiB = 1 << 20
MAX_MESSAGE_BYTES = 16 * MiB  # one request or answer (real ones: kilobytes to a few hundred)
MAX_MESSAGE_VALUES = 200_000  # JSON values in one message, counted before it is parsed (real ones: hundreds)
MAX_PENDING_BYTES = 64 * MiB  # the requests of all calls in progress together (real ones: 128 calls at most, small)
MAX_CALLS = 256  # connections served at once (a run's pools: config.MAX_AGENTS threads per agent, two agents at most)
READ_TIMEOUT_S = 60.0  # a request arrives whole within this long of its connection (the child sends it at once)
SEND_TIMEOUT_S = 60.0  # an answer leaves within this long (the child is waiting to read it)


class MessageTooLarge(ValueError):
    """A message over :data:`MAX_MESSAGE_BYTES` (or :data:`MAX_MESSAGE_VALUES`)."""


class RelayFlooded(ChildCrashed):
    """The jailed run sent the relay more than its limits allow; the run is stopped."""


class RelayServer:
    """The parent's side of a relay: a Unix socket in a private folder, a
    thread that accepts connections and a thread per call that reads its JSON
    request and sends back ``answer(request)`` (or ``error_answer(exc)`` when
    that raises) as JSON.

    A context manager: entering sets ``environment()`` (``$LEGO_AGENT_RELAY``;
    the child inherits it) and leaving restores it and closes the socket.
    One run per process at a time (the variables are process-wide).
    Subclasses define ``answer`` and may set the class attributes below."""

    dir_prefix = "lego-agents-"
    thread_name = "lego-agent-server"
    call_thread_name = "lego-agent-call"
    request_timeout_s: float | None = READ_TIMEOUT_S  # a request arrives whole within this long (None: no limit)
    send_timeout_s: float | None = SEND_TIMEOUT_S  # the answer leaves within this long (None: no limit)
    handler_join_s: float | None = None  # close() waits this long for each call still answering (None: not at all)
    max_message_bytes = MAX_MESSAGE_BYTES
    max_message_values = MAX_MESSAGE_VALUES
    max_pending_bytes = MAX_PENDING_BYTES
    max_calls = MAX_CALLS

    def __init__(self):
        self._dir = tempfile.mkdtemp(prefix=self.dir_prefix)  # mode 0700: only this user connects
        self.path = os.path.join(self._dir, "agents.sock")
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._server.bind(self.path)
        self._server.listen(64)
        self._server.settimeout(0.2)
        self._closed = threading.Event()
        self._handlers: list[threading.Thread] = []
        self._previous_env: dict[str, str | None] = {}
        self._lock = threading.Lock()
        self._pending = 0  # bytes of the requests of the calls in progress
        self._violation: RelayFlooded | None = None
        self._thread = threading.Thread(target=self._serve, name=self.thread_name, daemon=True)
        self._thread.start()

    def answer(self, request: dict) -> dict:
        """The answer to one call (``{"proposal": ...}``); an exception becomes ``error_answer``'s."""
        raise NotImplementedError

    def error_answer(self, exc: Exception) -> dict:
        return {"error": f"{type(exc).__name__}: {exc}"}

    def environment(self) -> dict[str, str]:
        """The variables set while entered, for the child to inherit."""
        return {RELAY_ENV: self.path}

    def alarm(self) -> RelayFlooded | None:
        """Why the run must stop (the first message or pending requests over
        their limit), or None: the run's watchdog (``lego_core.api``)."""
        return self._violation

    def _flooded(self, what: str) -> RelayFlooded:
        exc = RelayFlooded(f"the agent relay received {what} from the jailed run: code the run executed "
                           "(the model file, or code it imports) wrote to the relay's socket, and the run was stopped.")
        with self._lock:
            self._violation = self._violation or exc
        return exc

    def stopping(self) -> None:
        """Called by ``close`` once no call is accepted any more, before the
        threads are joined: end what the calls still wait on."""

    def __enter__(self):
        env = self.environment()
        self._previous_env = {name: os.environ.get(name) for name in env}
        os.environ.update(env)
        return self

    def __exit__(self, *exc_info) -> None:
        for name, value in self._previous_env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        self.close()

    def close(self) -> None:
        self._closed.set()
        self._server.close()
        self.stopping()
        self._thread.join(timeout=5)
        if self.handler_join_s is not None:
            for handler in list(self._handlers):
                handler.join(timeout=self.handler_join_s)
        shutil.rmtree(self._dir, ignore_errors=True)

    def _serve(self) -> None:
        while not self._closed.is_set():
            try:
                conn, _ = self._server.accept()
            except socket.timeout:
                continue
            except OSError:  # closed
                return
            self._handlers = [h for h in self._handlers if h.is_alive()]
            if len(self._handlers) >= self.max_calls:  # refused, not read: the child's own call fails
                self._refuse(conn, f"the agent relay serves at most {self.max_calls} calls at once")
                continue
            handler = threading.Thread(target=self._handle, args=(conn,), name=self.call_thread_name, daemon=True)
            self._handlers.append(handler)
            handler.start()

    def _refuse(self, conn: socket.socket, why: str) -> None:
        with conn:
            try:
                conn.setblocking(False)
                conn.send(json.dumps(self.error_answer(RuntimeError(why))).encode())
            except OSError:
                pass

    def _handle(self, conn: socket.socket) -> None:
        """One call: a JSON request in (bounded: module docstring), the answer out."""
        held = [0]  # bytes of this call's request counted in self._pending

        def charge(n: int) -> None:
            with self._lock:
                self._pending += n
                held[0] += n
                over = self._pending > self.max_pending_bytes
            if over:
                raise MessageTooLarge(f"more than {self.max_pending_bytes / MiB:g} MiB in the requests of the calls in progress")

        with conn:
            try:
                try:
                    data = read_bounded(conn, self.max_message_bytes, self.request_timeout_s, charge)
                    if value_bound(data) > self.max_message_values:
                        raise MessageTooLarge(f"more than {self.max_message_values:,} JSON values in one message")
                except MessageTooLarge as exc:
                    raise self._flooded(str(exc)) from None
                except socket.timeout:
                    raise TimeoutError(f"the request did not arrive whole within {self.request_timeout_s:g} s") from None
                answer = self.answer(json.loads(data))
                del data
            except RelayFlooded:
                return  # dropped unanswered: the run is stopped
            except Exception as exc:  # noqa: BLE001 - every failure goes back to the caller
                answer = self.error_answer(exc)
            finally:
                with self._lock:
                    self._pending -= held[0]
            try:
                conn.settimeout(self.send_timeout_s)
                conn.sendall(json.dumps(answer).encode())
            except OSError:
                pass  # the optimizer is gone, or does not read its answer


class AgentServer(RelayServer):
    """Answers agent calls on a Unix socket with ``pools`` (agent name ->
    ``agents.pool.AgentPool``): each call waits for its pool's proposal in
    a call thread of its own.  ``timeout_s``: the longest the pools take to
    answer (seconds; None: unknown), told to the child in
    ``$LEGO_AGENT_RELAY_TIMEOUT_S``.  The pools stay the caller's: closing
    the server does not close them."""

    def __init__(self, pools: dict, timeout_s: float | None = None):
        self.pools, self.timeout_s = pools, timeout_s
        super().__init__()

    def environment(self) -> dict[str, str]:
        extra = {TIMEOUT_ENV: str(float(self.timeout_s))} if self.timeout_s is not None else {}
        return {**super().environment(), **extra}

    def answer(self, request: dict) -> dict:
        from lego_core.agents.payload import sub_from_payload

        pool = self.pools.get(request.get("agent"))
        if pool is None:
            raise ValueError(f"no agent {request.get('agent')!r} is served here")
        sub = sub_from_payload(request["payload"])  # parsed, never executed
        proposal = pool.submit(sub, [str(f) for f in request.get("feedback", [])]).result()
        return {"proposal": proposal.to_dict()}


def exchange(sock: socket.socket, path: str, request: dict, timeout_s: float) -> dict:
    """One call through ``sock`` (a new ``AF_UNIX`` stream socket, which the
    caller closes): ``request`` to the relay at ``path``, its answer back.
    TimeoutError when no answer comes within ``timeout_s``, RuntimeError when
    the connection fails or the answer is no JSON."""
    sock.settimeout(timeout_s)
    try:
        sock.connect(path)
        sock.sendall(json.dumps(request).encode())
        sock.shutdown(socket.SHUT_WR)
        data = read_bounded(sock, MAX_MESSAGE_BYTES)
        if value_bound(data) > MAX_MESSAGE_VALUES:
            raise MessageTooLarge(f"more than {MAX_MESSAGE_VALUES:,} JSON values in one message")
        return json.loads(data or b"{}")
    except MessageTooLarge as exc:
        raise RuntimeError(f"the agent relay's answer was refused: {exc}") from None
    except socket.timeout:
        raise TimeoutError(f"the agent relay did not answer within {timeout_s:g} s") from None
    except (OSError, ValueError) as exc:
        raise RuntimeError(f"the agent relay at {path} failed: {exc}") from None


def proposal_of(answer: dict) -> dict:
    """The proposal dict of a relay's answer; RuntimeError with its error otherwise."""
    if "proposal" in answer:
        return answer["proposal"]
    raise RuntimeError(answer.get("error") or "the agent relay closed the connection without an answer")


class RelayPool:
    """The child's side: each ``submit`` is one connection to the socket at
    ``path``, from one of ``size`` threads (``agents.pool.AgentPool``)."""

    def __init__(self, agent_name: str, path: str, size: int = 1, timeout_s: float = DEFAULT_TIMEOUT_S):
        self.agent_name, self.path, self.size, self.timeout_s = agent_name, path, size, timeout_s
        self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=max(1, size), thread_name_prefix="lego-agent-relay")

    def submit(self, sub, feedback: list[str]) -> "concurrent.futures.Future[Proposal]":
        from lego_core.agents.payload import sub_to_payload

        request = {"agent": self.agent_name, "payload": sub_to_payload(sub), "feedback": list(feedback)}
        return self._executor.submit(self._round_trip, request)

    def _round_trip(self, request: dict) -> Proposal:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            answer = exchange(sock, self.path, request, self.timeout_s)
        return Proposal.from_dict(proposal_of(answer))

    def close(self) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)


def relay_pool(agent_name: str, size: int = 1) -> RelayPool:
    """The child's pool for ``agent_name``, whose calls the parent answers:
    a ``RelayPool`` to the socket ``$LEGO_AGENT_RELAY`` names, waiting
    ``$LEGO_AGENT_RELAY_TIMEOUT_S`` + ``GRACE_S`` seconds for each answer
    (``DEFAULT_TIMEOUT_S`` when the parent names no timeout).  Raises
    RuntimeError when ``$LEGO_AGENT_RELAY`` names no socket."""
    path = os.environ.get(RELAY_ENV)
    if not path:
        raise RuntimeError(f"the {agent_name} agent runs in the parent process, but ${RELAY_ENV} names no socket")
    timeout = os.environ.get(TIMEOUT_ENV)
    return RelayPool(agent_name, path, size, float(timeout) + GRACE_S if timeout else DEFAULT_TIMEOUT_S)


def read_bounded(sock: socket.socket, limit: int, within_s: float | None = None, charge=None) -> bytearray:
    """What the peer sends until it shuts its side down, read in chunks:
    MessageTooLarge as soon as more than ``limit`` bytes came (the rest is
    never read), socket.timeout when it has not all come within ``within_s``
    seconds (None: each read waits the socket's own timeout).  ``charge(n)``
    is told each chunk's size before it is kept (and may raise)."""
    deadline = None if within_s is None else time.monotonic() + within_s
    data = bytearray()
    while True:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise socket.timeout("timed out")
            sock.settimeout(left)
        chunk = sock.recv(min(1 << 16, limit + 1 - len(data)))
        if not chunk:
            return data
        if charge is not None:
            charge(len(chunk))
        data += chunk
        if len(data) > limit:
            raise MessageTooLarge(f"more than {limit / MiB:g} MiB in one message")
