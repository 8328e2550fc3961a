"""The JSON API (``/api/``, ``webapp/runs/api.py``): token and session
authentication, validation with the upload form's rules, owner-only runs,
events paging, downloads, the token page and command; and one whole run
driven through the API alone against real run and agents workers."""
import io
import json
import zipfile

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.urls import reverse
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from webapp.runs.models import Run, RunEvent

from test_web_views import finished_run_with_output

MODEL = "scores_chain.py"


@pytest.fixture
def token(user):
    return Token.objects.create(user=user)


@pytest.fixture
def api(token):
    """An APIClient that sends alice's token and enforces CSRF like a browser would."""
    client = APIClient(enforce_csrf_checks=True)
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client



def post_run(client, content=None, name="scores.py", **fields):
    data = dict(fields)
    if content is not None:
        data["model"] = SimpleUploadedFile(name, content)
    return client.post(reverse("api:runs"), data, format="multipart")


# --- authentication ------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("header", [None, "Token not-a-real-key", "Bearer abc"])
def test_without_a_valid_token_the_api_answers_401_with_how_to_authenticate(header, make_run):
    client = APIClient()
    if header:
        client.credentials(HTTP_AUTHORIZATION=header)
    run = make_run()
    for url in (reverse("api:runs"), reverse("api:run", args=[run.id]), reverse("api:events", args=[run.id])):
        response = client.get(url)
        assert response.status_code == 401, url
        assert response["Content-Type"] == "application/json"
        assert response["WWW-Authenticate"] == "Token"
        body = response.json()
        assert body["detail"] and "Authorization: Token <key>" in body["hint"]
        assert "create_api_token" in body["hint"]
    assert post_run(client, b"x").status_code == 401


@pytest.mark.django_db
def test_a_token_posts_a_run_without_csrf_and_it_is_queued_after_commit(
    api, user, good_model, queued, django_capture_on_commit_callbacks
):
    good_model = good_model.replace(b"rows = 4\n", b"rows = 4\nd_in = 8\n")  # overrides name the file's constants (issue 28)
    with django_capture_on_commit_callbacks(execute=True):
        response = post_run(api, good_model, overrides="rows=2, d_in=4", dtype="fp32", device="cpu")
    assert response.status_code == 201, response.content
    run = Run.objects.get()
    body = response.json()
    assert (run.owner, run.state, run.original_filename) == (user, "queued", "scores.py")
    assert run.overrides == {"rows": 2, "d_in": 4}
    assert run.upload.read() == good_model
    assert queued == [str(run.id)]
    assert body["id"] == str(run.id) and body["state"] == "queued" and body["active"] is True
    assert body["model"] == "scores.py" and body["overrides"] == {"rows": 2, "d_in": 4}
    assert body["last_seq"] == 0 and body["report"] is None
    urls = body["urls"]
    assert response["Location"] == urls["self"] == f"http://testserver{reverse('api:run', args=[run.id])}"
    assert urls["events"].endswith(reverse("api:events", args=[run.id]))
    assert urls["download"].endswith(reverse("api:download", args=[run.id]))
    assert urls["report_html"].endswith(reverse("api:report-html", args=[run.id]))
    assert urls["page"].endswith(reverse("runs:detail", args=[run.id]))


@pytest.mark.django_db
def test_dtype_and_device_default_to_fp32_and_cpu(api, good_model, queued):
    response = post_run(api, good_model)
    assert response.status_code == 201, response.content
    assert (response.json()["dtype"], response.json()["device"]) == ("fp32", "cpu")
    assert Run.objects.get().overrides == {}


@pytest.mark.django_db
def test_a_session_works_too_but_its_posts_need_the_csrf_token(user, good_model, queued, make_run):
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(user)
    run = make_run()
    assert client.get(reverse("api:run", args=[run.id])).json()["id"] == str(run.id)
    response = post_run(client, good_model)
    assert response.status_code == 403 and "CSRF" in response.json()["detail"]
    assert Run.objects.count() == 1


