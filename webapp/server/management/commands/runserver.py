"""``manage.py runserver``: daphne's (ASGI, websockets) with the request-body
limit enforced while the body streams in (``webapp.server.bounded``)."""
from daphne.management.commands.runserver import Command as DaphneRunserver

from webapp.server.bounded import BoundedServer


class Command(DaphneRunserver):
    """Daphne's runserver serving through ``BoundedServer``."""

    server_cls = BoundedServer
