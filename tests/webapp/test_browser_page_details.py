"""Page details of issue 28 in headless Chromium, without a server: pages
the Django test client rendered are loaded with ``page.set_content`` and the
site's CSS and scripts added to them.

- the runs list's table fits its container at 1280 and 1920 px, with long
  file names, long failure reasons and many overrides (before: the table ran
  past ``main``, so Options was cut and Uploaded scrolled out of sight);
- the overrides box and the per-constant fields of the new-run form follow
  each other both ways;
- the example picker offers the CPU-sized overrides (``tiny.json``).
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from chromium_support import headless_chromium
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from webapp.runs.models import Run

pytestmark = [pytest.mark.browser, pytest.mark.django_db]

FRONTEND = Path(__file__).resolve().parents[2] / "frontend"
APP_CSS = (FRONTEND / "css" / "app.css").read_text()
UPLOAD_JS = (FRONTEND / "js" / "upload_form.js").read_text()

# every element of the table against its container (.table-scroll, whose box is main's content width)
OVERFLOW = """() => {
  const scroll = document.querySelector('#runs-table').parentElement;
  const box = scroll.getBoundingClientRect();
  const main = document.querySelector('main').getBoundingClientRect();
  const out = [];
  for (const el of [document.querySelector('#runs-table'), ...document.querySelectorAll('#runs-table *')]) {
    const r = el.getBoundingClientRect();
    if (r.width === 0 && r.height === 0) continue;
    if (el.classList.contains('visually-hidden')) continue;
    if (r.right > box.right + 0.5 || r.left < box.left - 0.5)
      out.push(el.tagName + '.' + el.className + ' ' + Math.round(r.left) + '..' + Math.round(r.right) + ' > ' + Math.round(box.right));
  }
  return {out, scrollWidth: scroll.scrollWidth, clientWidth: scroll.clientWidth,
          boxRight: box.right, mainRight: main.right, viewport: window.innerWidth};
}"""

HEADERS = """() => [...document.querySelectorAll('#runs-table thead th')].map(th => {
  const r = th.getBoundingClientRect();
  const box = th.closest('.table-scroll').getBoundingClientRect();
  return [th.textContent.trim(), r.width > 0 && r.left >= box.left - 0.5 && r.right <= box.right + 0.5
          && r.right <= window.innerWidth];
})"""


def test_runs_list_table_fits_its_container_at_1280_and_1920(user_client, make_run):
    long_reason = ("The file does not load: model.py:12: RuntimeError: mat1 and mat2 shapes cannot be multiplied "
                   "(16x40 and 30x40) while tracing the forward of the model's third_projection_layer_with_a_long_name"
                   "_that_never_breaks_anywhere_in_its_text. Fix: make the shapes agree.")
    make_run(filename="a_model_file_with_a_very_long_name_that_has_no_spaces_at_all_in_it_v2_final.py",
             state=Run.State.FAILED, error_message=long_reason + "\nsecond line")
    make_run(filename="llama_stack.py", state=Run.State.FINISHED, dtype="bf16", device="cpu",
             overrides={"batch_size": 2, "seq_len": 16, "d_model": 64, "n_heads": 4, "n_kv_heads": 2,
                        "d_ffn": 96, "n_layers": 2, "a_very_long_constant_name_without_breaks": [400, 800, 1600, 3200]},
             report={"plan": {"speedup": 1.8, "cost_kind": "estimated"}})
    make_run(filename="gpt_stack.py", state=Run.State.QUEUED)
    page_html = user_client.get(reverse("runs:list")).content.decode()
    assert 'id="runs-table"' in page_html
    with headless_chromium() as browser:  # the database is not used from here on
        for width in (1280, 1920):
            page = browser.new_page(viewport={"width": width, "height": 900})
            page.set_content(page_html)
            page.add_style_tag(content=APP_CSS)
            found = page.evaluate(OVERFLOW)
            assert found["out"] == [], (width, found)
            assert found["scrollWidth"] <= found["clientWidth"], (width, found)  # no horizontal scroll needed
            assert found["boxRight"] <= found["mainRight"] + 0.5 <= width
            headers = page.evaluate(HEADERS)
            assert [h[0] for h in headers] == ["Compare", "Model", "State", "Speedup", "Time", "Options", "Uploaded"]
            assert all(visible for _, visible in headers), (width, headers)
            # a cut cell keeps its whole text as a title tooltip
            titles = page.evaluate("() => [...document.querySelectorAll('#runs-table [title]')].map(e => e.title)")
            assert any(t.startswith("The file does not load") for t in titles)
            assert any("a_very_long_constant_name_without_breaks=[400, 800, 1600, 3200]" in t for t in titles)
            # a long file name wraps and is shown whole
            name = page.locator("#runs-table tbody a", has_text="a_model_file_with").first
            assert name.inner_text().replace("\n", "") == "a_model_file_with_a_very_long_name_that_has_no_spaces_at_all_in_it_v2_final.py"
            assert name.bounding_box()["height"] > 25  # on more than one line
            page.close()


ORIGIN = "http://lego.test"


def serve(page, responses: dict[str, tuple[str, str]]) -> None:
    """Answer the page's requests to ORIGIN from ``responses`` (path -> (content type, body)),
    rendered by the test client beforehand; the static files from the repository."""
    static = {"/static/js/upload_form.js": ("text/javascript", UPLOAD_JS), "/static/css/app.css": ("text/css", APP_CSS)}

    def handle(route):
        path = route.request.url[len(ORIGIN):]
        found = responses.get(path) or static.get(path)
        if found is None:
            route.fulfill(status=404, body="")
        else:
            route.fulfill(status=200, content_type=found[0], body=found[1])

    page.route(f"{ORIGIN}/**", handle)


def rendered_new_form(client, settings, examples: list[str]) -> dict[str, tuple[str, str]]:
    """The new-run page, the examples' sources and their constants, as the server answers them."""
    responses = {reverse("runs:new"): ("text/html", client.get(reverse("runs:new")).content.decode())}
    for name in examples:
        source = client.get(reverse("runs:example", args=[name])).content
        responses[reverse("runs:example", args=[name])] = ("text/x-python", source.decode())
        # the constants endpoint answers per file: the test serves the last example's, posted by name below
        answer = client.post(reverse("runs:constants"), {"upload": SimpleUploadedFile(name, source)})
        assert answer.status_code == 200, answer.content
        responses[f"constants:{name}"] = ("application/json", answer.content.decode())
    return responses


