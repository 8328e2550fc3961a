from django.contrib import admin

from webapp.runs.models import Run, RunEvent


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    list_display = ("id", "original_filename", "owner", "state", "device", "dtype", "created_at")
    list_filter = ("state", "device", "dtype")
    search_fields = ("original_filename", "owner__username")


@admin.register(RunEvent)
class RunEventAdmin(admin.ModelAdmin):
    list_display = ("run", "seq", "type", "created_at")
    list_filter = ("type",)
