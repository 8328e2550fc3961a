"""Who may see a run: its owner, and anyone holding its current share
token (read only).  Everyone else gets the same answer as for a run that
does not exist: 404 pages (a login redirect when anonymous), and a refused
websocket (docs/STREAM.md: close 4403, or HTTP 403 at the handshake for a
bad Origin)."""
from __future__ import annotations

import time

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from django.urls import reverse

from test_web_stream import communicator, outcome, receive, session_cookie, stream_path
from webapp.runs import live
from webapp.runs.models import Run, RunEvent


@pytest.fixture
def shared_run(make_run, sample_report):
    """A finished run of alice's with a share token, its output folder and
    two events."""
    run = make_run(state=Run.State.FINISHED, report=sample_report, output_dir="runs/x/output")
    run.output_path.mkdir(parents=True)
    (run.output_path / "report.json").write_text("{}")
    run.create_share_token()
    RunEvent.objects.create(run=run, seq=1, type="run_started", data={"type": "run_started"})
    RunEvent.objects.create(run=run, seq=2, type="run_finished", data={"type": "run_finished"})
    return run


# --- pages ----------------------------------------------------------------------


@pytest.mark.django_db
def test_other_user_gets_404_everywhere(client, other_user, shared_run):
    client.force_login(other_user)
    run_id = shared_run.id
    for name in ("runs:detail", "runs:download", "runs:report-html"):
        assert client.get(reverse(name, args=[run_id])).status_code == 404, name
    token = shared_run.share_token
    for name in ("runs:share-create", "runs:share-revoke"):
        assert client.post(reverse(name, args=[run_id])).status_code == 404, name
    shared_run.refresh_from_db()
    assert shared_run.share_token == token, "a non-owner neither replaced nor revoked the token"


@pytest.mark.django_db
def test_anonymous_is_sent_to_login_for_owner_pages(client, shared_run):
    for name in ("runs:detail", "runs:download", "runs:report-html"):
        response = client.get(reverse(name, args=[shared_run.id]))
        assert response.status_code == 302 and response.url.startswith(reverse("login")), name
    for name in ("runs:share-create", "runs:share-revoke"):
        response = client.post(reverse(name, args=[shared_run.id]))
        assert response.status_code == 302 and response.url.startswith(reverse("login")), name


@pytest.mark.django_db
def test_wrong_and_revoked_tokens_are_404(client, user_client, shared_run):
    good = shared_run.share_token
    pages = ("runs:shared", "runs:shared-download", "runs:shared-report-html")
    assert client.get(reverse("runs:shared", args=[good])).status_code == 200  # anonymous holder
    for name in pages:
        assert client.get(reverse(name, args=["not-the-token"])).status_code == 404, name
        assert client.get(reverse(name, args=[good[:-1]])).status_code == 404, name
    assert user_client.post(reverse("runs:share-revoke", args=[shared_run.id])).status_code == 302
    for name in pages:
        assert client.get(reverse(name, args=[good])).status_code == 404, name


# --- the websocket ----------------------------------------------------------------


def subscribe(path: str, cookie: str | None = None, origin=...) -> tuple[str, object]:
    """``outcome()`` of one subscription attempt, run to completion."""

    async def attempt():
        kwargs = {} if origin is ... else {"origin": origin}
        comm = communicator(path, cookie, **kwargs)
        result = await outcome(comm)
        await comm.disconnect()
        return result

    return async_to_sync(attempt)()


