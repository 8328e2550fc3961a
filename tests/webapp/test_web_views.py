"""Views: login, upload, run page, JSON endpoints, zip download."""
import html
import io
import json
import zipfile

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from django.utils.http import content_disposition_header

from webapp.runs.models import Run, RunEvent

pytestmark = pytest.mark.django_db


def upload(client, content, overrides="rows=2", name="scores.py", **extra):
    data = {"upload": SimpleUploadedFile(name, content), "overrides": overrides, "dtype": "fp32", "device": "cpu", **extra}
    return client.post(reverse("runs:new"), data)


@pytest.mark.parametrize("name", ["runs:list", "runs:new"])
def test_pages_need_login(client, name):
    response = client.get(reverse(name))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_login_page_logs_in(client, user):
    response = client.post(reverse("login"), {"username": "alice", "password": "pw-alice"})
    assert response.status_code == 302
    assert response["Location"] == reverse("runs:list")


def test_upload_creates_a_queued_run_and_enqueues_it_after_commit(
    user_client, user, good_model, django_capture_on_commit_callbacks, monkeypatch
):
    sent = []
    monkeypatch.setattr("webapp.runs.tasks.queue_run", lambda run_id: sent.append(run_id))
    good_model = good_model.replace(b"rows = 4\n", b"rows = 4\nd_in = 8\n")  # overrides name the file's constants (issue 28)
    with django_capture_on_commit_callbacks(execute=True):
        response = upload(user_client, good_model, overrides="rows=2, d_in=4")
    run = Run.objects.get()
    assert response.status_code == 302
    assert response["Location"] == reverse("runs:detail", args=[run.id])
    assert (run.owner, run.state, run.original_filename) == (user, "queued", "scores.py")
    assert run.overrides == {"rows": 2, "d_in": 4}
    assert run.upload.read() == good_model
    assert sent == [str(run.id)]


def test_upload_with_bad_overrides_shows_the_error_and_creates_nothing(user_client, good_model):
    response = upload(user_client, good_model, overrides="rows=two")
    assert response.status_code == 200
    assert "is not a number" in response.content.decode()
    assert not Run.objects.exists()


def test_a_file_kept_across_a_validation_error_is_used_by_the_next_try(user_client, good_model, monkeypatch):
    monkeypatch.setattr("webapp.runs.tasks.queue_run", lambda run_id: None)
    page = upload(user_client, good_model, overrides="rows=two").content.decode()
    assert 'id="kept-upload"' in page and "scores.py" in page
    assert '"name": "rows"' in page  # the kept file's constants, for the fields
    response = user_client.post(reverse("runs:new"), {"keep_upload": "1", "overrides": "rows=2", "dtype": "fp32", "device": "cpu"})
    run = Run.objects.get()
    assert response.status_code == 302 and run.upload.read() == good_model and run.overrides == {"rows": 2}
    # used once: the next form without a file says the file is missing
    again = user_client.post(reverse("runs:new"), {"keep_upload": "1", "overrides": "", "dtype": "fp32", "device": "cpu"})
    assert again.status_code == 200 and Run.objects.count() == 1


def test_constants_endpoint_reads_the_file_without_running_it(user_client):
    source = (b"import sys\nsys.exit(3)\nrows = 4\neps: float = 1e-5\nflag = True\nneg = -2\n_private = 1\nshape = (rows, 2)\nrows = 8\n"
              b"sizes = [400, 800]\nkernel = (3, 3)\n")
    got = user_client.post(reverse("runs:constants"), {"upload": SimpleUploadedFile("m.py", source)}).json()
    # ``text`` is the value as an override is typed: a tuple keeps its parentheses, which JSON's value cannot
    assert got == {"constants": [{"name": "rows", "value": 8, "text": "8"}, {"name": "eps", "value": 1e-5, "text": "1e-05"},
                                 {"name": "flag", "value": True, "text": "true"}, {"name": "neg", "value": -2, "text": "-2"},
                                 {"name": "sizes", "value": [400, 800], "text": "[400, 800]"},
                                 {"name": "kernel", "value": [3, 3], "text": "(3, 3)"}]}
    bad = user_client.post(reverse("runs:constants"), {"upload": SimpleUploadedFile("m.py", b"def (:\n")})
    # the words submit refuses the file with (forms.compiled_source), not a second wording
    assert bad.status_code == 400 and bad.json()["error"].startswith("m.py:1: syntax error: ")


