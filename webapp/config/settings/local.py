"""``make run`` on a developer's machine: embedded defaults, DEBUG off
unless ``DJANGO_DEBUG=1`` (Django's debug pages list the URL patterns and
settings to anyone, share-link holders included); ``make run`` serves static
files with ``runserver --insecure``."""
from webapp.config.settings.base import *  # noqa: F401,F403
from webapp.config.settings.base import env, env_bool

DEBUG = env_bool("DJANGO_DEBUG", False)
SECRET_KEY = env("DJANGO_SECRET_KEY", "lego-local-development-key-not-for-production")
ALLOWED_HOSTS = ["localhost", "127.0.0.1", "[::1]", "0.0.0.0"]
