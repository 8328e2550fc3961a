"""The live event stream (``/ws/runs/<id>/events/``, docs/STREAM.md).

In-process tests drive ``webapp.config.asgi.application`` (origin check,
session auth, routing, consumer) with Channels' WebsocketCommunicator on
the test database and Redis layer; two tests start a real server and a
separate writer process and connect with the ``websockets`` client: one on
PostgreSQL + Redis (wake-ups cross processes), one on the embedded default
of ``make run`` (SQLite, in-memory layer: the poll delivers).
"""
from __future__ import annotations

import json
import os
import socket
import statistics
import sys
import threading
import time
from pathlib import Path

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.db import connection

from lego_core import events as ev
from webapp.config.asgi import application
from webapp.runs import consumers, live
from webapp.runs.execution import EventRecorder, finish, jsonable
from webapp.runs.models import Run, RunEvent

ORIGIN = (b"origin", b"http://localhost")


# --- helpers (test_web_permissions.py uses them too) --------------------------


def stream_path(run_id, after: int | None = None, share: str | None = None) -> str:
    """``/ws/runs/<id>/events/`` with its query."""
    query = []
    if after is not None:
        query.append(f"after={after}")
    if share is not None:
        query.append(f"share={share}")
    return f"/ws/runs/{run_id}/events/" + ("?" + "&".join(query) if query else "")


def communicator(path: str, cookie: str | None = None, origin=ORIGIN) -> WebsocketCommunicator:
    """A WebsocketCommunicator on the whole ASGI application (origin check,
    session auth, routing), with an allowed Origin unless told otherwise."""
    headers = [origin] if origin else []
    if cookie:
        headers.append((b"cookie", cookie.encode()))
    return WebsocketCommunicator(application, path, headers=headers)


def session_cookie(client, user) -> str:
    """A ``Cookie`` header value that logs ``user`` in."""
    client.force_login(user)
    name = settings.SESSION_COOKIE_NAME
    return f"{name}={client.cookies[name].value}"


async def receive(comm: WebsocketCommunicator, timeout: float = 10) -> dict:
    """The next message as a dict; a close becomes ``{"type": "closed", "code": n}``."""
    output = await comm.receive_output(timeout)
    if output["type"] == "websocket.close":
        return {"type": "closed", "code": output.get("code", 1000)}
    assert output["type"] == "websocket.send", output
    return json.loads(output["text"])


async def outcome(comm: WebsocketCommunicator) -> tuple[str, object]:
    """How a subscription went: ``("refused", None)`` when the handshake was
    refused (HTTP 403), ``("closed", code)`` when accepted and closed before
    any data, ``("streaming", first message)`` when it streams."""
    accepted, _ = await comm.connect(timeout=10)
    if not accepted:
        return "refused", None
    first = await receive(comm)
    if first["type"] == "closed":
        return "closed", first["code"]
    return "streaming", first


async def read_to_end(comm: WebsocketCommunicator, received: list[dict], timeout: float = 20) -> dict:
    """Collect events into ``received`` until ``end``; check every message's
    shape and that the server then closes with 1000. Returns ``end``."""
    while True:
        message = await receive(comm, timeout)
        assert message["type"] in ("events", "state", "end"), message
        if message["type"] == "events":
            batch = message["events"]
            assert 1 <= len(batch) <= consumers.BATCH_EVENTS
            seqs = [e["seq"] for e in batch]
            assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), "a batch is contiguous"
            if received:
                assert seqs[0] == received[-1]["seq"] + 1, "no gap, no repeat between batches"
            received.extend(batch)
        if message["type"] == "end":
            assert message["last_seq"] == (received[-1]["seq"] if received else message["last_seq"])
            assert await receive(comm, timeout) == {"type": "closed", "code": 1000}
            return message


