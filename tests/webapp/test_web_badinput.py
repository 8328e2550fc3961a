"""Bad and hostile input to the web app (issue 11), each with what the user
must see: downloads that hold nothing but the run's own regular files,
request bodies bounded before they are read, friendly 400s for bad
overrides with no orphan files, the app's own error pages, and no server
paths in events, reports or pages."""
from __future__ import annotations

import asyncio
import io
import json
import os
import socket
import tempfile
import zipfile
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import IntegrityError
from django.urls import reverse
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from lego_core.events import RunFailed, RunFinished
from webapp.runs.models import Run, RunEvent

pytestmark = [pytest.mark.badinput, pytest.mark.django_db]

SECRET = "DJANGO_SECRET_KEY=planted-secret-value-0123456789"


# --- helpers -------------------------------------------------------------------


@pytest.fixture
def secrets_outside(tmp_path) -> dict[str, Path]:
    """Files an attacker wants, outside any run folder: a stand-in for the
    settings' secret (a file) and the database (beside MEDIA_ROOT, as
    var/db.sqlite3 sits beside var/media), and a folder of another user's."""
    secret = tmp_path / "secret.env"
    secret.write_text(SECRET)
    database = tmp_path / "db.sqlite3"  # MEDIA_ROOT is tmp_path/media
    database.write_text("pbkdf2_sha256$planted-password-hash " + SECRET)
    other = tmp_path / "other-run"
    other.mkdir()
    (other / "model.py").write_text("# bob's model " + SECRET)
    return {"secret": secret, "database": database, "other": other}


def finished_run(make_run, sample_report) -> Run:
    """A finished run of alice's laid out as a real one: its output folder
    at ``runs/<id>/output`` with the files LEGO writes."""
    run = make_run(state="finished", report=sample_report)
    Run.objects.filter(pk=run.pk).update(output_dir=f"runs/{run.id}/output")
    run.refresh_from_db()
    out = run.output_path
    (out / "kernels").mkdir(parents=True)
    (out / "optimized_model.py").write_text("# optimized\n")
    (out / "kernels" / "sp1.py").write_text("# kernel\n")
    (out / "report.json").write_text(json.dumps(sample_report))
    return run


OWN_FILES = {"kernels/sp1.py", "optimized_model.py", "report.json"}


def zip_members(response) -> dict[str, bytes]:
    """``{path inside the top folder: bytes}`` of a zip response."""
    archive = zipfile.ZipFile(io.BytesIO(b"".join(response.streaming_content)))
    return {name.split("/", 1)[1]: archive.read(name) for name in archive.namelist()}


def plant(out: Path, secrets: dict[str, Path]) -> None:
    """Everything an upload could leave in its own output folder to get
    files that are not its own into the zip."""
    os.symlink("/proc/self/environ", out / "environ")  # the web server's environment
    os.symlink(secrets["secret"], out / "secret_abs.txt")  # absolute link to a file outside
    os.symlink(os.path.relpath(secrets["database"], out / "kernels"), out / "kernels" / "db_rel.sqlite3")  # relative, outside
    os.symlink(secrets["other"], out / "other_abs")  # absolute link to a folder outside
    os.symlink(os.path.relpath(secrets["other"], out), out / "other_rel")  # relative link to a folder outside
    os.symlink("kernels", out / "kernels_again")  # relative link to a folder inside
    os.symlink(out / "optimized_model.py", out / "alias.py")  # absolute link to a file inside
    os.link(secrets["database"], out / "hardlinked.sqlite3")  # a hard link to a file outside
    os.mkfifo(out / "fifo")  # a read would block forever
    short = Path(tempfile.mkdtemp(dir=out.anchor + "tmp")) / "s"  # AF_UNIX paths are short
    with socket.socket(socket.AF_UNIX) as sock:  # a socket file, moved in
        sock.bind(str(short))
        os.rename(short, out / "sock")
    short.parent.rmdir()


def assert_only_own_files(members: dict[str, bytes]) -> None:
    assert set(members) == OWN_FILES, sorted(members)
    for name, data in members.items():
        assert SECRET.encode() not in data, name


# --- downloads: the run's own regular files only -----------------------------------


def test_zip_holds_only_the_runs_regular_files_whatever_was_planted(user_client, make_run, sample_report, secrets_outside):
    """The attack: an upload linking /proc/self/environ or the database into
    its output folder got the server's secret key or every password hash
    back in its zip."""
    run = finished_run(make_run, sample_report)
    plant(run.output_path, secrets_outside)
    response = user_client.get(reverse("runs:download", args=[run.id]))
    assert response.status_code == 200
    assert_only_own_files(zip_members(response))


def test_share_link_zip_holds_only_the_runs_regular_files(client, make_run, sample_report, secrets_outside):
    """The same attack through an anonymous share link."""
    run = finished_run(make_run, sample_report)
    plant(run.output_path, secrets_outside)
    token = run.create_share_token()
    response = client.get(reverse("runs:shared-download", args=[token]))
    assert response.status_code == 200
    assert_only_own_files(zip_members(response))


def test_api_zip_holds_only_the_runs_regular_files(user, make_run, sample_report, secrets_outside):
    run = finished_run(make_run, sample_report)
    plant(run.output_path, secrets_outside)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    response = api.get(reverse("api:download", args=[run.id]))
    assert response.status_code == 200
    assert_only_own_files(zip_members(response))


def test_an_output_folder_replaced_by_a_link_has_nothing_to_download(user_client, make_run, sample_report, secrets_outside):
    """The output folder itself swapped for a link to another run's folder:
    404 (nothing of the target), not a zip of the target."""
    run = finished_run(make_run, sample_report)
    out = run.output_path
    out.rename(out.with_name("real-output"))
    os.symlink(secrets_outside["other"], out)
    response = user_client.get(reverse("runs:download", args=[run.id]))
    assert response.status_code == 404
    assert SECRET not in response.content.decode()


