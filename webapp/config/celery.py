"""The Celery app. Settings come from Django's, under the ``CELERY_`` prefix.

Start a worker with ``celery -A webapp.config worker --concurrency 1``
(one run at a time, so timings never overlap).
"""
import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.config.settings.local")

app = Celery("lego")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