def realistic_events(count: int) -> list[ev.Event]:
    """``count`` events shaped like a real run's log (node_created first,
    then per node: started, transcript, candidate, verification, timings,
    progress, sometimes plan_improved or node_reused), ending run_finished."""
    kernel = '"""Triton kernel for sub-problem {i}"""\nimport triton\nimport triton.language as tl\n\n' + (
        "@triton.jit\ndef kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):\n"
        "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
        "    tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=offs < n), 0), mask=offs < n)\n"
    ) * 8
    out: list[ev.Event] = [
        ev.RunStarted(model="gpt_stack.py", overrides={"batch_size": 2, "seq_len": 16}, dtype="fp32", device="cpu"),
        ev.StageStarted(stage="load"),
        ev.StageStarted(stage="capture"),
        ev.StageStarted(stage="construct"),
    ]
    nodes = max(1, count // 10)
    for i in range(nodes):
        out.append(ev.NodeCreated(
            node_id=f"or{i:03d}", kind="or", parent=None if i == 0 else f"and{(i - 1) // 4:03d}",
            label=f"blocks.{i % 4}.attn · div, softmax", signature=f"{i * 7919:016x}",
            ops=["aten.div.Tensor", "aten._softmax.default"], shapes=[[2, 4, 16, 16]],
            input_shapes=[[2, 4, 16, 16]], reference="def reference(x):\n    return (torch.softmax(x / 8, -1),)\n",
        ))
    out.append(ev.StageStarted(stage="search", total=nodes))
    out.append(ev.PlanImproved(cost_ms=0.12, baseline_ms=0.12, speedup=1.0, measured=False, items=nodes, initial=True))
    i = 0
    while len(out) < count - 1:
        node, cand = f"or{i % nodes:03d}", f"or{i % nodes:03d}-template-{i // nodes + 1}"
        out += [
            ev.NodeStarted(node_id=node, agent="template"),
            ev.TranscriptMessage(node_id=node, agent="template", role="user", content=f"sub-problem sp{i}: softmax"),
            ev.TranscriptMessage(node_id=node, agent="template", role="assistant", content="row reduction template", tokens=412),
            ev.CandidateProposed(node_id=node, candidate_id=cand, agent="template", implementation="triton",
                                 source=kernel.format(i=i)),
            ev.VerificationResult(node_id=node, candidate_id=cand, passed=i % 9 != 4, max_abs_error=5.96e-08,
                                  reason="3 input sets matched the reference"),
            ev.Timing(node_id=node, candidate_id=f"{node}-library", ms=0.0030, measured=False),
            ev.Timing(node_id=node, candidate_id=cand, ms=0.0011, measured=False, baseline_ms=0.0030),
            ev.Progress(stage="search", done=i + 1, total=nodes),
        ]
        if i % 5 == 0:
            out.append(ev.PlanImproved(cost_ms=0.1 - i * 1e-4, baseline_ms=0.12, speedup=1.2, measured=False,
                                       items=nodes, chosen=[f"or{k:03d}" for k in range(0, nodes, 3)]))
        if i % 7 == 0:
            out.append(ev.NodeReused(node_id=f"or{(i + 1) % nodes:03d}", reused_from=node, via="dedupe"))
        i += 1
    out = out[: count - 1]
    out.append(ev.RunFinished(out_dir="/tmp/out", summary={"model": "gpt_stack", "speedup": 1.52}))
    return out


def store_events(run: Run, events: list[ev.Event]) -> None:
    """Store events as the run's log at once (as EventRecorder would, in one insert)."""
    RunEvent.objects.bulk_create(
        [RunEvent(run=run, seq=n, type=e.type, data=jsonable(e.to_dict())) for n, e in enumerate(events, 1)],
        batch_size=1000,
    )


def db_seqs(run: Run) -> list[int]:
    return list(RunEvent.objects.filter(run=run).order_by("seq").values_list("seq", flat=True))


# --- in process: Channels' communicator on the whole ASGI application ---------


@pytest.mark.django_db(transaction=True)
def test_reconnect_mid_run_gets_every_event_exactly_once(make_run, user, client):
    """A writer thread records events through EventRecorder while a viewer
    follows; the viewer drops the socket mid-run, reconnects with
    ?after=<last seq it has>, and ends with every event once, in order."""
    run = make_run(state=Run.State.RUNNING)
    cookie = session_cookie(client, user)
    events = realistic_events(400)
    errors: list[BaseException] = []

    def writer():
        try:
            recorder = EventRecorder(Run.objects.get(pk=run.pk))
            for n, event in enumerate(events):
                recorder(event)
                if n % 10 == 0:
                    time.sleep(0.005)  # a few ms of "optimizing" now and then
            finish(Run.objects.get(pk=run.pk), {"plan": {}})
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)
        finally:
            connection.close()

    async def scenario():
        received: list[dict] = []
        first = communicator(stream_path(run.id, after=0), cookie)
        assert (await first.connect(timeout=10))[0]
        thread = threading.Thread(target=writer)
        thread.start()
        states = []
        while len(received) < 60:
            message = await receive(first)
            if message["type"] == "events":
                received.extend(message["events"])
                states.append(message["state"])
        await first.disconnect()  # drop mid-run
        assert states[-1] == Run.State.RUNNING, "the drop happened before the run ended"
        last = received[-1]["seq"]

        second = communicator(stream_path(run.id, after=last), cookie)
        assert (await second.connect(timeout=10))[0]
        rest: list[dict] = []
        end = await read_to_end(second, rest)
        await second.disconnect()
        return thread, received, rest, end

    thread, received, rest, end = async_to_sync(scenario)()
    thread.join(30)
    assert not errors, errors
    assert rest[0]["seq"] == received[-1]["seq"] + 1, "after=<last> resumes right after it"
    seqs = [e["seq"] for e in received + rest]
    assert seqs == db_seqs(run) == list(range(1, len(events) + 1))
    assert end == {"type": "end", "state": "finished", "last_seq": len(events)}
    assert [e["type"] for e in received + rest] == [e.type for e in events]
    assert (received + rest)[-1]["data"]["summary"]["speedup"] == 1.52


