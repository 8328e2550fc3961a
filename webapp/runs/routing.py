"""Websocket routes of the runs app (mounted by ``webapp/config/asgi.py``)."""
from django.urls import re_path

from webapp.runs.consumers import RunEventsConsumer

# any id reaches the consumer, which answers a malformed or unknown one with
# close code 4404 (a route that did not match would be a server error)
websocket_urlpatterns = [
    re_path(r"^ws/runs/(?P<run_id>[^/]+)/events/$", RunEventsConsumer.as_asgi()),
]
