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
