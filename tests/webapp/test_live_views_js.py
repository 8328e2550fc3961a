"""The run page's live views in headless Chromium, without Node.js or a server.

Each test loads ``tests/webapp/js/harness.html`` with ``page.set_content``,
adds plotly.min.js (from the plotly Python package), the classic scripts of
``frontend/js/live/`` (RunModel, TreeView, NodePanel, Charts), ``live.css``
and the harness helpers, feeds synthetic events and checks the model, the
Plotly traces, the charts and the node panel with ``page.evaluate``. The event log is written
out below (one small run with every state) or generated (a 2,000-node tree
for the redraw timing).
"""
from __future__ import annotations

import re
import statistics
from pathlib import Path

import pytest
from chromium_support import headless_chromium

playwright_sync = pytest.importorskip("playwright.sync_api")
plotly = pytest.importorskip("plotly")

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parents[2]
LIVE = REPO / "frontend" / "js" / "live"
HARNESS = Path(__file__).resolve().parent / "js"
PLOTLY_JS = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
T0 = 1_700_000_000.0


def wire(events: list[tuple[str, dict]], start: int = 1) -> list[dict]:
    """(type, fields) pairs -> {seq, type, data} as the websocket sends them."""
    return [
        {"seq": start + i, "type": kind, "data": {"ts": T0 + start + i, "type": kind, **fields}}
        for i, (kind, fields) in enumerate(events)
    ]


def node(node_id, kind, parent, label, signature="", **extra):
    fields = dict(node_id=node_id, kind=kind, parent=parent, label=label, signature=signature,
                  ops=[], shapes=[], reused=False, shared=[], input_shapes=[], reference="")
    fields.update(extra)
    return ("node_created", fields)


def leaf(node_id, parent, label, signature):
    return node(node_id, "or", parent, label, signature,
                ops=["aten.mul.Tensor", "aten.add.Tensor"], shapes=[[2, 8]], input_shapes=[[2, 8], [8]],
                reference="def reference(x, w):\n    mul = torch.ops.aten.mul.Tensor(x, w)\n    return (mul + 1,)")


def started(node_id, attempt=1):
    return ("node_started", dict(node_id=node_id, agent="template", attempt=attempt))


def said(node_id, role, content, tokens=0, agent="template"):
    return ("transcript", dict(node_id=node_id, agent=agent, role=role, content=content, tokens=tokens))


def proposed(node_id, cid, agent="template"):
    return ("candidate_proposed", dict(node_id=node_id, candidate_id=cid, agent=agent, implementation="triton",
                                        source=f"@triton.jit\ndef {node_id}_kernel(x_ptr):\n    pass\n"))


def verified(node_id, cid, passed=True, err=1e-7, reason="3 input sets matched the reference"):
    return ("verification", dict(node_id=node_id, candidate_id=cid, passed=passed, max_abs_error=err, reason=reason))


def timed(node_id, cid, ms, baseline=None):
    return ("timing", dict(node_id=node_id, candidate_id=cid, ms=ms, measured=False, baseline_ms=baseline))


def plan(speedup, chosen, initial=False):
    return ("plan_improved", dict(cost_ms=0.12 / speedup, baseline_ms=0.12, speedup=speedup, measured=False,
                                  items=len(chosen), initial=initial, chosen=chosen))


XSS = "<img src=x onerror=window.pwned=1>"

