"""A running run's heartbeat: proof, every few seconds, that its worker is
alive, and the way a running task learns that it should stop.

While ``execution.execute`` runs, a daemon thread of the task's process
writes ``Run.heartbeat_at`` every ``LEGO_HEARTBEAT_S`` seconds, only while
the run is still ``running``.  The reaper (``lifecycle.reap_stuck_runs``)
fails a run whose heartbeat is older than ``LEGO_HEARTBEAT_TIMEOUT_S``: its
process died or stopped answering.  When the write finds the run no longer
running (its owner cancelled it, or the reaper failed it while the process
was frozen) the thread calls ``on_stop`` once; in a prefork pool process the
task's ``on_stop`` ends that process (``stop_pool_process``), the optimizer's
child dies with it, and the worker starts a fresh pool process.
"""
from __future__ import annotations

import logging
import os
import signal
import threading
from typing import Callable

from django.db import connections
from django.utils import timezone

from webapp.runs.models import Run

log = logging.getLogger(__name__)

# set in Celery prefork pool processes by ``signals.mark_pool_process``
IN_POOL_PROCESS = False


def stop_pool_process() -> None:
    """End this Celery pool process (SIGTERM, which Celery resets to its
    default in pool processes): the worker's main process replaces it and
    the message it held is requeued, then dropped as the run has ended.
    Does nothing outside a pool process (a test, the solo pool), where it
    would stop the whole program."""
    if IN_POOL_PROCESS:
        log.warning("run stopped from outside: ending pool process %d", os.getpid())
        os.kill(os.getpid(), signal.SIGTERM)


class Heartbeat:
    """``with Heartbeat(run_id, interval_s, on_stop):`` beats while the
    block runs.  ``stopped`` is the state the run was found in when it was
    no longer running (``cancelled``, ``failed``), else None."""

    def __init__(self, run_id, interval_s: float, on_stop: Callable[[], None] | None = None):
        self.run_id = run_id
        self.interval_s = interval_s
        self.on_stop = on_stop
        self.beats = 0
        self.stopped: str | None = None
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._serve, name=f"lego-heartbeat-{run_id}", daemon=True)

    def __enter__(self) -> "Heartbeat":
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._done.set()
        self._thread.join(timeout=self.interval_s + 5)

    def beat(self) -> bool:
        """Write the heartbeat; False when the run is no longer running
        (``stopped`` then says its state)."""
        if Run.objects.filter(pk=self.run_id, state=Run.State.RUNNING).update(heartbeat_at=timezone.now()):
            self.beats += 1
            return True
        self.stopped = Run.objects.filter(pk=self.run_id).values_list("state", flat=True).first() or "deleted"
        return False

    def _serve(self) -> None:
        try:
            while not self._done.wait(self.interval_s):
                try:
                    alive = self.beat()
                except Exception:  # noqa: BLE001 - a database hiccup: try again next beat
                    log.warning("heartbeat of run %s not written", self.run_id, exc_info=True)
                    continue
                if not alive:
                    log.warning("run %s is %s: stopping its task", self.run_id, self.stopped)
                    if self.on_stop is not None and not self._done.is_set():
                        self.on_stop()
                    return
        finally:
            connections.close_all()  # this thread's own connections
