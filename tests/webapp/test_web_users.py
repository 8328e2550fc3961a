"""Ordinary users (issue 28): ``manage.py adduser`` adds a non-staff user
who can log in and upload; self sign-up exists only with
``LEGO_SIGNUP_ENABLED`` (a 404 otherwise)."""
from __future__ import annotations

import io
import sys

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse

pytestmark = pytest.mark.django_db

GOOD_PASSWORD = "cobalt-heron-77"


def add(monkeypatch, *args, stdin: str = GOOD_PASSWORD + "\n") -> str:
    monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    out = io.StringIO()
    call_command("adduser", *args, stdout=out)
    return out.getvalue()


def test_adduser_adds_an_ordinary_user_who_can_log_in_and_upload(monkeypatch):
    printed = add(monkeypatch, "carol", "--email", "carol@example.org", "--password-from-stdin")
    assert "Added the user 'carol' (not staff)" in printed
    carol = get_user_model().objects.get(username="carol")
    assert carol.email == "carol@example.org" and carol.is_active
    assert not carol.is_staff and not carol.is_superuser
    client = Client()
    assert client.login(username="carol", password=GOOD_PASSWORD)
    assert client.get(reverse("runs:list")).status_code == 200
    assert client.get(reverse("runs:new")).status_code == 200
    assert client.get("/admin/").status_code == 302  # not staff: the admin sends them to its login


def test_adduser_asks_twice_on_the_terminal_without_stdin(monkeypatch):
    answers = iter([GOOD_PASSWORD, GOOD_PASSWORD])
    monkeypatch.setattr("getpass.getpass", lambda prompt="": next(answers))
    add(monkeypatch, "dave")
    assert get_user_model().objects.get(username="dave").check_password(GOOD_PASSWORD)
    answers = iter([GOOD_PASSWORD, "something-else-9"])
    with pytest.raises(CommandError, match="the two passwords differ"):
        add(monkeypatch, "erin")
    assert not get_user_model().objects.filter(username="erin").exists()


@pytest.mark.parametrize("args, stdin, message", [
    (["alice", "--password-from-stdin"], GOOD_PASSWORD + "\n", "a user named 'alice' already exists"),
    (["frank", "--password-from-stdin"], "password\n", "the password was refused"),
    (["frank", "--password-from-stdin"], "\n", "the password is empty"),
    (["bad name!", "--password-from-stdin"], GOOD_PASSWORD + "\n", "is not a valid user name"),
])
def test_adduser_refuses_with_a_reason_and_changes_nothing(monkeypatch, user, args, stdin, message):
    before = get_user_model().objects.count()
    with pytest.raises(CommandError, match=message):
        add(monkeypatch, *args, stdin=stdin)
    assert get_user_model().objects.count() == before
    assert user.check_password("pw-alice")  # the existing user is untouched


def test_signup_is_a_404_while_off(client, settings):
    settings.LEGO_SIGNUP_ENABLED = False
    response = client.get("/accounts/signup/")
    assert response.status_code == 404 and "sign-up is off" in response.content.decode()
    assert client.post("/accounts/signup/", {"username": "gina", "password1": GOOD_PASSWORD,
                                             "password2": GOOD_PASSWORD}).status_code == 404
    assert not get_user_model().objects.filter(username="gina").exists()
    assert 'id="signup-link"' not in client.get(reverse("login")).content.decode()


def test_signup_when_on_makes_an_ordinary_user_logged_in(client, settings, user):
    settings.LEGO_SIGNUP_ENABLED = True
    assert 'href="/accounts/signup/"' in client.get(reverse("login")).content.decode()
    page = client.get(reverse("signup"))
    assert page.status_code == 200 and 'id="signup-form"' in page.content.decode()
    # Django's UserCreationForm: a taken name and a weak or mismatched password are refused
    for data in ({"username": "alice", "password1": GOOD_PASSWORD, "password2": GOOD_PASSWORD},
                 {"username": "gina", "password1": "password", "password2": "password"},
                 {"username": "gina", "password1": GOOD_PASSWORD, "password2": GOOD_PASSWORD + "x"}):
        refused = client.post(reverse("signup"), data)
        assert refused.status_code == 200 and "errorlist" in refused.content.decode()
    assert not get_user_model().objects.filter(username="gina").exists()
    done = client.post(reverse("signup"), {"username": "gina", "password1": GOOD_PASSWORD, "password2": GOOD_PASSWORD})
    assert done.status_code == 302 and done["Location"] == reverse("runs:list")
    gina = get_user_model().objects.get(username="gina")
    assert not gina.is_staff and not gina.is_superuser and gina.check_password(GOOD_PASSWORD)
    assert client.get(reverse("runs:list")).status_code == 200  # logged in
    assert client.get(reverse("signup"))["Location"] == reverse("runs:list")  # nothing to sign up for once logged in
