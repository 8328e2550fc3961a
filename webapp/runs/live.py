"""Wake-ups for a run's live viewers (``consumers.RunEventsConsumer``).

The event log in the database is the source of truth: ``EventRecorder``
stores each event as a ``RunEvent`` first and only then calls
``notify_new_events``, which sends ``{"type": "run.wakeup", "seq": n}`` to
the channel-layer group ``run-<uuid hex>``.  A consumer that gets it reads
the new events from the database; a lost wake-up only delays them until the
consumer's next poll (``LEGO_EVENT_POLL_S``).  So a wake-up carries no
event data and sending one may fail without losing anything.

Sending happens on one background thread per process with its own event
loop (one Redis connection, reused), never in the optimizer's thread:
``notify_new_events`` only notes the newest seq and returns (a few
microseconds).  Per run at most one wake-up goes out every ``THROTTLE_S``;
the last one of a burst always goes out (trailing edge), so the viewer is
never left waiting for a poll after the optimizer goes quiet.

With the in-memory channel layer (the embedded default, no Redis) a
wake-up from the worker process could reach nobody in the web process, so
nothing is sent at all: viewers there rely on the poll (0.5 s).
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import threading
import uuid

log = logging.getLogger(__name__)

# at most one wake-up per run per 200 ms: each goes to every viewer's channel,
# so 200 viewers of one run at 50 ms were 4,000 messages/s into one daphne
# process, and under CPU load late wake-ups left delivery to the 5 s poll
# (tests/webapp/test_web_load.py: p99 4.9 s at 50 ms, 1.1 s at 200 ms)
THROTTLE_S = 0.2
SEND_TIMEOUT_S = 2.0  # a group_send that takes longer is given up (logged)
WAKEUP = "run.wakeup"


def group_name(run_id) -> str:
    """The channel-layer group of a run's viewers: ``run-<uuid hex>``."""
    return f"run-{uuid.UUID(str(run_id)).hex}"


def notify_new_events(run_id, seq: int) -> None:
    """Wake the run's viewers up: events up to ``seq`` are stored.

    Throttled (at most one wake-up per run per ``THROTTLE_S``, the newest
    seq always goes out last), sent from a background thread, and it never
    raises: a channel-layer failure is logged and the viewers' poll picks
    the events up instead.
    """
    try:
        notifier = _notifier()
        if notifier is not None:
            notifier.submit(group_name(run_id), seq, now=False)
    except Exception:  # noqa: BLE001 - must never break a run
        log.warning("could not queue a wake-up for run %s", run_id, exc_info=True)


def notify_run_changed(run_id, seq: int | None = None, wait_s: float = SEND_TIMEOUT_S) -> bool:
    """Wake the run's viewers up at once, unthrottled: its state or share
    token changed (a viewer then gets ``state``/``end``, or is cut off).

    Waits up to ``wait_s`` for the wake-up to go out (0: do not wait), so
    the last wake-up of a run is sent before its task returns.  Returns
    whether it was sent (True also when there is no cross-process layer to
    send on); never raises.
    """
    try:
        notifier = _notifier()
        if notifier is None:
            return True
        future = notifier.submit(group_name(run_id), seq, now=True)
        if wait_s <= 0:
            return True
        return bool(future.result(timeout=wait_s))
    except concurrent.futures.TimeoutError:
        log.warning("the wake-up for run %s took more than %.1f s", run_id, wait_s)
        return False
    except Exception:  # noqa: BLE001
        log.warning("could not send a wake-up for run %s", run_id, exc_info=True)
        return False


class Notifier:
    """Sends throttled wake-ups on ``layer`` from a daemon thread of its own."""

    def __init__(self, layer, throttle_s: float = THROTTLE_S, send_timeout_s: float = SEND_TIMEOUT_S):
        self.layer = layer
        self.throttle_s = throttle_s
        self.send_timeout_s = send_timeout_s
        self.pid = os.getpid()
        self.lock = threading.Lock()
        self.pending: dict[str, int | None] = {}  # group -> newest seq not sent yet
        self.scheduled: set[str] = set()  # groups with a send on its way
        self.last_sent: dict[str, float] = {}  # group -> loop time of its last send
        self.sent = 0  # wake-ups sent (for tests and measurements)
        self.failed = 0
        self.tasks: set[asyncio.Task] = set()
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._serve, name="lego-live-wakeups", daemon=True)
        self.thread.start()

    def stop(self) -> None:
        """Stop the thread's loop (pending sends are dropped)."""
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=5)

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def submit(self, group: str, seq: int | None, now: bool) -> concurrent.futures.Future | None:
        """Note ``seq`` for ``group``; schedule a send unless one is already
        on its way.  ``now`` sends at once and returns its future."""
        with self.lock:
            old = self.pending.get(group)
            self.pending[group] = seq if old is None else max(old, seq if seq is not None else old)
            if group in self.scheduled and not now:
                return None  # the scheduled send will carry this seq
            self.scheduled.add(group)
        if now:
            return asyncio.run_coroutine_threadsafe(self._send(group), self.loop)
        self.loop.call_soon_threadsafe(self._schedule, group)
        return None

    def _schedule(self, group: str) -> None:
        last = self.last_sent.get(group)
        delay = 0.0 if last is None else max(0.0, last + self.throttle_s - self.loop.time())
        self.loop.call_later(delay, self._start_send, group)

    def _start_send(self, group: str) -> None:
        task = self.loop.create_task(self._send(group))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _send(self, group: str) -> bool:
        with self.lock:
            if group not in self.pending:
                return True  # an unthrottled send already carried it
            seq = self.pending.pop(group)
            self.scheduled.discard(group)
        now = self.loop.time()
        self.last_sent[group] = now
        if len(self.last_sent) > 1024:  # forget runs that went quiet
            for name, at in list(self.last_sent.items()):
                if now - at > self.throttle_s:
                    del self.last_sent[name]
        try:
            await asyncio.wait_for(self.layer.group_send(group, {"type": WAKEUP, "seq": seq}), self.send_timeout_s)
        except Exception:  # noqa: BLE001 - events are stored; viewers poll
            self.failed += 1
            log.warning("wake-up for %s not sent; its viewers will poll", group, exc_info=True)
            return False
        self.sent += 1
        return True


_lock = threading.Lock()
_instance: Notifier | None = None
_disabled_pid: int | None = None


def _notifier() -> Notifier | None:
    """This process's Notifier (started on first use, again after a fork);
    None when the channel layer is missing or in-memory."""
    global _instance, _disabled_pid
    pid = os.getpid()
    if _instance is not None and _instance.pid == pid:
        return _instance
    if _disabled_pid == pid:
        return None
    with _lock:
        if _instance is not None and _instance.pid == pid:
            return _instance
        from channels.layers import InMemoryChannelLayer, get_channel_layer

        layer = get_channel_layer()
        if layer is None or isinstance(layer, InMemoryChannelLayer):
            _disabled_pid = pid
            return None
        _instance = Notifier(layer)
        return _instance
