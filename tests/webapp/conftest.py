"""Fixtures for the web app's tests: users, runs, media in a temporary folder."""
from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
from django.core.files.base import ContentFile

from webapp.runs.models import Run

GOOD_MODEL = b'''import torch
import torch.nn as nn

rows = 4


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x) * 2


def get_inputs():
    return [torch.randn(rows, 8)]


def get_init_inputs():
    return []
'''

# the syntax error is on line 6
BROKEN_MODEL = b'''import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x) return x


def get_inputs():
    return [torch.randn(2, 2)]


def get_init_inputs():
    return []
'''


@pytest.fixture
def good_model() -> bytes:
    return GOOD_MODEL


@pytest.fixture
def broken_model() -> bytes:
    """A model file with a syntax error on line 6."""
    return BROKEN_MODEL


@pytest.fixture(autouse=True)
def media_root(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    return settings.MEDIA_ROOT


@pytest.fixture
def user(django_user_model):
    return django_user_model.objects.create_user("alice", password="pw-alice")


@pytest.fixture
def other_user(django_user_model):
    return django_user_model.objects.create_user("bob", password="pw-bob")


@pytest.fixture
def user_client(client, user):
    client.force_login(user)
    return client


@pytest.fixture
def sample_report():
    """A report.json in the shape lego_core writes."""
    return {
        "model": "scores_chain",
        "overrides": {"rows": 16},
        "dtype": "fp32",
        "device": "cpu",
        "subproblems": [
            {
                "id": "sp0", "label": "proj", "module_path": "proj", "kind": "gemm",
                "ops": ["aten.addmm.default"], "input_shapes": [[16, 40]], "output_shapes": [[16, 30]],
                "implementation": "library", "kernel": None, "max_abs_error": None,
                "time_ms": 0.0125, "time_kind": "estimated", "baseline_ms": 0.0125,
            },
            {
                "id": "sp1", "label": "softmax chain", "module_path": "", "kind": "rows",
                "ops": ["aten.div.Tensor", "aten._softmax.default", "aten.logsumexp.default"],
                "input_shapes": [[16, 30]], "output_shapes": [[16]],
                "implementation": "triton", "kernel": "kernels/sp1.py", "max_abs_error": 2.4e-07,
                "time_ms": 0.0031, "time_kind": "estimated", "baseline_ms": 0.0212,
            },
            {
                "id": "sp2", "label": "proj · view", "module_path": "proj", "kind": "layout",
                "ops": ["aten.view.default"], "input_shapes": [[16, 30]], "output_shapes": [[480]],
                "implementation": "library", "kernel": None, "max_abs_error": None,
                "time_ms": 0.0, "time_kind": "estimated", "baseline_ms": 0.0,
            },
        ],
        "plan": {"cost_ms": 0.0156, "cost_kind": "estimated", "baseline_ms": 0.0337, "speedup": 2.16},
        "end_to_end": {"passed": True, "max_abs_error": 4.8e-07, "norm_rel_error": 1.1e-07, "seed": 4242},
        "metrics": {
            "agent_calls": 3, "wall_time_s": 4.2, "subproblems": 2, "triton": 1, "library": 1, "reused_nodes": 0,
            "time_to_first_plan_s": 0.4, "time_to_first_agent_call_s": 0.7, "time_to_first_improved_plan_s": 1.6,
            "signatures": {
                "distinct": 2, "attempted": 1, "won": 1, "above_1pct": 2, "above_1pct_attempted": 1,
                "not_attempted": [{"label": "proj", "share": 0.371, "why": "the search budget ran out first"}],
            },
        },
        # seconds per phase (lego_core.phases); the busy ones inside the search can exceed its wall
        "phases_s": {
            "load": 0.8, "capture": 0.6, "construct": 0.1, "search": 2.5, "baseline_timing": 0.3, "agent_calls": 3.1,
            "verification": 0.9, "mutation": 0.2, "compose": 0.05, "e2e_check": 0.12, "_wall": 4.2,
        },
    }  # fmt: skip


@pytest.fixture
def make_run(user):
    """``make_run(state=..., owner=..., source=..., **fields)`` saves a Run with an upload."""

    def make(owner=None, source: bytes = GOOD_MODEL, filename: str = "model.py", **fields) -> Run:
        run = Run(owner=owner or user, original_filename=filename, **fields)
        run.upload.save(filename, ContentFile(source), save=False)
        run.save()
        return run

    return make


@pytest.fixture
def api(user):
    """An APIClient that sends alice's API token (test_web_api.py's own also enforces CSRF)."""
    from rest_framework.authtoken.models import Token
    from rest_framework.test import APIClient

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    return client


@pytest.fixture
def queued(monkeypatch):
    """Run ids sent to the run queue (``tasks.queue_run``), instead of sending them."""
    sent = []
    monkeypatch.setattr("webapp.runs.tasks.queue_run", lambda run_id: sent.append(run_id))
    return sent


# --- processes and downloads, for the tests with a real worker ----------------

REPO = Path(__file__).resolve().parents[2]

CHECK_DOWNLOAD = """
import importlib.util, sys, torch
folder, model_path, overrides = sys.argv[1], sys.argv[2], eval(sys.argv[3])
spec = importlib.util.spec_from_file_location("reference", model_path)
ref = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ref)
for name, value in overrides.items():
    setattr(ref, name, value)
sys.path.insert(0, folder)
import optimized_model
torch.manual_seed(0)
model = ref.Model(*ref.get_init_inputs()).eval()
new = optimized_model.ModelNew(*ref.get_init_inputs()).eval()
new.load_state_dict(model.state_dict())
torch.manual_seed(987)  # inputs the optimizer never saw
inputs = ref.get_inputs()
with torch.no_grad():
    expected, got = model(*inputs), new(*inputs)
torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4)
print("MATCHES EAGER", tuple(got.shape))
"""


@pytest.fixture
def spawn(tmp_path):
    """``spawn(name, argv, env)`` starts a process in its own session with
    output to ``tmp_path/name.log``; every one is stopped at teardown."""
    started = []

    def start(name: str, argv: list, env: dict) -> tuple[subprocess.Popen, Path]:
        log = tmp_path / f"{name}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        started.append(proc)
        return proc, log

    yield start
    for proc in started:
        stop_group(proc)


def stop_group(proc: subprocess.Popen) -> None:
    """SIGTERM the process group we started; SIGKILL whatever is left."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            pass
    proc.wait(timeout=10)


def poll_until(predicate, timeout_s: float, what: str, log: Path | None = None, every_s: float = 0.5):
    """Call ``predicate`` until it returns something truthy; fail after ``timeout_s``
    with the tail of ``log``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every_s)
    tail = log.read_text(errors="replace")[-4000:] if log and log.exists() else ""
    pytest.fail(f"timed out after {timeout_s:.0f} s waiting for {what}\n{tail}")


