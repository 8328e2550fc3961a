from django.apps import AppConfig


class ServerConfig(AppConfig):
    """``manage.py runserver``: daphne's, with the request-body limit
    enforced while the body streams in (``webapp.server.bounded``)."""

    name = "webapp.server"
    label = "lego_server"
