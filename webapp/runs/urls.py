from django.urls import path

from webapp.runs import sharing, views

app_name = "runs"

urlpatterns = [
    path("", views.run_list, name="list"),
    path("runs/new/", views.run_new, name="new"),
    path("runs/new/constants/", views.run_constants, name="constants"),
    path("runs/new/examples/<str:name>", views.run_example, name="example"),
    path("runs/compare/", views.run_compare, name="compare"),
    path("runs/<uuid:run_id>/", views.run_detail, name="detail"),
    path("runs/<uuid:run_id>/cancel/", views.run_cancel, name="cancel"),
    path("runs/<uuid:run_id>/download.zip", views.run_download, name="download"),
    path("runs/<uuid:run_id>/report.html", views.run_report_html, name="report-html"),
    path("runs/<uuid:run_id>/share/", sharing.share_create, name="share-create"),
    path("runs/<uuid:run_id>/share/revoke/", sharing.share_revoke, name="share-revoke"),
    path("share/<str:token>/", sharing.shared_run, name="shared"),
    path("share/<str:token>/download.zip", sharing.shared_download, name="shared-download"),
    path("share/<str:token>/report.html", sharing.shared_report_html, name="shared-report-html"),
]