# A small run with every state: seq = index + 1 (the comments give it).
SMALL = wire([
    ("run_started", dict(model="tiny.py", overrides={}, dtype="fp32", device="cpu")),  # 1
    ("stage_started", dict(stage="construct", total=0)),  # 2
    node("or0", "or", None, "Model", "sig0"),  # 3
    node("and1", "and", "or0", "by module hierarchy"),  # 4
    leaf("or2", "and1", "<b>ln</b> & co " + XSS, "sigA"),  # 5
    leaf("or3", "and1", "attn", "sigB"),  # 6
    leaf("or4", "and1", "ln twin", "sigA"),  # 7
    leaf("or8", "and1", "mlp", "sigC"),  # 8
    ("stage_started", dict(stage="search", total=4)),  # 9
    timed("or2", "or2-library", 0.02),  # 10
    timed("or3", "or3-library", 0.03),  # 11
    timed("or4", "or4-library", 0.02),  # 12
    timed("or8", "or8-library", 0.05),  # 13
    started("or2"),  # 14: running
    said("or2", "user", "write a kernel for ln", 10),  # 15
    said("or2", "agent", "here it is " + XSS + "\n<script>window.pwned=2</script>", 20),  # 16
    proposed("or2", "or2-template-1"),  # 17: still running (waits for verification)
    verified("or2", "or2-template-1"),  # 18: verified
    timed("or2", "or2-template-1", 0.005, 0.02),  # 19
    ("node_reused", dict(node_id="or4", reused_from="or2", via="dedupe", usable=True)),  # 20
    ("progress", dict(stage="search", done=1, total=4, message="")),  # 21
    plan(1.0, ["or2", "or4"], initial=True),  # 22: or2, or4 chosen; and1 chosen
    started("or3"),  # 23
    said("or3", "agent", "attention kernel attempt one", 7),  # 24
    proposed("or3", "or3-template-1"),  # 25
    verified("or3", "or3-template-1", passed=False, err=0.5, reason="max abs error 0.5 > 1e-4"),  # 26: failed
    started("or3", attempt=2),  # 27: running again
    said("or3", "agent", "no kernel this time", 3),  # 28
    ("node_finished", dict(node_id="or3", outcome="failed")),  # 29: back to failed (every kernel failed)
    started("or8"),  # 30
    said("or8", "system", "signature solved before; verifying it again", agent="cache"),  # 31
    proposed("or8", "or8-template-cached"),  # 32
    verified("or8", "or8-template-cached"),  # 33
    timed("or8", "or8-template-cached", 0.01, 0.05),  # 34
    ("node_reused", dict(node_id="or8", reused_from="cache", via="cache", usable=True)),  # 35: cache hit
    ("progress", dict(stage="search", done=3, total=4, message="")),  # 36
    node("and5", "and", "or0", "mutation: fuse or2 + or3", shared=["or8"]),  # 37
    leaf("or6", "and5", "fused ln+attn", "sigD"),  # 38
    started("or6"),  # 39
    said("or6", "agent", "no template matches this sub-problem", 5),  # 40
    ("node_finished", dict(node_id="or6", outcome="library")),  # 41: or6 library, said by lego_core
    plan(1.5, ["or2", "or4", "or8"]),  # 42
    node("and9", "and", "or3", "finer split"),  # 43
    leaf("or10", "and9", "attn part 1", "sigE"),  # 44
    leaf("or11", "and9", "attn part 2", "sigF"),  # 45: and9 pending
    timed("or10", "or10-library", 0.02),  # 46
    timed("or11", "or11-library", 0.03),  # 47
    started("or10"), proposed("or10", "or10-template-1"), verified("or10", "or10-template-1"),  # 48-50
    timed("or10", "or10-template-1", 0.01, 0.02),  # 51
    started("or11"), proposed("or11", "or11-template-1"), verified("or11", "or11-template-1"),  # 52-54
    timed("or11", "or11-template-1", 0.09, 0.03),  # 55: and9 verified (not chosen)
    plan(1.6, ["or2", "or4", "or8", "or10", "or11"]),  # 56: and9 chosen
    ("stage_started", dict(stage="compose", total=0)),  # 57
    ("run_finished", dict(out_dir="/tmp/out", summary={"model": "tiny"})),  # 58
])
assert len(SMALL) == 58


def big_tree(n_nodes: int = 2000) -> list[dict]:
    """A generated run: breadth-first OR -> AND -> 3 or 4 ORs until n_nodes,
    with verified, failed, reused, running and chosen nodes, two mutation ANDs
    sharing 150 OR nodes each, and a plan of 200 leaves."""
    events = [("run_started", dict(model="big.py", overrides={}, dtype="fp32", device="cpu"))]
    events.append(node("or0", "or", None, "Model", "s0"))
    queue, count, ors = ["or0"], 1, []
    while queue and count < n_nodes:
        parent = queue.pop(0)
        and_id = f"and{count}"
        events.append(node(and_id, "and", parent, f"split of {parent}"))
        count += 1
        for k in range(3 + count % 2):
            if count >= n_nodes:
                break
            or_id = f"or{count}"
            events.append(leaf(or_id, and_id, f"region {count}", f"s{count % 97}"))
            ors.append(or_id)
            queue.append(or_id)
            count += 1
    leaves = ors[-1200:]
    for i, or_id in enumerate(leaves[:400]):
        events.append(timed(or_id, f"{or_id}-library", 0.02))
        events.append(started(or_id))
        if i % 5 == 4:
            continue  # stays running
        events.append(said(or_id, "agent", f"kernel for {or_id}", 12))
        events.append(proposed(or_id, f"{or_id}-t-1"))
        events.append(verified(or_id, f"{or_id}-t-1", passed=i % 7 != 0))
        events.append(timed(or_id, f"{or_id}-t-1", 0.01, 0.02))
    for or_id, src in zip(leaves[400:600], leaves[:200]):
        events.append(("node_reused", dict(node_id=or_id, reused_from=src, via="dedupe", usable=True)))
    events.append(plan(1.3, leaves[:200], initial=True))
    for m in range(2):
        events.append(node(f"andm{m}", "and", "or0", f"mutation {m}", shared=leaves[m * 150:(m + 1) * 150]))
    return wire(events)


