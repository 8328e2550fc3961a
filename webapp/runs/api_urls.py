"""URLs of the JSON API (``/api/``, namespace ``api``); see ``docs/API.md``."""
from django.urls import path, re_path

from webapp.runs import api

app_name = "api"

urlpatterns = [
    path("runs/", api.RunListCreate.as_view(), name="runs"),
    path("runs/<uuid:run_id>/", api.RunDetail.as_view(), name="run"),
    path("runs/<uuid:run_id>/cancel/", api.RunCancel.as_view(), name="cancel"),
    path("runs/<uuid:run_id>/events/", api.RunEvents.as_view(), name="events"),
    path("runs/<uuid:run_id>/download.zip", api.RunDownload.as_view(), name="download"),
    path("runs/<uuid:run_id>/report.html", api.RunReportHtml.as_view(), name="report-html"),
    path("token/", api.api_token_page, name="token"),
    # last: any other path under /api/ is a JSON 404, never Django's HTML page
    re_path(r"^(?P<path>.*)$", api.not_found, name="not-found"),
]