@pytest.mark.django_db
def test_runs_of_other_users_are_not_found(api, make_run, other_user, media_root, sample_report):
    run = finished_run_with_output(make_run, media_root, sample_report, owner=other_user)
    for name in ("api:run", "api:events", "api:download", "api:report-html"):
        response = api.get(reverse(name, args=[run.id]))
        assert response.status_code == 404, name
        assert response.json()["detail"] == f"You have no run {run.id} (no such run, or it is someone else's)."


@pytest.mark.django_db
@pytest.mark.parametrize("debug", [False, True])
@pytest.mark.parametrize("method", ["get", "post", "delete"])
@pytest.mark.parametrize(
    "path", ["/api/runs/nope/", "/api/nothing/here", "/api/", "/api/runs/c1070384-53f9-46a2-96c9-33cbb6285815/extra/"]
)
def test_unknown_api_paths_are_a_json_404(api, settings, debug, method, path):
    """Not Django's HTML 404 (which, with DEBUG, lists every URL pattern)."""
    settings.DEBUG = debug
    response = getattr(api, method)(path)
    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    detail = response.json()["detail"]
    assert path in detail and "/api/runs/" in detail and "docs/API.md" in detail
    assert b"<html" not in response.content.lower() and b"urlpatterns" not in response.content.lower()


@pytest.mark.django_db
def test_an_api_path_without_its_slash_still_redirects_on_get_and_says_so_otherwise(api):
    response = api.get("/api/runs?state=failed")
    assert response.status_code == 301 and response["Location"] == "/api/runs/?state=failed"
    response = api.post("/api/runs")
    assert response.status_code == 404 and "/api/runs/" in response.json()["detail"]
    assert "trailing slash" in response.json()["detail"]


# --- validation: the upload form's rules, errors as JSON ------------------------


@pytest.mark.django_db
@pytest.mark.parametrize(
    "fields, field, expected",
    [
        ({"content": None}, "model", "Send the .py file as the multipart field 'model'"),
        ({"content": None, "model": "scores.py"}, "model", "curl -F model=@path/to/model.py"),
        ({"content": b"x = 1\n", "name": "notes.txt"}, "model", "Upload a Python file (.py)."),
        ({"overrides": "rows=two"}, "overrides", "is not a number. Give rows an integer or a float."),
        ({"overrides": "rows"}, "overrides", "is not of the form name=value. Write it as name=value"),
        ({"overrides": '{"rows": 2'}, "overrides", "overrides is not valid JSON"),
        ({"overrides": '["rows", 2]'}, "overrides", "overrides must be a JSON object"),
        ({"overrides": '{"rows": null}'}, "overrides", "override rows=null is not a number"),
        ({"overrides": '{"rows": "two"}'}, "overrides", "is not a number"),
        ({"overrides": '{"2rows": 2}'}, "overrides", "is not a Python identifier"),
        ({"dtype": "fp64"}, "dtype", "Use one of: fp32, bf16, fp16."),
        ({"device": "tpu"}, "device", "Use one of: cpu, cuda."),
        ({"content": b"rows = 4\n# caf\xe9\n"}, "model",
         "scores.py:2: the file is not UTF-8 text: byte 0xe9 is not UTF-8 (the file was saved in another encoding, "
         "such as Latin-1 or Windows-1252). Fix: save the file as UTF-8"),
        ({"content": "rows = 4\n".encode("utf-16")}, "model", "scores.py:1: the file is not UTF-8 text: it is UTF-16"),
    ],
)
def test_invalid_uploads_get_400_saying_what_is_wrong_and_how_to_fix_it(api, good_model, queued, fields, field, expected):
    fields = dict(fields)
    content = fields.pop("content", good_model)
    response = post_run(api, content, name=fields.pop("name", "scores.py"), **fields)
    assert response.status_code == 400, response.content
    errors = response.json()["errors"]
    assert field in errors, errors
    assert any(expected in message for message in errors[field]), errors
    assert not Run.objects.exists() and queued == []