@pytest.fixture(scope="module")
def browser():
    with headless_chromium() as b:
        yield b


@pytest.fixture(scope="module")
def harness(browser):
    """One page with plotly.min.js, the three scripts, live.css and the harness
    helpers loaded (Plotly is parsed once: about a second under load)."""
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.set_content((HARNESS / "harness.html").read_text())
    page.add_style_tag(content=(REPO / "frontend" / "css" / "live.css").read_text())
    page.add_script_tag(path=str(PLOTLY_JS))
    for name in ("run_model.js", "tree_view.js", "node_panel.js", "charts.js"):
        page.add_script_tag(content=(LIVE / name).read_text())
    page.add_script_tag(content=(HARNESS / "harness.js").read_text())
    yield page, errors
    page.close()


@pytest.fixture
def page(harness):
    """A fresh model, tree view and panel on the harness page (T.model, T.view, T.panel)."""
    page, errors = harness
    page.evaluate("() => T.start()")
    yield page
    assert not errors, errors
def test_states_follow_the_events(page):
    # the state of every node after each event
    snapshots = page.evaluate(
        """(events) => events.map(e => { T.model.apply(e);
             return Object.fromEntries([...T.model.nodes.values()].map(n => [n.id, n.state])); })""",
        SMALL,
    )
    at = lambda seq: snapshots[seq - 1]  # noqa: E731
    assert at(5)["or2"] == "pending"
    assert at(21)["or0"] == "pending"  # no plan yet
    assert at(14)["or2"] == "running"
    assert at(17)["or2"] == "running"  # a kernel waits for verification
    assert at(18)["or2"] == "verified"
    assert at(20)["or4"] == "verified"  # dedupe: follows its source
    assert at(21)["and1"] == "pending"
    assert at(22)["or2"] == at(22)["or4"] == "chosen" and at(22)["and1"] == "chosen"
    assert at(22)["or0"] == "chosen"  # the plan goes through its decomposition and1
    assert at(23)["or3"] == "running"
    assert at(26)["or3"] == "failed"
    assert at(27)["or3"] == "running"  # the retry
    assert at(29)["or3"] == "failed"  # the retry gave no kernel: every kernel failed
    assert at(30)["or8"] == "running"
    assert at(35)["or8"] == "verified"
    assert at(40)["or6"] == "running"  # transcript but no candidate: still running until lego_core says otherwise
    assert at(41)["or6"] == "library"  # the agent answered without a kernel
    assert at(41)["and5"] == "pending"
    assert at(42)["or8"] == "chosen"
    assert at(45)["and9"] == "pending"
    assert at(51)["and9"] == "pending" and at(51)["or10"] == "verified"
    assert at(55)["and9"] == "verified"
    # or3's own kernels failed, but the plan goes through its decomposition and9
    assert at(56)["and9"] == "chosen" and at(56)["or3"] == "chosen"
    assert at(57)["and5"] == "pending"  # the run still goes
    assert at(58)["and5"] == "unexplored"  # ended: the search never finished it
    assert not [k for k, v in at(58).items() if v == "pending"]

    model = page.evaluate(
        """() => { const m = T.model; const n = id => m.nodes.get(id);
             return {version: m.version, lastSeq: m.lastSeq, header: m.header, history: m.planHistory,
                     chosen: [...m.chosen], items: m.chosenItems(), order: m.order,
                     or4: {reused: n('or4').reused, from: n('or4').reusedFrom, via: n('or4').reusedVia, outcome: n('or4').outcome},
                     or8: {reused: n('or8').reused, from: n('or8').reusedFrom, via: n('or8').reusedVia},
                     or3: {attempts: n('or3').attempts, outcome: n('or3').outcome, via: m.chosenVia('or3'), cands: n('or3').candidates.map(c => [c.id, c.verification.passed, c.verification.reason])},
                     or2: {lib: n('or2').library, cand: n('or2').candidates[0], transcript: n('or2').transcript.length,
                           depth: n('or2').depth, children: n('and1').children},
                     failure: m.failure, finished: m.finished}; }"""
    )
    assert model["version"] == 58 and model["lastSeq"] == 58
    assert model["or4"] == {"reused": True, "from": "or2", "via": "dedupe", "outcome": "verified"}
    assert model["or8"] == {"reused": True, "from": "cache", "via": "cache"}
    assert model["or3"]["attempts"] == 2
    assert model["or3"]["outcome"] == "failed" and model["or3"]["via"] == {"item": False, "via": ["and9"]}
    assert model["or3"]["cands"] == [["or3-template-1", False, "max abs error 0.5 > 1e-4"]]
    assert model["or2"]["lib"] == {"ms": 0.02, "measured": False}
    assert model["or2"]["cand"]["timing"] == {"ms": 0.005, "measured": False, "baseline_ms": 0.02}
    assert model["or2"]["transcript"] == 2 and model["or2"]["depth"] == 2
    assert model["or2"]["children"] == ["or2", "or3", "or4", "or8"]
    header = model["header"]
    assert header["state"] == "finished" and header["model"] == "tiny.py" and header["stage"] == "compose"
    assert header["agentCalls"] == 6  # 7 node_started, one a cache hit
    assert header["tokens"] == 10 + 20 + 7 + 3 + 5
    assert header["speedup"] == 1.6 and header["baselineMs"] == 0.12 and header["endedTs"] == T0 + 58
    assert [h["speedup"] for h in model["history"]] == [1.0, 1.5, 1.6]
    # seconds since the search started (stage_started "search", seq 9): the
    # origin of the report's "first plan after ... s, final after ... s"
    assert [h["t"] for h in model["history"]] == [13, 33, 47]
    assert header["searchStartedTs"] == T0 + 9
    assert model["history"][0]["initial"] is True
    assert model["finished"]["out_dir"] == "/tmp/out" and model["failure"] is None
    items = {i["id"]: i for i in model["items"]}
    assert [i["id"] for i in model["items"]] == ["or2", "or4", "or8", "or10", "or11"]
    assert items["or2"] == {**items["or2"], "implementation": "triton", "chosenMs": 0.005, "baselineMs": 0.02, "ops": 2}
    assert items["or4"]["implementation"] == "triton" and items["or4"]["chosenMs"] == 0.005  # the source's kernel
    assert items["or11"]["implementation"] == "library" and items["or11"]["chosenMs"] == 0.03  # kernel slower

    # duplicates after a reconnect change nothing
    again = page.evaluate(
        """(events) => { const v = T.model.version; const applied = T.model.applyAll(events);
             return {applied, same: T.model.version === v, lastSeq: T.model.lastSeq}; }""",
        SMALL[:40],
    )
    assert again == {"applied": 0, "same": True, "lastSeq": 58}