@pytest.mark.parametrize("content, says", [
    ("rows = 4\n".encode("utf-16"), "m.py:1: the file is not UTF-8 text: it is UTF-16"),  # was "line None: ... null bytes"
    (b"rows = 4\n\x00\n", "m.py:2: the file is not UTF-8 text: it holds null bytes"),
    (b"rows = 4\n# \xe9\n", "m.py:2: the file is not UTF-8 text: byte 0xe9 is not UTF-8"),
])
def test_a_file_that_is_not_utf8_says_so_on_the_form_never_line_none(user_client, content, says):
    """The constants the form reads as soon as a file is chosen, then the
    form's submit: both say the file is not UTF-8 text and how to convert it."""
    got = user_client.post(reverse("runs:constants"), {"upload": SimpleUploadedFile("m.py", content)})
    error = got.json()["error"]
    assert got.status_code == 400 and error.startswith(says) and "Fix: save the file as UTF-8" in error
    assert "None" not in error
    page = user_client.post(reverse("runs:new"), {"upload": SimpleUploadedFile("m.py", content), "overrides": "",
                                                   "dtype": "fp32", "device": "cpu"})
    assert page.status_code == 200 and not Run.objects.exists()
    text = html.unescape(page.content.decode())
    assert says in text and "line None" not in text


def test_new_run_form_offers_the_reference_models(user_client, shared_models):
    page = user_client.get(reverse("runs:new")).content.decode()
    assert '<option value="llama_stack.py">' in page
    text = user_client.get(reverse("runs:example", args=["llama_stack.py"])).content
    assert text == (shared_models / "llama_stack.py").read_bytes()
    assert user_client.get(reverse("runs:example", args=["tiny.json"])).status_code == 404  # .py examples only


def test_run_list_says_why_a_run_failed_in_one_line(user_client, make_run):
    make_run(state="failed", error_message="model.py:6: invalid syntax\n  x = (\n      ^")
    page = user_client.get(reverse("runs:list")).content.decode()
    assert '<div class="run-reason note" title="model.py:6: invalid syntax' in page
    assert ">model.py:6: invalid syntax</div>" in page


def test_compare_page_shows_two_runs_of_one_model_side_by_side(user_client, make_run, sample_report):
    import copy

    other = copy.deepcopy(sample_report)
    other["plan"]["speedup"] = 1.5
    other["subproblems"][0].update(implementation="triton", time_ms=0.01)
    a = make_run(state="finished", report=sample_report, filename="scores.py")
    b = make_run(state="finished", report=other, filename="scores.py")
    page = user_client.get(reverse("runs:compare") + f"?run={a.id}&run={b.id}").content.decode()
    assert "2.16×" in page and "1.50×" in page
    assert '<span class="note" id="compare-differences">1 of 2 differ</span>' in page
    assert page.count('data-differs="true"') == 1 and "proj · view" not in page
    c = make_run(state="finished", report=sample_report, filename="other.py")
    response = user_client.get(reverse("runs:compare") + f"?run={a.id}&run={c.id}")
    assert response.status_code == 302


def test_run_list_shows_only_own_runs(user_client, make_run, other_user):
    make_run(filename="mine.py")
    make_run(owner=other_user, filename="theirs.py")
    page = user_client.get(reverse("runs:list")).content.decode()
    assert "mine.py" in page and "theirs.py" not in page


def test_run_page_of_another_user_is_not_found(user_client, make_run, other_user):
    run = make_run(owner=other_user)
    assert user_client.get(reverse("runs:detail", args=[run.id])).status_code == 404
    assert user_client.get(reverse("api:run", args=[run.id])).status_code == 404


def test_active_run_page_polls_its_status(user_client, make_run):
    run = make_run(state="running")
    page = user_client.get(reverse("runs:detail", args=[run.id])).content.decode()
    assert 'data-active="true"' in page
    assert reverse("api:run", args=[run.id]) in page
    assert "run_page.js" in page


