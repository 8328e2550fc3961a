"""Django project wiring for the LEGO web app (settings, urls, asgi, celery)."""
from webapp.config.celery import app as celery_app

__all__ = ["celery_app"]