# A run that ended with most of its tree never worked on: the plan is the
# library plan of and1's leaves; a second decomposition and5 was never tried.
UNEXPLORED = wire([
    ("run_started", dict(model="tiny.py", overrides={}, dtype="fp32", device="cpu")),  # 1
    node("or0", "or", None, "Model", "sig0"),  # 2
    node("and1", "and", "or0", "by module hierarchy"),  # 3
    leaf("or2", "and1", "ln", "sigA"),  # 4
    leaf("or3", "and1", "attn", "sigB"),  # 5
    node("and5", "and", "or0", "another split"),  # 6
    leaf("or6", "and5", "first half", "sigC"),  # 7
    leaf("or7", "and5", "second half", "sigD"),  # 8
    ("stage_started", dict(stage="search", total=4)),  # 9
    timed("or2", "or2-library", 0.02), timed("or3", "or3-library", 0.03),  # 10, 11
    plan(1.0, ["or2", "or3"], initial=True),  # 12
    ("run_finished", dict(out_dir="/tmp/out", summary={})),  # 13
])


def test_finished_tree_colours_the_plan_path_and_marks_unexplored_nodes(page):
    states = page.evaluate(
        """(events) => { const out = [];
             for (const e of events) { T.model.apply(e);
               out.push(Object.fromEntries([...T.model.nodes.values()].map(n => [n.id, n.state]))); }
             T.view.redraw(); T.panel.show('or0'); return out; }""",
        UNEXPLORED,
    )
    # while the run goes, untouched nodes are pending; the plan path is chosen up to the root
    assert states[11] == {"or0": "chosen", "and1": "chosen", "or2": "chosen", "or3": "chosen",
                          "and5": "pending", "or6": "pending", "or7": "pending"}
    # once it ended, they were "not explored"
    assert states[12] == {**states[11], "and5": "unexplored", "or6": "unexplored", "or7": "unexplored"}
    assert page.evaluate("() => [T.model.ended, T.model.chosenVia('or0'), T.model.chosenVia('or2')]") == [
        True, {"item": False, "via": ["and1"]}, {"item": True, "via": []}]

    legend = page.inner_text(".tree-legend")
    assert "not explored\n3" in legend and "in the plan: sub-problems\n2\n(4 nodes on its path)" in legend and "pending" not in legend
    colors = page.evaluate("""() => { const t = T.view.plot.data.find(t => t.name === 'OR nodes');
                                      return Object.fromEntries(t.customdata.map((id, i) => [id, t.marker.color[i]])); }""")
    assert colors["or6"] == colors["or7"] == "#d3d8de" != colors["or0"] == colors["or2"] == "#7b3fb5"
    hover = page.evaluate("() => T.view.plot.data.find(t => t.name === 'OR nodes').hovertext[T.view.plot.data.find(t => t.name === 'OR nodes').customdata.indexOf('or6')]")
    assert "not explored" in hover

    # the root's panel says why it is in the plan, not "pending" / "No kernel candidates yet"
    summary = page.inner_text("#node-panel .node-summary")
    assert "in the plan through decomposition and1" in summary and "pending" not in summary
    candidates = page.inner_text("#node-panel .node-candidates")
    assert "No kernel candidates yet" not in candidates and "through decomposition and1" in candidates
    page.click("#node-panel .node-summary .node-state a[data-node-id='and1']")
    assert page.evaluate("() => T.selected.at(-1)") == ["panel", "and1"]
    page.evaluate("() => T.panel.show('or6')")
    assert "not explored" in page.inner_text("#node-panel .node-summary")
    assert "the run ended without work on this node" in page.inner_text("#node-panel .node-candidates")


