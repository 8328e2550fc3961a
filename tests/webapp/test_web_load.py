"""Load on the live event stream (issue 11): 200 websocket viewers of one run
while three runs go on at once, on loopback, through the production path.

daphne serves the real ASGI application on PostgreSQL with the
channels-redis layer; three writer processes (one per run, as three run
workers would be) store and publish events with ``execution.EventRecorder``,
the sink the worker gives ``lego_core.optimize`` (RunEvent with the run's
next seq, then the Redis wake-up), and end their runs with
``execution.finish``.  The viewers are real websocket clients (the
``websockets`` library) in this process: 200 on the first run, 5 on each of
the other two.  Every viewer must get every event of its run exactly once,
in seq order, then ``end`` and close code 1000.  Figures printed: events
delivered per second and the p99 latency from the event's own timestamp
(``ts``, written when the event was made) to its receipt.
"""
from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

import pytest

from webapp.runs.models import Run

pytestmark = [pytest.mark.load, pytest.mark.django_db(transaction=True)]

VIEWERS = {0: 200, 1: 5, 2: 5}  # run index -> websocket viewers
EVENTS = 300  # per run
PER_S = 60  # events per second per run, in bursts of 10
# Bounds for a loaded 2-core machine.  Measured on the 2-core dev machine
# (2026-12-01, other agents' work beside it): 8,857 events/s, p99 1.65 s
# at load average 3.7; 6,900-7,800 events/s, p99 4.8 s at load average
# 5-6 (past ~4 s some wake-ups come too late and the 5 s poll delivers).
# Before read_batch loaded run_id with the events: 1,284 events/s, p99 45 s.
# On CI beside another xdist worker's test: 4,456 events/s, p99 10.4 s, so
# `make test` runs this file after the others, alone (Makefile, LOAD_TESTS).
MIN_EVENTS_PER_S = 2500
MAX_P99_S = 10.0

WRITER = r'''
import os, sys, time
import django
django.setup()
from pathlib import Path
from lego_core import events as ev
from webapp.runs.execution import EventRecorder, finish
from webapp.runs.models import Run

go, run_id, count, per_s = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
recorder = EventRecorder(Run.objects.get(pk=run_id))
print("writer ready", flush=True)
while not go.exists():
    time.sleep(0.01)
started = time.monotonic()
for i in range(1, count + 1):
    recorder(ev.Progress(stage="search", done=i, total=count))
    if i % 10 == 0:  # bursts of 10, like an agent round
        time.sleep(max(0.0, started + i / per_s - time.monotonic()))
finish(Run.objects.get(pk=run_id), {"plan": {}})
print("writer done", recorder.seq, flush=True)
'''


async def view(url: str, origin: str, gate: asyncio.Semaphore, connected: asyncio.Event) -> dict:
    """One viewer: connect (holding ``gate`` until it hears the live
    ``state``), set ``connected``, then collect events until ``end``."""
    from websockets.asyncio.client import connect

    seqs, latencies = [], []
    await gate.acquire()
    async with connect(url, origin=origin, proxy=None, open_timeout=60, max_size=None) as ws:
        try:
            hello = json.loads(await asyncio.wait_for(ws.recv(), 60))
        finally:
            gate.release()
        assert hello["type"] == "state" and hello["state"] == "running", hello
        connected.set()
        while True:
            message = json.loads(await asyncio.wait_for(ws.recv(), 60))
            now = time.time()
            if message["type"] == "events":
                seqs.extend(e["seq"] for e in message["events"])
                latencies.extend(now - e["data"]["ts"] for e in message["events"])
            elif message["type"] == "end":
                end = message
                break
        try:
            await asyncio.wait_for(ws.recv(), 10)
        except Exception:  # noqa: BLE001 - the server closes after end
            pass
        code = ws.close_code
    return {"seqs": seqs, "latencies": latencies, "end": end, "close_code": code}


