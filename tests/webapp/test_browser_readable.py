"""The run page read at a glance (issue 13), in headless Chromium against
``make run``: one tiny llama_stack upload, looked at while it runs (the tree
folded to fewer than 150 markers) and once finished (the time view's boxes,
a click on one selects the node and fills the panel, folded nodes unfold on
a click, the search finds ``layers.0.attn_norm``, the legend's plan count is
the header's sub-problem count, the speedup chart's last plan is the
summary's final plan time to 0.01 s).  The upload goes through the form's
constant fields (the file's values shown, the tiny sizes typed in, kept
across a validation error) and the run's report says it used them.  A second
run of the model is compared with the first from the runs list.  Writes
``time-view.png`` and ``compare.png``."""
import ast
import math
import time

import pytest

from test_browser_live import MODEL, TREE_POINTS, chromium, fresh_kernel_cache, log_in, new_page, wait_js  # noqa: F401
from test_browser_upload import RUN_TIMEOUT_S, RUN_URL, app, shot, upload  # noqa: F401

pytestmark = [pytest.mark.browser, pytest.mark.slow]

BOXES = """() => { const g = [...document.querySelectorAll('#time-view g.slice')];
  return LEGO.page.timeView.boxes().map(b => { const s = g.find(x => x.__data__ && x.__data__.data && x.__data__.data.id === 'n:' + b.nodeId);
    const r = s ? s.getBoundingClientRect() : null;
    return {id: b.nodeId, ms: b.valueMs, colour: b.colour, speedup: b.speedup, x: r && r.left + r.width / 2, y: r && r.top + r.height / 2, w: r && r.width}; }); }"""


def test_time_view_folded_tree_search_and_header(fresh_kernel_cache, app, chromium, shared_models, tiny_overrides):  # noqa: F811
    base, proc, log = app
    errors: list[str] = []
    context, page = new_page(chromium, errors)
    log_in(page, base)
    overrides = tiny_overrides(MODEL)
    upload_through_fields(page, base, (shared_models / MODEL).read_bytes(), overrides)

    # running: the folded tree stays small
    wait_js(page, f"() => document.getElementById('run-state').textContent.trim() === 'running' && ({TREE_POINTS})() > 0", RUN_TIMEOUT_S, "the running tree", log)
    running = []
    while page.locator("#run-state").inner_text().strip() == "running":
        running.append(page.evaluate(TREE_POINTS))
        time.sleep(0.5)
    assert running and max(running) < 150, running

    # finished (the page reloaded)
    wait_js(page, "() => document.getElementById('run-summary').dataset.active === 'false' && window.LEGO && LEGO.stream && LEGO.stream.ended"
            " && LEGO.page.timeView.boxes().length > 0", RUN_TIMEOUT_S, "the finished run", log)
    page.wait_for_timeout(800)
    subproblems = int(page.locator("#run-subproblems").inner_text())
    boxes = page.evaluate(BOXES)
    assert len(boxes) == subproblems
    assert all(b["x"] is not None for b in boxes), "a sub-problem has no box"
    for b in boxes:  # colour: log2 of the speedup, clipped at 4x
        if b["speedup"]:
            assert b["colour"] == pytest.approx(max(-2, min(2, math.log2(b["speedup"]))))
    report = page.evaluate("() => JSON.parse(document.getElementById('run-report').textContent)")
    file_has = file_values((shared_models / MODEL).read_bytes())
    # the run used the values typed into the fields (those equal to the file's are not overrides)
    assert report["overrides"] == {k: v for k, v in overrides.items() if str(v) != file_has[k]}
    assert all(report["overrides"].get(k, int(file_has[k])) == v for k, v in overrides.items())
    baseline = {s["node_id"]: s["baseline_ms"] for s in report["subproblems"] if s["kind"] != "layout"}
    assert {b["id"]: b["ms"] for b in boxes} == pytest.approx(baseline)
    legend = int(page.locator(".tree-legend-chosen .tree-legend-count").inner_text())
    assert legend == subproblems
    shot(page, "time-view.png")

    # a click on the widest box selects its node in the tree and fills the panel (scrolled to it
    # first, as a person does: the activity card above the time view can push it below the fold)
    page.locator("#time-view").scroll_into_view_if_needed()
    boxes = page.evaluate(BOXES)
    widest = max(boxes, key=lambda b: b["w"])
    page.mouse.click(widest["x"], widest["y"])
    wait_js(page, f"() => LEGO.page.tree.selected === '{widest['id']}'", 10, "the tree selection", log)
    label = page.evaluate(f"() => LEGO.page.model.nodes.get('{widest['id']}').label")
    assert label in page.locator("#node-panel").inner_text()

    # the folded tree: fewer than 150 markers; a folded node unfolds on a click
    page.evaluate("() => { document.querySelector('.tree-fold-reset').click(); LEGO.page.tree.redraw(); }")
    folded = page.evaluate(TREE_POINTS)
    assert folded < 150
    target = page.evaluate("() => { const l = LEGO.page.tree._lay; const i = l.hidden.findIndex((h, k) => h > 0 && l.visible[k]); return LEGO.page.model.order[i]; }")
    page.evaluate("(id) => { LEGO.page.tree.toggle(id); LEGO.page.tree.redraw(); }", target)
    assert page.evaluate(TREE_POINTS) > folded

    # the search box
    page.fill("#tree-search", "layers.0.attn_norm")
    page.press("#tree-search", "Enter")
    wait_js(page, "() => (LEGO.page.model.nodes.get(LEGO.page.tree.selected) || {}).modulePath === 'layers.0.attn_norm'", 10, "the search", log)
    expect_text = page.locator("#node-panel").inner_text()
    assert "layers.0.attn_norm" in expect_text

    # the speedup chart's last plan and the summary's final plan time
    last_x = page.evaluate("() => { const d = document.getElementById('speedup-chart').data[1].x; return d[d.length - 1]; }")
    final = float(page.locator("#run-plan-times").get_attribute("data-final"))
    assert last_x == pytest.approx(final, abs=0.01)
    assert "template agent" in page.locator("#run-agents").inner_text()
    assert not page.locator("#run-tokens-row").is_visible()

    # a second run of the model (the kernel cache answers most of it), then both side by side from the runs list
    upload(page, base, MODEL, (shared_models / MODEL).read_bytes(), overrides)
    wait_js(page, "() => document.getElementById('run-summary').dataset.active === 'false'", RUN_TIMEOUT_S, "the second run", log)
    page.goto(f"{base}/")
    boxes_ = page.locator("#runs-table tbody input[name=run]")
    assert boxes_.count() == 2
    boxes_.nth(0).check()
    boxes_.nth(1).check()
    page.locator("#compare-runs").click()
    page.wait_for_selector("#compare-table")
    assert page.locator("#compare-summary .speedup").count() == 2
    rows = page.locator("#compare-table tbody tr").count()
    assert rows >= subproblems
    assert f"of {rows} differ" in page.locator("#compare-differences").inner_text()
    shot(page, "compare.png")
    context.close()
    assert not errors, errors