CHARTS = """(events) => { T.feed(events);
  for (const id of ['speedup', 'subs']) { const old = document.getElementById(id); if (old) old.remove();
    const div = document.createElement('div'); div.id = id; div.style.width = '560px'; document.body.appendChild(div); }
  T.charts = new LEGO.Charts(document.getElementById('speedup'), document.getElementById('subs'), T.model, {throttleMs: 0});
  T.charts.update(true); return true; }"""


def test_speedup_chart_counts_from_the_search_start(page):
    page.evaluate(CHARTS, SMALL)
    chart = page.evaluate("""() => { const gd = document.getElementById('speedup');
                                     return {line: gd.data[0].x, marks: gd.data[1].x, ys: gd.data[1].y,
                                             title: gd.layout.xaxis.title.text}; }""")
    # plans at seq 22, 42, 56; the search started at seq 9; the run ended at seq 58
    assert chart["marks"] == [13, 33, 47] and chart["ys"] == [1.0, 1.5, 1.6]
    assert chart["line"] == [13, 33, 47, 49]
    assert chart["title"] == "seconds since the search started"
    # before any search stage: counted from the run's start, and the axis says so
    page.evaluate("() => T.start()")
    no_search = [e for e in SMALL if not (e["type"] == "stage_started" and e["data"]["stage"] == "search")]
    page.evaluate(CHARTS, no_search)
    assert page.evaluate("() => document.getElementById('speedup').data[1].x") == [21, 41, 55]
    assert page.evaluate("() => document.getElementById('speedup').layout.xaxis.title.text") == "seconds since the run started"


def test_subproblem_chart_legend_ticks_collapsed_rows_and_empty_state(page):
    chart = """() => { const gd = document.getElementById('subs');
      return {traces: gd.data.map(t => [t.name, t.marker.color, t.y.length]), items: gd.dataset.items, rows: gd.dataset.rows,
              labels: gd.layout.yaxis.ticktext, xVisible: gd._fullLayout.xaxis.visible, legend: gd._fullLayout.showlegend,
              ticks: [...gd.querySelectorAll('.xtick text')].map(t => [t.textContent, t.getAttribute('transform') || '']),
              notes: (gd.layout.annotations || []).map(a => a.text)}; }"""
    # before any plan: only the note, no bare axes or legend
    page.evaluate(CHARTS, SMALL[:21])
    empty = page.evaluate(chart)
    assert empty["traces"] == [] and empty["items"] == "0" and empty["notes"] == ["no chosen plan yet"]
    assert empty["xVisible"] is False and empty["ticks"] == [] and empty["legend"] is False

    # the plan: one bar per sub-problem, ms saved blue, the estimates in one trace (hatched)
    page.evaluate("(events) => { T.feed(events); T.charts.update(true); }", SMALL[21:])
    drawn = page.evaluate(chart)
    assert [t[0] for t in drawn["traces"]] == ["estimated (cost model)"] and drawn["traces"][0][2] == 5
    assert drawn["items"] == drawn["rows"] == "5"

    # a llama-like plan: the top 10 by time saved, the other 10 summed in one row, ticks upright
    subs = [dict(id=f"sp{i}", label=f"fused layers.0.attn · mul + layers.0.attn · mul + layers.0 {i}", kind="x",
                 implementation="triton" if i % 4 == 0 else "library", time_kind="estimated",
                 time_ms=0.003 if i % 4 else 0.00301, baseline_ms=0.021 if i % 4 == 0 else 0.003) for i in range(20)]
    page.evaluate(
        """(subs) => { const gd = document.getElementById('subs'); gd.style.width = '551px';
             T.charts = new LEGO.Charts(null, gd, T.model, {throttleMs: 0, report: {subproblems: subs}}); T.charts.update(true); }""",
        subs,
    )
    big = page.evaluate(chart)
    assert big["items"] == "20" and big["rows"] == "11"
    assert big["labels"][-1] == "10 other sub-problems" and all(len(t) <= 40 for t in big["labels"])
    assert len(big["ticks"]) >= 2 and not [t for t in big["ticks"] if "rotate" in t[1]], big["ticks"]
    hover = page.evaluate("() => document.getElementById('subs').data[0].text")
    assert "saves 0.018 ms, estimated by the cost model" in hover[0] and "10 sub-problems together" in hover[-1]


