from django.apps import AppConfig


class RunsConfig(AppConfig):
    name = "webapp.runs"
    label = "runs"
    verbose_name = "Optimization runs"

    def ready(self) -> None:
        from webapp.runs import signals  # noqa: F401  (connects Celery worker signals)
