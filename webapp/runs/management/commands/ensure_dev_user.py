"""Create the first development user if there is none, and say how to log in.

Usage: ``python manage.py ensure_dev_user [--url http://127.0.0.1:8000/]
[--quiet | --wait-for-server SECONDS]``.
The user is ``dev`` with password ``LEGO_DEV_PASSWORD`` (default ``lego-dev``).
``--wait-for-server``: print "LEGO is at <url>" only once the server answers
HTTP there (polled; exit status 1 when it did not within SECONDS), which
``make run`` does in the background while its four processes start;
``--quiet``: make sure of the user and print no URL (``make run``'s first
call, before anything serves).
Refuses to run under any settings but the development ones
(``webapp.config.settings.local``, what ``make run`` uses, DEBUG on or off)
unless ``--force``: a known password must not reach a production database.
"""
import os
import time
import urllib.error
import urllib.request

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
        parser.add_argument("--quiet", action="store_true", help="print no URL")
        parser.add_argument("--wait-for-server", type=float, default=0, metavar="SECONDS",
                            help="print the URL only once the server answers HTTP there (at most SECONDS)")

    def handle(self, *args, url, username, force, quiet=False, wait_for_server=0, **options):
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
        if quiet:
            return
        if wait_for_server and not answers_within(url, wait_for_server):
            raise CommandError(f"LEGO did not answer at {url} within {wait_for_server:g} s; see the web server's messages above.")
        self.stdout.write(self.style.SUCCESS(f"LEGO is at {url}  log in as {username} / {shown}"))
        self.stdout.flush()


def answers_within(url: str, seconds: float, every_s: float = 0.25) -> bool:
    """Whether anything answers HTTP at ``url`` within ``seconds`` (any
    status counts: a 302 to the login page is the server answering)."""
    deadline = time.monotonic() + seconds
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # this server, never through a proxy
    while True:
        try:
            with opener.open(url, timeout=5):
                return True
        except urllib.error.HTTPError:
            return True
        except (urllib.error.URLError, OSError):
            pass
        if time.monotonic() >= deadline:
            return False
        time.sleep(every_s)
