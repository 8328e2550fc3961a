"""The run page (owner and shared), share links, the runs list filter and
the self-contained report.html (rendered, written at finish, zipped, and
opened from file:// in headless Chromium)."""
from __future__ import annotations

import html
import io
import json
import re
import zipfile
from pathlib import Path

import pytest
from django.contrib.staticfiles import finders
from django.test import Client
from django.urls import reverse

from chromium_support import headless_chromium
from webapp.runs import execution, report_html
from webapp.runs.models import Run, RunEvent

pytestmark = pytest.mark.django_db

REPO = Path(__file__).resolve().parents[2]
PLOTLY_URL = "/static/plotly/plotly.min.js"
LIVE_IDS = ["run-state", "run-elapsed", "run-agent-calls", "run-tokens", "run-speedup-live", "tree-view",
            "node-panel", "speedup-chart", "subproblem-chart", "stream-status"]
# a kernel source and a transcript line that try to end the inline JSON early
HOSTILE = '</script><script>window.PWNED = 1</script><!-- </SCRIPT >'


def page_of(response) -> str:
    assert response.status_code == 200, response.status_code
    return response.content.decode()


def json_script(page: str, element_id: str):
    """The JSON inside ``<script type="application/json" id=...>``, parsed."""
    match = re.search(rf'<script id="{element_id}" type="application/json">(.*?)</script>', page, re.S)
    assert match, f"no #{element_id} JSON in the page"
    return json.loads(match.group(1))


def sample_events(n_leaves: int = 3) -> list[dict]:
    """A small run's events (as lego_core sends them): a root OR node, one
    AND decomposition with ``n_leaves`` OR leaves, an agent that writes a
    kernel for the first leaf, two plans.  ``1 + 1 + n_leaves`` nodes."""
    t0 = 1_700_000_000.0
    leaves = [f"or{i:03d}" for i in range(2, 2 + n_leaves)]
    events = [
        {"type": "run_started", "ts": t0, "model": "scores.py", "overrides": {"rows": 16}, "dtype": "fp32", "device": "cpu"},
        {"type": "stage_started", "ts": t0 + 0.1, "stage": "construct", "total": 0},
        {"type": "node_created", "ts": t0 + 0.2, "node_id": "or000", "kind": "or", "parent": None, "label": "Model",
         "signature": "s0", "ops": ["aten.addmm.default", "aten._softmax.default"], "shapes": [[16, 30]],
         "reused": False, "shared": [], "input_shapes": [[16, 40]], "reference": "def reference(x):\n    return x\n"},
        {"type": "node_created", "ts": t0 + 0.3, "node_id": "and001", "kind": "and", "parent": "or000", "label": "Model",
         "signature": "", "ops": [], "shapes": [], "reused": False, "shared": []},
    ]
    for i, leaf in enumerate(leaves):
        events.append({"type": "node_created", "ts": t0 + 0.4 + i / 100, "node_id": leaf, "kind": "or", "parent": "and001",
                       "label": f"leaf {i}", "signature": f"s{i + 1}", "ops": ["aten.relu.default"], "shapes": [[16, 30]],
                       "reused": False, "shared": [], "input_shapes": [[16, 30]], "reference": "def reference(x):\n    return x\n"})
        events.append({"type": "timing", "ts": t0 + 0.5 + i / 100, "node_id": leaf, "candidate_id": f"{leaf}-library",
                       "ms": 0.01 * (i + 1), "measured": False, "baseline_ms": None})
    first = leaves[0]
    events += [
        {"type": "stage_started", "ts": t0 + 1.0, "stage": "search", "total": n_leaves},
        {"type": "plan_improved", "ts": t0 + 1.1, "cost_ms": 0.06, "baseline_ms": 0.06, "speedup": 1.0, "measured": False,
         "items": n_leaves, "chosen": leaves, "initial": True},
        {"type": "node_started", "ts": t0 + 1.2, "node_id": first, "agent": "template", "attempt": 1},
        {"type": "transcript", "ts": t0 + 1.3, "node_id": first, "agent": "template", "role": "user", "content": HOSTILE, "tokens": 7},
        {"type": "candidate_proposed", "ts": t0 + 1.4, "node_id": first, "candidate_id": f"{first}-template-1",
         "agent": "template", "implementation": "triton", "source": f"# kernel\n# {HOSTILE}\n"},
        {"type": "verification", "ts": t0 + 1.5, "node_id": first, "candidate_id": f"{first}-template-1", "passed": True,
         "max_abs_error": 2.4e-07, "reason": "matched"},
        {"type": "timing", "ts": t0 + 1.6, "node_id": first, "candidate_id": f"{first}-template-1", "ms": 0.002,
         "measured": False, "baseline_ms": 0.01},
        {"type": "progress", "ts": t0 + 1.7, "stage": "search", "done": 1, "total": n_leaves, "message": ""},
        {"type": "plan_improved", "ts": t0 + 2.5, "cost_ms": 0.052, "baseline_ms": 0.06, "speedup": 1.154, "measured": False,
         "items": n_leaves, "chosen": leaves, "initial": False},
        {"type": "run_finished", "ts": t0 + 3.0, "out_dir": ".", "summary": {"speedup": 1.154}},
    ]
    return events


def store_events(run: Run, events: list[dict]) -> None:
    RunEvent.objects.bulk_create(
        [RunEvent(run=run, seq=i, type=e["type"], data=e) for i, e in enumerate(events, start=1)]
    )


def output_folder(run: Run, report: dict) -> Path:
    out = run.output_path
    (out / "kernels").mkdir(parents=True)
    (out / "optimized_model.py").write_text("# optimized\n")
    (out / "kernels" / "sp1.py").write_text("# kernel\n")
    (out / "report.json").write_text(json.dumps(report))
    return out


# --- the run page --------------------------------------------------------------


def test_static_finder_serves_plotly_from_the_plotly_package():
    found = finders.find("plotly/plotly.min.js")
    assert found and Path(found).stat().st_size > 1_000_000
    assert Path(found).parent.name == "package_data"