async def watch_all(urls: list[tuple[int, str]], origin: str, start) -> tuple[list[tuple[int, dict]], float]:
    """Connect every viewer (a few at a time, as page loads come), call
    ``start`` once all heard the live state, and collect; returns each
    viewer's result with its run index, and the seconds from ``start`` to
    the last ``end``."""
    flags = [asyncio.Event() for _ in urls]
    gate = asyncio.Semaphore(20)  # at most 20 handshakes at once

    async def one(index: int, url: str, flag: asyncio.Event):
        return index, await view(url, origin, gate, flag)

    tasks = [asyncio.create_task(one(index, url, flag)) for (index, url), flag in zip(urls, flags)]
    waiting = asyncio.ensure_future(asyncio.gather(*(f.wait() for f in flags)))
    await asyncio.wait([waiting, *tasks], timeout=60, return_when=asyncio.FIRST_COMPLETED)  # a viewer ends early only by failing
    waiting.cancel()
    for task in tasks:
        if task.done() and task.exception():
            raise task.exception()
    assert all(f.is_set() for f in flags), f"{sum(f.is_set() for f in flags)} of {len(flags)} viewers connected"
    started = time.monotonic()
    start()
    results = await asyncio.wait_for(asyncio.gather(*tasks), 60)
    return results, time.monotonic() - started


def test_200_viewers_of_one_run_get_every_event_once_in_order_while_three_runs_go_on(
    make_run, service_env, spawn, daphne, wait_for, tmp_path
):
    """Every viewer gets seq 1..300 of its run once, in order, then ``end``
    (close 1000); the delivery figures stay within the bounds above."""
    runs = [make_run(state=Run.State.RUNNING) for _ in VIEWERS]
    shares = [run.create_share_token() for run in runs]
    env = {**service_env, "LEGO_EVENT_POLL_S": "5"}  # the production poll: deliveries come from the wake-ups
    go = tmp_path / "go"
    writers = [spawn(f"writer-{i}", [sys.executable, "-c", WRITER, str(go), str(run.id), str(EVENTS), str(PER_S)], env)
               for i, run in enumerate(runs)]
    port, server_log = daphne(env)
    for proc, log in writers:
        wait_for(lambda: proc.poll() is not None or "writer ready" in log.read_text(), 60, "a writer", log, every_s=0.1)
        assert proc.poll() is None, log.read_text()

    origin = f"http://127.0.0.1:{port}"
    urls = [(i, f"ws://127.0.0.1:{port}/ws/runs/{runs[i].id}/events/?after=0&share={shares[i]}")
            for i, count in VIEWERS.items() for _ in range(count)]
    results, seconds = asyncio.run(watch_all(urls, origin, go.touch))

    for proc, log in writers:
        proc.wait(timeout=30)
        assert proc.returncode == 0 and f"writer done {EVENTS}" in log.read_text(), log.read_text()[-3000:]
    assert len(results) == sum(VIEWERS.values())
    for index, result in results:
        assert result["seqs"] == list(range(1, EVENTS + 1)), (index, result["seqs"][:20], len(result["seqs"]))
        assert result["end"] == {"type": "end", "state": "finished", "last_seq": EVENTS}, result["end"]
        assert result["close_code"] == 1000
    assert "Exception inside application" not in server_log.read_text(errors="replace"), server_log.read_text()[-3000:]
    assert "Too many connections" not in server_log.read_text(errors="replace"), "viewers could not leave the run group: the channel layer pool is too small"

    latencies = sorted(x for _, r in results for x in r["latencies"])
    delivered = len(latencies)
    p99 = latencies[int(0.99 * (delivered - 1))]
    rate = delivered / seconds
    print(f"\nload: {len(results)} viewers, {len(runs)} runs x {EVENTS} events at {PER_S}/s each: "
          f"{delivered} deliveries in {seconds:.1f} s = {rate:.0f} events/s; latency median "
          f"{statistics.median(latencies) * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms, max {latencies[-1] * 1000:.0f} ms")
    assert rate > MIN_EVENTS_PER_S and p99 < MAX_P99_S, (rate, p99)