def route_constants(page, responses) -> None:
    """POST /runs/new/constants/: the constants of the file the form posted (by its name in the body)."""
    url = f"{ORIGIN}{reverse('runs:constants')}"

    def handle(route):
        body = route.request.post_data_buffer or b""
        name = next(k[len("constants:"):] for k in responses if k.startswith("constants:")
                    and f'filename="{k[len("constants:"):]}"'.encode() in body)
        route.fulfill(status=200, content_type="application/json", body=responses[f"constants:{name}"][1])

    page.route(url, handle)


def box_items(page) -> list[str]:
    return page.input_value("#id_overrides").splitlines()


def test_overrides_box_and_constant_fields_follow_each_other(user_client, settings, shared_models):
    settings.LEGO_EXAMPLES_DIR = shared_models
    responses = rendered_new_form(user_client, settings, ["mlp_residual.py"])
    with headless_chromium() as browser:
        page = browser.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        serve(page, responses)
        route_constants(page, responses)  # registered last: Playwright asks the last matching route first
        page.goto(f"{ORIGIN}{reverse('runs:new')}")
        page.select_option("#id_device", "cuda")  # "CPU size" off: the example's file sizes, an empty box
        page.select_option("#example", "mlp_residual.py")
        page.wait_for_selector("#constant-d_model")
        assert box_items(page) == []
        file_d_model = page.input_value("#constant-d_model")
        # a field -> the box
        page.fill("#constant-d_model", "48")
        assert box_items(page) == ["d_model=48"]
        # the box -> the fields, as typed (a line, and items with commas)
        page.fill("#id_overrides", "d_model=32, d_hidden=64\nbatch_size=4")
        assert [page.input_value(f"#constant-{n}") for n in ("d_model", "d_hidden", "batch_size")] == ["32", "64", "4"]
        page.locator("#id_overrides").press_sequentially("0")  # typing key by key: batch_size=40
        assert page.input_value("#constant-batch_size") == "40"
        # a name the box no longer sets shows the file's value again
        page.fill("#id_overrides", "d_hidden=64")
        assert page.input_value("#constant-d_model") == file_d_model
        assert page.input_value("#constant-d_hidden") == "64"
        # and the field again -> the box, keeping the box's other line
        page.fill("#constant-batch_size", "2")
        assert box_items(page) == ["d_hidden=64", "batch_size=2"]
        assert errors == []


def test_example_picker_offers_the_cpu_sizes(user_client, settings, shared_models, tiny_overrides):
    settings.LEGO_EXAMPLES_DIR = shared_models
    responses = rendered_new_form(user_client, settings, ["mlp_residual.py", "gpt_stack.py"])
    page_html = responses[reverse("runs:new")][1]
    assert 'id="example-cpu-size"' in page_html and 'id="example-cpu-sizes"' in page_html
    with headless_chromium() as browser:
        page = browser.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        serve(page, responses)
        route_constants(page, responses)  # registered last: Playwright asks the last matching route first
        page.goto(f"{ORIGIN}{reverse('runs:new')}")
        assert page.input_value("#id_device") == "cpu" and page.is_checked("#example-cpu-size")  # on by default on cpu
        page.select_option("#example", "mlp_residual.py")
        tiny = tiny_overrides("mlp_residual.py")
        expected = [f"{k}={v}" for k, v in tiny.items()]
        assert box_items(page) == expected
        hint = page.locator("#example-cpu-hint")
        assert hint.is_visible() and all(item in hint.inner_text() for item in expected)
        page.wait_for_selector("#constant-d_model")
        assert {k: page.input_value(f"#constant-{k}") for k in tiny} == {k: str(v) for k, v in tiny.items()}
        # another example: its own CPU sizes replace the first one's
        page.select_option("#example", "gpt_stack.py")
        assert box_items(page) == [f"{k}={v}" for k, v in tiny_overrides("gpt_stack.py").items()]
        # unticked: the file's (GPU) sizes, nothing in the box
        page.uncheck("#example-cpu-size")
        assert box_items(page) == []
        assert "tick CPU size" in hint.inner_text()
        page.check("#example-cpu-size")
        assert len(box_items(page)) == len(tiny_overrides("gpt_stack.py"))
        page.select_option("#id_device", "cuda")  # a GPU run: the file's sizes
        assert not page.is_checked("#example-cpu-size") and box_items(page) == []
        assert errors == []