@pytest.mark.django_db(transaction=True)
def test_websocket_refuses_everyone_but_owner_and_token_holder(client, user, other_user, shared_run, make_run):
    run = shared_run
    owner = session_cookie(client, user)
    other = session_cookie(client.__class__(), other_user)
    token = run.share_token

    # refused: accepted, then closed with 4403 before any data
    assert subscribe(stream_path(run.id)) == ("closed", 4403), "anonymous, no token"
    assert subscribe(stream_path(run.id), other) == ("closed", 4403), "other user"
    assert subscribe(stream_path(run.id, share="wrong"), other) == ("closed", 4403), "wrong token"
    assert subscribe(stream_path(run.id, share=token[:-1])) == ("closed", 4403), "token prefix"
    assert subscribe(stream_path(run.id, share="")) == ("closed", 4403), "empty token"
    assert subscribe(stream_path(run.id, share="é")) == ("closed", 4403), "non-ASCII token"
    # no such run (or not a run id at all): 4404
    assert subscribe(stream_path("00000000-0000-4000-8000-000000000000")) == ("closed", 4404)
    assert subscribe("/ws/runs/not-a-uuid/events/") == ("closed", 4404)
    # bad or missing Origin: refused at the handshake (HTTP 403), even for the owner
    assert subscribe(stream_path(run.id), owner, origin=(b"origin", b"http://evil.example")) == ("refused", None)
    assert subscribe(stream_path(run.id, share=token), origin=None) == ("refused", None)

    # accepted: the owner (cookie), an anonymous token holder, the other user with the token
    for cookie, share in ((owner, None), (None, token), (other, token), (owner, "wrong")):
        kind, first = subscribe(stream_path(run.id, after=0, share=share), cookie)
        assert kind == "streaming" and first["type"] == "events", (cookie, share, first)
    # another run's token does not open this run
    other_run = make_run(owner=other_user, state=Run.State.RUNNING)
    other_token = other_run.create_share_token()
    assert subscribe(stream_path(run.id, share=other_token)) == ("closed", 4403)

    run.revoke_share_token()
    assert subscribe(stream_path(run.id, share=token)) == ("closed", 4403), "revoked token"
    kind, _ = subscribe(stream_path(run.id), owner)
    assert kind == "streaming", "revoking does not lock the owner out"


def cut_off_after(run, token: str, revoke, timeout_s: float) -> tuple[dict, float]:
    """Connect a token viewer, wait for its live ``state``, call ``revoke()``
    (sync; run in a thread) and return what the viewer got next and how
    many seconds that took."""

    async def scenario():
        viewer = communicator(stream_path(run.id, share=token))
        assert (await viewer.connect(timeout=10))[0]
        assert (await receive(viewer))["type"] == "state"
        await database_sync_to_async(revoke)()
        started = time.monotonic()
        closed = await receive(viewer, timeout=timeout_s)
        took = time.monotonic() - started
        await viewer.disconnect()
        return closed, took

    return async_to_sync(scenario)()


@pytest.mark.django_db(transaction=True)
def test_revoking_cuts_a_connected_token_viewer_off(make_run, user, settings):
    """At the viewer's next poll after ``revoke_share_token`` (here 0.2 s),
    its socket is closed with 4403; the owner's stays open."""
    settings.LEGO_EVENT_POLL_S = 0.2
    run = make_run(state=Run.State.RUNNING)
    token = run.create_share_token()
    closed, took = cut_off_after(run, token, run.revoke_share_token, timeout_s=5)
    assert closed == {"type": "closed", "code": 4403}
    assert took < 2


@pytest.mark.django_db(transaction=True)
def test_revoke_view_cuts_the_viewer_off_at_once(client, user_client, make_run, settings):
    """Revoking from the run page wakes the viewers up, so the cut does not
    wait for the poll (made 30 s here)."""
    settings.LEGO_EVENT_POLL_S = 30
    run = make_run(state=Run.State.RUNNING)
    token = run.create_share_token()

    def revoke_from_the_page():
        response = user_client.post(reverse("runs:share-revoke", args=[run.id]))
        assert response.status_code == 302

    closed, took = cut_off_after(run, token, revoke_from_the_page, timeout_s=10)
    assert closed == {"type": "closed", "code": 4403}
    assert took < 3
    assert live.group_name(run.id) == f"run-{run.id.hex}"
