"""``make run`` on a developer's machine: DEBUG on, embedded defaults."""
from webapp.config.settings.base import *  # noqa: F401,F403
from webapp.config.settings.base import env

DEBUG = True
SECRET_KEY = env("DJANGO_SECRET_KEY", "lego-local-development-key-not-for-production")
ALLOWED_HOSTS = ["localhost", "127.0.0.1", "[::1]", "0.0.0.0"]
