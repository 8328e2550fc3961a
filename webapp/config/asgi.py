"""ASGI entry point (``daphne webapp.config.asgi:application``).

Routes by protocol: plain HTTP goes to Django. Live run updates over
websockets join here as a ``"websocket"`` route when they land; until then
the run page polls ``/api/runs/<id>/``.
"""
import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.config.settings.local")
django_asgi_app = get_asgi_application()

from channels.routing import ProtocolTypeRouter  # noqa: E402  (after Django set-up)

application = ProtocolTypeRouter({"http": django_asgi_app})
