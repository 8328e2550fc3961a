"""Number formatting for run pages."""
import math

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
def ms_number(value) -> str:
    """A time in milliseconds as the run page's scripts write it
    (``LEGO.msNumber`` in frontend/js/live/run_model.js, the same text for
    the same number): three significant digits, plain decimals from 1e-4
    on (``0.00312``, ``12.3``, ``1230``), ``1.23e-5`` below; ``—`` for
    None.  Times are never switched to µs: every page says ms."""
    if value is None or value == "":
        return "—"
    if isinstance(value, str):
        return value
    x = float(value)
    if not math.isfinite(x):
        return str(x)
    if x == 0:
        return "0"
    if abs(x) < 1e-4:
        mantissa, exponent = f"{x:.2e}".split("e")
        return f"{float(mantissa):g}e{int(exponent)}"
    r = float(f"{x:.3g}")
    text = f"{r:.{max(0, 2 - math.floor(math.log10(abs(r))))}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


@register.filter
def ms(value) -> str:
    """``ms_number`` and the unit: ``0.00312 ms``; ``—`` for None."""
    text = ms_number(value)
    return text if text == "—" else f"{text} ms"


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


@register.filter
def expected_wait(seconds) -> str:
    """A queued run's expected wait: ``150`` -> ``about 3 min``; ``""`` for None."""
    from webapp.runs.queue import describe_wait

    return describe_wait(seconds) if isinstance(seconds, (int, float)) else ""