def test_a_run_folder_replaced_by_a_link_has_nothing_to_download(user_client, make_run, sample_report, secrets_outside, media_root):
    """A folder above the output (``runs/<id>``) swapped for a link."""
    run = finished_run(make_run, sample_report)
    run_dir = media_root / "runs" / str(run.id)
    elsewhere = secrets_outside["other"].parent / "elsewhere"
    run_dir.rename(elsewhere)
    (elsewhere / "output" / "stolen.txt").write_text(SECRET)
    os.symlink(elsewhere, run_dir)
    assert user_client.get(reverse("runs:download", args=[run.id])).status_code == 404
    assert user_client.get(reverse("runs:report-html", args=[run.id])).status_code == 404


def test_report_html_planted_as_a_link_is_rebuilt_not_followed(client, make_run, sample_report, secrets_outside):
    """report.html linked to the secret: the share link's report.html is the
    run's rebuilt report, and the link is replaced by a regular file."""
    run = finished_run(make_run, sample_report)
    report = run.output_path / "report.html"
    os.symlink(secrets_outside["secret"], report)
    token = run.create_share_token()
    response = client.get(reverse("runs:shared-report-html", args=[token]))
    assert response.status_code == 200
    body = response.content.decode()
    assert SECRET not in body and "run-events" in body
    assert not report.is_symlink() and report.is_file()
    assert secrets_outside["secret"].read_text() == SECRET  # the target was not written either


@pytest.mark.parametrize("kind", ["hardlink", "fifo"])
def test_report_html_as_a_hard_link_or_fifo_is_rebuilt(user_client, make_run, sample_report, secrets_outside, kind):
    run = finished_run(make_run, sample_report)
    report = run.output_path / "report.html"
    if kind == "hardlink":
        os.link(secrets_outside["secret"], report)
    else:
        os.mkfifo(report)
    response = user_client.get(reverse("runs:report-html", args=[run.id]))
    assert response.status_code == 200
    assert SECRET not in response.content.decode() and "run-events" in response.content.decode()
    assert secrets_outside["secret"].read_text() == SECRET


def test_writing_report_html_never_writes_through_a_planted_temporary_link(user_client, make_run, sample_report, secrets_outside):
    """The report used to be written to ``.report.html.tmp`` first: a link
    planted under that name made the web server overwrite its target."""
    run = finished_run(make_run, sample_report)
    os.symlink(secrets_outside["secret"], run.output_path / ".report.html.tmp")
    response = user_client.get(reverse("runs:report-html", args=[run.id]))
    assert response.status_code == 200
    assert secrets_outside["secret"].read_text() == SECRET
    assert (run.output_path / "report.html").is_file() and not (run.output_path / "report.html").is_symlink()


def test_a_failed_runs_source_line_is_never_read_through_a_link(user_client, make_run, secrets_outside):
    """The page shows the upload's line the error points at; an upload that
    replaced itself with a link to the secret must not get it shown."""
    run = make_run(state="failed", error_message="boom", error_line=1)
    upload = Path(run.upload.path)
    upload.unlink()
    os.symlink(secrets_outside["secret"], upload)
    page = user_client.get(reverse("runs:detail", args=[run.id])).content.decode()
    assert "boom" in page and SECRET not in page


def test_the_download_still_holds_every_own_file_next_to_planted_ones(user_client, make_run, sample_report, secrets_outside):
    """Nothing of the run's own is lost: nested folders, report.html."""
    run = finished_run(make_run, sample_report)
    (run.output_path / "tests").mkdir()
    (run.output_path / "tests" / "test_sp1.py").write_text("# test\n")
    plant(run.output_path, secrets_outside)
    assert user_client.get(reverse("runs:report-html", args=[run.id])).status_code == 200  # writes report.html
    members = zip_members(user_client.get(reverse("runs:download", args=[run.id])))
    assert set(members) == OWN_FILES | {"tests/test_sp1.py", "report.html"}
    assert members["optimized_model.py"] == b"# optimized\n"


# --- bounded input: request bodies --------------------------------------------------