def test_owner_page_of_an_active_run_has_live_json_controls_and_local_plotly(user_client, make_run):
    run = make_run(state="running")
    page = page_of(user_client.get(reverse("runs:detail", args=[run.id])))
    live = json_script(page, "run-live")
    assert live == {"run_id": str(run.id), "ws_path": f"/ws/runs/{run.id}/events/", "share_token": "",
                    "state": "running", "active": True}
    for element_id in LIVE_IDS:
        assert f'id="{element_id}"' in page, element_id
    assert f'<script src="{PLOTLY_URL}"' in page
    assert "src=\"http" not in page and "cdn" not in page.lower()
    for script in ("run_model.js", "tree_view.js", "node_panel.js", "event_stream.js", "charts.js", "header.js", "run_page.js"):
        assert f"/static/js/live/{script}" in page
    # owner controls: a csrf-protected Share form; no download before the run finished
    assert 'id="share-create"' in page and reverse("runs:share-create", args=[run.id]) in page
    assert "csrfmiddlewaretoken" in page
    assert 'id="share-url"' not in page and 'id="share-revoke"' not in page
    assert 'id="download"' not in page and 'id="report-html"' not in page
    assert 'data-active="true"' in page  # test_browser_upload waits for data-active="false"


def test_owner_page_of_a_finished_run_links_zip_and_report_and_keeps_the_plan(user_client, make_run, sample_report):
    run = make_run(state="finished", report=sample_report)
    page = page_of(user_client.get(reverse("runs:detail", args=[run.id])))
    assert f'href="{reverse("runs:download", args=[run.id])}" id="download"' in page
    assert f'href="{reverse("runs:report-html", args=[run.id])}" id="report-html"' in page
    assert json_script(page, "run-live")["active"] is False
    assert json_script(page, "run-report")["plan"]["speedup"] == 2.16
    assert 'id="plan-table"' in page and "softmax chain" in page
    assert 'id="run-speedup-live"' in page and "2.16×" in page


@pytest.mark.parametrize("state, words", [
    ("finished", "first after 0.40 s, final after 2.50 s of the search"),
    ("running", "first after 0.40 s, best so far after 2.50 s of the search"),
    ("failed", "first after 0.40 s, best after 2.50 s of the search (no final plan: the run ended without one)"),
])
def test_the_plans_line_says_final_only_for_a_finished_run(user_client, make_run, sample_report, state, words):
    metrics = dict(sample_report["metrics"], time_to_first_plan_s=0.4, time_to_final_plan_s=2.5)
    run = make_run(state=state, report=dict(sample_report, metrics=metrics))
    page = page_of(user_client.get(reverse("runs:detail", args=[run.id])))
    line = re.search(r'<dd id="run-plan-times"([^>]*)>(.*?)</dd>', page, re.S)
    assert line.group(2) == words
    assert ('data-final="2.5"' in line.group(1)) == (state == "finished") and 'data-best="2.5"' in line.group(1)