@pytest.fixture
def service_env(settings) -> dict:
    """The environment of a server or worker process on this test's
    database (PostgreSQL) and this session's Redis and queues; skips the
    test when the settings are not PostgreSQL + Redis."""
    from django.db import connection

    db = connection.settings_dict
    if db["ENGINE"] != "django.db.backends.postgresql" or not settings.CELERY_BROKER_URL.startswith("redis"):
        pytest.skip("this test runs against PostgreSQL and Redis (see webapp/config/settings/test.py)")
    auth = db["USER"] + (f":{db['PASSWORD']}" if db["PASSWORD"] else "")
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "webapp.config.settings.test",
        "DATABASE_URL": f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}",
        "REDIS_URL": settings.REDIS_URL,
        "TRITON_INTERPRET": os.environ.get("TRITON_INTERPRET", "1"),
    }


@pytest.fixture
def start_worker(spawn, wait_for, media_root, settings, tmp_path, service_env):
    """``start_worker(name, *celery_args, **env)`` starts ``celery -A
    webapp.config worker`` on the test database, this session's queues and
    Redis, with MEDIA_ROOT shared and a kernel cache of its own (so agents
    are really asked), waits until it is ready and returns ``(proc, log)``.
    Without ``-Q`` it consumes the run queue."""

    def start(name: str, *celery_args: str, **extra_env: str) -> tuple[subprocess.Popen, Path]:
        env = {
            **service_env,
            "LEGO_VAR_DIR": str(media_root.parent),
            "LEGO_CACHE_DIR": str(tmp_path / "kernel-cache"),
            **extra_env,
        }
        argv = [sys.executable, "-m", "celery", "-A", "webapp.config", "worker", "--loglevel", "INFO",
                "--hostname", f"{name}-{settings.CELERY_TASK_DEFAULT_QUEUE}@%h",
                "--without-gossip", "--without-mingle", "--without-heartbeat", *celery_args]
        proc, log = spawn(name, argv, env)
        wait_for(lambda: proc.poll() is not None or "ready." in log.read_text(errors="replace"), 120, f"the {name} worker", log)
        assert proc.poll() is None, log.read_text()
        return proc, log

    return start


