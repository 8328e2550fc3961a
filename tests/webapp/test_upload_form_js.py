"""The upload form's constant fields (``frontend/js/upload_form.js``) with
list and tuple constants, in headless Chromium, without a server: the page
the server rendered after a refused try (its kept file's constants in
``#kept-constants``) is loaded with ``page.set_content`` and the script
added to it.

Before: a list's own commas split the overrides box (``sizes=[8, 4]``
became ``sizes=[8`` and ``4]``), and a tuple's field showed ``3,3``.
"""
from __future__ import annotations

import html
from pathlib import Path

import pytest
from chromium_support import headless_chromium
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from test_web_list_overrides import LIST_MODEL

pytestmark = [pytest.mark.browser, pytest.mark.django_db]

SCRIPT = Path(__file__).resolve().parents[2] / "frontend" / "js" / "upload_form.js"

FIELDS = """() => Object.fromEntries([...document.querySelectorAll('#constants-fields label')].map(
  l => [l.querySelector('input').id.slice(9), [l.querySelector('input').value, l.querySelector('.note').textContent.trim()]]))"""


def test_list_and_tuple_fields_write_whole_items_into_the_overrides_box(user_client):
    # a refused try (a tuple for the list): the page keeps the file and shows its constants at once
    refused = user_client.post(reverse("runs:new"), {
        "upload": SimpleUploadedFile("lists.py", LIST_MODEL), "overrides": "sizes=(8, 4)", "dtype": "fp32", "device": "cpu",
    })
    assert refused.status_code == 200 and "`sizes` is a list of whole numbers" in html.unescape(refused.content.decode())
    with headless_chromium() as browser:  # the database is not used from here on
        page = browser.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.set_content(refused.content.decode())
        page.add_script_tag(content=SCRIPT.read_text())
        page.wait_for_selector("#constants-fields input")

        def box() -> list[str]:
            return page.input_value("#id_overrides").splitlines()

        assert page.evaluate(FIELDS) == {
            "rows": ["4", "file: 4"],
            "sizes": ["(8, 4)", "file: [400, 800]"],  # what was typed, beside the file's value
            "kernel": ["(3, 3)", "file: (3, 3)"],  # a tuple keeps its parentheses
        }
        page.fill("#constant-sizes", "[8, 4]")
        assert box() == ["sizes=[8, 4]"]
        page.fill("#constant-kernel", "(1, 1)")
        assert box() == ["sizes=[8, 4]", "kernel=(1, 1)"]
        page.fill("#constant-sizes", "[16, 8, 4]")  # rewrites its own line whole, the tuple's stays
        assert box() == ["kernel=(1, 1)", "sizes=[16, 8, 4]"]
        page.fill("#constant-kernel", "(3, 3)")  # back to the file's value: its line goes away
        assert box() == ["sizes=[16, 8, 4]"]
        page.fill("#id_overrides", "sizes=[2, 2], kernel=(5, 5), rows=3")  # one line with commas, as typed in the box
        page.fill("#constant-rows", "2")
        assert box() == ["sizes=[2, 2]", "kernel=(5, 5)", "rows=2"]
        assert errors == []