@pytest.mark.django_db(transaction=True)
def test_replay_of_a_finished_run_with_thousands_of_events(make_run, user, client, record_property):
    """A new viewer of a finished run with 2,500 stored events gets each
    once, in order, in batches of at most 500, then ``end``; and one that
    comes back with ?after=2400 gets the last 100."""
    count = 2500
    run = make_run(state=Run.State.FINISHED)
    events = realistic_events(count)
    store_events(run, events)
    cookie = session_cookie(client, user)

    async def replay(after: int):
        comm = communicator(stream_path(run.id, after=after), cookie)
        started = time.perf_counter()
        assert (await comm.connect(timeout=10))[0]
        received: list[dict] = []
        batches = 0

        async def counting_receive(*args, **kwargs):
            nonlocal batches
            batches += 1
            return await original(*args, **kwargs)

        original, comm.receive_output = comm.receive_output, counting_receive
        end = await read_to_end(comm, received)
        elapsed_ms = (time.perf_counter() - started) * 1000
        await comm.disconnect()
        return received, end, elapsed_ms, batches - 2  # less the end and the close

    received, end, ms, batches = async_to_sync(replay)(0)
    assert [e["seq"] for e in received] == list(range(1, count + 1))
    assert [e["type"] for e in received] == [e.type for e in events]
    assert received[123]["data"] == json.loads(json.dumps(jsonable(events[123].to_dict())))
    assert end == {"type": "end", "state": "finished", "last_seq": count}
    assert batches >= count // consumers.BATCH_EVENTS
    print(f"replayed {count} events in {ms:.0f} ms ({batches} messages)")
    record_property("replay_events", count)
    record_property("replay_ms", round(ms))

    tail, end, _, _ = async_to_sync(replay)(2400)
    assert [e["seq"] for e in tail] == list(range(2401, count + 1))
    assert end["last_seq"] == count


@pytest.mark.django_db
def test_a_batch_is_read_in_a_fixed_number_of_queries(make_run, django_assert_max_num_queries):
    """Every viewer reads every batch itself (200 viewers of one run: 200
    reads per wake-up), so a read must not cost a query per event (it did:
    ``event_json`` read the deferred ``run_id`` of each event again; the
    load test's p99 was 45 s)."""
    run = make_run(state=Run.State.RUNNING)
    store_events(run, realistic_events(300))
    with django_assert_max_num_queries(4):
        batch = consumers.read_batch(run.id, 0)
    assert len(batch.events) == 300

@pytest.mark.django_db(transaction=True)
def test_big_events_are_split_by_size(make_run, user, client):
    """Messages stay near BATCH_BYTES even when single events are large."""
    run = make_run(state=Run.State.FAILED)
    big = [ev.TranscriptMessage(node_id="or001", agent="template", role="assistant", content="x" * 40_000)
           for _ in range(60)]
    store_events(run, big)
    cookie = session_cookie(client, user)

    async def scenario():
        comm = communicator(stream_path(run.id), cookie)
        assert (await comm.connect(timeout=10))[0]
        sizes, received = [], []
        while True:
            output = await comm.receive_output(10)
            if output["type"] == "websocket.close":
                break
            sizes.append(len(output["text"]))
            message = json.loads(output["text"])
            if message["type"] == "events":
                received.extend(message["events"])
        await comm.disconnect()
        return sizes, received

    sizes, received = async_to_sync(scenario)()
    assert [e["seq"] for e in received] == list(range(1, 61))
    assert len(sizes) > 4 and max(sizes) < consumers.BATCH_BYTES + 50_000