# times in ms as the cost model and the GPU give them, and the text every page shows for each
MS_TEXTS = [(0, "0"), (0.003, "0.003"), (0.00312, "0.00312"), (0.002, "0.002"), (0.0099, "0.0099"),
            (0.01, "0.01"), (0.0123456, "0.0123"), (0.5, "0.5"), (1, "1"), (12.34, "12.3"), (99.97, "100"),
            (1234.5, "1230"), (0.000123, "0.000123"), (4.567e-05, "4.57e-5"), (-0.0012, "-0.0012"), (7e-07, "7e-7")]


def test_times_are_ms_in_every_view_with_the_servers_digits(page):
    """Times are milliseconds everywhere (report.json's unit): the tree's
    hover, the node panel and the charts never switch to µs for a
    small kernel, and LEGO.msNumber writes a number as the server's
    |ms_number filter does (the plan table, the summary, the compare page)."""
    from webapp.runs.templatetags.run_format import ms, ms_number

    values = [v for v, _ in MS_TEXTS]
    assert [ms_number(v) for v in values] == [t for _, t in MS_TEXTS]
    assert page.evaluate("(vs) => vs.map(v => LEGO.msNumber(v))", values) == [t for _, t in MS_TEXTS]
    assert page.evaluate("(vs) => vs.map(v => LEGO.formatMs(v))", values) == [ms(v) for v in values]
    assert page.evaluate("() => [LEGO.formatMs(null), LEGO.formatMs(undefined), LEGO.formatMs(NaN, '—')]") == ["?", "?", "—"]
    assert ms(None) == "—"

    page.evaluate(CHARTS, SMALL)  # or2's kernel: 0.005 ms against the library's 0.02 ms
    page.evaluate("() => { T.view.redraw(); T.panel.show('or2'); }")
    panel = page.inner_text("#node-panel")
    assert "0.005 ms" in panel and "0.02 ms" in panel
    hover = page.evaluate("""() => { const t = T.view.plot.data.find(t => t.name === 'OR nodes');
                                     return t.hovertext[t.customdata.indexOf('or2')]; }""")
    assert "best: 0.005 ms" in hover
    bars = page.evaluate("() => document.getElementById('subs').data.map(t => t.text).flat().join(' ')")
    speedup = page.evaluate("() => document.getElementById('speedup').data.map(t => t.text || t.hovertext || '').flat().join(' ')")
    assert " ms" in bars and " ms" in speedup
    for text in (panel, hover, bars, speedup):
        assert not re.search(r"\d\s*(\u00b5|u)s\b", text), text
    assert page.evaluate("() => document.getElementById('subs')._fullLayout.xaxis.exponentformat") == "none"


def test_no_view_or_template_writes_another_time_unit():
    """Kernel and plan times are formatted by LEGO.formatMs / |ms only: no
    live-view script, template or presenter switches a time to µs."""
    sources = [*LIVE.glob("*.js"), *(REPO / "webapp" / "runs" / "templates" / "runs").glob("*.html"),
               REPO / "webapp" / "runs" / "presenters.py", REPO / "webapp" / "runs" / "report_html.py"]
    for path in sources:
        text = path.read_text()
        for bad in ("\\u00b5s", "\u00b5s\"", "\u00b5s'", "&micro;", "* 1000).toPrecision", "|sig }} ms"):
            assert bad not in text, f"{path.name} writes a time as {bad!r}"


def test_run_failed_and_raw_events(page):
    # raw lego_core dicts (no seq) are numbered on arrival
    result = page.evaluate(
        """() => { const m = new LEGO.RunModel();
             m.apply({type: 'run_started', ts: 10, model: 'x.py', dtype: 'fp32', device: 'cpu'});
             m.apply({type: 'run_failed', ts: 12, error_type: 'ProblemError', message: 'bad file', line: 6, hint: ''});
             return {state: m.header.state, failure: m.failure, lastSeq: m.lastSeq, ended: m.header.endedTs}; }"""
    )
    assert result["state"] == "failed" and result["lastSeq"] == 2 and result["ended"] == 12
    assert result["failure"]["message"] == "bad file" and result["failure"]["line"] == 6


