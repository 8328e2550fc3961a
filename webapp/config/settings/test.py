"""pytest settings: fast password hashing, test services by default.

Unless ``DATABASE_URL`` / ``REDIS_URL`` say otherwise, tests use the
machine's PostgreSQL (pytest-django makes its own ``test_<name>`` database)
and Redis database 15, so the real-worker tests exercise the production
stack. Each test session sends runs to a queue of its own
(``LEGO_CELERY_QUEUE``) and agent calls to an agents queue of its own
(``LEGO_AGENT_QUEUE``), and keeps a kernel cache of its own
(``LEGO_CACHE_DIR``), which the worker processes it starts inherit; under
pytest-xdist each worker process is a session of its own (``test_session.py``).
"""
import os

from webapp.config.settings.test_session import own_test_session_names

os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/test")
os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/15")
# queues and a kernel cache of this test session's own (workers it starts
# inherit them), so that tests counting agent calls are never answered by an
# earlier session, and pytest-xdist workers never share them (test_session.py)
own_test_session_names()

from webapp.config.settings.base import *  # noqa: E402,F401,F403
from webapp.config.settings.base import env  # noqa: E402

DEBUG = False
SECRET_KEY = env("DJANGO_SECRET_KEY", "lego-test-key")
ALLOWED_HOSTS = ["testserver", "localhost", "127.0.0.1"]
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