@pytest.mark.django_db(transaction=True)
def test_state_messages_follow_the_run_without_events(make_run, user, client, settings):
    """A queued run with no events: ``state`` once caught up (queued,
    last_seq 0); a state change without events gives another ``state``;
    the end gives ``end``.  The poll is made long so only wake-ups can
    deliver these within the test's time."""
    settings.LEGO_EVENT_POLL_S = 30
    run = make_run(state=Run.State.QUEUED)
    cookie = session_cookie(client, user)

    def change(state):
        Run.objects.filter(pk=run.pk).update(state=state)
        assert live.notify_run_changed(run.pk)

    async def scenario():
        comm = communicator(stream_path(run.id), cookie)
        assert (await comm.connect(timeout=10))[0]
        messages = [await receive(comm)]
        await database_sync_to_async(change)(Run.State.RUNNING)
        messages.append(await receive(comm, timeout=5))
        await database_sync_to_async(change)(Run.State.FAILED)
        messages.append(await receive(comm, timeout=5))
        messages.append(await receive(comm, timeout=5))
        await comm.disconnect()
        return messages

    assert async_to_sync(scenario)() == [
        {"type": "state", "state": "queued", "last_seq": 0, "queue_position": 1},
        {"type": "state", "state": "running", "last_seq": 0, "queue_position": None},
        {"type": "end", "state": "failed", "last_seq": 0},
        {"type": "closed", "code": 1000},
    ]


@pytest.mark.django_db(transaction=True)
def test_a_queued_run_hears_its_place_in_the_queue_move_and_its_cancel(make_run, user, client, settings, monkeypatch):
    """``state`` carries ``queue_position``; it is sent again when the
    place changes (a run ahead started), and a cancel ends the stream."""
    from webapp.runs import lifecycle

    settings.LEGO_EVENT_POLL_S = 30
    monkeypatch.setattr(lifecycle, "revoke_task", lambda run_id, terminate: None)  # no broadcast from this test
    ahead = make_run(state=Run.State.QUEUED)
    run = make_run(state=Run.State.QUEUED)
    cookie = session_cookie(client, user)

    def start_the_one_ahead():
        Run.objects.filter(pk=ahead.pk).update(state=Run.State.RUNNING)
        assert live.notify_run_changed(run.pk)

    def cancel():
        assert lifecycle.cancel_run(run)

    async def scenario():
        comm = communicator(stream_path(run.id), cookie)
        assert (await comm.connect(timeout=10))[0]
        messages = [await receive(comm)]
        await database_sync_to_async(start_the_one_ahead)()
        messages.append(await receive(comm, timeout=5))
        await database_sync_to_async(cancel)()
        messages.append(await receive(comm, timeout=5))
        messages.append(await receive(comm, timeout=5))
        messages.append(await receive(comm, timeout=5))
        await comm.disconnect()
        return messages

    messages = async_to_sync(scenario)()
    assert messages[:2] == [
        {"type": "state", "state": "queued", "last_seq": 0, "queue_position": 2},
        {"type": "state", "state": "queued", "last_seq": 0, "queue_position": 1},
    ]
    [event] = messages[2]["events"]
    assert (event["seq"], event["type"], event["data"]["error_type"]) == (1, "run_failed", "RunCancelled")
    assert messages[3:] == [{"type": "end", "state": "cancelled", "last_seq": 1}, {"type": "closed", "code": 1000}]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("after", [5, 6, 999999, 2**64])
def test_end_never_claims_more_than_the_run_has(make_run, user, client, after):
    """A client whose ``after`` is at or past the end of an ended run's log
    gets ``end`` with the run's real last seq, not its own ``after``."""
    run = make_run(state=Run.State.FINISHED)
    store_events(run, realistic_events(5))
    cookie = session_cookie(client, user)

    async def scenario():
        comm = communicator(stream_path(run.id, after=after), cookie)
        assert (await comm.connect(timeout=10))[0]
        messages = [await receive(comm), await receive(comm)]
        await comm.disconnect()
        return messages

    assert async_to_sync(scenario)() == [
        {"type": "end", "state": "finished", "last_seq": 5},
        {"type": "closed", "code": 1000},
    ]


