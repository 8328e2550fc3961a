"""Create the first development user if there is none, and say how to log in.

Usage: ``python manage.py ensure_dev_user [--url http://127.0.0.1:8000/]``.
The user is ``dev`` with password ``LEGO_DEV_PASSWORD`` (default ``lego-dev``).
Refuses to run under any settings but the development ones
(``webapp.config.settings.local``, what ``make run`` uses, DEBUG on or off)
unless ``--force``: a known password must not reach a production database.
"""
import os

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError


DEVELOPMENT_SETTINGS = "webapp.config.settings.local"


class Command(BaseCommand):
    help = "Create the development user (dev) if missing and print how to log in."

    def add_arguments(self, parser):
        parser.add_argument("--url", default="http://127.0.0.1:8000/", help="the URL to print")
        parser.add_argument("--username", default="dev")
        parser.add_argument("--force", action="store_true", help="run under settings other than the development ones")

    def handle(self, *args, url, username, force, **options):
        if settings.SETTINGS_MODULE != DEVELOPMENT_SETTINGS and not force:
            raise CommandError(f"ensure_dev_user is for development (settings {DEVELOPMENT_SETTINGS}, which `make run` uses), "
                               f"not {settings.SETTINGS_MODULE}; pass --force to override.")
        password = os.environ.get("LEGO_DEV_PASSWORD") or "lego-dev"
        User = get_user_model()
        user, created = User.objects.get_or_create(username=username, defaults={"is_staff": True, "is_superuser": True})
        if created:
            user.set_password(password)
            user.save()
            self.stdout.write(f"Created the development user {username!r}.")
            shown = password
        else:
            shown = password if user.check_password(password) else "(the password you set)"
        self.stdout.write(self.style.SUCCESS(f"LEGO is at {url}  log in as {username} / {shown}"))
