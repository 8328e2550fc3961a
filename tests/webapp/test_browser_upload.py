"""A user's whole flow in headless Chromium against ``make run`` on the
embedded defaults (SQLite file, filesystem broker, a real run worker and agents worker):
log in, upload a tiny gpt_stack, watch the run page follow the run to the
end, download the zip and check ``optimized_model.py`` against eager in a
fresh Python process; then a file that does not compile is refused on the
form, one that fails at import fails readably, and the same worker still
finishes a second good run.

Screenshots of the run pages (active, finished, failed) go to
``build/screenshots/`` (for people; nothing asserts on them).
"""
import os
import re
import time
from pathlib import Path

import pytest
import requests

from chromium_support import headless_chromium
from test_web_embedded import SERVICE_VARS, free_port

playwright_sync = pytest.importorskip("playwright.sync_api")
expect = playwright_sync.expect

pytestmark = [pytest.mark.browser, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
SCREENSHOTS = REPO / "build" / "screenshots"
FIRST, SECOND = "gpt_stack.py", "scores_chain.py"
RUN_URL = re.compile(r"/runs/[0-9a-f-]{36}/$")
RUN_TIMEOUT_S = 300


@pytest.fixture
def app(spawn, wait_for, tmp_path):
    """``make run`` on a fresh LEGO_VAR_DIR: (base URL, its process, its log)."""
    port = free_port()
    env = {k: v for k, v in os.environ.items()
           if k not in SERVICE_VARS and k != "LEGO_DEV_PASSWORD" and not k.startswith("PYTEST")}
    env.update(LEGO_VAR_DIR=str(tmp_path / "var"), PORT=str(port), TRITON_INTERPRET="1")
    proc, log = spawn("make-run", ["make", "--no-print-directory", "run"], env)
    base = f"http://127.0.0.1:{port}"

    def serving():
        assert proc.poll() is None, log.read_text(errors="replace")
        try:
            return requests.get(f"{base}/accounts/login/", timeout=5).ok
        except requests.ConnectionError:
            return False

    wait_for(serving, 180, "make run to serve", log)
    return base, proc, log


@pytest.fixture
def chromium_page():
    with headless_chromium() as browser:
        context = browser.new_context(accept_downloads=True, viewport={"width": 1280, "height": 900})
        context.set_default_timeout(30_000)
        try:
            yield context.new_page()
        finally:
            context.close()


# compiles, so it is queued; fails when the worker imports it, on line 9
FAILING_AT_IMPORT = (b"import torch\n\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x\n\n\n"
                     b"raise RuntimeError('the weights file is missing')\n")


def upload(page, base: str, name: str, content: bytes, overrides: dict) -> str:
    """Fill and submit the upload form; returns the run page's URL."""
    page.goto(f"{base}/runs/new/")
    page.set_input_files("#id_upload", {"name": name, "mimeType": "text/x-python", "buffer": content})
    page.fill("#id_overrides", ", ".join(f"{k}={v}" for k, v in overrides.items()))
    page.select_option("#id_dtype", "fp32")
    page.select_option("#id_device", "cpu")
    page.get_by_role("button", name="Optimize").click()
    page.wait_for_url(RUN_URL)
    return page.url


def wait_until_ended(page, proc, log: Path) -> str:
    """Wait, without reloading, until run_page.js has reloaded the page into
    its server-rendered final state; returns that state. Fails early if
    ``make run`` exits."""
    ended = page.locator('#run-summary[data-active="false"]')
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"make run exited\n{log.read_text(errors='replace')[-4000:]}"
        try:
            expect(ended).to_be_attached(timeout=2_000)
            return page.locator("#run-state").inner_text().strip()
        except AssertionError:
            continue
    pytest.fail(f"the run page at {page.url} never ended\n{log.read_text(errors='replace')[-4000:]}")


def state_after_upload(page) -> str:
    return page.locator("#run-state").inner_text().strip()


def shot(page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / name), full_page=True)