def test_finished_run_page_shows_plan_speedup_and_error(user_client, make_run, sample_report):
    run = make_run(state="finished", report=sample_report)
    page = user_client.get(reverse("runs:detail", args=[run.id])).content.decode()
    assert 'data-active="false"' in page
    assert "softmax chain" in page and "aten._softmax.default" in page
    assert "triton" in page and "library" in page
    assert "2.4e-07" in page  # a sub-problem's max error
    assert "2.16×" in page and "estimated" in page  # speedup with its kind
    assert "4.8e-07" in page  # end-to-end error
    assert reverse("runs:download", args=[run.id]) in page


def test_plan_table_counts_layout_steps_instead_of_listing_them(user_client, make_run, sample_report):
    run = make_run(state="finished", report=sample_report)
    page = user_client.get(reverse("runs:detail", args=[run.id])).content.decode()
    assert "proj · view" not in page  # a view moves no data: not a row
    assert "1 layout-only step " in page
    assert '<span id="run-subproblems">2</span>' in page  # the run's metrics
    assert ": 1 generated Triton, 1 library" in page
    assert '<span class="kind">reference</span>' in page  # the library row's error


def test_failed_run_page_shows_message_line_and_source(user_client, make_run, broken_model):
    run = make_run(state="failed", source=broken_model, error_message="model.py:6: invalid syntax", error_line=6)
    page = user_client.get(reverse("runs:detail", args=[run.id])).content.decode()
    assert "invalid syntax" in page
    assert "line 6" in page
    assert "def forward(self, x) return x" in page


def test_status_endpoint(user_client, make_run):
    run = make_run(state="running")
    RunEvent.objects.create(run=run, seq=1, type="stage_started", data={"type": "stage_started", "stage": "capture"})
    status = user_client.get(reverse("api:run", args=[run.id])).json()
    assert status["state"] == "running" and status["active"] is True
    assert status["last_seq"] == 1 and status["activity"] == "stage capture"


def test_events_endpoint_reads_after_a_sequence_number(user_client, make_run):
    run = make_run(state="running")
    for seq in (1, 2, 3):
        RunEvent.objects.create(run=run, seq=seq, type="progress", data={"type": "progress", "done": seq})
    url = reverse("api:events", args=[run.id])
    assert [e["seq"] for e in user_client.get(url).json()["events"]] == [1, 2, 3]
    assert [e["seq"] for e in user_client.get(url, {"after": 2}).json()["events"]] == [3]
    assert user_client.get(url, {"after": "x"}).status_code == 400


def finished_run_with_output(make_run, media_root, sample_report, **fields):
    run = make_run(state="finished", report=sample_report, output_dir="runs/x/output", **fields)
    out = run.output_path
    (out / "kernels").mkdir(parents=True)
    (out / "__pycache__").mkdir()
    (out / "optimized_model.py").write_text("# optimized\n")
    (out / "kernels" / "sp1.py").write_text("# kernel\n")
    (out / "report.json").write_text(json.dumps(sample_report))
    (out / "__pycache__" / "junk.pyc").write_bytes(b"\0")
    return run


def test_zip_download_holds_the_output_folder(user_client, make_run, media_root, sample_report):
    run = finished_run_with_output(make_run, media_root, sample_report, filename="scores.py")
    response = user_client.get(reverse("runs:download", args=[run.id]))
    assert response.status_code == 200
    assert response["Content-Type"] == "application/zip"
    assert "attachment" in response["Content-Disposition"]
    names = zipfile.ZipFile(io.BytesIO(b"".join(response.streaming_content))).namelist()
    folder = f"scores-lego-{str(run.id)[:8]}"
    assert sorted(names) == [f"{folder}/kernels/sp1.py", f"{folder}/optimized_model.py", f"{folder}/report.json"]


def test_zip_download_is_for_the_owner_only(client, make_run, media_root, sample_report, other_user):
    run = finished_run_with_output(make_run, media_root, sample_report)
    url = reverse("runs:download", args=[run.id])
    assert client.get(url).status_code == 302  # anonymous: to the login page
    client.force_login(other_user)
    assert client.get(url).status_code == 404


def test_zip_download_of_an_unfinished_run_is_not_found(user_client, make_run):
    run = make_run(state="running")
    assert user_client.get(reverse("runs:download", args=[run.id])).status_code == 404


EVIL_NAME = "evil<img src=x onerror=alert(1)>.py"