def test_tree_traces_and_click_opens_the_transcript(page):
    page.evaluate("(events) => { T.feed(events); T.view.redraw(); }", SMALL)
    points = page.evaluate("() => T.tracePoints()")
    assert points["OR nodes"] + points["reused OR nodes"] + points["AND nodes"] == 11
    assert (points["OR nodes"], points["reused OR nodes"], points["AND nodes"]) == (6, 2, 3)
    assert points["edges"] + points["plan path"] == 2 * 10  # every node but the root, two points each
    assert points["shared edges"] == 0 and points["selected"] == 0
    assert page.evaluate("() => T.view.plot.data.find(t => t.name === 'OR nodes').type") == "scattergl"
    legend = page.inner_text(".tree-legend")
    for word in ("not explored", "running", "verified", "failed", "library", "in the plan", "reused"):
        assert word in legend
    assert "pending" not in legend  # the run ended: what was never worked on is "not explored"

    # a real click on or3's marker: plotly_click -> onSelect -> the panel
    page.wait_for_timeout(100)
    xy = page.evaluate("() => T.pixelOf('or3')")
    page.mouse.move(xy["x"], xy["y"])
    page.mouse.click(xy["x"], xy["y"])
    page.wait_for_function("() => T.selected.length > 0", timeout=5000)
    assert page.evaluate("() => T.selected") == [["tree", "or3"]]
    transcript = page.inner_text("#node-panel .node-transcript")
    assert "attention kernel attempt one" in transcript and "no kernel this time" in transcript
    candidates = page.inner_text("#node-panel .node-candidates")
    assert "failed" in candidates and "max abs error 0.5 > 1e-4" in candidates
    assert "def reference(x, w)" in page.inner_text("#node-panel .node-reference")
    page.wait_for_function("() => T.view.plot.data.find(t => t.name === 'selected').x.length === 1", timeout=5000)

    # a node id link inside the panel selects that node
    page.click("#node-panel a[data-node-id='and1']")
    assert page.evaluate("() => T.selected[T.selected.length - 1]") == ["panel", "and1"]
    assert page.evaluate("() => T.view.selected") == "and1"
    assert "by module hierarchy" in page.inner_text("#node-panel .node-summary")
    page.wait_for_function("() => T.tracePoints()['shared edges'] === 0", timeout=5000)
    page.evaluate("() => { T.view.select('and5'); T.view.redraw(); }")
    assert page.evaluate("() => T.tracePoints()['shared edges']") == 2  # and5 -> or8


def test_panel_escapes_event_text(page):
    page.evaluate("(events) => { T.feed(events); T.panel.show('or2'); }", SMALL)
    title = page.inner_text("#node-panel .node-title")
    assert "<b>ln</b> & co " + XSS in title
    assert page.evaluate("() => document.querySelectorAll('#node-panel img, #node-panel script, #node-panel b').length") == 0
    assert "<script>window.pwned=2</script>" in page.inner_text("#node-panel .node-transcript")
    assert page.evaluate("() => window.pwned === undefined")
    # the kernel source sits in a closed <details>; opened, it stays open across refreshes
    page.click("#node-panel .node-candidates details summary")
    page.evaluate("""() => { T.model.apply({seq: 99, type: 'transcript', data: {node_id: 'or2', agent: 'x',
                     role: 'user', content: 'one more', tokens: 1, ts: 1}}); T.panel.refresh(); }""")
    assert "one more" in page.inner_text("#node-panel .node-transcript")
    assert page.evaluate("() => document.querySelector('#node-panel .node-candidates details').open")


def test_panel_links_without_a_callback_select_in_the_tree(page):
    # a panel built without onSelect shows the linked node itself and the tree
    # follows the "lego:select-node" event it sends
    selected = page.evaluate(
        """(events) => { T.feed(events); const div = document.createElement('div');
             document.body.appendChild(div); const panel = new LEGO.NodePanel(div, T.model);
             panel.show('or4'); div.querySelector("a[data-node-id='or2']").click();
             const out = [T.view.selected, panel.nodeId]; div.remove(); return out; }""",
        SMALL,
    )
    assert selected == ["or2", "or2"]


def test_zoom_survives_updates(page):
    page.evaluate("(events) => { T.feed(events); T.view.redraw(); }", SMALL[:30])
    page.evaluate("() => Plotly.relayout(T.view.plot, {'xaxis.range': [0.5, 2.5], 'yaxis.range': [-2.5, -0.5]})")
    draws = page.evaluate("() => T.view.draws")
    page.evaluate("(events) => T.feed(events)", SMALL[30:])
    # a redraw of the latest events (the zoom itself may redraw first: labels follow the room on screen)
    page.wait_for_function(f"() => T.view.draws > {draws} && T.view._drawnKey === T.view._key()", timeout=5000)
    ranges = page.evaluate("() => [T.view.plot.layout.xaxis.range, T.view.plot.layout.yaxis.range]")
    assert ranges == [[0.5, 2.5], [-2.5, -0.5]]
    assert page.evaluate("() => T.tracePoints()['OR nodes'] + T.tracePoints()['reused OR nodes'] + T.tracePoints()['AND nodes']") == 11