def asgi_call(app, scope_extra: dict, chunks, chunk_count: list | None = None):
    """Drive ``app`` with one HTTP request; ``chunks`` is an iterator of body
    parts.  Returns ``(status, headers, body, bytes the app read)``."""
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
        "scheme": "http", "path": "/api/runs/", "raw_path": b"/api/runs/", "query_string": b"",
        "root_path": "", "headers": [(b"host", b"testserver")], "client": ("127.0.0.1", 1), "server": ("testserver", 80),
    }
    scope.update(scope_extra)
    sent = []
    read = [0]
    parts = iter(chunks)

    async def receive():
        try:
            body = next(parts)
        except StopIteration:
            return {"type": "http.request", "body": b"", "more_body": False}
        read[0] += len(body)
        return {"type": "http.request", "body": body, "more_body": True}

    async def send(message):
        sent.append(message)

    asyncio.run(app(scope, receive, send))
    start = next(m for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return start["status"], dict(start["headers"]), body, read[0]


def endless(chunk: bytes = b"x" * 65536):
    while True:
        yield chunk


def test_a_300_mb_post_without_a_token_is_refused_before_one_byte_is_read(settings):
    """The attack: a 300 MB POST to /api/runs/ with no token raised the web
    process by 2.4 GB before the 401."""
    from webapp.config.asgi import application

    headers = [(b"host", b"testserver"), (b"content-length", b"300000000"), (b"content-type", b"multipart/form-data; boundary=x")]
    status, response_headers, body, read = asgi_call(application, {"headers": headers}, endless())
    assert (status, read) == (413, 0)
    assert response_headers[b"content-type"] == b"application/json"
    detail = json.loads(body)["detail"]
    assert "300,000,000 bytes" in detail and f"{settings.LEGO_MAX_REQUEST_BYTES:,} bytes" in detail
    assert "at most 1000 kB" in detail


def test_a_chunked_body_stops_being_read_past_the_limit(settings):
    """No Content-Length (chunked): read while it streams, cut at the limit."""
    from webapp.config.asgi import application

    headers = [(b"host", b"testserver"), (b"transfer-encoding", b"chunked"), (b"content-type", b"multipart/form-data; boundary=x")]
    status, _, body, read = asgi_call(application, {"headers": headers}, endless())
    assert status == 413
    assert settings.LEGO_MAX_REQUEST_BYTES < read <= settings.LEGO_MAX_REQUEST_BYTES + 65536
    assert "over the limit" in json.loads(body)["detail"]


def test_a_page_post_over_the_limit_gets_a_page_saying_so():
    from webapp.config.asgi import application

    headers = [(b"host", b"testserver"), (b"content-length", b"50000000")]
    status, response_headers, body, read = asgi_call(application, {"headers": headers, "path": "/runs/new/"}, endless())
    assert (status, read) == (413, 0)
    assert response_headers[b"content-type"].startswith(b"text/html")
    assert b"A model file may be at most 1000 kB" in body


@pytest.mark.parametrize("value", [b"12abc", b"-5", b"1e9"])
def test_a_malformed_content_length_is_a_400(value):
    from webapp.config.asgi import application

    status, _, body, read = asgi_call(application, {"headers": [(b"content-length", value)]}, endless())
    assert (status, read) == (400, 0)
    assert "Content-Length header is not a whole number" in json.loads(body)["detail"]


def test_a_body_under_the_limit_reaches_the_application_whole():
    from webapp.config.body_limit import ASGIBodyLimit

    seen = {}

    async def app(scope, receive, send):
        data = b""
        while True:
            message = await receive()
            data += message.get("body", b"")
            if not message.get("more_body"):
                break
        seen["body"] = data
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    status, _, body, read = asgi_call(ASGIBodyLimit(app), {"headers": [(b"content-length", b"300000")]}, [b"a" * 100000] * 3)
    assert (status, body, read, len(seen["body"])) == (200, b"ok", 300000, 300000)


def test_the_wsgi_entry_point_refuses_a_declared_body_over_the_limit():
    from webapp.config.wsgi import application

    got = {}

    class Unreadable(io.RawIOBase):
        def read(self, *args):
            raise AssertionError("the body was read")

    environ = {"REQUEST_METHOD": "POST", "PATH_INFO": "/api/runs/", "CONTENT_LENGTH": "300000000",
               "wsgi.input": Unreadable(), "SERVER_NAME": "testserver", "SERVER_PORT": "80", "wsgi.url_scheme": "http"}
    body = b"".join(application(environ, lambda status, headers: got.update(status=status)))
    assert got["status"].startswith("413")
    assert "over the limit" in json.loads(body)["detail"]


def test_form_fields_over_djangos_limit_are_a_400_page(user_client, good_model, settings, media_root):
    """Django's DATA_UPLOAD_MAX_MEMORY_SIZE bounds the fields other than the file."""
    response = user_client.post(reverse("runs:new"), {
        "upload": SimpleUploadedFile("m.py", good_model), "overrides": "rows=2\n" * 60000, "dtype": "fp32", "device": "cpu",
    })
    assert response.status_code == 400
    page = response.content.decode()
    assert "Bad request" in page and "larger than 256 kB. Send shorter overrides" in page
    assert "DATA_UPLOAD_MAX_MEMORY_SIZE" not in page
    assert not Run.objects.exists() and upload_files(media_root) == []


def test_a_model_file_over_the_upload_limit_says_so(user_client, settings, media_root):
    response = user_client.post(reverse("runs:new"), {
        "upload": SimpleUploadedFile("big.py", b"#" * (settings.LEGO_MAX_UPLOAD_BYTES + 1)), "dtype": "fp32", "device": "cpu",
    })
    assert response.status_code == 200
    assert "The file is larger than 1000 kB: it is 1.0 MB (1,000,001 bytes)." in response.content.decode()
    assert not Run.objects.exists() and upload_files(media_root) == []


# --- bounded input: overrides ----------------------------------------------------------


def upload_files(media_root: Path) -> list[Path]:
    return sorted(p for p in Path(media_root).rglob("*")) if Path(media_root).exists() else []


BAD_OVERRIDES = [
    ("rows=nan", "override rows='nan' is not a finite number"),
    ("rows=inf", "override rows='inf' is not a finite number"),
    ("rows=-inf", "override rows='-inf' is not a finite number"),
    ("rows=1e400", "override rows='1e400' is not a finite number"),
    ("rows=-1e400", "is not a finite number"),
    ("rows=NaN", "is not a finite number"),
    ("rows=Infinity", "is not a finite number"),
    ("rows=9223372036854775808", "override rows='9223372036854775808' is out of range"),
    ("rows=-9223372036854775809", "is out of range"),
    ("rows=" + "9" * 5000, "is out of range"),
    ("rows=" + "1" * 400 + ".5", "is not a finite number"),
    ("rows=[1]", "override rows=[1]: `rows` is an integer constant (rows = 4 in the file). Give rows a whole number."),
    ("rows=true", "override rows=true: `rows` is an integer constant (rows = 4 in the file)."),  # issue 28: not queued
    ("rows=[1, nan]", "override rows[1]='nan' is not a finite number"),
    ("rows=[" + "1," * 2000 + "]", "holds more than 1024 numbers"),
    ("rows=(3)", "override rows='(3)' is not a list or tuple of numbers. Write it as Python does"),
    ("rows=0x10", "is not a number"),
    ("rows=", "is not a number"),
]


@pytest.mark.parametrize("overrides, message", BAD_OVERRIDES)
def test_bad_overrides_on_the_page_show_the_form_error_and_store_nothing(user_client, good_model, media_root, queued, overrides, message):
    """The attack: nan, inf or 1e400 gave a 500 IntegrityError page and left an orphan upload folder."""
    before = upload_files(media_root)
    response = user_client.post(reverse("runs:new"), {
        "upload": SimpleUploadedFile("m.py", good_model), "overrides": overrides, "dtype": "fp32", "device": "cpu",
    })
    assert response.status_code == 200
    page = response.content.decode()
    assert message.replace("'", "&#x27;") in page, page[-3000:]
    assert not Run.objects.exists() and queued == [] and upload_files(media_root) == before


@pytest.mark.parametrize("overrides, message", BAD_OVERRIDES + [
    ('{"rows": NaN}', "is not a finite number"),
    ('{"rows": Infinity}', "is not a finite number"),
    ('{"rows": -Infinity}', "is not a finite number"),
    ('{"rows": 1e400}', "is not a finite number"),
    ('{"rows": 99999999999999999999}', "is out of range"),
    ('{"rows": [1]}', "override rows=[1]: `rows` is an integer constant (rows = 4 in the file). Give rows a whole number."),
    ('{"rows": [1, "a"]}', "override rows[1]='\"a\"' is not a number"),
    ('{"rows": [[[[[1]]]]]}', "override rows is nested more than 4 deep"),
    ('{"rows": {"a": 1}}', "is not a number"),
    ('{"rows": null}', "is not a number"),
    ('[1, 2]', "overrides must be a JSON object"),
])
def test_bad_overrides_on_the_api_are_a_json_400_and_store_nothing(api, good_model, media_root, queued, overrides, message):
    before = upload_files(media_root)
    response = api.post(reverse("api:runs"), {"model": SimpleUploadedFile("m.py", good_model), "overrides": overrides}, format="multipart")
    assert response.status_code == 400, response.content
    assert response["Content-Type"] == "application/json"
    errors = response.json()["errors"]["overrides"]
    assert any(message in m for m in errors), errors
    assert not Run.objects.exists() and queued == [] and upload_files(media_root) == before


def test_non_finite_overrides_say_how_to_fix_them(api, good_model, queued):
    response = api.post(reverse("api:runs"), {"model": SimpleUploadedFile("m.py", good_model), "overrides": "rows=nan"}, format="multipart")
    assert response.json()["errors"]["overrides"] == [
        "override rows='nan' is not a finite number. Give rows a finite value: nan, inf and numbers beyond ±1.8e308 cannot be used."
    ]
    response = api.post(reverse("api:runs"), {"model": SimpleUploadedFile("m.py", good_model), "overrides": "rows=" + "9" * 30}, format="multipart")
    assert response.json()["errors"]["overrides"] == [
        f"override rows='{'9' * 30}' is out of range. Give rows a whole number from -2**63 to 2**63-1 (it must fit in 64 bits)."
    ]


@pytest.mark.parametrize("body", [
    '{"overrides": {"rows": NaN}}',
    '{"overrides": {"rows": 1e400}}',
    '{"model": 5, "dtype": ["fp32"]}',
    "not json at all",
])
def test_json_bodies_with_bad_values_are_a_json_400(api, media_root, queued, body):
    before = upload_files(media_root)
    response = api.post(reverse("api:runs"), body, content_type="application/json")
    assert response.status_code == 400, response.content
    assert response["Content-Type"] == "application/json"
    assert response.json()
    assert not Run.objects.exists() and upload_files(media_root) == before


@pytest.mark.parametrize("field, value, message", [
    ("dtype", "fp64", "Use one of: fp32, bf16, fp16."),
    ("device", "tpu", "Use one of: cpu, cuda."),
])
def test_wrong_choices_are_a_json_400_and_store_nothing(api, good_model, media_root, queued, field, value, message):
    before = upload_files(media_root)
    response = api.post(reverse("api:runs"), {"model": SimpleUploadedFile("m.py", good_model), field: value}, format="multipart")
    assert response.status_code == 400
    assert any(message in m for m in response.json()["errors"][field])
    assert upload_files(media_root) == before


def test_a_row_that_cannot_be_saved_leaves_no_upload_behind(user_client, good_model, media_root, queued, monkeypatch):
    """Whatever makes the insert fail after the file was stored, the file
    and its run folder go again (the user gets the error page, not a file left over)."""
    def refuse(*args, **kwargs):
        raise IntegrityError("refused by the database")

    monkeypatch.setattr(Run, "_do_insert", refuse)
    user_client.raise_request_exception = False
    before = upload_files(media_root)
    response = user_client.post(reverse("runs:new"), {
        "upload": SimpleUploadedFile("m.py", good_model), "overrides": "rows=2", "dtype": "fp32", "device": "cpu",
    })
    assert response.status_code == 500
    assert "Something went wrong" in response.content.decode()
    assert "IntegrityError" not in response.content.decode()
    assert upload_files(media_root) == before and queued == []


def test_good_overrides_still_work(api, good_model, queued):
    model = good_model.replace(b"rows = 4\n", b"rows = 4\neps = 1e-5\nneg = -1\non = False\n")  # overrides name real constants
    response = api.post(reverse("api:runs"), {
        "model": SimpleUploadedFile("m.py", model), "overrides": "rows=9223372036854775807, eps=1e-300, neg=-2, on=true",
    }, format="multipart")
    assert response.status_code == 201, response.content
    assert Run.objects.get().overrides == {"rows": 2**63 - 1, "eps": 1e-300, "neg": -2, "on": True}


# --- pages for people ------------------------------------------------------------------


DEBUG_PAGE_MARKS = ("Using the URLconf", "URLconf defined in", "Traceback", "DEBUG = True", "django.core", "runs/<uuid:run_id>")


def test_a_revoked_share_link_gets_the_apps_own_404_page(client, make_run, sample_report):
    """The attack: after a revoke, the share-link holder got Django's debug
    404 (under make run) listing every URL pattern."""
    run = finished_run(make_run, sample_report)
    token = run.create_share_token()
    run.revoke_share_token()
    for name in ("runs:shared", "runs:shared-download", "runs:shared-report-html"):
        response = client.get(reverse(name, args=[token]))
        assert response.status_code == 404
        page = response.content.decode()
        assert "Not found" in page and "the link is wrong or was revoked" in page
        assert not any(mark in page for mark in DEBUG_PAGE_MARKS), page


def test_an_unknown_page_gets_the_apps_own_404(client, user):
    response = client.get("/no/such/page/")
    page = response.content.decode()
    # "Back to your runs" only for someone logged in (issue 28: a logged-out visitor has no runs)
    assert response.status_code == 404 and "Not found" in page and "Back to your runs" not in page
    assert not any(mark in page for mark in DEBUG_PAGE_MARKS)
    client.force_login(user)
    page = client.get("/no/such/page/").content.decode()
    assert "Not found" in page and "Back to your runs" in page


def test_make_run_settings_do_not_show_debug_pages(tmp_path):
    """``make run`` uses settings.local: DEBUG is off unless DJANGO_DEBUG=1,
    and runserver still serves the static files (``--insecure``)."""
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in os.environ.items() if k not in ("DJANGO_DEBUG", "DJANGO_SETTINGS_MODULE")}
    code = "import webapp.config.settings.local as s; print(s.DEBUG)"
    result = subprocess.run([sys.executable, "-c", code], env={**env, "LEGO_VAR_DIR": str(tmp_path / "var")},
                            capture_output=True, text=True, timeout=60, cwd=repo)
    assert result.stdout.strip() == "False", result.stderr
    assert "runserver --noreload --insecure" in (repo / "Makefile").read_text()


