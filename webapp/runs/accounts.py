"""Ordinary users: optional self sign-up (``LEGO_SIGNUP_ENABLED``, off by
default: the page is then a 404).  An operator adds users with
``manage.py adduser`` (``management/commands/adduser.py``)."""
from __future__ import annotations

from django.conf import settings
from django.contrib.auth import login
from django.contrib.auth.forms import UserCreationForm
from django.http import Http404
from django.shortcuts import redirect, render


def signup(request):
    """Sign up with Django's ``UserCreationForm`` (user name, password
    twice, the password validators): an ordinary user (not staff), logged
    in at once and sent to their runs.  404 while sign-up is off."""
    if not settings.LEGO_SIGNUP_ENABLED:
        raise Http404("sign-up is off on this server; ask its administrator for an account")
    if request.user.is_authenticated:
        return redirect(settings.LOGIN_REDIRECT_URL)
    form = UserCreationForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        user = form.save()
        login(request, user, backend="django.contrib.auth.backends.ModelBackend")
        return redirect(settings.LOGIN_REDIRECT_URL)
    return render(request, "registration/signup.html", {"form": form})