def test_markers_shrink_when_dense_and_grow_when_zoomed(page):
    # the hint sits above the plot
    hint = page.locator("#tree .tree-hint")
    assert "drag to pan, double-click to reset" in hint.inner_text().lower()
    assert page.evaluate("() => !!(document.querySelector('#tree .tree-hint').compareDocumentPosition(T.view.plot) & Node.DOCUMENT_POSITION_FOLLOWING)")
    marker = """(name) => { const t = T.view.plot.data.find(t => t.name === name); return t.marker; }"""

    # a few nodes: full-size markers; reused ones with a thin, not black, ring
    page.evaluate("(events) => { T.feed(events); T.view.redraw(); }", SMALL)
    assert page.evaluate(marker, "OR nodes")["size"] == 10
    ring = page.evaluate(marker, "reused OR nodes")["line"]
    assert 1 <= ring["width"] <= 1.5 and ring["color"].lower() not in ("#000", "#000000", "#111111", "#1b1b1b")

    # 1,100 leaves across about 900 px: small markers (at least 4 px), no pile of 10 px discs
    page.evaluate("() => T.start()")
    page.evaluate("(events) => { T.feed(events); T.view.redraw(); }", big_tree(2000))
    size = page.evaluate(marker, "OR nodes")["size"]
    spacing = page.evaluate("""() => { const fl = T.view.plot._fullLayout;
                                        return fl.xaxis._length / (fl.xaxis.range[1] - fl.xaxis.range[0]); }""")
    assert spacing < 2 and size == 4, (spacing, size)
    assert page.evaluate(marker, "AND nodes")["size"] < 7

    # zoomed in (as the wheel does): the markers grow back, the zoom stays
    draws = page.evaluate("() => T.view.draws")
    page.evaluate("() => Plotly.relayout(T.view.plot, {'xaxis.range': [100, 120], 'yaxis.range': [-9, -3]})")
    page.wait_for_function(f"() => T.view.draws > {draws}", timeout=5000)
    assert page.evaluate(marker, "OR nodes")["size"] == 10
    assert page.evaluate("() => T.view.plot.layout.xaxis.range") == [100, 120]
    # double-click (autorange): small again
    page.evaluate("() => Plotly.relayout(T.view.plot, {'xaxis.autorange': true, 'yaxis.autorange': true})")
    page.wait_for_function("() => T.view.plot.data.find(t => t.name === 'OR nodes').marker.size === 4", timeout=5000)


def test_updates_are_coalesced(page):
    # 100 batches of events in about a second: a handful of redraws, not 100
    events = big_tree(600)
    draws = page.evaluate(
        """(events) => new Promise(resolve => {
             const start = T.view.draws; let i = 0; const step = Math.ceil(events.length / 100);
             const timer = setInterval(() => {
               T.feed(events.slice(i, i + step)); i += step;
               if (i >= events.length) { clearInterval(timer);
                 setTimeout(() => resolve({draws: T.view.draws - start, nodes: T.model.nodes.size,
                                           points: T.tracePoints()}), 600); }
             }, 10);
           })""",
        events,
    )
    # coalesced: at most one draw per five batches (a quiet machine makes 3-8;
    # a loaded 2-core one, timers late, 10-13), never one per batch
    assert 1 <= draws["draws"] <= 20, draws
    p = draws["points"]
    assert p["OR nodes"] + p["reused OR nodes"] + p["AND nodes"] == draws["nodes"] == 602


def test_redraw_of_2000_nodes(page):
    events = big_tree(2000)
    split = len(events) - 200
    timing = page.evaluate(
        """([first, rest]) => {
             const other = new LEGO.RunModel(); const t = performance.now();
             other.applyAll(first); other.applyAll(rest);
             const applyMs = performance.now() - t;
             T.model.applyAll(first);
             const firstDraw = T.view.redraw();
             const draws = [];
             for (let i = 0; i < rest.length; i += 20) {  // the tail in batches, a redraw after each
               T.model.applyAll(rest.slice(i, i + 20));
               draws.push(T.view.redraw());
             }
             return {applyMs, firstDraw, draws, nodes: T.model.nodes.size, points: T.tracePoints()};
           }""",
        [events[:split], events[split:]],
    )
    p = timing["points"]
    assert timing["nodes"] == 2002  # 2,000 + two mutation ANDs
    assert p["OR nodes"] + p["reused OR nodes"] + p["AND nodes"] == 2002
    median = statistics.median(timing["draws"])
    print(f"\n2,002-node tree: applying {len(events)} events {timing['applyMs']:.1f} ms; "
          f"first draw {timing['firstDraw']:.1f} ms; redraw median {median:.1f} ms, "
          f"max {max(timing['draws']):.1f} ms over {len(timing['draws'])} redraws")
    assert median < 100