def test_a_server_error_on_a_page_is_the_apps_own_500_without_details(user_client, make_run, monkeypatch):
    run = make_run()

    def explode(*args, **kwargs):
        raise RuntimeError("/srv/secret/path/settings.py exploded")

    monkeypatch.setattr("webapp.runs.views.presenters.run_page_context", explode)
    user_client.raise_request_exception = False
    response = user_client.get(reverse("runs:detail", args=[run.id]))
    page = response.content.decode()
    assert response.status_code == 500 and "Something went wrong" in page
    assert "/srv/secret" not in page and "RuntimeError" not in page


def test_a_server_error_on_the_api_is_json(api, make_run, monkeypatch):
    run = make_run()

    def explode(*args, **kwargs):
        raise RuntimeError("/srv/secret/path exploded")

    monkeypatch.setattr("webapp.runs.api.run_json", explode)
    api.raise_request_exception = False
    response = api.get(reverse("api:run", args=[run.id]))
    assert response.status_code == 500
    assert response["Content-Type"] == "application/json"
    assert "/srv/secret" not in response.content.decode()
    assert "server met an error" in response.json()["detail"]


# --- no server paths in events, reports and pages ------------------------------------


def server_path_marks(settings) -> list[str]:
    return [str(settings.MEDIA_ROOT), str(Path(settings.MEDIA_ROOT).resolve()), str(settings.BASE_DIR)]


