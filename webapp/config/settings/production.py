"""Production: secrets and services come from the environment, no defaults."""
from webapp.config.settings.base import *  # noqa: F401,F403
from webapp.config.settings.base import SECRET_KEY, env

if not SECRET_KEY:
    raise RuntimeError("set DJANGO_SECRET_KEY for production settings")
if not env("DATABASE_URL"):
    raise RuntimeError("set DATABASE_URL (PostgreSQL) for production settings")

DEBUG = False
SESSION_COOKIE_SECURE = env("DJANGO_SECURE_COOKIES", "1") == "1"
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
CSRF_TRUSTED_ORIGINS = [o for o in (env("DJANGO_CSRF_TRUSTED_ORIGINS", "") or "").split(",") if o]
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
# HTTPS redirect and HSTS are usually the reverse proxy's; turn them on here if not.
SECURE_SSL_REDIRECT = env("DJANGO_SSL_REDIRECT", "0") == "1"
SECURE_HSTS_SECONDS = int(env("DJANGO_HSTS_SECONDS", "0"))