@pytest.mark.django_db(transaction=True)
def test_an_after_past_the_end_of_a_live_run_resumes_from_its_real_last_seq(make_run, user, client, settings):
    """``state`` says the run's real last seq, and the events stored next
    are sent, though the client's ``after`` was bigger."""
    settings.LEGO_EVENT_POLL_S = 30
    run = make_run(state=Run.State.RUNNING)
    events = realistic_events(40)
    store_events(run, events[:3])
    cookie = session_cookie(client, user)

    def record_next():
        RunEvent.objects.create(run=run, seq=4, type=events[3].type, data=jsonable(events[3].to_dict()))
        assert live.notify_run_changed(run.pk)

    async def scenario():
        comm = communicator(stream_path(run.id, after=10**12), cookie)
        assert (await comm.connect(timeout=10))[0]
        messages = [await receive(comm)]
        await database_sync_to_async(record_next)()
        messages.append(await receive(comm, timeout=5))
        await comm.disconnect()
        return messages

    caught_up, batch = async_to_sync(scenario)()
    assert caught_up == {"type": "state", "state": "running", "last_seq": 3, "queue_position": None}
    assert [e["seq"] for e in batch["events"]] == [4]


# --- the wake-up sender -------------------------------------------------------


class RecordingLayer:
    """A channel layer stand-in that records group_send calls (or fails)."""

    def __init__(self, fail: bool = False):
        self.sent: list[tuple[str, dict]] = []
        self.fail = fail

    async def group_send(self, group, message):
        if self.fail:
            raise ConnectionError("redis went away")
        self.sent.append((group, message))


def test_wakeups_are_throttled_cheap_and_keep_the_newest_seq():
    """10,000 notifications for one run in a tight loop cost microseconds
    each, become a handful of group_sends (at most one per 50 ms plus the
    trailing one), and the last one carries the newest seq."""
    layer = RecordingLayer()
    notifier = live.Notifier(layer)
    run_id = "0" * 32
    started = time.perf_counter()
    for seq in range(1, 10_001):
        notifier.submit(live.group_name(run_id), seq, now=False)
    per_call_us = (time.perf_counter() - started) / 10_000 * 1e6
    elapsed = time.perf_counter() - started
    deadline = time.monotonic() + 5
    while (not layer.sent or layer.sent[-1][1]["seq"] != 10_000) and time.monotonic() < deadline:
        time.sleep(0.01)
    notifier.stop()
    print(f"notify: {per_call_us:.1f} us per call, {len(layer.sent)} group_sends for 10000 events")
    assert layer.sent[-1] == (f"run-{run_id}", {"type": "run.wakeup", "seq": 10_000})
    assert len(layer.sent) <= 2 + elapsed / live.THROTTLE_S + 1
    assert per_call_us < 200
    seqs = [m["seq"] for _, m in layer.sent]
    assert seqs == sorted(seqs)


def test_a_failing_layer_never_reaches_the_optimizer(caplog):
    """group_send raising is logged; neither notify function raises."""
    notifier = live.Notifier(RecordingLayer(fail=True))
    future = notifier.submit("run-x", 3, now=True)
    assert future.result(timeout=5) is False
    assert notifier.failed == 1
    notifier.submit("run-x", 4, now=False)  # throttled path: logged too, nothing raised
    deadline = time.monotonic() + 5
    while notifier.failed < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert notifier.failed == 2
    notifier.stop()


def test_notify_functions_never_raise(monkeypatch):
    """Even when the notifier cannot be made at all."""
    def broken():
        raise RuntimeError("no layer")

    monkeypatch.setattr(live, "_notifier", broken)
    assert live.notify_new_events("not-a-uuid", 1) is None
    assert live.notify_run_changed("00000000-0000-0000-0000-000000000000") is False