def test_no_server_paths_in_events_reports_or_pages(user_client, make_run, sample_report, settings, client):
    """The attack: report.html (and every viewer's events) carried the
    server's output path and the upload's path."""
    from webapp.runs import execution, report_html

    run = finished_run(make_run, sample_report)
    Run.objects.filter(pk=run.pk).update(state=Run.State.RUNNING)  # finish() ends only a running run
    run.refresh_from_db()
    out, upload = run.output_path, Path(run.upload.path)
    recorder = execution.EventRecorder(run)
    recorder(RunFailed(error_type="ProblemError", message=f'File "{upload}", line 3: in {settings.BASE_DIR}/lego_core/load/problem.py',
                       path=str(upload), line=3))
    recorder(RunFinished(out_dir=str(out), summary={"kernel": f"{out}/kernels/sp1.py"}))
    report = {**sample_report, "output": str(out), "kernels": [f"{out}/kernels/sp1.py"]}
    execution.finish(run, report)
    run.refresh_from_db()
    token = run.create_share_token()

    shown = {
        "report.html": report_html.report_html_bytes(run, out).decode(),
        "stored events": json.dumps([e.data for e in run.events.all()]),
        "stored report": json.dumps(run.report),
        "run page": user_client.get(reverse("runs:detail", args=[run.id])).content.decode(),
        "shared page": client.get(reverse("runs:shared", args=[token])).content.decode(),
        "api events": json.dumps(user_client.get(reverse("api:events", args=[run.id])).json()),
        "api run": json.dumps(user_client.get(reverse("api:run", args=[run.id])).json()),
    }
    for where, text in shown.items():
        for mark in server_path_marks(settings):
            assert mark not in text, f"{mark} in {where}"
    events = [e.data for e in run.events.order_by("seq")]
    assert events[0]["path"] == "model.py" and 'File "model.py", line 3: in lego_core/load/problem.py' in events[0]["message"]
    assert events[1]["out_dir"] == "." and events[1]["summary"]["kernel"] == "kernels/sp1.py"
    assert run.report["output"] == "." and run.report["kernels"] == ["kernels/sp1.py"]


def test_events_stored_before_paths_were_scrubbed_are_shown_without_them(user_client, make_run, settings):
    run = make_run(state="failed", error_message=f"cannot read {settings.MEDIA_ROOT}/runs/{{id}}/upload/model.py")
    upload = Path(run.upload.path)
    RunEvent.objects.create(run=run, seq=1, type="run_failed", data={"type": "run_failed", "message": "x", "path": str(upload)})
    Run.objects.filter(pk=run.pk).update(error_message=f"cannot read {upload}")
    body = json.dumps(user_client.get(reverse("api:events", args=[run.id])).json())
    page = user_client.get(reverse("runs:detail", args=[run.id])).content.decode()
    status = json.dumps(user_client.get(reverse("api:run", args=[run.id])).json())
    for text in (body, page, status):
        assert str(settings.MEDIA_ROOT) not in text
    assert "cannot read model.py" in page


def test_kernel_source_with_slashes_is_left_as_it_was(make_run):
    """Only known server folders are replaced, never code that has slashes."""
    from webapp.runs import server_paths

    code = "y = (x)/a/b // 2  # see /usr/share/doc and a/b/c"
    run = make_run()
    assert server_paths.scrub({"source": code}, run.pk) == {"source": code}


