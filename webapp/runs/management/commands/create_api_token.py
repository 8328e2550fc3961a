"""Print a user's API token for ``Authorization: Token <key>`` (docs/API.md).

Usage: ``python manage.py create_api_token <username> [--regenerate]``.
Creates the token if the user has none, else prints the existing one;
``--regenerate`` replaces it (the old key stops working).  Only the key goes
to stdout, so ``KEY=$(python manage.py create_api_token alice)`` works.
"""
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from rest_framework.authtoken.models import Token

from webapp.runs.api import regenerate_token


class Command(BaseCommand):
    help = "Print the user's API token (created if missing; --regenerate replaces it)."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--regenerate", action="store_true", help="replace the token; the old key stops working")

    def handle(self, *args, username, regenerate, **options):
        User = get_user_model()
        try:
            user = User.objects.get(username=username)
        except User.DoesNotExist:
            raise CommandError(f"no user {username!r}; create one with 'python manage.py createsuperuser' "
                               "or log in once with ensure_dev_user") from None
        if regenerate:
            token = regenerate_token(user)
            self.stderr.write(f"New API token for {username} (the old one no longer works):")
        else:
            token, created = Token.objects.get_or_create(user=user)
            self.stderr.write(f"{'New' if created else 'Existing'} API token for {username}:")
        self.stdout.write(token.key)
