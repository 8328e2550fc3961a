"""The embedded broker and result store (``webapp.config.file_broker``):
a message or result file is never seen half-written, a message is taken by
exactly one consumer, and an unreadable file is skipped, not fatal.

Stock kombu 5.7 lets a consumer read a message file before its writer has
written it; the consumer dies on ``JSONDecodeError`` (kombu issue #1551)
and ``make run`` was left with a dead run worker and a run queued forever.
"""
import json
import logging
import multiprocessing as mp
import os
import threading
from queue import Empty

import pytest
from celery import Celery
from kombu import Connection

from webapp.config import file_broker


TRANSPORT = "webapp.config.file_broker:Transport"


def connection(folder, transport=TRANSPORT) -> Connection:
    queue = os.path.join(folder, "queue")
    os.makedirs(queue, exist_ok=True)
    return Connection(
        "filesystem://localhost//",
        transport=transport,
        transport_options={
            "data_folder_in": queue,
            "data_folder_out": queue,
            "control_folder": os.path.join(folder, "control"),
            "store_processed": False,
        },
    )


def test_the_settings_select_these_classes_on_embedded_defaults(tmp_path):
    """Without REDIS_URL the Celery app uses the whole-file transport and result backend."""
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DATABASE_URL")}
    env.update(DJANGO_SETTINGS_MODULE="webapp.config.settings.local", LEGO_VAR_DIR=str(tmp_path / "var"))
    code = (
        "import django; django.setup()\n"
        "from webapp.config.celery import app\n"
        "conn = app.connection_for_write()\n"
        "print(conn.transport_cls if isinstance(conn.transport_cls, str) else conn.transport_cls.__module__)\n"
        "print(type(conn.transport).__module__, type(conn.transport).__name__)\n"
        "print(type(app.backend).__module__, type(app.backend).__name__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120,
                         cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    assert out.returncode == 0, out.stderr[-3000:]
    assert "webapp.config.file_broker Transport" in out.stdout
    assert "webapp.config.file_broker ResultBackend" in out.stdout


def test_a_consumer_polling_while_a_message_is_written_sees_nothing_until_it_is_whole(tmp_path, monkeypatch):
    conn = connection(tmp_path)
    channel = conn.default_channel
    seen_while_writing = []
    real_replace = os.replace

    def replace_after_a_poll(src, dst):
        # the writer has written every byte but not yet renamed: a consumer polls now
        assert os.path.getsize(src) > 0
        try:
            seen_while_writing.append(channel._get("lego"))
        except Empty:
            seen_while_writing.append("empty")
        real_replace(src, dst)

    monkeypatch.setattr(file_broker.os, "replace", replace_after_a_poll)
    channel._put("lego", {"body": "x" * 100_000, "n": 1})
    assert seen_while_writing == ["empty"]
    assert channel._get("lego") == {"body": "x" * 100_000, "n": 1}
    assert os.listdir(tmp_path / "queue") == []  # no partial or claimed file left behind
    conn.release()


def test_an_unreadable_message_file_is_logged_and_skipped_and_the_next_one_delivered(tmp_path, caplog):
    conn = connection(tmp_path)
    channel = conn.default_channel
    (tmp_path / "queue" / "0_aaaa.lego.msg").write_bytes(b"")  # what stock kombu's race leaves
    (tmp_path / "queue" / "0_bbbb.lego.msg").write_bytes(b'{"half": ')
    channel._put("lego", {"ok": True})
    with caplog.at_level(logging.ERROR, logger=file_broker.__name__):
        assert channel._get("lego") == {"ok": True}
    dropped = [r.getMessage() for r in caplog.records]
    assert len(dropped) == 2 and all("not JSON" in m and "lego" in m for m in dropped), dropped
    with pytest.raises(Empty):
        channel._get("lego")
    conn.release()


def test_messages_of_another_queue_and_files_being_written_are_left_alone(tmp_path):
    conn = connection(tmp_path)
    channel = conn.default_channel
    channel._put("lego-agents", {"to": "agents"})
    (tmp_path / "queue" / f"{file_broker.PARTIAL_PREFIX}deadbeef").write_bytes(b'{"incomplete"')
    with pytest.raises(Empty):
        channel._get("lego")
    assert channel._get("lego-agents") == {"to": "agents"}
    conn.release()


def _produce(folder, queue, writer, count, size, errors, transport):
    try:
        conn = connection(folder, transport)
        for i in range(count):
            conn.default_channel._put(queue, {"writer": writer, "i": i, "pad": "p" * size})
        conn.release()
    except Exception as exc:  # noqa: BLE001 - reported to the test
        errors.put(repr(exc))


def _consume(folder, queue, got, errors, stop, transport):
    try:
        conn = connection(folder, transport)
        channel = conn.default_channel
        while not stop.is_set():
            try:
                message = channel._get(queue)
            except Empty:
                continue
            got.put((message["writer"], message["i"], len(message["pad"])))
        conn.release()
    except Exception as exc:  # noqa: BLE001 - reported to the test
        errors.put(repr(exc))


def test_under_concurrent_writers_and_consumers_every_message_arrives_once_and_whole(tmp_path, transport=TRANSPORT):
    """Two writer processes and two consumer processes on one folder, as the
    web process, beat and two workers are under ``make run``.  (With
    ``transport="kombu.transport.filesystem:Transport"`` this fails: a
    consumer dies on an empty message.)"""
    # fork, not spawn: a spawned child re-imports this module on the parent's sys.path, which other
    # tests of the same worker may have changed (a model folder holding a logging.py, once)
    ctx = mp.get_context("fork")
    writers, per_writer, size = 2, 300, 20_000
    got, errors, stop = ctx.Queue(), ctx.Queue(), ctx.Event()
    consumers = [ctx.Process(target=_consume, args=(str(tmp_path), "lego", got, errors, stop, transport)) for _ in range(2)]
    producers = [ctx.Process(target=_produce, args=(str(tmp_path), "lego", w, per_writer, size, errors, transport))
                 for w in range(writers)]
    for p in consumers + producers:
        p.start()
    received = []
    try:
        while len(received) < writers * per_writer:
            received.append(got.get(timeout=60))
    finally:
        stop.set()
        for p in consumers + producers:
            p.join(timeout=30)
    assert errors.empty(), errors.get()
    assert sorted(received) == sorted((w, i, size) for w in range(writers) for i in range(per_writer))
    assert got.empty()


def test_a_new_exchange_table_is_never_read_empty(tmp_path):
    conn = connection(tmp_path)
    channel = conn.default_channel
    for queue in ("a", "b", "a"):
        channel._queue_bind("fan", "", "", queue)
    assert sorted(q.queue for q in channel.get_table("fan")) == ["a", "b"]
    assert [p for p in os.listdir(tmp_path / "control")] == ["fan.exchange"]
    conn.release()


def test_a_result_being_rewritten_is_read_whole_or_not_at_all(tmp_path):
    """An agent call's streamed progress rewrites its result file many times
    while the run polls it: every read decodes."""
    app = Celery("t", set_as_current=False)
    backend = file_broker.ResultBackend(app=app, url=f"file://{tmp_path}")
    key = backend.get_key_for_task("task-1")
    stop = threading.Event()

    def rewrite():
        n = 0
        while not stop.is_set():
            backend.set(key, json.dumps({"n": n, "events": ["e" * 50_000] * (1 + n % 3)}))
            n += 1

    writer = threading.Thread(target=rewrite)
    writer.start()
    reads = 0
    try:
        while reads < 2000:
            value = backend.get(key)
            if value is not None:
                json.loads(value)
                reads += 1
    finally:
        stop.set()
        writer.join()
    assert backend.get(key) is not None
    assert not [p for p in os.listdir(tmp_path) if p.startswith(file_broker.PARTIAL_PREFIX)]