@pytest.mark.django_db
def test_cuda_on_a_server_whose_workers_have_no_gpu_is_a_400_before_any_run(api, good_model, queued, settings):
    settings.LEGO_WORKER_CUDA = False
    response = post_run(api, good_model, device="cuda")
    assert response.status_code == 400, response.content
    [message] = response.json()["errors"]["device"]
    assert message.startswith("This server's run workers have no CUDA GPU (LEGO_WORKER_CUDA=0 says so)")
    assert "Choose device cpu" in message
    assert not Run.objects.exists() and queued == []
    settings.LEGO_WORKER_CUDA = True
    assert post_run(api, good_model, device="cuda").status_code == 201 and Run.objects.get().device == "cuda"


@pytest.mark.django_db
def test_overrides_may_be_a_json_object(api, good_model, queued):
    text = json.dumps({"rows": 16, "eps": 1e-5, "bias": True})
    response = post_run(api, good_model.replace(b"rows = 4\n", b"rows = 4\neps = 1e-6\nbias = False\n"), overrides=text)
    assert response.status_code == 201, response.content
    assert Run.objects.get().overrides == {"rows": 16, "eps": 1e-5, "bias": True}


# --- reading runs and events -----------------------------------------------------


@pytest.mark.django_db
def test_the_run_list_is_the_users_own_newest_first_and_filters_by_state(api, make_run, other_user, sample_report):
    first = make_run(filename="first.py", state="failed")
    second = make_run(filename="second.py", state="finished", report=sample_report)
    make_run(owner=other_user, filename="theirs.py")
    body = api.get(reverse("api:runs")).json()
    assert body["count"] == 2
    assert [r["model"] for r in body["runs"]] == ["second.py", "first.py"]
    row = body["runs"][0]
    assert set(row) == {"id", "model", "state", "queue_position", "speedup", "created", "elapsed_s", "url"}
    assert (row["id"], row["state"], row["speedup"]) == (str(second.id), "finished", 2.16)
    assert row["url"].endswith(reverse("api:run", args=[second.id]))
    assert body["runs"][1]["speedup"] is None
    failed = api.get(reverse("api:runs"), {"state": "failed"}).json()
    assert [r["id"] for r in failed["runs"]] == [str(first.id)]
    response = api.get(reverse("api:runs"), {"state": "done"})
    assert response.status_code == 400
    assert "Use one of: queued, running, finished, failed, cancelled." in response.json()["errors"]["state"][0]


@pytest.mark.django_db
def test_a_run_shows_its_status_and_the_report_once_finished(api, make_run, sample_report):
    running = make_run(state="running")
    RunEvent.objects.create(run=running, seq=1, type="stage_started", data={"type": "stage_started", "stage": "capture"})
    body = api.get(reverse("api:run", args=[running.id])).json()
    assert (body["state"], body["active"], body["last_seq"], body["activity"]) == ("running", True, 1, "stage capture")
    assert body["report"] is None and body["error_message"] == "" and body["elapsed_s"] >= 0

    finished = make_run(state="finished", report=sample_report)
    body = api.get(reverse("api:run", args=[finished.id])).json()
    assert body["report"] == sample_report and body["speedup"] == 2.16 and body["active"] is False

    failed = make_run(state="failed", error_message="model.py:6: invalid syntax", error_line=6)
    body = api.get(reverse("api:run", args=[failed.id])).json()
    assert (body["error_message"], body["error_line"], body["report"]) == ("model.py:6: invalid syntax", 6, None)


