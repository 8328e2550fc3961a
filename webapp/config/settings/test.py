"""pytest settings: fast password hashing, test services by default.

Unless ``DATABASE_URL`` / ``REDIS_URL`` say otherwise, tests use the
machine's PostgreSQL (pytest-django makes its own ``test_<name>`` database)
and Redis database 15, so the real-worker tests exercise the production
stack. Each test session sends runs to a queue of its own
(``LEGO_CELERY_QUEUE``) and agent calls to an agents queue of its own
(``LEGO_AGENT_QUEUE``), and keeps a kernel cache of its own
(``LEGO_CACHE_DIR``), which the worker processes it starts inherit.
"""
import os
import tempfile
import uuid

os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/test")
os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/15")
os.environ.setdefault("LEGO_CELERY_QUEUE", f"lego-test-{uuid.uuid4().hex[:12]}")
os.environ.setdefault("LEGO_AGENT_QUEUE", f"lego-agents-test-{uuid.uuid4().hex[:12]}")
# a kernel cache of this test session's own (workers it starts inherit it),
# so that tests counting agent calls are never answered by an earlier session
os.environ.setdefault("LEGO_CACHE_DIR", tempfile.mkdtemp(prefix="lego-test-cache-"))

from webapp.config.settings.base import *  # noqa: E402,F401,F403
from webapp.config.settings.base import env  # noqa: E402

DEBUG = False
SECRET_KEY = env("DJANGO_SECRET_KEY", "lego-test-key")
ALLOWED_HOSTS = ["testserver", "localhost", "127.0.0.1"]
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
