"""An LLM run in the web app, watched in headless Chromium: the node panel
shows the reply growing while the model writes it (issue 12).

``make run`` (embedded defaults: its run worker and its agents worker) gets
``LEGO_LLM_*`` pointing at the scripted chat-completions server of
``tests/unit/llm_server.py`` on 127.0.0.1, which streams a correct kernel
slowly (its first reply: 40 characters every 0.25 s).  The upload asks for the LLM agent; the
page's panel, opened on the node the agent works on, shows a text that
grows across several observations before the run ends.  The key is in no
page and not in ``make run``'s log.
"""
import sys
import time
from pathlib import Path

import pytest

from test_browser_live import DIAGNOSIS, log_in, new_page  # noqa: F401
from chromium_support import headless_chromium
from test_browser_upload import RUN_URL, app, wait_until_ended  # noqa: F401 (app: fixture)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))
from llm_server import ScriptedEndpoint  # noqa: E402
from test_llm_agent import CORRECT, KEY, MODEL, fenced  # noqa: E402

playwright_sync = pytest.importorskip("playwright.sync_api")

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.llm]

STREAMING_NODE = """() => {
  const m = window.LEGO && LEGO.page && LEGO.page.model;
  if (!m) return null;
  for (const n of m.nodes.values()) if (n.streams && n.streams.length) return n.id;
  return null;
}"""
PANEL_TEXT = "() => (document.querySelector('#node-panel .transcript-streaming .transcript-content') || {}).textContent || ''"


@pytest.fixture
def scripted_llm(monkeypatch, tmp_path):
    """A slowly streaming scripted endpoint, named in the environment that
    ``make run`` inherits (with an empty kernel cache, so the agent is asked)."""
    def script(body, n):  # the first call streams slowly (it is the one watched), later ones at once
        return {"reply": fenced(CORRECT), "pause": 0.25 if n == 0 else 0.0}

    with ScriptedEndpoint(script) as endpoint:
        for name, value in {"LEGO_LLM_BASE_URL": endpoint.base_url, "LEGO_LLM_MODEL": "scripted", "LEGO_LLM_API_KEY": KEY,
                            "LEGO_LLM_TIMEOUT_S": "60", "LEGO_CACHE_DIR": str(tmp_path / "kernel-cache")}.items():
            monkeypatch.setenv(name, value)
        yield endpoint


def test_the_node_panel_shows_the_llm_reply_growing_live(scripted_llm, app, tmp_path):  # noqa: F811
    base, proc, log = app
    errors: list[str] = []
    with headless_chromium() as browser:
        context, page = new_page(browser, errors)
        log_in(page, base)
        page.goto(f"{base}/runs/new/")
        page.set_input_files("#id_upload", {"name": "softmax2.py", "mimeType": "text/x-python", "buffer": MODEL.encode()})
        page.select_option("#id_dtype", "fp32")
        page.select_option("#id_device", "cpu")
        page.select_option("#id_agent", "llm")
        page.get_by_role("button", name="Optimize").click()
        page.wait_for_url(RUN_URL)

        # open the panel on the node the agent writes for, then watch its text
        seen: list[tuple[float, str, int]] = []  # (seconds, state shown, characters in the panel's streaming message)
        started = time.monotonic()
        node_id = None
        while time.monotonic() - started < 120:
            assert proc.poll() is None, log.read_text(errors="replace")[-4000:]
            state = page.locator("#run-state").inner_text().strip()
            if state not in ("queued", "running"):
                break
            if node_id is None and (node_id := page.evaluate(STREAMING_NODE)):
                page.evaluate("(id) => LEGO.page.select(id)", node_id)
            if node_id is not None:
                seen.append((round(time.monotonic() - started, 2), state, len(page.evaluate(PANEL_TEXT))))
            time.sleep(0.3)
        growing = sorted({n for _, state, n in seen if state == "running" and n > 0})
        assert len(growing) >= 2, (f"the panel's text did not grow while running: {seen}; page: {page.evaluate(DIAGNOSIS)}\n"
                                   f"{log.read_text(errors='replace')[-3000:]}")
        print(f"\nnode {node_id}: the streamed reply grew through {len(growing)} lengths, {growing[0]} to {growing[-1]} characters")

        state = wait_until_ended(page, proc, log)
        assert state == "finished", (page.locator("main").inner_text()[:2000], log.read_text(errors="replace")[-3000:])
        page.wait_for_function("""(id) => { if (window.LEGO && LEGO.page && LEGO.page.panel) LEGO.page.select(id);
            const t = document.querySelector('#node-panel .node-transcript');
            return t && t.textContent.includes('def launch'); }""", arg=node_id, timeout=30_000, polling=500)
        transcript = page.inner_text("#node-panel .node-transcript")
        assert "def launch" in transcript and not page.locator("#node-panel .transcript-streaming").count()
        assert KEY not in page.content()
        context.close()
    assert scripted_llm.requests and KEY not in log.read_text(errors="replace")
    assert not errors, errors