def test_browser_login_upload_follow_download_then_broken_and_second_run(
    app, chromium_page, shared_models, tiny_overrides, check_download, broken_model
):
    base, proc, log = app
    page = chromium_page

    # 1. log in through the login page as the development user make run created
    page.goto(f"{base}/")
    expect(page).to_have_url(re.compile(r"/accounts/login/"))
    page.fill("#id_username", "dev")
    page.fill("#id_password", "lego-dev")
    page.get_by_role("button", name="Log in").click()
    expect(page).to_have_url(f"{base}/")
    expect(page.locator(".topbar .logout span")).to_have_text("dev")

    # 2. upload gpt_stack with its tiny sizes
    overrides = tiny_overrides(FIRST)
    assert overrides == {"batch_size": 2, "seq_len": 16, "d_model": 64, "n_heads": 4, "n_layers": 2}
    upload(page, base, FIRST, (shared_models / FIRST).read_bytes(), overrides)
    expect(page.locator("h1")).to_have_text(FIRST)
    assert state_after_upload(page) in ("queued", "running")  # so the page must update itself
    shot(page, "run-active.png")

    # 3. the page follows the run to its end and shows the plan
    state = wait_until_ended(page, proc, log)
    assert state == "finished", (page.locator("main").inner_text(), log.read_text(errors="replace")[-4000:])
    shot(page, "run-finished.png")
    expect(page.locator("#run-error")).to_have_count(0)
    plan = page.locator("#plan-table")
    expect(plan).to_be_visible()
    assert plan.locator("tbody tr").count() >= 2
    assert plan.locator("tbody .impl.impl-triton").count() >= 1
    e2e = page.locator("#run-e2e").inner_text()
    assert e2e.startswith("passed") and "max abs error" in e2e, e2e
    assert "×" in page.locator("#run-speedup-live").inner_text()

    # 4. download the zip through the page's link; check it against eager in a fresh process
    with page.expect_download() as info:
        page.locator("#download").click()
    download = info.value
    assert download.suggested_filename.endswith(".zip"), download.suggested_filename
    names = check_download(Path(download.path()).read_bytes(), shared_models / FIRST, overrides)
    assert any(n.endswith("/optimized_model.py") for n in names)
    assert any(n.endswith("/report.json") for n in names)
    assert any("/kernels/" in n for n in names), names

    # 5. a file that does not compile is refused on the form (issue 28): the message names
    # file and line, nothing is queued; a file that compiles but fails when the worker
    # imports it fails readably: message, file name and line, the source line
    page.goto(f"{base}/runs/new/")
    page.set_input_files("#id_upload", {"name": "broken.py", "mimeType": "text/x-python", "buffer": broken_model})
    page.select_option("#id_device", "cpu")
    page.get_by_role("button", name="Optimize").click()
    expect(page.locator("main")).to_contain_text("broken.py:6: syntax error")
    assert not RUN_URL.search(page.url), page.url
    upload(page, base, "failing.py", FAILING_AT_IMPORT, {})
    assert wait_until_ended(page, proc, log) == "failed"
    shot(page, "run-failed.png")
    error = page.locator("#run-error")
    expect(error).to_be_visible()
    expect(error.locator(".error-where")).to_have_text("failing.py, line 9")
    expect(error.locator("pre.source")).to_contain_text("raise RuntimeError('the weights file is missing')")
    message = error.locator(".error-message").inner_text()
    assert "failing.py" in message and "the weights file is missing" in message, message
    expect(page.locator("#download")).to_have_count(0)
    expect(page.locator("#plan-table")).to_have_count(0)

    # ... and the same worker (make run starts one) finishes a second good run
    overrides = tiny_overrides(SECOND)
    upload(page, base, SECOND, (shared_models / SECOND).read_bytes(), overrides)
    state = wait_until_ended(page, proc, log)
    assert state == "finished", (page.locator("main").inner_text(), log.read_text(errors="replace")[-4000:])
    expect(page.locator("#plan-table")).to_be_visible()
    expect(page.locator("#download")).to_be_visible()
    assert proc.poll() is None

    # the runs list shows all three
    page.goto(f"{base}/")
    rows = page.locator("table.runs tbody tr")
    expect(rows).to_have_count(3)
    expect(rows.locator(".state")).to_have_text(["finished", "failed", "finished"])