def file_values(source: bytes) -> dict:
    """NAME = number at module level, as the form shows them."""
    found = {}
    for stmt in ast.parse(source).body:
        if isinstance(stmt, ast.Assign) and isinstance(stmt.targets[0], ast.Name) and isinstance(stmt.value, ast.Constant):
            found[stmt.targets[0].id] = str(stmt.value.value)
    return found


def upload_through_fields(page, base: str, source: bytes, overrides: dict) -> None:
    """Choose the file, see its constants as fields with the file's values,
    send the form once with a bad extra override (the error keeps the file
    and the fields), then fix it and submit with the tiny sizes typed into
    the fields."""
    page.goto(f"{base}/runs/new/")
    page.set_input_files("#id_upload", {"name": MODEL, "mimeType": "text/x-python", "buffer": source})
    page.wait_for_selector("#constants-fields input")
    shown = page.evaluate("() => Object.fromEntries([...document.querySelectorAll('#constants-fields input')].map(i => [i.id.slice(9), i.value]))")
    assert shown == file_values(source) and set(overrides) <= set(shown)
    for name, value in overrides.items():
        page.fill(f"#constant-{name}", str(value))
    typed = page.input_value("#id_overrides")
    assert typed.splitlines() == [f"{k}={v}" for k, v in overrides.items() if str(v) != shown[k]]
    page.fill("#id_overrides", typed + "\nd_model=wide")
    page.select_option("#id_dtype", "fp32")
    page.select_option("#id_device", "cpu")
    page.get_by_role("button", name="Optimize").click()
    page.wait_for_selector(".has-error")
    assert "is not a number" in page.locator("#run-form").inner_text()
    assert MODEL in page.locator("#kept-upload").inner_text()
    page.wait_for_selector("#constants-fields input")
    assert page.input_value("#constant-batch_size") == str(overrides["batch_size"])
    page.fill("#constant-d_model", str(overrides["d_model"]))  # rewrites the box's d_model line
    page.get_by_role("button", name="Optimize").click()
    page.wait_for_url(RUN_URL)
