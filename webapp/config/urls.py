from django.contrib import admin
from django.urls import include, path

from webapp.runs.accounts import signup

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/signup/", signup, name="signup"),  # 404 unless LEGO_SIGNUP_ENABLED
    path("accounts/", include("django.contrib.auth.urls")),
    path("api/", include("webapp.runs.api_urls")),
    path("", include("webapp.runs.urls")),
]

# the app's own error pages (JSON under /api/); see error_views.py
handler400 = "webapp.config.error_views.bad_request"
handler403 = "webapp.config.error_views.permission_denied"
handler404 = "webapp.config.error_views.page_not_found"
handler500 = "webapp.config.error_views.server_error"