def test_in_memory_layer_sends_nothing(monkeypatch):
    """The embedded default: no notifier thread, notify is a no-op."""
    from channels.layers import InMemoryChannelLayer

    monkeypatch.setattr("channels.layers.get_channel_layer", lambda *a, **k: InMemoryChannelLayer())
    monkeypatch.setattr(live, "_instance", None)
    monkeypatch.setattr(live, "_disabled_pid", None)
    assert live._notifier() is None
    live.notify_new_events("00000000-0000-0000-0000-000000000000", 1)
    assert live.notify_run_changed("00000000-0000-0000-0000-000000000000") is True


@pytest.mark.django_db(transaction=True)
def test_wakeups_add_little_to_recording(make_run, monkeypatch):
    """EventRecorder with wake-ups on the real Redis layer: the time spent
    in notify_new_events is a small share of recording an event (the send
    happens on a background thread).  Timed directly, so a busy machine's
    noise in the database writes does not decide the outcome; the printed
    line also compares whole runs with and without wake-ups."""
    events = realistic_events(600)
    real_notify = live.notify_new_events
    spent = []

    def timed_notify(run_id, seq):
        started = time.perf_counter()
        real_notify(run_id, seq)
        spent.append(time.perf_counter() - started)

    def record_all(notify) -> float:
        monkeypatch.setattr(live, "notify_new_events", notify)
        recorder = EventRecorder(make_run(state=Run.State.RUNNING))
        started = time.perf_counter()
        for event in events:
            recorder(event)
        return (time.perf_counter() - started) / len(events) * 1000

    record_all(real_notify)  # warm up: the first run, the wake-up thread
    with_wakeups = record_all(timed_notify)
    without = record_all(lambda run_id, seq: None)
    notify_us = sum(spent) / len(spent) * 1e6
    print(f"record(): {with_wakeups:.3f} ms per event with wake-ups ({notify_us:.1f} us of it in notify), "
          f"{without:.3f} ms without")
    assert len(spent) == len(events)
    assert notify_us < 200 and sum(spent) < 0.1 * with_wakeups / 1000 * len(events)


# --- across processes: a real server, a writer process, a websocket client ----

WRITER = r'''
import json, os, sys, time
import django
django.setup()
from pathlib import Path
from lego_core import events as ev
from webapp.runs.execution import EventRecorder, finish
from webapp.runs.models import Run

work = Path(sys.argv[1])
if len(sys.argv) > 2:
    run = Run.objects.get(pk=sys.argv[2])
else:  # the embedded default: a fresh SQLite file
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    call_command("migrate", verbosity=0)
    owner = get_user_model().objects.create_user("writer")
    run = Run.objects.create(owner=owner, original_filename="m.py", upload="m.py", state="running")
    run.create_share_token()
(work / "ready.json").write_text(json.dumps({"run_id": str(run.id), "share": run.share_token}))
while not (work / "go").exists():
    time.sleep(0.01)
recorder = EventRecorder(run)
for burst in range(int(os.environ["BURSTS"])):
    for k in range(20):
        recorder(ev.Progress(stage="search", done=burst * 20 + k + 1, total=0))
    time.sleep(float(os.environ["PAUSE_S"]))
if float(os.environ.get("QUIET_S", "0")):  # a quiet spell (an agent thinking), then one more event
    time.sleep(float(os.environ["QUIET_S"]))
    recorder(ev.Progress(stage="search", done=0, total=0, message="after the quiet spell"))
finish(run, {"plan": {}})
print("writer done", recorder.seq, flush=True)
'''


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def follow(url: str, origin: str, go: Path) -> tuple[list[dict], dict, list[float]]:
    """Connect with the ``websockets`` client, wait for the live ``state``,
    tell the writer to go, collect events until ``end``; returns events,
    ``end`` and each event's delivery latency (receive time - event ts)."""
    from websockets.sync.client import connect

    received, latencies = [], []
    with connect(url, origin=origin, proxy=None, open_timeout=20) as ws:
        hello = json.loads(ws.recv(timeout=20))
        assert hello["type"] == "state" and hello["state"] == "running", hello
        go.touch()
        while True:
            message = json.loads(ws.recv(timeout=30))
            now = time.time()
            if message["type"] == "events":
                received.extend(message["events"])
                latencies.extend(now - e["data"]["ts"] for e in message["events"])
            elif message["type"] == "end":
                end = message
                break
        try:
            ws.recv(timeout=10)
        except Exception:  # noqa: BLE001 - the server closes after end
            pass
        assert ws.close_code == 1000
    return received, end, latencies


