from django.urls import path

from webapp.runs import views

app_name = "runs"

urlpatterns = [
    path("", views.run_list, name="list"),
    path("runs/new/", views.run_new, name="new"),
    path("runs/<uuid:run_id>/", views.run_detail, name="detail"),
    path("runs/<uuid:run_id>/download.zip", views.run_download, name="download"),
    path("api/runs/<uuid:run_id>/", views.api_run, name="api-run"),
    path("api/runs/<uuid:run_id>/events/", views.api_run_events, name="api-events"),
]