def phase_rows(page: str) -> list[dict]:
    """The rows of ``#phases-table``: name, classes, seconds, title, the cells' text and the bar's width."""
    table = page.split('id="phases-table"')[1].split("</table>")[0]
    rows = []
    for classes, attrs, body in re.findall(r'<tr class="phase-row([^"]*)"([^>]*)>(.*?)</tr>', table, re.S):
        name = re.search(r'data-phase="([^"]+)"', attrs).group(1)
        title = re.search(r'title="([^"]*)"', attrs)
        cells = [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", body, re.S)]
        width = re.search(r'class="phase-bar" style="width: ([0-9.]+)%"', body).group(1)
        rows.append({"name": name, "inside": "phase-inside" in classes, "title": html.unescape(title.group(1)) if title else None,
                     "cells": [html.unescape(c) for c in cells[:3]], "width": float(width)})
    return rows


def test_run_page_shows_where_the_time_went_with_a_bar_per_phase(user_client, make_run, sample_report):
    from lego_core.phases import PHASES

    run = make_run(state="finished", report=sample_report)
    page = page_of(user_client.get(reverse("runs:detail", args=[run.id])))
    rows = phase_rows(page)
    assert [r["name"] for r in rows] == ["load", "capture", "construct", "search", "baseline_timing", "agent_calls",
                                         "verification", "mutation", "compose", "e2e_check"]
    by_name = {r["name"]: r for r in rows}
    # sequential stages: seconds and share of the 4.2 s wall; the bar is seconds over the wall (the largest here)
    assert by_name["search"]["cells"] == ["search", "2.5", "60%"] and by_name["search"]["width"] == 59.5
    assert by_name["e2e_check"]["cells"] == ["end-to-end check", "0.12", "3%"]
    assert by_name["load"]["width"] == 19.0 and not by_name["load"]["inside"]
    # inside the search: marked, no share of wall (busy seconds can exceed it)
    assert by_name["agent_calls"]["inside"] and by_name["agent_calls"]["cells"] == ["agent calls busy, inside search", "3.1", ""]
    assert by_name["mutation"]["cells"][0] == "mutation inside search"  # wall inside the search, not busy
    assert by_name["agent_calls"]["width"] == 73.8
    # each phase says what it covers, from lego_core.phases
    assert all(r["title"] == PHASES[r["name"]] for r in rows)
    assert "4.2 s of the optimizer's wall time" in page
    # the summary: first agent call, first plan with agent work, signatures
    first = re.search(r'<dd id="run-first-agent-call">(.*?)</dd>', page, re.S).group(1)
    assert re.sub(r"<[^>]+>", "", first) == "after 0.70 s; first plan with agent work: after 1.60 s"
    signatures = html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", re.search(r'<dd id="run-signatures">(.*?)</dd>', page, re.S).group(1)))).strip()
    assert signatures == ("2 distinct, 1 attempted, 1 won by Triton; at ≥1% of library time: 1 of 2 attempted "
                          "not attempted: proj (37.1% of library time): the search budget ran out first")


def test_phases_come_in_pipeline_order_whatever_order_the_stored_json_has(user_client, make_run, sample_report):
    phases = dict(reversed(list(sample_report["phases_s"].items())))  # PostgreSQL's jsonb reorders keys
    phases.update(_wall=10.0, some_new_phase=0.5)
    run = make_run(state="finished", report=dict(sample_report, phases_s=phases))
    rows = phase_rows(page_of(user_client.get(reverse("runs:detail", args=[run.id]))))
    names = [r["name"] for r in rows]
    assert names[:4] == ["load", "capture", "construct", "search"] and names[-2:] == ["some_new_phase", "_other"]
    other = rows[-1]  # the wall time no stage covers: 10 - 4.17 s
    assert other["cells"] == ["other", "5.8", "58%"] and "outside the stages above" in other["title"]
    assert rows[-2]["title"] is None  # a phase this version does not know: shown, no description


def test_a_report_without_phases_or_signatures_still_renders(user_client, make_run, sample_report):
    metrics = {k: v for k, v in sample_report["metrics"].items()
               if k not in ("signatures", "time_to_first_agent_call_s", "time_to_first_improved_plan_s")}
    old = {k: v for k, v in sample_report.items() if k != "phases_s"}
    run = make_run(state="finished", report=dict(old, metrics=metrics))
    page = page_of(user_client.get(reverse("runs:detail", args=[run.id])))
    for part in ('id="run-phases"', 'id="phases-table"', 'id="run-signatures"', 'id="run-first-agent-call"', 'id="run-host-load"'):
        assert part not in page, part
    assert 'id="plan-table"' in page and "2.16×" in page and 'id="run-search"' in page  # the rest as before


def test_a_report_with_partial_new_keys_shows_dashes_and_none(user_client, make_run, sample_report):
    metrics = dict(sample_report["metrics"], signatures={"distinct": 5, "not_attempted": "junk"},
                   time_to_first_agent_call_s=None)
    del metrics["time_to_first_improved_plan_s"]
    run = make_run(state="finished", report=dict(sample_report, metrics=metrics, phases_s={"_wall": 3.0}))
    page = page_of(user_client.get(reverse("runs:detail", args=[run.id])))
    assert re.sub(r"<[^>]+>", "", re.search(r'<dd id="run-first-agent-call">(.*?)</dd>', page, re.S).group(1)) == \
        "none; first plan with agent work: —"
    assert '<span id="run-signature-counts">5 distinct, — attempted, — won by Triton</span>' in page
    assert 'id="run-signatures-missed"' not in page
    rows = phase_rows(page)  # only the wall: it all shows as "other"
    assert [(r["name"], r["cells"]) for r in rows] == [("_other", ["other", "3.0", "100%"])]


def test_measured_timing_says_how_busy_the_host_was(user_client, make_run, sample_report):
    timing = {"eager_ms": 2.0, "optimized_ms": 1.0, "speedup_vs_eager": 2.0,
              "host": {"load_avg_1m": 3.24, "cpus": 16, "busy": 0.2}, "interleaved": True}
    run = make_run(state="finished", report=dict(sample_report, timing=timing))
    page = page_of(user_client.get(reverse("runs:detail", args=[run.id])))
    timing_text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", re.search(r'<dd id="run-timing">(.*?)</dd>', page, re.S).group(1)))
    assert timing_text == ("eager 2 ms, LEGO 1 ms (2.00× over eager); "
                           "host load 3.2 on 16 CPUs while timing, eager and LEGO interleaved")


def test_shared_page_is_read_only_and_works_logged_out(client, make_run, sample_report):
    run = make_run(state="finished", report=sample_report)
    token = run.create_share_token()
    page = page_of(client.get(reverse("runs:shared", args=[token])))
    assert json_script(page, "run-live")["share_token"] == token
    for element_id in LIVE_IDS + ["plan-table", "run-summary", "phases-table", "run-signatures", "run-first-agent-call"]:
        assert f'id="{element_id}"' in page, element_id
    assert [r["name"] for r in phase_rows(page)][:4] == ["load", "capture", "construct", "search"]
    # the same views, no controls at all
    for control in ('id="share-create"', 'id="share-revoke"', 'id="share-url"', "csrfmiddlewaretoken", "<form",
                    "New run", "Log out", "/api/"):
        assert control not in page, control
    # read-only downloads through the token
    assert reverse("runs:shared-download", args=[token]) in page
    assert reverse("runs:shared-report-html", args=[token]) in page
    assert reverse("runs:download", args=[run.id]) not in page


def test_share_create_replace_and_revoke(user_client, make_run, other_user):
    client = Client()  # user_client is pytest-django's `client`: this one is someone else
    run = make_run(state="running")
    detail = reverse("runs:detail", args=[run.id])
    create = reverse("runs:share-create", args=[run.id])
    assert user_client.get(create).status_code == 405  # POST only

    assert user_client.post(create)["Location"] == detail
    run.refresh_from_db()
    first = run.share_token
    assert len(first) >= 43 and re.fullmatch(r"[A-Za-z0-9_-]+", first)
    page = page_of(user_client.get(detail))
    shared_url = f"http://testserver{reverse('runs:shared', args=[first])}"
    assert f'id="share-url" value="{shared_url}" readonly' in page
    assert 'id="share-revoke"' in page and 'id="share-copy"' in page and 'id="share-create"' not in page
    assert client.get(shared_url).status_code == 200  # anyone with the link

    user_client.post(create)  # a new link replaces the old one
    run.refresh_from_db()
    assert run.share_token != first and len(run.share_token) >= 43
    assert client.get(reverse("runs:shared", args=[first])).status_code == 404
    second = run.share_token

    client.force_login(other_user)  # someone else can neither share nor revoke it
    assert client.post(reverse("runs:share-revoke", args=[run.id])).status_code == 404
    assert client.post(create).status_code == 404
    client.logout()

    assert user_client.post(reverse("runs:share-revoke", args=[run.id]))["Location"] == detail
    run.refresh_from_db()
    assert run.share_token == ""
    assert client.get(reverse("runs:shared", args=[second])).status_code == 404
    assert client.get(reverse("runs:shared-report-html", args=[second])).status_code == 404
    page = page_of(user_client.get(detail))
    assert 'id="share-create"' in page and 'id="share-url"' not in page


# --- the runs list ---------------------------------------------------------------


def test_runs_list_filters_by_state_with_counts(user_client, make_run, other_user, sample_report):
    make_run(filename="done-a.py", state="finished", report=sample_report)
    make_run(filename="done-b.py", state="finished")
    make_run(filename="broken.py", state="failed")
    make_run(filename="going.py", state="running")
    make_run(owner=other_user, filename="theirs.py", state="queued")
    url = reverse("runs:list")

    page = page_of(user_client.get(url))
    nav = page.split('id="run-filter"')[1].split("</nav>")[0]
    counts = dict(re.findall(r'data-state="(\w*)"[^>]*>\s*\w+ <span class="count">(\d+)</span>', nav))
    assert counts == {"": "4", "queued": "0", "running": "1", "finished": "2", "failed": "1", "cancelled": "0"}
    assert re.search(r'data-state="" class="active" aria-current="page"', nav)
    assert all(name in page for name in ("done-a.py", "done-b.py", "broken.py", "going.py"))
    assert "theirs.py" not in page
    assert "2.16×" in page and "estimated" in page  # speedup with its kind

    page = page_of(user_client.get(url, {"state": "finished"}))
    assert re.search(r'href="\?state=finished" data-state="finished" class="active"', page)
    assert "done-a.py" in page and "done-b.py" in page and "broken.py" not in page and "going.py" not in page
    assert page.count('<tr data-state="finished">') == 2

    page = page_of(user_client.get(url, {"state": "queued"}))
    assert 'id="no-runs"' in page and "No queued runs" in page

    page = page_of(user_client.get(url, {"state": "bogus<b>"}))
    assert 'id="unknown-state"' in page and "bogus&lt;b&gt;" in page and "bogus<b>" not in page
    assert page.count("<tr data-state=") == 4


def list_rows(page: str) -> list[tuple[str, str]]:
    """``[(model, options)]`` of the runs table, top to bottom (after each row's compare checkbox)."""
    return [(html.unescape(name), html.unescape(options)) for name, options in re.findall(
        r'<tr data-state="\w+">\s*<td><input type="checkbox" name="run"[^>]*></td>\s*<td><a [^>]*>([^<]*)</a>.*?<td class="options"[^>]*><div class="clamp">([^<]*)</div></td>', page, re.S
    )]


def test_runs_list_shows_each_runs_overrides(user_client, make_run):
    """Three runs of one model that differ only in their overrides."""
    make_run(filename="scores.py", overrides={"rows": 2}, override_order=["rows"])
    make_run(filename="scores.py", overrides={"rows": 16, "d_in": 40}, override_order=["rows", "d_in"], dtype="bf16")
    make_run(filename="scores.py", overrides={}, device="cuda")
    page = page_of(user_client.get(reverse("runs:list")))
    assert list_rows(page) == [
        ("scores.py", "fp32 on cuda"),
        ("scores.py", "bf16 on cpu, rows=16, d_in=40"),
        ("scores.py", "fp32 on cpu, rows=2"),
    ]


def test_runs_list_reads_no_reports(user_client, make_run, sample_report, django_assert_max_num_queries):
    """The speedup and its kind come from the database's JSON; the reports
    themselves stay in the database, and the query count does not grow
    with the runs."""
    for n in range(12):
        make_run(filename=f"m{n}.py", state="finished", report=sample_report)
    with django_assert_max_num_queries(8):
        response = user_client.get(reverse("runs:list"))
    runs = list(response.context["runs"])
    assert len(runs) == 12 and all("report" in run.get_deferred_fields() for run in runs)
    assert page_of(response).count("2.16× <span class=\"kind\">estimated</span>") == 12


def test_runs_list_is_paged_by_50_and_keeps_the_state_filter(user_client, user):
    Run.objects.bulk_create(
        [Run(owner=user, original_filename=f"done{n}.py", state="finished") for n in range(55)]
        + [Run(owner=user, original_filename=f"broken{n}.py", state="failed") for n in range(3)]
    )
    url = reverse("runs:list")

    page = page_of(user_client.get(url, {"state": "finished"}))
    assert page.count('<tr data-state="finished">') == 50
    pages = page.split('id="run-pages"')[1].split("</nav>")[0]
    assert 'href="?state=finished&amp;page=2" rel="next"' in pages and 'rel="prev"' not in pages
    assert "runs 1–50 of 55, page 1 of 2" in pages

    page = page_of(user_client.get(url, {"state": "finished", "page": 2}))
    assert page.count('<tr data-state="finished">') == 5
    pages = page.split('id="run-pages"')[1].split("</nav>")[0]
    assert 'href="?state=finished&amp;page=1" rel="prev"' in pages and 'rel="next"' not in pages
    # the filter's counts are of all the user's runs, whatever the page
    assert re.search(r'data-state="failed">failed <span class="count">3</span>', page)

    every = [page_of(user_client.get(url, {"page": n})) for n in (1, 2)]
    assert [p.count("<tr data-state=") for p in every] == [50, 8]
    assert 'href="?page=2" rel="next"' in every[0] and 'href="?page=1" rel="prev"' in every[1]
    names = re.findall(r'<td><a href="[^"]*">([^<]*)</a></td>', every[0] + every[1])
    assert sorted(names) == sorted([f"done{n}.py" for n in range(55)] + [f"broken{n}.py" for n in range(3)])

    assert page_of(user_client.get(url, {"page": "999"})).count("<tr data-state=") == 8  # the last page
    assert page_of(user_client.get(url, {"page": "x"})).count("<tr data-state=") == 50  # the first
    assert 'id="run-pages"' not in page_of(user_client.get(url, {"state": "failed"}))  # one page: no links


# --- report.html -----------------------------------------------------------------


@pytest.fixture
def finished_run(make_run, sample_report):
    """A finished run with an output folder (no report.html yet) and a small event log."""
    run = make_run(state="finished", report=sample_report, output_dir="runs/fake/output", filename="scores.py")
    output_folder(run, sample_report)
    store_events(run, sample_events())
    return run


def test_report_html_is_self_contained_and_its_json_parses_back(finished_run, sample_report):
    text = report_html.render_report_html(finished_run)
    assert 3_000_000 < len(text) < 8_000_000  # plotly.min.js is most of it
    # no external resource of any kind
    assert not re.search(r"<script[^>]*\ssrc=", text, re.I)
    assert not re.search(r"<link[^>]*stylesheet", text, re.I)
    assert "<script src=http" not in text.replace('"', "")
    assert "Plotly" in text and "LEGO.RunModel = " in text and "LEGO.Charts = " in text
    assert "LEGO.EventStream = " not in text  # no stream in the report
    # the events and the report as inline JSON that parses back to what was stored
    events = json_script(text, "run-events")
    assert [e["seq"] for e in events] == list(range(1, len(sample_events()) + 1))
    assert [e["data"] for e in events] == sample_events()
    assert json_script(text, "run-report") == sample_report
    # the hostile text appears only escaped: one </script> per <script> element
    assert text.lower().count("</script") == text.lower().count("<script")
    assert "window.PWNED" in text and "<script>window.PWNED" not in text
    assert "\\u003C/script\\u003E" in text
    # the same server-rendered parts as the run page, no controls
    assert 'id="plan-table"' in text and "softmax chain" in text and 'id="run-e2e"' in text
    assert len(phase_rows(text)) == 10 and 'id="run-signatures"' in text and 'id="run-first-agent-call"' in text
    for element_id in ("tree-view", "node-panel", "speedup-chart", "subproblem-chart", "run-speedup-live"):
        assert f'id="{element_id}"' in text
    assert "<form" not in text and "csrfmiddlewaretoken" not in text and 'id="run-live"' not in text


def test_inline_script_escapes_what_would_end_the_element():
    code = 'var s = "</script><!-- </SCRIPT>";'
    assert report_html.inline_script(code) == 'var s = "<\\/script><\\!-- <\\/SCRIPT>";'
    assert report_html.inline_style("a::after{content:'</style>'}") == "a::after{content:'<\\/style>'}"


def test_finish_writes_report_html_before_the_run_is_finished_and_the_zip_has_it(
    user_client, make_run, sample_report, monkeypatch
):
    run = make_run(state="running", output_dir="runs/going/output", filename="scores.py")
    out = output_folder(run, sample_report)
    store_events(run, sample_events())
    seen = {}
    write = report_html.write_report_html

    def spy(r):
        seen["state in the database"] = Run.objects.get(pk=r.pk).state
        return write(r)

    monkeypatch.setattr(report_html, "write_report_html", spy)
    execution.finish(run, sample_report)
    assert seen == {"state in the database": "running"}
    run.refresh_from_db()
    assert run.state == "finished"
    assert (out / "report.html").is_file()
    assert 'id="run-events"' in (out / "report.html").read_text()

    response = user_client.get(reverse("runs:download", args=[run.id]))
    archive = zipfile.ZipFile(io.BytesIO(b"".join(response.streaming_content)))
    folder = f"scores-lego-{str(run.id)[:8]}"
    assert f"{folder}/report.html" in archive.namelist()
    assert 'id="run-events"' in archive.read(f"{folder}/report.html").decode()


def test_report_html_download_builds_a_missing_report(user_client, finished_run):
    out = finished_run.output_path
    assert not (out / "report.html").exists()
    response = user_client.get(reverse("runs:report-html", args=[finished_run.id]))
    assert response.status_code == 200 and response["Content-Type"].startswith("text/html")
    assert 'id="run-events"' in response.content.decode()
    assert (out / "report.html").is_file()
    token = finished_run.create_share_token()
    assert Client().get(reverse("runs:shared-report-html", args=[token])).status_code == 200


# --- in Chromium -------------------------------------------------------------------


@pytest.fixture
def browser():
    """Headless Chromium; tests ask for it after the fixtures that use the
    database and use the database no more (see ``headless_chromium``)."""
    with headless_chromium() as chromium:
        yield chromium


def open_page(browser, url: str):
    """A page at ``url`` with its JavaScript errors, console errors and
    requests collected in ``page.lego_log``."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    log = {"errors": [], "console": [], "requests": []}
    page.on("pageerror", lambda exc: log["errors"].append(str(exc)))
    page.on("console", lambda msg: msg.type == "error" and log["console"].append(msg.text))
    page.on("request", lambda request: log["requests"].append(request.url))
    page.lego_log = log
    page.goto(url)
    return page


@pytest.fixture
def report_file(finished_run, tmp_path) -> Path:
    """The finished run's report.html, copied alone into another folder."""
    html = report_html.report_html_bytes(finished_run, finished_run.output_path)
    copy = tmp_path / "elsewhere" / "report.html"  # no server, no folder around it
    copy.parent.mkdir()
    copy.write_bytes(html)
    return copy


@pytest.mark.browser
def test_report_html_renders_tree_and_charts_from_file_url(report_file, browser):
    page = open_page(browser, report_file.as_uri())
    try:
        page.wait_for_function("() => window.LEGO && window.LEGO.page && window.LEGO.page.renders > 0")
        page.wait_for_selector("#speedup-chart .main-svg")
        page.wait_for_function("() => LEGO.page.tree && LEGO.page.tree.draws > 0")
        page.wait_for_selector("#subproblem-chart .main-svg")
        nodes = len([e for e in sample_events() if e["type"] == "node_created"])
        assert page.evaluate("() => LEGO.page.model.nodes.size") == nodes
        assert page.evaluate(TREE_POINTS) == nodes
        # the speedup chart: one marker per plan, the final speedup last
        assert page.evaluate("() => document.getElementById('speedup-chart').dataset.points") == "2"
        ys = page.evaluate("() => document.getElementById('speedup-chart').data[1].y")
        assert ys == [1.0, 1.154]
        # x: seconds since the search started (t0 + 1.0), like the report's time to first/final plan
        xs = page.evaluate("() => document.getElementById('speedup-chart').data[1].x")
        assert xs == pytest.approx([0.1, 1.5], abs=1e-6)
        assert page.evaluate("() => document.getElementById('speedup-chart').layout.xaxis.title.text") == \
            "seconds since the search started"
        assert page.evaluate("() => document.getElementById('subproblem-chart').dataset.items") == "2"
        assert page.locator("#run-speedup-live .value").inner_text() == "1.15×"
        assert page.locator("#run-tokens").inner_text() == "7"
        assert page.locator("#plan-table tbody tr").count() == 2
        assert page.evaluate("() => window.PWNED") is None
        assert page.lego_log["errors"] == []
        assert [u for u in page.lego_log["requests"] if not u.startswith(("file:", "data:", "blob:"))] == []
    finally:
        page.context.close()


# how many node marks the tree view drew (C1's tree_view.js)
TREE_POINTS = """() => {
  const plot = document.querySelector('#tree-view .js-plotly-plot') || document.getElementById('tree-view');
  // node traces carry the node ids as customdata (edges and the selection ring do not)
  return (plot.data || []).filter(t => t.customdata && t.x).reduce((n, t) => n + t.x.length, 0);
}"""


# a WebSocket the test drives: serverSends(message), serverCloses(code)
FAKE_WEBSOCKET = """
window.sockets = [];
class FakeSocket {
  constructor(url) { this.url = url; this.closedWith = null; window.sockets.push(this);
                     setTimeout(() => this.onopen && this.onopen(), 0); }
  send() {}
  close(code) { if (this.closedWith !== null) return; this.closedWith = code || 1005;
                setTimeout(() => this.onclose && this.onclose({code: code || 1005}), 0); }
  serverSends(msg) { this.onmessage({data: JSON.stringify(msg)}); }
  serverCloses(code) { this.closedWith = code; this.onclose({code}); }
}
window.WebSocket = FakeSocket;
"""


STREAM_HARNESS = """
<!doctype html><html><body><span id="stream-status" hidden></span>
<script>
""" + FAKE_WEBSOCKET.replace("%", "%%") + """
window.applied = [];
window.states = [];
</script>
<script>%s</script>
<script>
window.stream = new LEGO.EventStream({ws_path: "/ws/runs/r/events/", share_token: "a b", state: "running", active: true},
  (events) => window.applied.push(...events.map(e => e.seq)), (state) => window.states.push(state),
  {WebSocket: FakeSocket, statusEl: document.getElementById("stream-status")});
window.stream.start();
</script></body></html>
"""


@pytest.mark.browser
def test_event_stream_dedupes_reconnects_after_gaps_and_drops_and_stops_on_4404(browser, tmp_path):
    source = (REPO / "frontend/js/live/event_stream.js").read_text()
    harness = tmp_path / "stream.html"
    harness.write_text(STREAM_HARNESS % report_html.inline_script(source))
    page = open_page(browser, harness.as_uri())
    try:
        ev = lambda *seqs: {"type": "events", "state": "running", "events": [{"seq": s, "type": "progress", "data": {}} for s in seqs]}  # noqa: E731
        url = page.evaluate("() => sockets[0].url")
        assert url.endswith("/ws/runs/r/events/?after=0&share=a%20b")
        page.evaluate("m => sockets[0].serverSends(m)", ev(1, 2, 3))
        page.evaluate("m => sockets[0].serverSends(m)", ev(2, 3, 4))  # duplicates dropped
        assert page.evaluate("() => [applied, stream.received, stream.lastSeq]") == [[1, 2, 3, 4]] * 2 + [4]
        # a gap: reconnect at once with after=4, nothing past the gap applied
        page.evaluate("m => sockets[0].serverSends(m)", ev(6, 7))
        assert page.evaluate("() => [sockets.length, sockets[1].url.split('?')[1], applied.length]") == [2, "after=4&share=a%20b", 4]
        # a network drop: reconnect after the backoff with after=<last applied>
        page.evaluate("m => sockets[1].serverSends(m)", ev(5, 6))
        page.evaluate("() => stream.drop()")
        page.wait_for_function("() => sockets.length === 3", timeout=3000)
        assert page.evaluate("() => [sockets[2].url.split('?')[1], stream.connections]") == ["after=6&share=a%20b", 3]
        # the end: no reconnect after the server closes
        page.evaluate("() => sockets[2].serverSends({type: 'end', state: 'finished', last_seq: 6})")
        page.evaluate("() => sockets[2].serverCloses(1000)")
        page.wait_for_timeout(700)
        assert page.evaluate("() => [sockets.length, stream.ended, states.at(-1)]") == [3, True, "finished"]
        assert page.locator("#stream-status").inner_text() == "run finished"
        # 4404 on a fresh stream: a message, no reconnect
        page.evaluate("""() => { window.s2 = new LEGO.EventStream({ws_path: "/x/", share_token: ""}, () => {}, () => {},
                                   {WebSocket: FakeSocket, statusEl: document.getElementById("stream-status")}).start();
                                 sockets.at(-1).serverCloses(4404); }""")
        page.wait_for_timeout(700)
        assert page.evaluate("() => [sockets.length, s2.stopped]") == [4, True]
        assert "does not exist" in page.locator("#stream-status").inner_text()
        assert page.lego_log["errors"] == []
    finally:
        page.context.close()


# --- the favicon -------------------------------------------------------------------

ICON = '<link rel="icon" href="data:image/svg+xml,'


def test_every_page_has_an_inline_icon_so_browsers_ask_no_favicon_ico(client, user, finished_run):
    """Without one, every page logs a 404 for /favicon.ico in the console."""
    pages = {"login": page_of(client.get(reverse("login")))}
    client.force_login(user)
    for name, args in (("runs:list", []), ("runs:new", []), ("runs:detail", [finished_run.id]), ("api:token", [])):
        pages[name] = page_of(client.get(reverse(name, args=args)))
    token = finished_run.create_share_token()
    pages["shared"] = page_of(Client().get(reverse("runs:shared", args=[token])))
    pages["report.html"] = report_html.render_report_html(finished_run)
    for name, page in pages.items():
        head = page.split("</head>", 1)[0]
        assert head.count(ICON) == 1, name
        assert "favicon.ico" not in page, name


def stream_page(browser, tmp_path):
    """The stream harness page (a fake socket class, LEGO.EventStream) with
    its own stream stopped, so tests make theirs."""
    source = (REPO / "frontend/js/live/event_stream.js").read_text()
    harness = tmp_path / "stream.html"
    harness.write_text(STREAM_HARNESS % report_html.inline_script(source))
    page = open_page(browser, harness.as_uri())
    page.evaluate("() => stream.stop()")
    return page


NEW_STREAM = """(options) => { window.stops = []; window.s3 = new LEGO.EventStream(
  {ws_path: "/ws/runs/r/events/", share_token: "", state: "running", active: true},
  (events) => applied.push(...events.map(e => e.seq)), (state) => states.push(state),
  {WebSocket: FakeSocket, statusEl: document.getElementById("stream-status"),
   onStop: (code, message) => stops.push([code, message]), ...options}).start(); return sockets.length; }"""


@pytest.mark.browser
def test_event_stream_offline_online_and_stale_connections(browser, tmp_path):
    page = stream_page(browser, tmp_path)
    try:
        ev = lambda *seqs: {"type": "events", "state": "running", "events": [{"seq": s, "type": "progress", "data": {}} for s in seqs]}  # noqa: E731
        n = page.evaluate(NEW_STREAM, {"staleMs": 600})
        page.wait_for_function("() => document.getElementById('stream-status').textContent === 'live'")
        page.evaluate("m => sockets.at(-1).serverSends(m)", ev(1, 2))
        # the browser goes offline: say so, drop the socket, no reconnect attempts
        page.evaluate("() => window.dispatchEvent(new Event('offline'))")
        status = page.locator("#stream-status")
        assert status.inner_text() == "offline…" and status.get_attribute("data-status") == "offline"
        assert page.evaluate("() => sockets.at(-1).closedWith") == 4000
        page.wait_for_timeout(1000)  # past the 0.5 s backoff and the 0.6 s stale limit
        assert page.evaluate("() => sockets.length") == n and status.inner_text() == "offline…"
        # back online: reconnect at once, after the last seq
        page.evaluate("() => window.dispatchEvent(new Event('online'))")
        assert page.evaluate("() => [sockets.length, sockets.at(-1).url.split('?')[1]]") == [n + 1, "after=2"]
        page.wait_for_function("() => document.getElementById('stream-status').textContent === 'live'")
        # messages keep coming: no check
        for seq in range(3, 8):
            page.evaluate("m => sockets.at(-1).serverSends(m)", ev(seq))
            page.wait_for_timeout(200)
        assert page.evaluate("() => [sockets.length, s3.staleChecks]") == [n + 1, 0]
        # silence on a running run: the badge stops saying "live" and the stream checks by reconnecting
        page.wait_for_function(f"() => sockets.length === {n + 2}", timeout=3000)
        page.wait_for_timeout(100)  # the new socket opened
        assert page.evaluate("() => [s3.staleChecks, sockets.at(-1).url.split('?')[1], sockets.at(-2).closedWith]") == [1, "after=7", 4000]
        assert re.fullmatch(r"no events for \d+ s; checking…", status.inner_text())
        assert status.get_attribute("data-status") == "stale"
        # the server answers a caught-up connection with `state`: live again
        page.evaluate("m => sockets.at(-1).serverSends(m)", {"type": "state", "state": "running", "last_seq": 7})
        assert status.inner_text() == "live" and page.evaluate("() => applied") == list(range(1, 8))
        # an ended run is not checked
        page.evaluate("() => sockets.at(-1).serverSends({type: 'end', state: 'finished', last_seq: 7})")
        count = page.evaluate("() => sockets.length")
        page.wait_for_timeout(1000)
        page.evaluate("() => window.dispatchEvent(new Event('offline'))")
        assert page.evaluate("() => [sockets.length, s3.staleChecks]") == [count, 1]
        assert status.inner_text() == "run finished"
        assert page.lego_log["errors"] == []
    finally:
        page.context.close()


@pytest.mark.browser
def test_event_stream_4403_says_why_and_calls_on_stop(browser, tmp_path):
    page = stream_page(browser, tmp_path)
    try:
        n = page.evaluate(NEW_STREAM, {})
        page.evaluate("() => sockets.at(-1).serverCloses(4403)")
        page.wait_for_timeout(700)
        stops = page.evaluate("() => stops")
        assert [code for code, _ in stops] == [4403]
        message = stops[0][1]
        assert "share link was revoked" in message and "may not watch this run" in message
        assert "logged out" not in message  # access is checked when the socket connects, not afterwards
        assert page.locator("#stream-status").inner_text() == message
        assert page.evaluate("() => [sockets.length, s3.stopped, s3.stopCode]") == [n, True, 4403]
        page.evaluate("() => window.dispatchEvent(new Event('online'))")  # no reconnect after a refusal
        assert page.evaluate("() => sockets.length") == n
    finally:
        page.context.close()


# --- the run page with a fake websocket ----------------------------------------------

ORIGIN = "http://lego.test"


def run_page_in_browser(browser, page_html: str, path: str):
    """The run page as the server rendered it, at ORIGIN + path, its /static/
    files from the static finders and a fake WebSocket the test drives
    (``sockets[i].serverSends(message)``, ``serverCloses(code)``)."""
    context = browser.new_context(viewport={"width": 1280, "height": 1000})
    page = context.new_page()
    log = {"errors": []}
    page.on("pageerror", lambda exc: log["errors"].append(str(exc)))
    page.lego_log = log

    def serve(route):
        url = route.request.url[len(ORIGIN):].split("?")[0]
        if url == path:
            return route.fulfill(status=200, content_type="text/html", body=page_html)
        found = finders.find(url[len("/static/"):]) if url.startswith("/static/") else None
        if not found:
            return route.fulfill(status=404, body="")
        kind = "text/css" if found.endswith(".css") else "application/javascript" if found.endswith(".js") else "image/svg+xml"
        return route.fulfill(status=200, content_type=kind, body=Path(found).read_bytes())

    page.route(f"{ORIGIN}/**", serve)
    page.add_init_script(FAKE_WEBSOCKET)
    page.goto(ORIGIN + path)
    page.wait_for_function("() => window.LEGO && LEGO.page && LEGO.stream && sockets.length === 1")
    page.wait_for_timeout(50)  # the socket opened
    return page


def wire_events(events: list[dict], start: int = 1) -> list[dict]:
    return [{"seq": start + i, "type": e["type"], "data": e} for i, e in enumerate(events)]


@pytest.fixture
def running_run_page(user_client, make_run):
    """(path, html) of an active run's page, rendered before any browser starts."""
    run = make_run(state="running")
    path = reverse("runs:detail", args=[run.id])
    return path, page_of(user_client.get(path))


@pytest.fixture
def finished_run_page(user_client, make_run, sample_report):
    """(path, html) of a finished run's page (the report's numbers in the header)."""
    run = make_run(state="finished", report=sample_report)
    path = reverse("runs:detail", args=[run.id])
    return path, page_of(user_client.get(path))


@pytest.mark.browser
def test_run_page_stops_following_when_the_share_link_is_revoked(running_run_page, browser):
    path, page_html = running_run_page
    page = run_page_in_browser(browser, page_html, path)
    try:
        events = wire_events(sample_events()[:-1])  # still running
        page.evaluate("m => sockets[0].serverSends(m)", {"type": "events", "state": "running", "events": events})
        page.wait_for_function("() => LEGO.page.model.lastSeq === %d" % len(events))
        assert page.locator("#stream-banner").is_hidden()
        elapsed = lambda: float(page.locator("#run-elapsed").get_attribute("data-seconds"))  # noqa: E731
        before = elapsed()
        page.wait_for_timeout(600)
        assert elapsed() > before  # the clock ticks while we follow

        page.evaluate("() => sockets[0].serverCloses(4403)")
        banner = page.locator("#stream-banner")
        assert banner.is_visible(), "no banner after 4403"
        text = banner.inner_text()
        assert "Stopped following this run" in text and "share link was revoked" in text and "logged out" not in text
        # the banner is the first thing of the views, above the tree
        assert page.evaluate("() => document.getElementById('live-views').firstElementChild.id") == "stream-banner"
        # the header: last known state, marked; the clock stopped
        assert page.locator("#run-state").inner_text() == "running"
        assert "state-stale" in page.locator("#run-state").get_attribute("class")
        assert "stopped following" in page.locator("#run-following").inner_text()
        stopped = elapsed()
        page.wait_for_timeout(800)
        assert elapsed() == stopped and page.locator("#run-elapsed").get_attribute("data-seconds") == f"{stopped:.1f}"
        assert page.evaluate("() => sockets.length") == 1  # no reconnect
        assert page.lego_log["errors"] == []
    finally:
        page.context.close()


@pytest.mark.browser
def test_the_cancel_button_goes_when_the_end_event_arrives_not_when_the_state_follows(running_run_page, browser):
    """The log's run_finished arrives while the database still says
    "running" (the worker saves the result for seconds, then the stream
    says "end" and the page reloads): the Cancel button is hidden and
    disabled at once, and a later "running" from the stream brings back
    neither the button nor the state."""
    path, page_html = running_run_page
    assert 'id="run-cancel"' in page_html
    page = run_page_in_browser(browser, page_html, path)
    try:
        events = wire_events(sample_events())
        cancel = page.locator("#run-cancel")
        page.evaluate("m => sockets[0].serverSends(m)", {"type": "events", "state": "running", "events": events[:-1]})
        assert cancel.is_visible() and cancel.is_enabled()
        # run_finished, sent with the database's state of that moment; no waiting for a render
        hidden = page.evaluate("""m => { sockets[0].serverSends(m);
            const b = document.getElementById('run-cancel');
            return [document.getElementById('run-cancel-form').hidden, b.disabled, b.offsetParent === null,
                    document.getElementById('run-state').textContent]; }""",
                               {"type": "events", "state": "running", "events": events[-1:]})
        assert hidden == [True, True, True, "finished"]
        page.evaluate("m => sockets[0].serverSends(m)", {"type": "state", "state": "running", "last_seq": len(events)})
        page.wait_for_timeout(300)  # past a render
        assert cancel.is_hidden() and cancel.is_disabled()
        assert page.locator("#run-state").inner_text() == "finished"
        assert page.lego_log["errors"] == []
    finally:
        page.context.close()


@pytest.mark.browser
def test_the_plan_times_say_best_so_far_while_running_and_final_once_finished(running_run_page, browser):
    path, page_html = running_run_page
    page = run_page_in_browser(browser, page_html, path)
    try:
        events = wire_events(sample_events())
        times = page.locator("#run-plan-times")
        page.evaluate("m => sockets[0].serverSends(m)", {"type": "events", "state": "running", "events": events[:-1]})
        page.wait_for_function("() => document.getElementById('run-plan-times').dataset.best")
        # the library plan 0.1 s into the search, one improvement at 1.5 s: "first" is the
        # library plan, as the server's summary (report.json's time_to_first_plan_s) says
        assert times.inner_text() == "first after 0.10 s, best so far after 1.50 s of the search"
        assert "final" not in times.inner_text() and times.get_attribute("data-final") == ""
        page.evaluate("m => sockets[0].serverSends(m)", {"type": "events", "state": "running", "events": events[-1:]})
        page.wait_for_function("() => document.getElementById('run-plan-times').dataset.final")
        assert times.inner_text() == "first after 0.10 s, final after 1.50 s of the search"
        assert float(times.get_attribute("data-final")) == pytest.approx(1.5)
        assert page.lego_log["errors"] == []
    finally:
        page.context.close()


@pytest.mark.browser
def test_replay_of_a_finished_run_shows_its_final_stage(finished_run_page, browser):
    path, page_html = finished_run_page
    page = run_page_in_browser(browser, page_html, path)
    try:
        assert page.locator("#run-stage").inner_text() == "done"
        events = wire_events(sample_events())
        header = """() => ({stage: document.getElementById('run-stage').textContent,
                             state: document.getElementById('run-state').textContent,
                             calls: document.getElementById('run-agent-calls').textContent,
                             speedup: document.querySelector('#run-speedup-live .value').textContent})"""
        # the replay's first batches: construct, then search 1/3; the header stays final
        seen = []
        for batch in (events[:4], events[4:16]):
            page.evaluate("m => sockets[0].serverSends(m)", {"type": "events", "state": "finished", "events": batch})
            page.wait_for_function("(n) => LEGO.page.model.lastSeq === n", arg=batch[-1]["seq"])
            seen.append(page.evaluate(header))
        assert page.evaluate("() => LEGO.page.model.header.stage") == "search"  # what the replay is at
        assert seen == [{"stage": "done", "state": "finished", "calls": "3", "speedup": "2.16×"}] * 2
        # caught up: the model's numbers
        page.evaluate("m => sockets[0].serverSends(m)", {"type": "events", "state": "finished", "events": events[16:]})
        page.evaluate("n => sockets[0].serverSends({type: 'end', state: 'finished', last_seq: n})", len(events))
        page.wait_for_function("() => LEGO.stream.ended")
        final = page.evaluate(header)
        assert final["stage"] == "done" and final["state"] == "finished" and final["speedup"] == "1.15×"
        assert page.locator("#run-following").count() == 0 and page.locator("#stream-banner").is_hidden()
        assert page.lego_log["errors"] == []
    finally:
        page.context.close()


@pytest.fixture
def second_in_queue_page(user_client, make_run, other_user):
    """(path, html) of a queued run's page, second in the queue behind
    someone else's run, rendered before any browser starts."""
    make_run(owner=other_user)
    run = make_run()
    path = reverse("runs:detail", args=[run.id])
    return path, page_of(user_client.get(path))


@pytest.mark.browser
@pytest.mark.faults
def test_a_queued_run_page_follows_its_place_in_the_queue_and_its_cancel(second_in_queue_page, browser):
    path, page_html = second_in_queue_page
    assert 'id="run-cancel"' in page_html
    page = run_page_in_browser(browser, page_html, path)
    try:
        place = page.locator("#run-queue-position")
        assert place.inner_text() == "2nd in the queue (1 run ahead)" and place.get_attribute("data-position") == "2"
        page.evaluate("() => sockets[0].serverSends({type: 'state', state: 'queued', last_seq: 0, queue_position: 1})")
        assert place.inner_text() == "next in the queue" and place.is_visible()
        page.evaluate("() => sockets[0].serverSends({type: 'state', state: 'running', last_seq: 0, queue_position: null})")
        assert place.is_hidden() and page.locator("#run-state").inner_text() == "running"
        cancel = {"type": "run_failed", "error_type": "RunCancelled", "message": "Cancelled by its owner.", "line": None}
        page.evaluate("m => sockets[0].serverSends(m)", {"type": "events", "state": "cancelled", "events": wire_events([cancel])})
        page.evaluate("() => sockets[0].serverSends({type: 'end', state: 'cancelled', last_seq: 1})")
        assert page.locator("#run-state").inner_text() == "cancelled"
        assert page.locator("#stream-status").inner_text().startswith("run cancelled")
        assert page.locator("#run-stage").inner_text() == "cancelled"
        assert page.lego_log["errors"] == []
    finally:
        page.context.close()


def test_the_web_process_renders_reports_without_importing_torch():
    """The run page's presenters read report.json through lego_core.report_view, which imports no torch
    (lego_core.report builds reports from a search and pulls torch in: a page view must not)."""
    import subprocess
    import sys

    code = ("import os, sys; os.environ['DJANGO_SETTINGS_MODULE'] = 'webapp.config.settings.base'; import django; django.setup(); "
            "import webapp.runs.presenters, webapp.runs.views, lego_core.report_view; print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=str(Path(__file__).resolve().parents[2]))
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "False"