def wait_for_port(port: int, proc, log: Path, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text()
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    pytest.fail(f"server did not listen on {port}\n{log.read_text()[-3000:]}")


def wait_for_file(path: Path, proc, log: Path, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        assert proc.poll() is None or path.exists(), log.read_text()
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.05)


@pytest.mark.django_db(transaction=True)
def test_redis_wakeups_cross_processes(make_run, spawn, tmp_path):
    """daphne on PostgreSQL + Redis (poll 5 s) and a writer process: each
    burst of events reaches the viewer well under a second after it was
    written (the last of a burst included), which only the Redis wake-up
    can do; ``end`` comes right after the run finishes.  A quiet spell of
    6.5 s (longer than redis-py 8's default 5 s socket timeout) neither
    breaks the socket nor the wake-ups that follow."""
    db = connection.settings_dict
    if db["ENGINE"] != "django.db.backends.postgresql" or not settings.REDIS_URL:
        pytest.skip("runs against PostgreSQL and Redis (see webapp/config/settings/test.py)")
    auth = db["USER"] + (f":{db['PASSWORD']}" if db["PASSWORD"] else "")
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "webapp.config.settings.test",
        "DATABASE_URL": f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}",
        "REDIS_URL": settings.REDIS_URL,
        "LEGO_EVENT_POLL_S": "5",
        "BURSTS": "8",
        "PAUSE_S": "0.4",
        "QUIET_S": "6.5",
    }
    run = make_run(state=Run.State.RUNNING)
    share = run.create_share_token()
    port = free_port()
    server, server_log = spawn("daphne", [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port),
                                          "webapp.config.asgi:application"], env)
    writer, writer_log = spawn("writer", [sys.executable, "-c", WRITER, str(tmp_path), str(run.id)], env)
    wait_for_port(port, server, server_log)
    wait_for_file(tmp_path / "ready.json", writer, writer_log)

    received, end, latencies = follow(
        f"ws://127.0.0.1:{port}{stream_path(run.id, after=0, share=share)}", f"http://127.0.0.1:{port}",
        tmp_path / "go",
    )
    assert [e["seq"] for e in received] == list(range(1, 162))
    assert end == {"type": "end", "state": "finished", "last_seq": 161}
    assert "Exception inside application" not in server_log.read_text(errors="replace"), server_log.read_text()[-3000:]
    print(f"redis wake-ups: median {statistics.median(latencies) * 1000:.0f} ms, "
          f"max {max(latencies) * 1000:.0f} ms (poll 5 s)")
    assert statistics.median(latencies) < 0.5 and max(latencies) < 1.5, latencies


def test_make_run_default_streams_across_processes(spawn, tmp_path):
    """The embedded default of ``make run`` (``manage.py runserver``: daphne,
    SQLite, in-memory layer, no Redis): events a separate worker-like
    process writes reach a token viewer of the web process by polling
    (0.5 s), and the stream ends with ``end``."""
    service_vars = ("DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE", "LEGO_EVENT_POLL_S")
    env = {k: v for k, v in os.environ.items() if k not in service_vars and not k.startswith("PYTEST")}
    env.update(DJANGO_SETTINGS_MODULE="webapp.config.settings.local", LEGO_VAR_DIR=str(tmp_path / "var"),
               BURSTS="4", PAUSE_S="0.4")
    writer, writer_log = spawn("writer", [sys.executable, "-c", WRITER, str(tmp_path)], env)
    port = free_port()
    server, server_log = spawn("runserver", [sys.executable, "manage.py", "runserver", "--noreload",
                                             f"127.0.0.1:{port}"], env)
    wait_for_file(tmp_path / "ready.json", writer, writer_log)
    wait_for_port(port, server, server_log)
    ready = json.loads((tmp_path / "ready.json").read_text())

    received, end, latencies = follow(
        f"ws://127.0.0.1:{port}{stream_path(ready['run_id'], after=0, share=ready['share'])}",
        f"http://127.0.0.1:{port}", tmp_path / "go",
    )
    assert [e["seq"] for e in received] == list(range(1, 81))
    assert end == {"type": "end", "state": "finished", "last_seq": 80}
    print(f"embedded polling: median {statistics.median(latencies) * 1000:.0f} ms, "
          f"max {max(latencies) * 1000:.0f} ms (poll 0.5 s)")
    assert max(latencies) < 3.0, latencies
