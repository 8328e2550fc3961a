"""ensure_dev_user: `make run` creates the development user with DEBUG off
(the app's own error pages), and the command refuses other settings."""
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _run(tmp_path, settings_module, *args):
    env = {"PATH": "/usr/bin:/bin", "DJANGO_SETTINGS_MODULE": settings_module, "LEGO_VAR_DIR": str(tmp_path),
           "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=ROOT, env=env, check=True, capture_output=True)
    return subprocess.run([sys.executable, "manage.py", "ensure_dev_user", *args], cwd=ROOT, env=env, capture_output=True, text=True)


@pytest.mark.slow
def test_make_runs_settings_create_the_user_with_debug_off(tmp_path):
    done = _run(tmp_path, "webapp.config.settings.local")
    assert done.returncode == 0, done.stderr
    assert "log in as dev / lego-dev" in done.stdout


@pytest.mark.slow
def test_the_url_is_printed_only_once_the_server_answers_http(tmp_path):
    """Issue 28: ``make run`` printed "LEGO is at ..." before the server
    answered.  ``--wait-for-server`` polls the URL and prints the line only
    once something answers HTTP there; with nothing there it says so and
    exits 1, printing no URL."""
    import http.server
    import socket
    import threading
    import time

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/"
    assert _run(tmp_path, "webapp.config.settings.local", "--quiet").stdout.count("LEGO is at") == 0
    env = {"PATH": "/usr/bin:/bin", "DJANGO_SETTINGS_MODULE": "webapp.config.settings.local", "LEGO_VAR_DIR": str(tmp_path),
           "PYTHONPATH": str(ROOT)}
    waiting = subprocess.Popen([sys.executable, "manage.py", "ensure_dev_user", "--url", url, "--wait-for-server", "60"],
                               cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    server = None
    try:
        time.sleep(4)  # Django has started and polls a port where nothing listens
        assert waiting.poll() is None, waiting.communicate()
        server = http.server.ThreadingHTTPServer(("127.0.0.1", port), http.server.SimpleHTTPRequestHandler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        out, err = waiting.communicate(timeout=30)
    finally:
        if waiting.poll() is None:
            waiting.kill()
        if server is not None:
            server.shutdown()
    assert waiting.returncode == 0, err
    assert f"LEGO is at {url}  log in as dev / lego-dev" in out

    gone = _run(tmp_path, "webapp.config.settings.local", "--url", url, "--wait-for-server", "1")
    assert gone.returncode == 1 and "LEGO is at" not in gone.stdout
    assert f"LEGO did not answer at {url} within 1 s" in gone.stderr


def test_make_run_announces_the_url_after_starting_the_server():
    """The Makefile's run target: the user is made before anything starts
    (no URL printed), the URL is printed by a poller started after the web
    server, which ``wait -n`` does not wait for and the exit trap stops."""
    recipe = (ROOT / "Makefile").read_text().split("\nrun:", 1)[1].split("\n\n", 1)[0]
    assert "ensure_dev_user --quiet" in recipe
    assert recipe.index("manage.py runserver") < recipe.index("--wait-for-server") < recipe.index("wait -n")
    assert "wait -n -p stopped $$run_worker $$agents_worker $$beat $$web_server;" in recipe
    assert "kill $$run_worker $$agents_worker $$beat $$web_server $$announce" in recipe
