"""A run's live event stream: ``/ws/runs/<uuid>/events/?after=<seq>[&share=<token>]``.

The protocol (messages, close codes, the reconnect rule) is in
``docs/STREAM.md``.  In short: the consumer replays the stored events after
``after`` in batches, then follows the run, reading the database again on
every wake-up (``live.py``) or every ``LEGO_EVENT_POLL_S`` seconds,
whichever comes first, and ends with ``end`` and close code 1000 once the
run ended and every event was sent.

Who may subscribe: the run's owner (session cookie, through
``AuthMiddlewareStack``), or anyone whose ``share`` equals the run's
current share token.  A refused socket is accepted and closed at once with
4403 (not allowed) or 4404 (no such run), so a browser sees the code; a bad
Origin is refused earlier, at the handshake (``asgi.py``).
"""
from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import secrets
import uuid
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings

from webapp.runs import live, presenters, queue
from webapp.runs.models import Run, RunEvent

log = logging.getLogger(__name__)

BATCH_EVENTS = 500  # events per message at most
BATCH_BYTES = 512 * 1024  # and about this much JSON (a message still holds one event)
CLOSE_NORMAL = 1000
CLOSE_ERROR = 1011
CLOSE_FORBIDDEN = 4403
CLOSE_NOT_FOUND = 4404
ENDED_STATES = Run.ENDED_STATES


def token_matches(current: str, offered: str) -> bool:
    """Whether ``offered`` is the run's current, non-empty share token
    (compared in constant time)."""
    if not current or not offered:
        return False
    return secrets.compare_digest(current.encode(), offered.encode())


def check_access(run_id: uuid.UUID, user_id: int | None, share: str) -> tuple[int | None, bool]:
    """``(close code or None, admitted by token)`` for a subscriber: the
    owner is let in, then a holder of the current share token; 4404 for a
    run that does not exist, 4403 for everyone else."""
    row = Run.objects.filter(pk=run_id).values_list("owner_id", "share_token").first()
    if row is None:
        return CLOSE_NOT_FOUND, False
    owner_id, share_token = row
    if user_id is not None and user_id == owner_id:
        return None, False
    if token_matches(share_token, share):
        return None, True
    return CLOSE_FORBIDDEN, False


@dataclasses.dataclass
class Batch:
    """One read of the database: the run's state and share token (read
    first), then the next events after a seq, each already as JSON text."""

    state: str
    share_token: str
    events: list[tuple[int, str]]  # (seq, JSON of presenters.event_json)
    more: bool  # the read stopped at a limit: read again at once
    last_seq: int  # the last event's seq; with no events, ``after`` or the run's last seq if smaller
    queue_position: int | None = None  # the run's place in the queue while queued


def read_batch(run_id: uuid.UUID, after: int) -> Batch | None:
    """The run's state, then up to ``BATCH_EVENTS`` events with seq >
    ``after`` (fewer when they pass ``BATCH_BYTES``); None when the run is gone.
    With no events, ``last_seq`` is ``after`` or, when the client claims
    more than there is, the run's real last seq.

    The state is read before the events: events are stored before the run's
    state changes, so an ended state read first means the events read after
    it are all there are.
    """
    row = Run.objects.filter(pk=run_id).values_list("state", "share_token", "created_at").first()
    if row is None:
        return None
    state, share_token, created_at = row
    position = queue.queue_position(Run(pk=run_id, state=state, created_at=created_at))
    rows = RunEvent.objects.filter(run_id=run_id, seq__gt=after).order_by("seq").only("run_id", "seq", "type", "data")
    events, size, more = [], 0, False
    for event in rows[:BATCH_EVENTS]:
        text = json.dumps(presenters.event_json(event))
        if events and size + len(text) > BATCH_BYTES:
            more = True
            break
        events.append((event.seq, text))
        size += len(text)
    more = more or len(events) == BATCH_EVENTS
    if events:
        last_seq = events[-1][0]
    else:  # nothing after ``after``: the end, unless the client claims more than is stored
        last_seq = min(after, presenters.last_event_seq(run_id)) if after else 0
    return Batch(state=state, share_token=share_token, events=events, more=more, last_seq=last_seq,
                 queue_position=position)


