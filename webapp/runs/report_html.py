"""A run's self-contained ``report.html``: one file that opens from disk
(``file://``) with no server and no network and shows what the run page
shows: the FusionTree, the node panel, the speedup-over-time and per
sub-problem charts, the summary and the plan table.

Everything is inline: plotly.min.js (from the plotly package), the app's
CSS and the live view's scripts, the run's events as
``<script type="application/json" id="run-events">`` and its report.json as
``#run-report``.  The page's scripts run in their "static" mode: they build
the same RunModel from the inline events instead of a websocket.

``execution.finish`` writes it into the output folder before the run is
marked finished (so the zip holds it); ``downloads`` builds it on demand for
runs that finished before reports existed, and in place of a report.html
that is not a regular file of the run's own (a planted link).
"""
from __future__ import annotations

import logging
import os
import re
import tempfile
from pathlib import Path

from django.contrib.staticfiles import finders
from django.template.loader import render_to_string
from django.utils import timezone
from django.utils.safestring import mark_safe

from webapp.runs import presenters, safe_files
from webapp.runs.models import Run

log = logging.getLogger(__name__)

REPORT_NAME = "report.html"

# static paths, in the order the page loads them
PLOTLY_JS = "plotly/plotly.min.js"
STYLESHEETS = ["css/app.css", "css/live.css"]
SCRIPTS = [
    "js/live/run_model.js",
    "js/live/tree_view.js",
    "js/live/time_view.js",
    "js/live/node_panel.js",
    "js/live/charts.js",
    "js/live/header.js",
    "js/live/run_page.js",
]

_SCRIPT_END = re.compile(r"</(script)", re.IGNORECASE)
_STYLE_END = re.compile(r"</(style)", re.IGNORECASE)
_COMMENT_OPEN = re.compile(r"<!--")


def read_static(path: str) -> str:
    """The text of a static file (found like ``{% static %}`` finds it);
    FileNotFoundError when no static folder has it."""
    found = finders.find(path)
    if not found:
        raise FileNotFoundError(f"static file {path} not found (is the plotly package installed?)")
    return Path(found).read_text(encoding="utf-8")


def inline_script(code: str) -> str:
    """``code`` made safe to sit between ``<script>`` and ``</script>``:
    ``</script`` becomes ``<\\/script`` and ``<!--`` becomes ``<\\!--`` (the
    same text inside a JavaScript string, regular expression or comment;
    neither can appear outside them in valid code)."""
    code = _SCRIPT_END.sub(r"<\\/\1", code)
    return _COMMENT_OPEN.sub(r"<\\!--", code)


def inline_style(css: str) -> str:
    """``css`` made safe to sit inside ``<style>``."""
    return _STYLE_END.sub(r"<\\/\1", css)


def inline_assets(run: Run, paths: list[str], escape) -> list[dict]:
    """``[{"name", "code"}]``: each static file in ``paths``, escaped for its
    element by ``escape``; a missing one is logged and left out."""
    assets = []
    for path in paths:
        try:
            assets.append({"name": path, "code": mark_safe(escape(read_static(path)))})
        except FileNotFoundError:
            log.warning("report.html of run %s: %s is missing", run.id, path)
    return assets


def report_context(run: Run) -> dict:
    """The template context of ``runs/report.html`` for ``run``: the run
    page's server-side parts plus the inline events, report and assets."""
    report = presenters.shown_report(run) or {}
    events = [presenters.event_json(event) for event in run.events.order_by("seq")]
    scripts = inline_assets(run, SCRIPTS, inline_script)
    styles = inline_assets(run, STYLESHEETS, inline_style)
    return {
        "run": run,
        "error_message": presenters.shown_error_message(run),
        "static_report": True,
        "shared_view": True,  # no controls
        "share": None,
        "status": {"elapsed_s": round(run.elapsed_s, 1), "activity": ""},
        "report": report,
        "plan": report.get("plan") or {},
        "end_to_end": report.get("end_to_end") or {},
        "rows": presenters.plan_rows(report),
        "layout_count": presenters.layout_count(report),
        "metrics": report.get("metrics") or {},
        "timing": report.get("timing") or {},
        "error_source_line": presenters.error_source_line(run),
        "agents": presenters.agents_view(report),
        **presenters.time_views(report),
        "events": events,
        "plotly_js": mark_safe(inline_script(read_static(PLOTLY_JS))),
        "styles": styles,
        "scripts": scripts,
        "generated_at": timezone.now(),
    }


def render_report_html(run: Run) -> str:
    """The run's self-contained report.html as text (about 5 MB, most of it
    plotly.min.js), rendered with the ``runs/report.html`` template."""
    return render_to_string("runs/report.html", report_context(run))


def store_report_html(out: Path, text: str) -> Path:
    """Write ``text`` as ``out/report.html`` through a new temporary file
    (``mkstemp``: created, never a planted link followed) moved over the
    old name (which replaces a link there, never writes through it)."""
    out = Path(out)
    if not safe_files.is_plain_dir(out):
        raise safe_files.UnsafeFile(f"{out} is not a plain folder under MEDIA_ROOT")
    fd, tmp = tempfile.mkstemp(prefix=f".{REPORT_NAME}.", suffix=".tmp", dir=out)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, out / REPORT_NAME)  # never a half-written report
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return out / REPORT_NAME


def report_html_bytes(run: Run, out: Path) -> bytes:
    """``out/report.html`` when it is a regular file of the run's own
    (``safe_files``); otherwise rendered from ``run`` now and stored in its
    place (a failure to store is logged: the rendered page is still served)."""
    try:
        return safe_files.read_regular(Path(out) / REPORT_NAME)
    except FileNotFoundError:
        pass
    except OSError as exc:
        log.warning("report.html of run %s is rebuilt: %s", run.id, exc)
    text = render_report_html(run)
    try:
        store_report_html(out, text)
    except OSError:
        log.exception("could not store report.html for run %s", run.id)
    return text.encode("utf-8")


def write_report_html(run: Run) -> Path | None:
    """Write report.html into the run's output folder (``execution.finish``
    calls it before the run is saved as finished).  A failure is logged, not
    raised: the run's result stands, and the download builds the report
    again on demand."""
    out = run.output_path
    if out is None:
        return None
    try:
        return store_report_html(out, render_report_html(run))  # the final events and report, not an older copy
    except Exception:  # noqa: BLE001 - a report is not worth failing a finished run
        log.exception("could not write report.html for run %s", run.id)
        return None
