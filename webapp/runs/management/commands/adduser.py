"""Add an ordinary user (not staff, not a superuser): someone who logs in,
uploads models and sees only their own runs.

Usage::

    python manage.py adduser NAME [--email ADDRESS] [--password-from-stdin]

Without ``--password-from-stdin`` the password is asked twice on the
terminal (as ``createsuperuser`` does); with it, the first line of standard
input is the password (``printf '%s\\n' "$PASSWORD" | python manage.py adduser
alice --password-from-stdin``), so it never appears in the process list or
the shell's history.  The password must pass the site's password validators
(``AUTH_PASSWORD_VALIDATORS``).  A name that is taken is refused; staff
accounts come from ``createsuperuser``.
"""
from __future__ import annotations

import getpass
import sys

from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError


class Command(BaseCommand):
    help = "Add an ordinary (non-staff) user who can log in and upload models."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--email", default="", help="the user's e-mail address (optional)")
        parser.add_argument("--password-from-stdin", action="store_true",
                            help="read the password from the first line of standard input instead of asking")

    def handle(self, *args, username, email, password_from_stdin, **options):
        User = get_user_model()
        try:
            username = User.normalize_username(username)
            User._meta.get_field(User.USERNAME_FIELD).run_validators(username)
        except ValidationError as exc:
            raise CommandError(f"{username!r} is not a valid user name: {' '.join(exc.messages)}") from None
        if User.objects.filter(**{User.USERNAME_FIELD: username}).exists():
            raise CommandError(f"a user named {username!r} already exists.")
        if password_from_stdin:
            password = sys.stdin.readline().rstrip("\r\n")
        else:
            password = getpass.getpass("Password: ")
            if password != getpass.getpass("Password (again): "):
                raise CommandError("the two passwords differ; nothing was changed.")
        if not password:
            raise CommandError("the password is empty; nothing was changed.")
        user = User(**{User.USERNAME_FIELD: username}, email=email, is_staff=False, is_superuser=False)
        try:
            validate_password(password, user)
        except ValidationError as exc:
            raise CommandError("the password was refused: " + " ".join(exc.messages)) from None
        user.set_password(password)
        user.save()
        self.stdout.write(self.style.SUCCESS(f"Added the user {username!r} (not staff); they can log in now."))