def events_message(events: list[tuple[int, str]], state: str) -> str:
    """``{"type": "events", "events": [...], "state": ...}`` from events
    already encoded as JSON."""
    return '{"type": "events", "events": [' + ", ".join(text for _, text in events) + "], " + (
        '"state": ' + json.dumps(state) + "}"
    )


def parse_after(query: dict[str, list[str]]) -> int:
    """``?after=<seq>``: a non-negative integer (at most ``presenters.MAX_SEQ``);
    missing or malformed is 0 (replay everything)."""
    try:
        return min(presenters.MAX_SEQ, max(0, int(query.get("after", ["0"])[-1])))
    except ValueError:
        return 0


class RunEventsConsumer(AsyncWebsocketConsumer):
    """Streams one run's events to one viewer (protocol: ``docs/STREAM.md``)."""

    async def connect(self):
        """Check who is asking, accept, then start streaming (or close with
        4403/4404 right after accepting)."""
        self.streamer: asyncio.Task | None = None
        self.group: str | None = None
        self.wakeup = asyncio.Event()
        query = parse_qs(self.scope.get("query_string", b"").decode("latin1"))
        self.after = parse_after(query)
        self.share = query.get("share", [""])[-1]
        user = self.scope.get("user")
        user_id = user.pk if user is not None and user.is_authenticated else None
        try:
            self.run_id = uuid.UUID(str(self.scope["url_route"]["kwargs"]["run_id"]))
        except ValueError:
            code, self.via_token = CLOSE_NOT_FOUND, False
        else:
            code, self.via_token = await database_sync_to_async(check_access)(self.run_id, user_id, self.share)
        await self.accept()
        if code is not None:
            await self.close(code)
            return
        if self.channel_layer is not None:
            self.group = live.group_name(self.run_id)
            try:
                await self.channel_layer.group_add(self.group, self.channel_name)
            except Exception:  # noqa: BLE001 - without wake-ups the poll still works
                log.warning("could not join %s; this viewer polls only", self.group, exc_info=True)
                self.group = None
        self.streamer = asyncio.create_task(self.stream())

    async def disconnect(self, code):
        """Stop streaming and leave the run's group."""
        if getattr(self, "streamer", None) is not None:
            self.streamer.cancel()
        if getattr(self, "group", None) is not None:
            try:
                await self.channel_layer.group_discard(self.group, self.channel_name)
            except Exception:  # noqa: BLE001
                log.warning("could not leave %s", self.group, exc_info=True)

    async def run_wakeup(self, message):
        """``run.wakeup`` from ``live.py``: read the database now."""
        self.wakeup.set()

    async def stream(self):
        """Replay, follow, end: the loop behind one socket."""
        last_sent = self.after
        told_state: str | None = None  # the state the client last heard
        told_position: int | None = None  # and the queue position
        live_told = False  # the client heard it caught up
        try:
            while True:
                self.wakeup.clear()  # a wake-up during the read below is kept
                batch = await database_sync_to_async(read_batch)(self.run_id, last_sent)
                if batch is None:
                    await self.close(CLOSE_NOT_FOUND)
                    return
                if self.via_token and not token_matches(batch.share_token, self.share):
                    await self.close(CLOSE_FORBIDDEN)  # the token was revoked or replaced
                    return
                last_sent = batch.last_seq  # never past the run's last event
                if batch.events:
                    await self.send(text_data=events_message(batch.events, batch.state))
                    told_state = batch.state
                    if batch.more:
                        continue
                if batch.state in ENDED_STATES:
                    await self.send_json({"type": "end", "state": batch.state, "last_seq": last_sent})
                    await self.close(CLOSE_NORMAL)
                    return
                if not live_told or batch.state != told_state or batch.queue_position != told_position:
                    await self.send_json({"type": "state", "state": batch.state, "last_seq": last_sent,
                                          "queue_position": batch.queue_position})
                    live_told, told_state, told_position = True, batch.state, batch.queue_position
                try:
                    await asyncio.wait_for(self.wakeup.wait(), settings.LEGO_EVENT_POLL_S)
                except asyncio.TimeoutError:
                    pass
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001
            log.exception("event stream of run %s failed", self.run_id)
            await self.close(CLOSE_ERROR)

    async def send_json(self, content: dict) -> None:
        """Send one JSON text message."""
        await self.send(text_data=json.dumps(content))