@pytest.mark.django_db
def test_events_are_read_in_pages_after_a_sequence_number(api, make_run):
    run = make_run(state="running")
    for seq in range(1, 6):
        RunEvent.objects.create(run=run, seq=seq, type="progress", data={"type": "progress", "done": seq})
    url = reverse("api:events", args=[run.id])

    body = api.get(url).json()
    assert [e["seq"] for e in body["events"]] == [1, 2, 3, 4, 5]
    assert (body["state"], body["last_seq"], body["more"]) == ("running", 5, False)
    assert body["events"][0] == {"seq": 1, "type": "progress", "data": {"type": "progress", "done": 1}}

    pages, after, more = [], 0, True
    while more:
        body = api.get(url, {"after": after, "limit": 2}).json()
        pages.append([e["seq"] for e in body["events"]])
        after, more = body["last_seq"], body["more"]
    assert pages == [[1, 2], [3, 4], [5]]

    body = api.get(url, {"after": 5}).json()
    assert (body["events"], body["last_seq"], body["more"]) == ([], 5, False)


@pytest.mark.django_db
@pytest.mark.parametrize(
    "query, field", [({"after": "x"}, "after"), ({"after": -1}, "after"), ({"limit": 0}, "limit"), ({"limit": 1001}, "limit")]
)
def test_bad_after_or_limit_is_a_400(api, make_run, query, field):
    run = make_run(state="running")
    response = api.get(reverse("api:events", args=[run.id]), query)
    assert response.status_code == 400
    assert list(response.json()["errors"]) == [field]


@pytest.mark.django_db
@pytest.mark.parametrize("after", ["3", "4", "1000", "99999999999999999999", str(2**64 + 5)])
def test_last_seq_is_never_past_the_runs_last_event(api, make_run, after):
    """An ``after`` at or past the end returns no events and the run's real
    last seq (never the ``after`` echoed back, never a database error)."""
    run = make_run(state="finished")
    for seq in range(1, 4):
        RunEvent.objects.create(run=run, seq=seq, type="progress", data={"type": "progress", "done": seq})
    response = api.get(reverse("api:events", args=[run.id]), {"after": after})
    assert response.status_code == 200, response.content
    assert response.json() == {"state": "finished", "events": [], "last_seq": 3, "more": False}


@pytest.mark.django_db
def test_last_seq_of_a_run_without_events_is_0_whatever_after_says(api, make_run):
    run = make_run(state="queued")
    for after in ("0", "7", str(2**70)):
        body = api.get(reverse("api:events", args=[run.id]), {"after": after}).json()
        assert (body["events"], body["last_seq"]) == ([], 0), after


@pytest.mark.django_db
@pytest.mark.parametrize(
    "query, field",
    [({"after": "1.5"}, "after"), ({"after": "2.0"}, "after"), ({"after": "1e3"}, "after"),
     ({"limit": "2.0"}, "limit"), ({"limit": "2.5"}, "limit"), ({"limit": "1e2"}, "limit")],
)
def test_after_and_limit_take_whole_numbers_only(api, make_run, query, field):
    run = make_run(state="running")
    response = api.get(reverse("api:events", args=[run.id]), query)
    assert response.status_code == 400, response.content
    expected = {
        "after": "after must be a whole number >= 0: the seq of the last event you already have (0 for all).",
        "limit": "limit must be a whole number from 1 to 1000 (the default).",
    }[field]
    assert response.json() == {"errors": {field: [expected]}}


# --- downloads -------------------------------------------------------------------


@pytest.mark.django_db
def test_the_zip_downloads_with_a_token_whatever_the_client_accepts(api, make_run, media_root, sample_report):
    run = finished_run_with_output(make_run, media_root, sample_report, filename="scores.py")
    response = api.get(reverse("api:download", args=[run.id]), HTTP_ACCEPT="application/zip")
    assert response.status_code == 200 and response["Content-Type"] == "application/zip"
    names = zipfile.ZipFile(io.BytesIO(b"".join(response.streaming_content))).namelist()
    folder = f"scores-lego-{str(run.id)[:8]}"
    assert sorted(names) == [f"{folder}/kernels/sp1.py", f"{folder}/optimized_model.py", f"{folder}/report.json"]


@pytest.mark.django_db
def test_an_unfinished_run_has_nothing_to_download_yet(api, make_run):
    run = make_run(state="running")
    for name in ("api:download", "api:report-html"):
        response = api.get(reverse(name, args=[run.id]))
        assert response.status_code == 404
        assert "has not finished" in response.json()["detail"]