@pytest.fixture
def agents_worker(start_worker, settings):
    """A worker of this session's agents queue, as ``make run`` starts it."""
    return start_worker("agents", "-Q", settings.LEGO_AGENT_QUEUE, "--pool", "threads", "--concurrency", "4")


@pytest.fixture
def wait_for():
    """``wait_for(predicate, timeout_s, what, log=None, every_s=0.5)``."""
    return poll_until


@pytest.fixture
def check_download(tmp_path):
    """``check_download(zip_bytes, model_path, overrides)``: unzip, then in a
    fresh Python process build ModelNew with the original weights and compare
    it with eager on new inputs. Returns the names in the zip."""

    def check(zip_bytes: bytes, model_path: Path, overrides: dict) -> list[str]:
        archive = zipfile.ZipFile(io.BytesIO(zip_bytes))
        names = archive.namelist()
        target = tmp_path / f"unzipped-{len(list(tmp_path.glob('unzipped-*')))}"
        archive.extractall(target)
        [optimized] = target.glob("*/optimized_model.py")
        env = {**os.environ, "TRITON_INTERPRET": os.environ.get("TRITON_INTERPRET", "1")}
        result = subprocess.run(
            [sys.executable, "-c", CHECK_DOWNLOAD, str(optimized.parent), str(model_path), repr(overrides)],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
        )
        assert result.returncode == 0, result.stdout + result.stderr
        assert "MATCHES EAGER" in result.stdout
        return names

    return check


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def daphne(spawn, wait_for):
    """``daphne(env)`` serves ``webapp.config.asgi:application`` with daphne
    on a free loopback port, waits until it listens and returns ``(port,
    log)``."""
    import socket

    def serve(env: dict) -> tuple[int, Path]:
        port = free_port()
        proc, log = spawn("daphne", [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port),
                                     "webapp.config.asgi:application"], env)

        def listening() -> bool:
            assert proc.poll() is None, log.read_text(errors="replace")[-4000:]
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return True
            except OSError:
                return False

        wait_for(listening, 60, f"daphne on port {port}", log, every_s=0.1)
        return port, log

    return serve


@pytest.fixture
def upload_model():
    """``upload_model(client, name, content, overrides="")`` posts the new-run
    form as the client's user and returns the saved Run (sent to the run queue)."""
    from django.core.files.uploadedfile import SimpleUploadedFile
    from django.urls import reverse

    def upload(client, name: str, content: bytes, overrides: str = "") -> Run:
        response = client.post(reverse("runs:new"), {"upload": SimpleUploadedFile(name, content), "overrides": overrides,
                                                     "dtype": "fp32", "device": "cpu"})
        assert response.status_code == 302, response.content.decode()[:2000]
        return Run.objects.get(pk=response["Location"].rstrip("/").split("/")[-1])

    return upload



class PrivateRedis:
    """A redis-server of the test's own on a free loopback port, keeping its
    data in an append-only file synced on every write (a broker that comes
    back with its queues), which a test may kill -9 and start again on the
    same port: the shared Redis of this machine is never touched."""

    def __init__(self, spawn, wait_for, folder: Path):
        self.spawn, self.wait_for, self.folder = spawn, wait_for, folder
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen | None = None
        self.starts = 0
        folder.mkdir(parents=True, exist_ok=True)

    def start(self) -> None:
        """Start the server and wait until it answers PING."""
        import redis

        self.starts += 1
        self.proc, log = self.spawn(f"redis-{self.starts}", [
            "redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.folder),
            "--appendonly", "yes", "--appendfsync", "always", "--save", "", "--protected-mode", "no",
        ], dict(os.environ))

        def answers() -> bool:
            assert self.proc.poll() is None, log.read_text(errors="replace")
            try:
                return redis.Redis.from_url(self.url, socket_timeout=1).ping()
            except redis.RedisError:
                return False

        self.wait_for(answers, 30, f"redis-server on port {self.port}", log, every_s=0.1)

    def kill(self) -> None:
        """SIGKILL the server (no shutdown, no final save)."""
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)


@pytest.fixture
def private_redis(spawn, wait_for, tmp_path) -> PrivateRedis:
    """A started :class:`PrivateRedis` (stopped at teardown by ``spawn``)."""
    server = PrivateRedis(spawn, wait_for, tmp_path / "redis")
    server.start()
    return server
