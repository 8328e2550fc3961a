"""Debian's Chromium driven by Playwright, headless, for every browser test
(``playwright install`` cannot download browsers here)."""
from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-background-networking", "--disable-gpu",
    "--disable-component-update", "--disable-sync", "--no-first-run",
]


@contextlib.contextmanager
def headless_chromium() -> Iterator:
    """A Playwright ``Browser`` on ``/usr/bin/chromium``; skips the test when
    Playwright or Chromium is missing (``make browser`` installs Chromium).
    Playwright's sync API runs an event loop in this thread, in which
    Django refuses database calls: use the database before launching."""
    sync_api = pytest.importorskip("playwright.sync_api")
    if not os.access(CHROMIUM, os.X_OK):
        pytest.skip(f"{CHROMIUM} is missing (make test installs it: make browser)")
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()
