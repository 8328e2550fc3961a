"""Read-only share links: the owner creates or revokes a run's share token;
anyone holding the token sees the run page without controls, its report and
its zip, and may subscribe to its event stream (``consumers.py``).  A
revoked or wrong token is a 404, the same answer as a run that does not
exist, so a token cannot be probed."""
from __future__ import annotations

import secrets

from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from webapp.runs import downloads, live, presenters
from webapp.runs.models import Run


def run_for_token(token: str) -> Run:
    """The run shared under ``token``; Http404 for an empty, revoked or unknown one."""
    if not token:
        raise Http404("no such shared run")
    run = Run.objects.filter(share_token=token).first()
    # compare in constant time, even though the lookup itself is by value
    if run is None or not secrets.compare_digest(run.share_token, token):
        raise Http404("no such shared run (the link is wrong or was revoked)")
    return run


@login_required
@require_POST
def share_create(request, run_id):
    """Create (or replace) the run's share link; back to the run page."""
    from webapp.runs.views import own_run

    own_run(request, run_id).create_share_token()
    live.notify_run_changed(run_id, wait_s=0)  # viewers of a replaced token are cut off now
    return redirect("runs:detail", run_id=run_id)


@login_required
@require_POST
def share_revoke(request, run_id):
    """Revoke the run's share link: the old URL and websocket stop working."""
    from webapp.runs.views import own_run

    own_run(request, run_id).revoke_share_token()
    live.notify_run_changed(run_id, wait_s=0)  # connected token viewers are cut off now
    return redirect("runs:detail", run_id=run_id)


@require_GET
def shared_run(request, token: str):
    run = run_for_token(token)
    return render(request, "runs/detail.html", presenters.run_page_context(run, request, share_token=token))


@require_GET
def shared_download(request, token: str):
    return downloads.zip_response(run_for_token(token))


@require_GET
def shared_report_html(request, token: str):
    return downloads.report_html_response(run_for_token(token))
