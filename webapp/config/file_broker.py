"""The embedded broker and result store: files that appear whole.

The embedded default broker (no ``REDIS_URL``) is kombu's filesystem
transport: a message is a file in a shared folder.  Stock kombu 5.7 writes a
message by opening its final name and then writing into it, and a consumer
takes any file with a matching name without waiting for the writer's lock,
so a worker polling at the wrong moment reads an empty file and its consumer
dies on ``JSONDecodeError`` (kombu issue #1551, open).  That is what left a
``make run`` worker dead with a run queued forever in CI.

Here a message is written under a name no consumer looks at and renamed to
its queue name when complete (``os.replace`` is atomic within one
filesystem), a consumer claims a file by renaming it (exactly one consumer
wins; stock kombu moves it across filesystems into ``/tmp``, a copy that two
consumers can both make), and a file that still cannot be decoded is logged
and skipped instead of taking the worker down.  Exchange tables (fanout,
remote control) are created the same way.  Selected with
``CELERY_BROKER_TRANSPORT`` in the settings; the URL stays ``filesystem://``.

Celery's ``file://`` result backend has the same flaw (``set`` truncates the
file and then writes; an agent call's streamed progress rewrites one file
many times while the run polls it), so ``ResultBackend`` writes results the
same way (``CELERY_RESULT_BACKEND = "webapp.config.file_broker:ResultBackend+file://..."``).
"""
from __future__ import annotations

import logging
import os
import uuid
from queue import Empty
from time import monotonic

from celery.backends.filesystem import FilesystemBackend
from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.utils.encoding import bytes_to_str, ensure_bytes, str_to_bytes
from kombu.utils.json import dumps, loads

log = logging.getLogger(__name__)

PARTIAL_PREFIX = ".partial-"  # a message being written: never matches "<queue>.msg"
CLAIMED_PREFIX = ".claimed-"  # a message a consumer has taken and is reading


def _queue_of(filename: str) -> str:
    """The ``<queue>.msg`` part kombu matches a message file's name on."""
    return filename.partition(".")[2]


def write_whole(folder, final_name, data: bytes) -> str:
    """Write ``data`` to ``folder/final_name`` (str or bytes paths) so that
    the name exists only once every byte is there, and a reader sees either
    the old content or the new, never a part; returns the final path.
    Raises ``OSError``."""
    folder, final_name = os.fsdecode(folder), os.fsdecode(final_name)
    partial = os.path.join(folder, f"{PARTIAL_PREFIX}{uuid.uuid4().hex}")
    final = os.path.join(folder, final_name)
    try:
        with open(partial, "wb") as f:
            f.write(data)
        os.replace(partial, final)
    except BaseException:
        try:
            os.remove(partial)
        except OSError:
            pass
        raise
    return final


class Channel(filesystem.Channel):
    """A filesystem channel whose messages are written whole and claimed
    once; see the module docstring."""

    def _put(self, queue, payload, **kwargs):
        """Put ``payload`` (a dict) onto ``queue``; raises ``ChannelError``
        when the folder cannot be written."""
        name = f"{int(round(monotonic() * 1000))}_{uuid.uuid4()}.{queue}.msg"
        try:
            write_whole(self.data_folder_out, name, str_to_bytes(dumps(payload)))
        except OSError as exc:
            raise ChannelError(f"Cannot add file {name!r} to directory {self.data_folder_out!r}") from exc

    def _get(self, queue):
        """The oldest message of ``queue`` (a dict); raises ``queue.Empty``
        when there is none.  A message file that cannot be decoded is
        logged and dropped, and the next one is tried."""
        wanted = f"{queue}.msg"
        for name in sorted(os.listdir(self.data_folder_in)):
            if _queue_of(name) != wanted:
                continue
            claimed = os.path.join(self.data_folder_in, f"{CLAIMED_PREFIX}{uuid.uuid4().hex}")
            try:
                os.rename(os.path.join(self.data_folder_in, name), claimed)
            except OSError:
                continue  # another consumer took it first
            try:
                with open(claimed, "rb") as f:
                    payload = f.read()
            except OSError as exc:
                raise ChannelError(f"Cannot read file {name!r} from queue.") from exc
            finally:
                self._done_with(claimed, name)
            try:
                return loads(bytes_to_str(payload))
            except ValueError:
                log.error("dropped message file %s of queue %r: %d bytes that are not JSON", name, queue, len(payload))
        raise Empty()

    def _done_with(self, claimed: str, name: str) -> None:
        """Remove a read message, or keep it under its own name in the
        processed folder when ``store_processed`` is set."""
        try:
            if self.store_processed:
                os.makedirs(self.processed_folder, exist_ok=True)
                os.replace(claimed, os.path.join(self.processed_folder, name))
            else:
                os.remove(claimed)
        except OSError:
            log.warning("could not clear the read message file %s", claimed, exc_info=True)

    def _queue_bind(self, exchange, routing_key, pattern, queue):
        """Bind ``queue`` to ``exchange``.  A new exchange table is written
        whole and linked into place (``os.link`` fails if another process
        created it first, and then the table is updated under its lock as
        kombu does); stock kombu creates the file empty and then writes,
        and a reader in between fails on an empty table."""
        file = self._exchange_file(exchange)
        if not file.exists():
            self.control_folder.mkdir(exist_ok=True)
            row = filesystem.exchange_queue_t(routing_key or "", pattern or "", queue or "")
            partial = self.control_folder / f"{PARTIAL_PREFIX}{uuid.uuid4().hex}"
            try:
                partial.write_bytes(str_to_bytes(dumps([row])))
                try:
                    os.link(partial, file)
                    return
                except FileExistsError:
                    pass  # created meanwhile: add the row to it below
            except OSError as exc:
                raise ChannelError(f"Cannot write {file}") from exc
            finally:
                try:
                    partial.unlink()
                except OSError:
                    pass
        super()._queue_bind(exchange, routing_key, pattern, queue)


class Transport(filesystem.Transport):
    """kombu's filesystem transport with ``Channel`` above."""

    Channel = Channel


class ResultBackend(FilesystemBackend):
    """Celery's ``file://`` result backend whose ``set`` replaces a result
    file whole (``write_whole``), so that a reader polling a task's state
    never decodes an empty or half-written file."""

    def set(self, key, value):
        folder, name = os.path.split(os.fsdecode(self._filename(key)))
        write_whole(folder, name, ensure_bytes(value))
