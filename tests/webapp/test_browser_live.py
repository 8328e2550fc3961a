"""The live run page in headless Chromium against ``make run`` on the embedded
defaults (SQLite, filesystem broker, in-memory channel layer: the websocket
follows the stored events by polling the database; a real run worker and
agents worker): upload a tiny llama_stack, see the FusionTree gain nodes while
the run is still going, drop the websocket mid-run (the page reconnects and
ends with every event exactly once, in order), click a node and read its
transcript, wait for the end, read the speedup chart, share the run and open
the link in a second, logged-out browser context (a new viewer replaying the
whole run of more than 2,000 events: the time it takes is printed), and
download the zip from there (checked against eager in a fresh Python process).

PNGs of the run page mid-run and finished and of the shared page go to
``build/screenshots/`` (``make screenshots`` runs this test).
"""
import json
import re
import time

import pytest
import requests

from chromium_support import headless_chromium
from test_browser_upload import RUN_TIMEOUT_S, app, shot, upload  # noqa: F401 (app: fixture)

playwright_sync = pytest.importorskip("playwright.sync_api")
expect = playwright_sync.expect

pytestmark = [pytest.mark.browser, pytest.mark.slow]

MODEL = "llama_stack.py"  # tiny: about 2,100 events, about 980 tree nodes

# what the page shows, read the way a person sees it: points in the tree plot
TREE_POINTS = """() => {
  const plot = document.querySelector('#tree-view .js-plotly-plot');
  if (!plot || !plot.data) return 0;
  return plot.data.filter(t => t.customdata).reduce((n, t) => n + t.customdata.length, 0);
}"""

# keep what the stream received across the reload that follows the run's end
KEEP_RECEIVED = """() => {
  window.addEventListener('beforeunload', () => {
    const s = window.LEGO && window.LEGO.stream;
    if (s) sessionStorage.setItem('lego-received', JSON.stringify({received: s.received, connections: s.connections}));
  });
}"""

# pixel position of a node in the tree plot (after zooming in on it)
NODE_PIXEL = """(nodeId) => {
  const plot = document.querySelector('#tree-view .js-plotly-plot');
  for (const trace of plot.data) {
    const k = trace.customdata ? trace.customdata.indexOf(nodeId) : -1;
    if (k < 0) continue;
    const fl = plot._fullLayout, box = plot.getBoundingClientRect();
    return {x: box.left + fl._size.l + fl.xaxis.l2p(trace.x[k]), y: box.top + fl._size.t + fl.yaxis.l2p(trace.y[k]),
            dx: trace.x[k], dy: trace.y[k]};
  }
  return null;
}"""


@pytest.fixture
def fresh_kernel_cache(monkeypatch, tmp_path):
    """``make run`` gets an empty kernel cache (it inherits the environment),
    so the agents are really asked and write transcripts: earlier tests of
    this session have solved gpt_stack's signatures."""
    monkeypatch.setenv("LEGO_CACHE_DIR", str(tmp_path / "kernel-cache"))


@pytest.fixture
def chromium():
    with headless_chromium() as browser:
        yield browser


def new_page(browser, errors: list):
    context = browser.new_context(accept_downloads=True, viewport={"width": 1400, "height": 1000})
    context.set_default_timeout(30_000)
    page = context.new_page()
    page.on("pageerror", lambda exc: errors.append(f"{page.url}: {exc}"))
    return context, page


def log_in(page, base: str) -> None:
    page.goto(f"{base}/accounts/login/")
    page.fill("#id_username", "dev")
    page.fill("#id_password", "lego-dev")
    page.get_by_role("button", name="Log in").click()
    expect(page).to_have_url(f"{base}/")


DIAGNOSIS = """() => {
  const s = window.LEGO && LEGO.stream, m = window.LEGO && LEGO.page && LEGO.page.model;
  return {url: location.href, shown: (document.getElementById('run-state') || {}).textContent,
          stream: s ? {lastSeq: s.lastSeq, connections: s.connections, ended: s.ended, stopped: s.stopped, gaps: s.gaps, state: s.state} : null,
          model: m ? {nodes: m.nodes.size, state: m.header.state, lastSeq: m.lastSeq} : null,
          kept: sessionStorage.getItem('lego-received') !== null};
}"""