# --- the server itself: make run's runserver (daphne) --------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def rss_peak_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def post_streaming(port: int, head: bytes, chunk: bytes, total: int) -> tuple[int, bytes]:
    """Send ``head`` and then ``chunk`` until ``total`` bytes or the server
    stops taking them; returns ``(bytes of body sent, the reply)``."""
    sent, reply = 0, b""
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.settimeout(20)
        sock.sendall(head)
        try:
            while sent < total:
                sock.sendall(chunk)
                sent += len(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass
        try:
            while data := sock.recv(65536):
                reply += data
        except (ConnectionResetError, socket.timeout):
            pass
    return sent, reply


@pytest.mark.parametrize("server, chunked", [("runserver", False), ("runserver", True), ("daphne-cli", False)])
def test_the_server_refuses_a_300_mb_body_while_it_streams(spawn, tmp_path, server, chunked):
    """The attack against ``make run``: daphne took the whole 300 MB body in
    (3.6 GB resident, measured) before Django or any middleware saw it.
    ``runserver`` is what ``make run`` serves with; ``python -m
    webapp.server`` is daphne's command line the Docker image uses."""
    import sys
    import time

    repo = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE", "DJANGO_DEBUG")}
    env.update(DJANGO_SETTINGS_MODULE="webapp.config.settings.local", LEGO_VAR_DIR=str(tmp_path / "var"))
    port = free_port()
    argv = {
        "runserver": [sys.executable, "manage.py", "runserver", "--noreload", "--insecure", f"127.0.0.1:{port}"],
        "daphne-cli": [sys.executable, "-m", "webapp.server", "-b", "127.0.0.1", "-p", str(port), "webapp.config.asgi:application"],
    }[server]
    server, log = spawn(server, argv, env)
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), 0.5).close()
            break
        except OSError:
            assert server.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
    before_kb = rss_peak_kb(server.pid)
    total = 300_000_000
    if chunked:
        head = b"POST /api/runs/ HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n"
        chunk = b"100000\r\n" + b"x" * 0x100000 + b"\r\n"
    else:
        head = (b"POST /api/runs/ HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: multipart/form-data; boundary=x\r\n"
                b"Content-Length: %d\r\n\r\n" % total)
        chunk = b"x" * 0x100000
    sent, reply = post_streaming(port, head, chunk, total)
    assert reply.startswith(b"HTTP/1.1 413"), reply[:300]
    assert b"over the limit of 2,048,576 bytes" in reply and b"application/json" in reply
    assert sent < 64_000_000, sent  # refused while streaming, not after 300 MB
    assert rss_peak_kb(server.pid) - before_kb < 100_000  # under 100 MB more, never the body's size
    # and the server still answers
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(b"GET /no/such/page/ HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        page = b""
        while data := sock.recv(65536):
            page += data
    assert page.startswith(b"HTTP/1.1 404") and b"Not found" in page and b"URLconf" not in page


def test_api_form_fields_over_djangos_limit_are_a_json_400(api, good_model, media_root, queued):
    response = api.post(reverse("api:runs"), {"model": SimpleUploadedFile("m.py", good_model), "overrides": "rows=2\n" * 60000},
                        format="multipart")
    assert response.status_code == 400
    assert response["Content-Type"] == "application/json"
    assert response.json()["detail"] == (
        "The form fields other than the file are larger than 256 kB. Send shorter overrides (only the constants you change)."
    )
    assert not Run.objects.exists() and upload_files(media_root) == []


def test_many_files_in_one_request_are_a_json_400(api, good_model, media_root, queued):
    files = {f"extra{i}": SimpleUploadedFile(f"e{i}.py", b"x") for i in range(5)}
    response = api.post(reverse("api:runs"), {"model": SimpleUploadedFile("m.py", good_model), **files}, format="multipart")
    assert response.status_code == 400
    assert response.json()["detail"] == "The request has more than 4 files. Send the model file alone."
    assert not Run.objects.exists() and upload_files(media_root) == []


# --- bounded text: an upload chooses its own error message ---------------------------


def test_a_50_mb_error_message_is_stored_and_shown_bounded(user_client, make_run):
    """An upload raising ``ValueError("x" * 50_000_000)`` put 50 MB in the
    run's row, its closing event and every viewer's websocket."""
    from lego_core.events import RunFailed
    from webapp.runs import execution, text_bounds

    run = make_run()
    Run.objects.filter(pk=run.pk).update(state=Run.State.RUNNING)
    run.refresh_from_db()
    huge = "model.py:1: ValueError while importing the file: " + "x" * 50_000_000
    recorder = execution.EventRecorder(run)
    recorder(RunFailed(error_type="ProblemError", message=huge, line=1))
    recorder.record({"type": "transcript", "node_id": "n", "agent": "a", "role": "assistant", "content": "y" * 3_000_000})
    execution.fail(run, recorder, huge, 1, error_type="ProblemError")
    run.refresh_from_db()
    assert run.state == "failed" and run.error_message.startswith("model.py:1: ValueError")
    assert len(run.error_message) <= text_bounds.MAX_MESSAGE_CHARS
    kept = run.error_message.index(" … (")
    assert run.error_message.endswith(f"({len(huge) - kept:,} more characters cut)") and huge.startswith(run.error_message[:kept])
    failed, transcript = [e.data for e in run.events.order_by("seq")]
    assert failed["message"] == run.error_message
    assert len(transcript["content"]) <= text_bounds.MAX_EVENT_TEXT_CHARS
    page = user_client.get(reverse("runs:detail", args=[run.id])).content.decode()
    assert len(page) < 1_000_000 and "more characters cut" in page


# --- refused before queueing: what the page and the API know without running the file (issue 28) ---------


def png_bytes() -> bytes:
    """A real 4x1 PNG image, as a user's screenshot renamed model.py would be."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    pixels = zlib.compress(b"\x00" + b"\xff\x00\x00" * 4)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 4, 1, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", pixels) + chunk(b"IEND", b""))


NOT_SOURCE_FIX = ("Fix: upload the model's Python source file (text: `class Model(nn.Module)`, `get_inputs()`, "
                  "`get_init_inputs()`); renaming another file to .py does not make it one.")
SIGN_FIX = "Give rows a whole number of at least 1 (0 only where the model allows it, such as a padding)."

# (case, file (None: the good model), overrides, the form's field, the message): each was queued and failed
# 15-22 s later on a worker; now the form and the API refuse it at submit with the same words
PRE_QUEUE = [
    ("syntax error", "broken", "", "upload", "m.py:6: syntax error: expected ':'. Fix: correct the Python syntax on that line."),
    ("syntax error the parser lets through", b"rows = 4\nreturn rows\n", "", "upload",
     "m.py:2: syntax error: 'return' outside function. Fix: correct the Python syntax on that line."),
    ("a PNG renamed .py", png_bytes(), "", "upload", f"m.py: the file is not a Python source file: it is a PNG image, by its first bytes. {NOT_SOURCE_FIX}"),
    ("a zip renamed .py", b"PK\x03\x04\x14\x00\x00\x00\x08\x00" + bytes(range(256)) * 4, "", "upload",
     "m.py: the file is not a Python source file: it is a zip archive (or a file in a zip format: a torch.save checkpoint, "
     f"a .docx, a wheel), by its first bytes. {NOT_SOURCE_FIX}"),
    ("binary with no known signature", bytes((i * 131 + 7) % 256 for i in range(4096)), "", "upload",
     f"m.py: the file is not a Python source file: it holds binary data, bytes no text file holds. {NOT_SOURCE_FIX}"),
    ("an override naming no constant", None, "cols=3", "overrides", "override cols=3: the file has no module-level constant `cols`. Override one of: rows."),
    ("a true/false for an integer", None, "rows=true", "overrides",
     "override rows=true: `rows` is an integer constant (rows = 4 in the file). Give rows a whole number."),
    ("a float for an integer", None, "rows=2.5", "overrides",
     "override rows=2.5: `rows` is an integer constant (rows = 4 in the file). Give rows a whole number."),
    ("a negative size", None, "rows=-5", "overrides",
     f"override rows=-5: `rows` is a positive integer constant, a size or count (rows = 4 in the file); -5 is negative. {SIGN_FIX}"),
]


def pre_queue_file(source, broken_model: bytes, good_model: bytes) -> bytes:
    return {None: good_model, "broken": broken_model}.get(source, source) if not isinstance(source, bytes) else source


@pytest.mark.parametrize("case, source, overrides, field, message", PRE_QUEUE, ids=[c[0] for c in PRE_QUEUE])
def test_what_the_file_shows_is_refused_at_submit_on_the_page_and_the_api_with_the_same_words_and_nothing_queued(
    user_client, api, good_model, broken_model, media_root, queued, case, source, overrides, field, message,
    django_capture_on_commit_callbacks,
):
    from django.utils.html import escape

    data = pre_queue_file(source, broken_model, good_model)
    with django_capture_on_commit_callbacks(execute=True) as callbacks:  # what would be sent to the queue once saved
        page = user_client.post(reverse("runs:new"), {"upload": SimpleUploadedFile("m.py", data), "overrides": overrides,
                                                      "dtype": "fp32", "device": "cpu"})
        response = api.post(reverse("api:runs"), {"model": SimpleUploadedFile("m.py", data), "overrides": overrides}, format="multipart")
    assert callbacks == [] and queued == []
    assert page.status_code == 200
    shown = page.content.decode()
    assert escape(message) in shown, shown[-3000:]
    assert response.status_code == 400, response.content
    assert response.json()["errors"][{"upload": "model"}.get(field, field)] == [message]  # the same text as the page's
    assert not Run.objects.exists() and queued == [] and upload_files(media_root) == []


def test_the_constants_the_form_reads_on_choosing_a_file_say_what_submit_says(user_client, broken_model):
    """The form flagged the syntax error as soon as the file was chosen, and
    then queued it anyway; now both say the same and submit refuses it."""
    response = user_client.post(reverse("runs:constants"), {"upload": SimpleUploadedFile("m.py", broken_model)})
    assert response.status_code == 400
    assert response.json()["error"] == PRE_QUEUE[0][4]
    response = user_client.post(reverse("runs:constants"), {"upload": SimpleUploadedFile("m.py", png_bytes())})
    assert response.json()["error"] == PRE_QUEUE[2][4]


@pytest.mark.parametrize("overrides", ["dim=-1", "shift=-2", "k=-3", "neg=-5", "rows=0", "eps=-1.0"])
def test_negative_positions_offsets_and_negative_constants_are_still_accepted(api, queued, overrides, django_capture_on_commit_callbacks):
    """Only a size goes negative wrongly: a dim, a shift (by name or as the
    file passes it), a constant the file makes negative, zero and floats pass."""
    source = (b"import torch\nrows = 4\ndim = 1\nshift = 2\nk = 2\nneg = -1\neps = 1e-5\n\n\nclass Model(torch.nn.Module):\n"
              b"    def forward(self, x):\n        return torch.roll(x, shifts=k, dims=dim) * eps\n\n\n"
              b"def get_inputs():\n    return [torch.randn(rows, 8)]\n\n\ndef get_init_inputs():\n    return []\n")
    with django_capture_on_commit_callbacks(execute=True):
        response = api.post(reverse("api:runs"), {"model": SimpleUploadedFile("m.py", source), "overrides": overrides}, format="multipart")
    assert response.status_code == 201, response.content
    assert queued == [str(Run.objects.get().id)]


def test_the_nan_message_is_the_same_with_its_fix_on_the_page_and_the_api(user_client, api, good_model, queued):
    from django.utils.html import escape

    message = "override rows='nan' is not a finite number. Give rows a finite value: nan, inf and numbers beyond ±1.8e308 cannot be used."
    page = user_client.post(reverse("runs:new"), {"upload": SimpleUploadedFile("m.py", good_model), "overrides": "rows=nan",
                                                  "dtype": "fp32", "device": "cpu"}).content.decode()
    assert f"<li>{escape(message)}</li>" in page
    for sent in ("rows=nan", '{"rows": NaN}'):
        response = api.post(reverse("api:runs"), {"model": SimpleUploadedFile("m.py", good_model), "overrides": sent}, format="multipart")
        assert response.json()["errors"]["overrides"] == [message]
    assert not Run.objects.exists() and queued == []


# --- a 50 MB upload from the form: the site's page, the file's size and limit, the way back ---------------


def test_a_50_mb_form_upload_gets_the_sites_page_with_the_files_size_and_the_limit():
    """It was a bare unstyled page saying the whole request was "50,000,000
    bytes over the limit" (read: 50 MB too many) and the typed fields were lost."""
    from webapp.config.asgi import application

    headers = [(b"host", b"testserver"), (b"content-length", b"50000000"), (b"content-type", b"multipart/form-data; boundary=x")]
    status, response_headers, body, read = asgi_call(application, {"headers": headers, "path": "/runs/new/"}, endless())
    assert (status, read) == (413, 0)
    page = body.decode()
    assert response_headers[b"content-type"].startswith(b"text/html")
    assert 'class="topbar"' in page and "css/app.css" in page  # the site's template (base.html)
    assert "File too large" in page and "Your upload is 50.0 MB (50,000,000 bytes" in page
    assert "A model file may be at most 1000 kB" in page and "nothing was stored and no run was made" in page
    assert 'id="back-to-form"' in page and "Back button returns to it with what you typed" in page
    assert "bytes over the limit" not in page


def test_a_streamed_form_upload_over_the_limit_gets_the_same_page_without_a_size():
    from webapp.config.asgi import application

    headers = [(b"host", b"testserver"), (b"transfer-encoding", b"chunked")]
    status, _, body, _ = asgi_call(application, {"headers": headers, "path": "/runs/new/"}, endless())
    page = body.decode()
    assert status == 413 and 'class="topbar"' in page and "Your upload is over 2,048,576 bytes." in page
    assert "A model file may be at most 1000 kB" in page


def test_the_apis_413_says_the_size_and_then_the_limit(settings):
    from webapp.config.asgi import application

    headers = [(b"host", b"testserver"), (b"content-length", b"50000000")]
    _, _, body, _ = asgi_call(application, {"headers": headers}, endless())
    assert json.loads(body)["detail"] == ("The request body is 50,000,000 bytes (50.0 MB), over the limit of 2,048,576 bytes. "
                                          "A model file may be at most 1000 kB; upload the .py file alone.")


def test_the_form_refuses_a_file_over_the_limit_before_sending_it(user_client, settings):
    """upload_form.js reads the limit from the form and stops the submit
    (what was typed stays); the server's own check says the file's size."""
    page = user_client.get(reverse("runs:new")).content.decode()
    assert f'data-max-upload-bytes="{settings.LEGO_MAX_UPLOAD_BYTES}"' in page
    script = (Path(__file__).resolve().parents[2] / "frontend" / "js" / "upload_form.js").read_text()
    assert "event.preventDefault()" in script and "upload-too-large" in script
    response = user_client.post(reverse("runs:new"), {
        "upload": SimpleUploadedFile("big.py", b"#" * 1_500_000), "overrides": "rows=2", "dtype": "fp32", "device": "cpu",
    })
    assert "The file is larger than 1000 kB: it is 1.5 MB (1,500,000 bytes)." in response.content.decode()
    assert not Run.objects.exists()


# --- messages of runs that fail: a line only where there is one, torch's own words -------------------------


def test_an_error_with_no_line_never_says_fix_the_code_at_that_line(tmp_path):
    """``get_inputs()`` giving forward more inputs than it takes: the
    TypeError has no line of the file, and the fix said "at that line"."""
    from hostile_uploads import CORPUS
    from lego_core.load.problem import ProblemError, ProblemSpec, load_problem

    entry = next(h for h in CORPUS if h.name == "forward_argument_count")
    path = tmp_path / "forward_argument_count.py"
    path.write_bytes(entry.source({}))
    with pytest.raises(ProblemError) as caught:
        load_problem(ProblemSpec(str(path), {}))
    text = str(caught.value)
    assert caught.value.line is None and "at that line" not in text
    assert all(words in text for words in entry.says), text


def test_a_capture_failure_quotes_torch_export_instead_of_pointing_above(tmp_path):
    """The run page and the command line said "read torch.export's message
    above"; nothing was above.  The message now carries torch's own words."""
    from hostile_uploads import CORPUS
    from lego_core.load.capture import capture_graph
    from lego_core.load.problem import ProblemError, ProblemSpec, load_problem

    entry = next(h for h in CORPUS if h.name == "capture_fails_on_data_dependent_control_flow")
    path = tmp_path / "capture.py"
    path.write_bytes(entry.source({}))
    with pytest.raises(ProblemError) as caught:
        capture_graph(load_problem(ProblemSpec(str(path), {})))
    text = str(caught.value)
    assert all(words in text for words in entry.says) and not any(words in text for words in entry.never), text


# --- server paths: the runs list, the kernel cache ---------------------------------------------------------


def test_the_runs_list_shows_a_failed_runs_reason_without_server_paths(user_client, make_run, settings):
    run = make_run(state="failed")
    upload = Path(run.upload.path)
    Run.objects.filter(pk=run.pk).update(error_message=f"cannot read {upload}: {settings.MEDIA_ROOT}/x")  # stored before scrubbing
    page = user_client.get(reverse("runs:list")).content.decode()
    assert "cannot read model.py: media/x" in page
    for mark in server_path_marks(settings):
        assert mark not in page


def test_a_kernel_cache_outside_var_is_not_shown_either(make_run, settings, tmp_path):
    from webapp.runs import server_paths

    settings.LEGO_CACHE_DIR = str(tmp_path / "srv-cache")
    run = make_run()
    said = server_paths.scrub({"message": f"cached kernel {settings.LEGO_CACHE_DIR}/user-1/ab/cd.json"}, run.pk)
    assert said == {"message": "cached kernel kernel-cache/user-1/ab/cd.json"}
