"""WSGI entry point, for servers that do not speak ASGI; behind the
request-body limit (``body_limit.WSGIBodyLimit``)."""
import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.config.settings.local")

from webapp.config.body_limit import WSGIBodyLimit  # noqa: E402

application = WSGIBodyLimit(get_wsgi_application())