@pytest.mark.django_db
def test_report_html_downloads_with_a_token(api, make_run, media_root, sample_report):
    run = finished_run_with_output(make_run, media_root, sample_report, filename="scores.py")
    response = api.get(reverse("api:report-html", args=[run.id]))
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/html")
    assert "attachment" in response["Content-Disposition"]
    assert b"<html" in response.content.lower()


# --- getting a token: the page and the command ------------------------------------


@pytest.mark.django_db
def test_the_token_page_creates_shows_and_regenerates_the_token(client, user):
    url = reverse("api:token")
    assert client.get(url).status_code == 302  # anonymous: to the login page
    client.force_login(user)
    page = client.get(url).content.decode()
    assert "You have no API token yet." in page
    assert f'href="{url}"' in page  # the nav link

    assert client.post(url, {"action": "create"})["Location"] == url
    key = Token.objects.get(user=user).key
    page = client.get(url).content.decode()
    assert key in page and "Regenerate" in page
    client.post(url, {"action": "create"})  # creating again keeps the key
    assert Token.objects.get(user=user).key == key

    client.post(url, {"action": "regenerate"})
    new_key = Token.objects.get(user=user).key
    assert new_key != key and new_key in client.get(url).content.decode()
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert api.get(reverse("api:runs")).status_code == 401
    api.credentials(HTTP_AUTHORIZATION=f"Token {new_key}")
    assert api.get(reverse("api:runs")).status_code == 200


@pytest.mark.django_db
def test_create_api_token_prints_the_key_and_regenerates_on_request(user, capsys):
    call_command("create_api_token", "alice")
    key = capsys.readouterr().out.strip()
    assert key == Token.objects.get(user=user).key
    call_command("create_api_token", "alice")
    assert capsys.readouterr().out.strip() == key
    call_command("create_api_token", "alice", "--regenerate")
    new_key = capsys.readouterr().out.strip()
    assert new_key != key and new_key == Token.objects.get(user=user).key
    with pytest.raises(CommandError, match="no user 'nobody'"):
        call_command("create_api_token", "nobody")


# --- a whole run through the API alone, with real workers --------------------------


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_whole_run_through_the_api_with_real_workers(
    user, start_worker, agents_worker, wait_for, shared_models, tiny_overrides, check_download
):
    proc, log = start_worker("worker")
    key = Token.objects.create(user=user).key
    api = APIClient(enforce_csrf_checks=True)
    api.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    overrides = tiny_overrides(MODEL)

    response = api.post(
        reverse("api:runs"),
        {"model": SimpleUploadedFile(MODEL, (shared_models / MODEL).read_bytes()), "overrides": json.dumps(overrides)},
        format="multipart",
    )
    assert response.status_code == 201, response.content
    urls = response.json()["urls"]
    assert api.get(reverse("api:runs"), {"state": "failed"}).json()["count"] == 0

    status = wait_for(lambda: (s := api.get(urls["self"]).json())["active"] is False and s, 120, "the run", log)
    assert status["state"] == "finished", (status, log.read_text()[-4000:])
    assert status["report"]["overrides"] == overrides and status["speedup"] == status["report"]["plan"]["speedup"]

    events, after, more = [], 0, True
    while more:
        page = api.get(urls["events"], {"after": after, "limit": 50}).json()
        assert page["state"] == "finished"
        events += page["events"]
        after, more = page["last_seq"], page["more"]
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert events[-1]["type"] == "run_finished" and status["last_seq"] == len(events)

    response = api.get(urls["download"])
    assert response.status_code == 200
    names = check_download(b"".join(response.streaming_content), shared_models / MODEL, overrides)
    assert any(n.endswith("/optimized_model.py") for n in names)
    assert any(n.endswith("/report.json") for n in names)

    response = api.get(urls["report_html"])
    assert response.status_code == 200 and response["Content-Type"].startswith("text/html")
    assert proc.poll() is None
