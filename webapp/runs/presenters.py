"""Plain-data views of a run for pages and JSON: what the templates and the
``/api/`` endpoints show, kept apart from the HTTP handling."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from django.urls import reverse

from lego_core.report_view import host_load, phase_breakdown, signature_counts
from webapp.runs import queue
from webapp.runs.models import Run, RunEvent


MAX_SEQ = 2**31 - 1  # RunEvent.seq's largest value; a client's bigger ``after`` is clamped to it


def last_event_seq(run_id) -> int:
    """The run's last stored seq (0 when it has no events): one read of the
    (run, seq) index."""
    return RunEvent.objects.filter(run_id=run_id).order_by("-seq").values_list("seq", flat=True).first() or 0


def can_cancel(run: Run) -> bool:
    """A Cancel button makes sense: the run is queued or running and its
    log has not ended (a run whose optimizer already sent its end event is
    over, even while the worker still saves its result)."""
    return run.is_active and not run.log_has_ended()


def websocket_path(run: Run) -> str:
    """Path of the run's event stream (``consumers.RunEventsConsumer``);
    the client adds ``?after=<seq>`` and, on a shared page, ``&share=<token>``."""
    return f"/ws/runs/{run.id}/events/"


def run_page_context(run: Run, request, share_token: str | None = None) -> dict[str, Any]:
    """Template context of the run page (``runs/detail.html``), for its owner
    or, with ``share_token``, for the read-only shared page (no controls).

    ``live`` is what the page's JavaScript reads (rendered with
    ``json_script``): the websocket path, the share token (empty for the
    owner) and the run's state when the page was rendered.
    """
    report = shown_report(run) or {}
    shared = share_token is not None
    if shared:
        download_url = reverse("runs:shared-download", args=[share_token])
        report_html_url = reverse("runs:shared-report-html", args=[share_token])
    else:
        download_url = reverse("runs:download", args=[run.id])
        report_html_url = reverse("runs:report-html", args=[run.id])
    share = None
    if not shared:
        share = {
            "url": request.build_absolute_uri(reverse("runs:shared", args=[run.share_token])) if run.share_token else "",
            "create_url": reverse("runs:share-create", args=[run.id]),
            "revoke_url": reverse("runs:share-revoke", args=[run.id]),
        }
    cancel_url = reverse("runs:cancel", args=[run.id]) if not shared and can_cancel(run) else ""
    return {
        "run": run,
        "error_message": shown_error_message(run),
        "shared_view": shared,
        "share": share,
        "cancel_url": cancel_url,
        "download_url": download_url,
        "report_html_url": report_html_url,
        "live": {
            "run_id": str(run.id),
            "ws_path": websocket_path(run),
            "share_token": share_token or "",
            "state": run.state,
            "active": run.is_active,
        },
        "status": run_status(run),
        "report": report,
        "plan": report.get("plan") or {},
        "end_to_end": report.get("end_to_end") or {},
        "rows": plan_rows(report),
        "layout_count": layout_count(report),
        "metrics": report.get("metrics") or {},
        "timing": report.get("timing") or {},
        "launch": report.get("launch") or {},
        "error_source_line": error_source_line(run),
        "agents": agents_view(report),
        **time_views(report),
    }


def _seconds_text(seconds: float) -> str:
    """``0.04`` below a second, ``12.3`` from there on."""
    return f"{seconds:.2f}" if seconds < 1 else f"{seconds:.1f}"


def time_views(report: dict | None) -> dict[str, Any]:
    """Where the run's time went and what its search reached, for the
    summary (``runs/_run_summary.html``, ``runs/_run_phases.html``); each
    key is None for a report that predates it (the page then leaves its
    part out).

    - ``phases``: ``lego_core.report_view.phase_breakdown`` with display text per
      row (``seconds_text``, ``share_text``; ``percent``: the bar's width).
    - ``signatures``: ``lego_core.report_view.signature_counts`` (counts None
      where the report lacks one), ``not_attempted`` with ``share_text``.
    - ``first_times``: ``agent_call`` and ``improved_plan``: "after 2.50 s"
      or "none" (it never happened), "—" where the report lacks the key.
    - ``host``: ``lego_core.report_view.host_load`` (``text``: "host load 3.2
      on 16 CPUs while timing", ``interleaved``).
    """
    report = report or {}
    phases = phase_breakdown(report)
    if phases is not None:
        for row in phases["rows"]:
            share = row["share_of_wall"]
            row.update(seconds_text=_seconds_text(row["seconds"]), share_text="" if share is None else f"{share * 100:.0f}%",
                       percent=f"{row['fraction'] * 100:.1f}")
        phases["wall_text"] = None if phases["wall_s"] is None else _seconds_text(phases["wall_s"])
    signatures = signature_counts(report)
    if signatures is not None:
        for item in signatures["not_attempted"]:
            item["share_text"] = "" if item["share"] is None else f"{item['share'] * 100:.1f}%"
    metrics = report.get("metrics") or {}
    first_times = None
    keys = {"agent_call": "time_to_first_agent_call_s", "improved_plan": "time_to_first_improved_plan_s"}
    if any(key in metrics for key in keys.values()):
        first_times = {}
        for name, key in keys.items():
            value = metrics.get(key, "")
            if value is None:
                first_times[name] = "none"
            elif isinstance(value, (int, float)) and not isinstance(value, bool):
                first_times[name] = f"after {value:.2f} s"
            else:
                first_times[name] = "—"
    return {"phases": phases, "signatures": signatures, "first_times": first_times, "host": host_load(report.get("timing"))}


def agents_view(report: dict) -> dict[str, Any]:
    """Which agents ran, for the header: ``text`` ("template agent (built in,
    no LLM)" or "LLM gpt-x"), ``names``, ``llm`` (an LLM ran: tokens are
    worth showing) and ``pool`` (agents at a time).  ``metrics.agents`` is the
    pool size, or a list of ``{kind, model, tokens}`` where the run says
    which agents it used."""
    metrics = report.get("metrics") or {}
    listed = metrics.get("agents")
    used = listed if isinstance(listed, list) else []
    pool = metrics.get("agent_pool") or (listed if isinstance(listed, int) else len(used) or 1)
    if not used and report:
        used = [{"kind": "template", "model": ""}]
    parts, names = [], []
    for agent in used:
        kind = str(agent.get("kind") or "template")
        model = str(agent.get("model") or "")
        names.append(model or kind)
        parts.append("template agent (built in, no LLM)" if kind == "template" else f"LLM {model or kind}")
    llm = any(str(a.get("kind") or "template") != "template" for a in used) or bool(metrics.get("tokens"))
    return {"text": ", ".join(dict.fromkeys(parts)), "names": names, "llm": llm, "pool": pool}


def run_status(run: Run) -> dict[str, Any]:
    """The run's status for the page and the JSON API: state, place in
    the queue (``queue_position``, 1 = next; None unless queued) and the
    expected wait (``expected_wait_s``), elapsed
    time, last event, what it is doing, its error."""
    last = run.events.order_by("-seq").first()
    position = queue.queue_position(run)
    wait_s = queue.expected_wait_s(run) if position else None
    return {
        "id": str(run.id),
        "state": run.state,
        "active": run.is_active,
        "queue_position": position,
        # seconds until it is expected to start (queue.expected_waits); None unless queued or nothing to go by
        "expected_wait_s": round(wait_s) if wait_s is not None else None,
        "elapsed_s": round(run.elapsed_s, 1),
        "last_seq": last.seq if last else 0,
        "activity": describe_event(last.data) if last else _idle_activity(run, position),
        "error_message": shown_error_message(run),
        "error_line": run.error_line,
    }


def shown_error_message(run: Run) -> str:
    """The run's error message with server paths made relative."""
    from webapp.runs import server_paths

    return server_paths.scrub(run.error_message or "", run.pk)


def shown_report(run: Run) -> dict | None:
    """The run's report (report.json) with server paths made relative."""
    from webapp.runs import server_paths

    return server_paths.scrub(run.report, run.pk) if run.report is not None else None


def _idle_activity(run: Run, position: int | None = None) -> str:
    if run.state == Run.State.QUEUED:
        return f"waiting for a worker: {queue.describe_position(position)}" if position else "waiting for a worker"
    return "starting"


def event_json(event: RunEvent) -> dict[str, Any]:
    """``{seq, type, data}`` of a stored event, as viewers get it (server
    paths made relative: events stored before they were scrubbed)."""
    from webapp.runs import server_paths

    return {"seq": event.seq, "type": event.type, "data": server_paths.scrub(event.data, event.run_id)}


def describe_event(data: dict) -> str:
    """One line for a person: what the optimizer is doing now."""
    kind = data.get("type")
    if kind == "stage_started":
        return f"stage {data.get('stage')}"
    if kind == "progress":
        text = f"{data.get('stage')}: {data.get('done')}/{data.get('total')}"
        return f"{text} {data.get('message', '')}".strip()
    if kind == "node_created":
        return f"sub-problem {data.get('label', data.get('node_id'))}"
    if kind == "verification":
        verdict = "passed" if data.get("passed") else "failed"
        return f"candidate {data.get('candidate_id')} {verdict} verification"
    if kind == "plan_improved":
        return f"plan improved: {data.get('speedup', 0):.2f}x"
    if kind == "run_finished":
        return "finished"
    if kind == "run_failed":
        if data.get("error_type") == "RunCancelled":
            return "cancelled"
        return f"failed: {data.get('message', '')}"
    return str(kind)


def plan_rows(report: dict | None) -> list[dict[str, Any]]:
    """One row per compute sub-problem of the chosen plan (report.json
    ``subproblems``); ``layout`` leaves (views, permutes: no data moved) are
    left out and counted by ``layout_count``."""
    return [
        {
            "id": sub.get("id"),
            "label": sub.get("label") or sub.get("id"),
            "module_path": sub.get("module_path") or "",
            "ops": sub.get("ops") or [],
            "implementation": sub.get("implementation"),
            "max_abs_error": sub.get("max_abs_error"),
            "time_ms": sub.get("time_ms"),
            "time_kind": sub.get("time_kind"),
            "baseline_ms": sub.get("baseline_ms"),
            "baseline_kind": sub.get("baseline_kind") or sub.get("time_kind"),
            "reused_from": sub.get("reused_from"),
        }
        for sub in (report or {}).get("subproblems", [])
        if sub.get("kind") != "layout"
    ]


def layout_count(report: dict | None) -> int:
    """How many layout-only leaves (views) the plan table leaves out."""
    return sum(1 for sub in (report or {}).get("subproblems", []) if sub.get("kind") == "layout")


def error_source_line(run: Run) -> str | None:
    """The text of the uploaded file's line the error points at (read as
    text, never imported; only when the upload is still a regular file of
    the run's own, never through a link the upload planted in its place)."""
    from webapp.runs import safe_files

    if not run.error_line or not run.upload:
        return None
    try:
        lines = safe_files.read_regular(Path(run.upload.path)).decode("utf-8", "replace").splitlines()
    except (OSError, ValueError):
        return None
    return lines[run.error_line - 1] if 0 < run.error_line <= len(lines) else None


def compare_context(a: Run, b: Run) -> dict[str, Any]:
    """Template context of the page comparing two runs of one model
    (``runs/compare.html``): each run's speedup and plan times, and one row
    per compute sub-problem (matched by module path, label, kind and
    how many of that name came before) with
    both runs' implementation and time; ``differs`` where the plans chose
    differently or only one run has the sub-problem."""
    reports = [shown_report(r) or {} for r in (a, b)]
    rows: dict[tuple, dict] = {}
    for side, report in enumerate(reports):
        seen: dict[tuple, int] = {}
        for sub in report.get("subproblems") or []:
            if sub.get("kind") == "layout":
                continue
            name = (sub.get("module_path") or "", sub.get("label") or "", sub.get("kind") or "")
            seen[name] = seen.get(name, 0) + 1
            key = name + (seen[name],)  # the n-th sub-problem of that name (two "clone"s in one module)
            row = rows.setdefault(key, {"label": key[1], "module_path": key[0], "kind": key[2], "sides": [None, None]})
            row["sides"][side] = sub
    for row in rows.values():
        left, right = row["sides"]
        row["differs"] = not (left and right and left.get("implementation") == right.get("implementation"))
        if left and right and left.get("time_ms") is not None and right.get("time_ms") is not None:
            row["delta_ms"] = right["time_ms"] - left["time_ms"]
    runs = []
    for run, report in zip((a, b), reports):
        metrics = report.get("metrics") or {}
        runs.append({"run": run, "plan": report.get("plan") or {}, "metrics": metrics,
                     "overrides": report.get("overrides") or run.overrides})
    table = sorted(rows.values(), key=lambda r: (not r["differs"], r["module_path"], r["label"]))
    return {"runs": runs, "rows": table, "differences": sum(r["differs"] for r in table)}
