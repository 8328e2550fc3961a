"""Number formatting for run pages."""
from django import template

register = template.Library()


@register.filter
def sig(value, digits: int = 3) -> str:
    """A float with ``digits`` significant digits (``1.23e-06``, ``0.412``);
    ``—`` for None; strings such as ``"inf"`` pass through."""
    if value is None or value == "":
        return "—"
    if isinstance(value, str):
        return value
    return f"{float(value):.{int(digits)}g}"


@register.filter
def duration(seconds) -> str:
    """``75.2`` -> ``1 min 15 s``."""
    seconds = int(float(seconds or 0))
    minutes, secs = divmod(seconds, 60)
    return f"{minutes} min {secs} s" if minutes else f"{secs} s"


@register.filter
def queue_place(position) -> str:
    """A queued run's place: ``1`` -> ``next in the queue``, ``3`` -> ``3rd in
    the queue (2 runs ahead)``; ``""`` for None."""
    from webapp.runs.queue import describe_position

    return describe_position(position)
