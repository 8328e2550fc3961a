"""The Celery app. Settings come from Django's, under the ``CELERY_`` prefix.

Start a run worker with ``celery -A webapp.config worker`` (a prefork pool of
one process, one run at a time, so timings never overlap; the worker
replaces the pool process when it dies), Celery beat with ``celery -A
webapp.config beat`` (it sends the reaper of stuck runs) and an agents worker with
``celery -A webapp.config worker -Q lego-agents --pool threads --concurrency 8``
(docs/WEB.md, *Queues and workers*).
"""
import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.config.settings.local")

app = Celery("lego")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
