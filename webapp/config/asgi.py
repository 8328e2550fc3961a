"""ASGI entry point (``daphne webapp.config.asgi:application``; ``manage.py
runserver`` serves it too, since ``daphne`` is the first installed app).

Routes by protocol: plain HTTP goes to Django behind the request-body
limit (``body_limit.ASGIBodyLimit``: 413 before the body is read); websockets go to the runs
app's live event stream (``webapp/runs/routing.py``, protocol in
``docs/STREAM.md``).  A websocket handshake must carry an ``Origin`` whose
host is in ``ALLOWED_HOSTS`` (else it is refused with HTTP 403: no
cross-site page can subscribe with a visitor's cookies), and the session
cookie identifies the user (``AuthMiddlewareStack``).
"""
import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.config.settings.local")
django_asgi_app = get_asgi_application()

# after Django set-up: these import models
from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from webapp.config.body_limit import ASGIBodyLimit  # noqa: E402
from webapp.runs.routing import websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": ASGIBodyLimit(django_asgi_app),
        "websocket": AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)
