"""``{% signup_enabled as name %}``: whether self sign-up is on (``LEGO_SIGNUP_ENABLED``), for the login page's link."""
from django import template
from django.conf import settings

register = template.Library()


@register.simple_tag
def signup_enabled() -> bool:
    return bool(getattr(settings, "LEGO_SIGNUP_ENABLED", False))