def test_upload_filenames_are_sanitised(user_client, good_model, monkeypatch):
    """The page and the API store the name as get_valid_filename makes it:
    no <, >, quotes or spaces reach the pages, the zip or a download's name."""
    from rest_framework.authtoken.models import Token
    from rest_framework.test import APIClient

    monkeypatch.setattr("webapp.runs.tasks.queue_run", lambda run_id: None)
    assert upload(user_client, good_model, name=EVIL_NAME).status_code == 302
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=Run.objects.get().owner).key}")
    response = api.post(reverse("api:runs"), {"model": SimpleUploadedFile('a "b" <c>.py', good_model)}, format="multipart")
    assert response.status_code == 201, response.content
    assert response.json()["model"] == "a_b_c.py"
    assert sorted(Run.objects.values_list("original_filename", flat=True)) == ["a_b_c.py", "evilimg_srcx_onerroralert1.py"]


@pytest.mark.parametrize(
    "filename, folder",
    [(EVIL_NAME, "evilimg_srcx_onerroralert1"), ('my "model".py', "my_model"), ("<>.py", "model"),
     ("..py", "model"), ("scores.py", "scores"), ("модель.py", "модель")],
)
def test_download_names_are_safe_for_runs_stored_before_names_were_sanitised(
    user_client, make_run, media_root, sample_report, filename, folder
):
    run = finished_run_with_output(make_run, media_root, sample_report)
    Run.objects.filter(pk=run.pk).update(original_filename=filename)  # as an old row holds it
    folder = f"{folder}-lego-{str(run.id)[:8]}"
    response = user_client.get(reverse("runs:download", args=[run.id]))
    assert response["Content-Disposition"] == content_disposition_header(True, f"{folder}.zip")
    names = zipfile.ZipFile(io.BytesIO(b"".join(response.streaming_content))).namelist()
    assert {name.split("/")[0] for name in names} == {folder}
    response = user_client.get(reverse("runs:report-html", args=[run.id]))
    assert response["Content-Disposition"] == content_disposition_header(True, f"{folder}-report.html")
    if folder.isascii():
        assert response["Content-Disposition"] == f'attachment; filename="{folder}-report.html"'


def options_on_pages(client, run) -> tuple[str, str, list[str]]:
    """The overrides as the run page, the runs list and the API show them."""
    import html
    import re

    from rest_framework.authtoken.models import Token
    from rest_framework.test import APIClient

    page = client.get(reverse("runs:detail", args=[run.id])).content.decode()
    detail = html.unescape(re.search(r'<dd id="run-options">([^<]*)</dd>', page).group(1))
    page = client.get(reverse("runs:list")).content.decode()
    listed = html.unescape(re.search(r'<td class="options"[^>]*><div class="clamp">([^<]*)</div></td>', page).group(1))
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.get_or_create(user=run.owner)[0].key}")
    return detail, listed, list(api.get(reverse("api:run", args=[run.id])).json()["overrides"])


def test_overrides_show_in_the_order_typed_everywhere(user_client, good_model, monkeypatch):
    """PostgreSQL's jsonb reorders an object's keys (shortest first); the
    run page, the list and the API keep the order they were typed in."""
    monkeypatch.setattr("webapp.runs.tasks.queue_run", lambda run_id: None)
    model = good_model.replace(b"rows = 4\n", b"rows = 4\nd_model = 32\na = 2\neps = 1e-5\n")  # the file's constants (issue 28)
    upload(user_client, model, overrides="d_model=64, rows=2\na=1, eps=0.5")
    run = Run.objects.get()
    assert run.overrides == {"d_model": 64, "rows": 2, "a": 1, "eps": 0.5}
    detail, listed, api_keys = options_on_pages(user_client, run)
    assert detail == listed == "fp32 on cpu, d_model=64, rows=2, a=1, eps=0.5"
    assert api_keys == ["d_model", "rows", "a", "eps"]


def test_overrides_of_runs_saved_without_their_order_are_sorted_by_name(user_client, make_run):
    run = make_run(overrides={"rows": 2, "d_model": 64, "a": 1})
    detail, listed, api_keys = options_on_pages(user_client, run)
    assert detail == listed == "fp32 on cpu, a=1, d_model=64, rows=2"
    assert api_keys == ["a", "d_model", "rows"]