def wait_js(page, expression: str, timeout_s: float, what: str, log) -> None:
    """``page.wait_for_function`` that, when it times out, fails with what the
    page and its stream were doing and the tail of ``make run``'s log."""
    try:
        page.wait_for_function(expression, timeout=timeout_s * 1000)
    except playwright_sync.TimeoutError:
        try:
            seen = page.evaluate(DIAGNOSIS)
        except playwright_sync.Error as exc:
            seen = f"(page not readable: {exc})"
        pytest.fail(f"timed out after {timeout_s:.0f} s waiting for {what}; page: {seen}\n{log.read_text(errors='replace')[-3000:]}")


def shown_state(page) -> str:
    return page.locator("#run-state").inner_text().strip()


def test_live_tree_reconnect_transcript_chart_share_and_zip(
    fresh_kernel_cache, app, chromium, shared_models, tiny_overrides, check_download  # noqa: F811
):
    base, proc, log = app
    errors: list[str] = []
    owner_context, page = new_page(chromium, errors)
    log_in(page, base)
    overrides = tiny_overrides(MODEL)
    run_url = upload(page, base, MODEL, (shared_models / MODEL).read_bytes(), overrides)
    run_id = re.search(r"/runs/([0-9a-f-]{36})/", run_url).group(1)
    page.evaluate(KEEP_RECEIVED)

    # 1. the tree gains nodes while the run is still going
    seen = []  # (seconds since upload, state shown, tree points)
    started = time.monotonic()
    deadline = started + RUN_TIMEOUT_S
    while time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text(errors="replace")[-4000:]
        state, points = shown_state(page), page.evaluate(TREE_POINTS)
        seen.append((round(time.monotonic() - started, 2), state, points))
        if state == "running" and points > 0:
            break
        assert state in ("queued", "running"), f"the run ended before its tree showed: {seen[-5:]}"
        time.sleep(0.1)
    else:
        pytest.fail(f"no tree while running: {seen[-5:]}\n{log.read_text(errors='replace')[-4000:]}")
    first_points = points
    assert seen[0][2] == 0, "the tree was there before the run built it"
    print(f"\ntree first drawn {seen[-1][0]} s after upload with {first_points} nodes while {state}")
    shot(page, "run-mid.png")

    # 2. drop the websocket mid-run; the page reconnects by itself
    assert page.evaluate("() => LEGO.stream.connections") == 1
    page.evaluate("() => LEGO.stream.drop()")
    wait_js(page, "() => LEGO.stream.connections >= 2", 20, "the page to reconnect", log)

    # 3. click a node that an agent worked on and read its transcript
    wait_js(
        page,
        "() => [...LEGO.page.model.nodes.values()].some(n => n.kind === 'or' && n.transcript.some(m => m.agent === 'template'))",
        120, "a node with an agent transcript", log,
    )
    # the tree folds subtrees nobody needs at first sight (deep plan paths too): take such a node
    # that is drawn, else unfold its ancestors as the search box does (``reveal``, which also
    # selects it: the selection is cleared so that the click below is what selects it)
    node_id, label = page.evaluate(
        """() => { const plot = document.querySelector('#tree-view .js-plotly-plot');
           const drawn = new Set(plot.data.flatMap(t => t.customdata || []));
           const worked = [...LEGO.page.model.nodes.values()].filter(n => n.kind === 'or' && n.transcript.some(m => m.agent === 'template'));
           const n = worked.find(n => drawn.has(n.id)) || worked[0];
           if (!drawn.has(n.id)) { LEGO.page.tree.reveal(n.id); LEGO.page.tree.selected = null; LEGO.page.tree.redraw(); }
           return [n.id, n.label]; }"""
    )
    wait_js(page, f"() => document.querySelector('#tree-view .js-plotly-plot').data.some(t => (t.customdata || []).includes({node_id!r}))",
            10, "the node drawn", log)
    # zoom in on it (as a user would, with the mouse wheel or a box), then click it
    here = page.evaluate(NODE_PIXEL, node_id)
    assert here, f"node {node_id} is not in the tree plot"
    page.evaluate(
        """([dx, dy]) => { const plot = document.querySelector('#tree-view .js-plotly-plot');
           return Plotly.relayout(plot, {'xaxis.range': [dx - 3, dx + 3], 'yaxis.range': [dy - 0.6, dy + 0.6]}); }""",
        [here["dx"], here["dy"]],
    )
    zoomed = page.evaluate("() => document.querySelector('#tree-view .js-plotly-plot').layout.xaxis.range.slice()")
    page.locator("#tree-view").scroll_into_view_if_needed()  # the time view comes first on the page now
    here = page.evaluate(NODE_PIXEL, node_id)
    page.mouse.click(here["x"], here["y"])
    panel = page.locator("#node-panel")
    expect(panel).to_contain_text(label)
    transcript = panel.locator(".node-transcript")
    expect(transcript).to_contain_text("template")
    expect(panel.locator(".node-reference")).to_contain_text("def reference(")
    # the zoom survives the redraws that follow
    time.sleep(1.0)
    assert page.evaluate("() => document.querySelector('#tree-view .js-plotly-plot').layout.xaxis.range.slice()") == pytest.approx(zoomed)

    # 4. the end: the page reloads into the finished run
    wait_js(
        page,
        "() => sessionStorage.getItem('lego-received') !== null && window.LEGO && LEGO.stream && LEGO.stream.ended",
        RUN_TIMEOUT_S, "the run's end and the page's reload", log,
    )
    expect(page.locator("#run-state")).to_have_text("finished")
    kept = json.loads(page.evaluate("() => sessionStorage.getItem('lego-received')") or "null")
    status = requests.get(f"{base}/api/runs/{run_id}/", cookies=cookies_of(owner_context)).json()
    last_seq = status["last_seq"]
    assert kept is not None, "the page did not reload when the run ended"
    assert kept["received"] == list(range(1, last_seq + 1)), "the live page missed or repeated events"
    assert kept["connections"] >= 2
    # and the reloaded page replayed the whole log once more, exactly once
    wait_js(page, f"() => LEGO.stream.lastSeq === {last_seq}", 30, "the reloaded page's replay", log)
    assert page.evaluate("() => LEGO.stream.received") == list(range(1, last_seq + 1))
    final_points = page.evaluate(TREE_POINTS)
    assert final_points >= first_points
    print(f"{last_seq} events; {final_points} tree nodes at the end ({first_points} at first sight); "
          f"{kept['connections']} websocket connections before the reload")

    # 5. the speedup chart ends at the plan's speedup
    speedup = status["report"]["plan"]["speedup"]
    chart_y = page.evaluate("() => { const d = document.querySelector('#speedup-chart .js-plotly-plot') || document.getElementById('speedup-chart'); return d.data[0].y.slice(); }")
    assert chart_y and chart_y[0] == pytest.approx(1.0) and chart_y[-1] == pytest.approx(speedup, rel=1e-6)
    expect(page.locator("#run-speedup-live")).to_contain_text(f"{speedup:.2f}")
    shot(page, "run-finished.png")

    # 6. share it; a logged-out browser opens the link and downloads the zip
    page.locator("#share-create").click()
    share_url = page.locator("#share-url").input_value()
    assert re.fullmatch(rf"{re.escape(base)}/share/[A-Za-z0-9_-]{{43,}}/", share_url), share_url
    assert last_seq >= 2000, f"{MODEL} sent only {last_seq} events"
    guest_context, guest = new_page(chromium, errors)
    t0 = time.perf_counter()
    guest.goto(share_url)
    wait_js(
        guest, f"() => LEGO.stream && LEGO.stream.lastSeq === {last_seq} && ({TREE_POINTS})() === {final_points}",
        60, "the shared page's replay", log,
    )
    replay_ms = (time.perf_counter() - t0) * 1000
    loaded_ms = guest.evaluate("() => performance.getEntriesByType('navigation')[0].domContentLoadedEventEnd")
    print(f"a new (logged-out) viewer replayed the finished run's {last_seq} events and drew {final_points} "
          f"tree nodes in {replay_ms:.0f} ms: {loaded_ms:.0f} ms to load the page (plotly.min.js parsed), "
          f"{replay_ms - loaded_ms:.0f} ms to replay and draw")
    expect(guest.locator("#run-state")).to_have_text("finished")
    assert guest.evaluate("() => LEGO.stream.received") == list(range(1, last_seq + 1))
    assert guest.locator("#share-create, #share-revoke, form.logout").count() == 0, "the shared page has controls"
    guest.wait_for_timeout(300)
    shot(guest, "shared.png")
    with guest.expect_download() as download:
        guest.locator("#download").click()
    names = check_download(download.value.path().read_bytes(), shared_models / MODEL, overrides)
    assert any(name.endswith("/report.html") for name in names), names
    assert any(name.endswith("/optimized_model.py") for name in names), names

    # 7. revoking the link closes the shared page for good
    page.locator("#share-revoke").click()
    assert guest.goto(share_url).status == 404
    guest_context.close()
    owner_context.close()
    assert not errors, errors


def cookies_of(context) -> dict:
    return {c["name"]: c["value"] for c in context.cookies()}
