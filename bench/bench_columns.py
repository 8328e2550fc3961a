"""The search columns of ``make bench-gpu``, read from each model's report.json.

:func:`report_fields` turns an optimizer report into the row fields below;
every key is read with ``.get`` and is None when the report lacks it (a
report from before the key existed, or no report at all), so the table shows
``-`` there and the JSON says null:

- ``signatures_distinct`` / ``_attempted`` / ``_won`` / ``_above_1pct`` /
  ``_above_1pct_attempted`` and ``signatures_not_attempted`` (a list of
  ``{label, share, why}``, at most ``NOT_ATTEMPTED_KEPT``):
  ``metrics.signatures``, the distinct canonical signatures of the plan's
  sub-problems, how many got at least one agent attempt, how many a Triton
  kernel won, and the same for those carrying at least 1% of the model's
  library time;
- ``mutations_tried`` / ``mutations_accepted``: ``metrics``, bottom-up fusions;
- ``agent_calls``, ``time_to_first_plan_s``, ``time_to_first_agent_call_s``:
  ``metrics``;
- ``optimizer_wall_s``: ``metrics.optimizer_wall_s``, the optimizer's whole wall time
  (its process's start, every phase, the output's check; older reports:
  ``metrics.wall_time_s``, the pipeline's; the bench's ``search_s`` adds
  the command line's own start around it);
- ``phases_s``: ``report["phases_s"]``, seconds per phase and ``_wall``;
- ``reported_vs_eager``: ``timing.speedup_vs_eager``, the speedup over eager
  the run itself measured (None where it measured none, as on a CPU);
  ``reported_host_busy``: ``timing.host.busy``, load per CPU while it did.

:func:`group_stats` sums and bounds them over the rows of one group for the
summary and the table's second geomean line.
"""
from __future__ import annotations

import math

NOT_ATTEMPTED_KEPT = 10
SIGNATURE_KEYS = ("distinct", "attempted", "won", "above_1pct", "above_1pct_attempted")
REPORT_KEYS = tuple(f"signatures_{k}" for k in SIGNATURE_KEYS) + (
    "signatures_not_attempted", "mutations_tried", "mutations_accepted", "agent_calls", "time_to_first_plan_s",
    "time_to_first_agent_call_s", "optimizer_wall_s", "phases_s", "reported_vs_eager", "reported_host_busy",
)  # fmt: skip


def _number(value) -> float | int | None:
    """``value`` when it is a finite int or float (not a bool), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value if math.isfinite(value) else None


def _dict(value) -> dict:
    return value if isinstance(value, dict) else {}


def report_fields(report: dict | None) -> dict:
    """The row fields of ``REPORT_KEYS`` from one report.json (None where absent)."""
    report = _dict(report)
    metrics, timing = _dict(report.get("metrics")), _dict(report.get("timing"))
    sig = _dict(metrics.get("signatures"))
    out: dict = {f"signatures_{k}": _number(sig.get(k)) for k in SIGNATURE_KEYS}
    missed = sig.get("not_attempted")
    out["signatures_not_attempted"] = (
        [{"label": m.get("label"), "share": _number(m.get("share")), "why": m.get("why")} if isinstance(m, dict) else {"label": str(m)}
         for m in missed[:NOT_ATTEMPTED_KEPT]]
        if isinstance(missed, list) else None
    )  # fmt: skip
    for key in ("mutations_tried", "mutations_accepted", "agent_calls", "time_to_first_plan_s", "time_to_first_agent_call_s"):
        out[key] = _number(metrics.get(key))
    out["optimizer_wall_s"] = _number(metrics.get("optimizer_wall_s", metrics.get("wall_time_s")))  # the whole run; older reports: the pipeline's
    phases = report.get("phases_s")
    out["phases_s"] = {str(k): v for k, v in phases.items() if _number(v) is not None} if isinstance(phases, dict) else None
    reported = _number(timing.get("speedup_vs_eager"))
    out["reported_vs_eager"] = reported if reported and reported > 0 else None
    out["reported_host_busy"] = _number(_dict(timing.get("host")).get("busy"))
    return out


def _total(rows: list[dict], key: str) -> int | float | None:
    values = [r.get(key) for r in rows if r.get(key) is not None]
    return sum(values) if values else None


def _most(rows: list[dict], key: str) -> float | None:
    values = [r.get(key) for r in rows if r.get(key) is not None]
    return max(values) if values else None


def group_stats(rows: list[dict]) -> dict:
    """Over ``rows`` (one group): the signature and mutation counts summed
    (None where no row has the key), ``models_without_agent_calls`` (rows
    whose report says 0 agent calls), ``models_with_unattempted`` (rows with
    a signature of at least 1% of library time left unattempted), the
    largest ``time_to_first_plan_s`` and ``optimizer_wall_s``, and
    ``models_with_report`` (rows with any of these fields)."""
    out: dict = {f"signatures_{k}": _total(rows, f"signatures_{k}") for k in SIGNATURE_KEYS}
    out["mutations_tried"], out["mutations_accepted"] = _total(rows, "mutations_tried"), _total(rows, "mutations_accepted")
    out["models_without_agent_calls"] = sum(1 for r in rows if r.get("agent_calls") == 0)
    out["models_with_unattempted"] = sum(
        1 for r in rows
        if r.get("signatures_above_1pct") is not None and (r.get("signatures_above_1pct_attempted") or 0) < r["signatures_above_1pct"]
    )  # fmt: skip
    out["max_time_to_first_plan_s"] = _most(rows, "time_to_first_plan_s")
    out["max_optimizer_wall_s"] = _most(rows, "optimizer_wall_s")
    out["models_with_report"] = sum(1 for r in rows if any(r.get(k) is not None for k in REPORT_KEYS))
    return out


def _part(value, fmt: str = "d") -> str:
    return "-" if value is None else format(value, fmt)


def stats_line(stats: dict) -> str:
    """The second geomean line of a group: what the searches did, summed."""
    sig = "/".join(_part(stats.get(f"signatures_{k}")) for k in ("won", "attempted", "distinct"))
    above = f"{_part(stats.get('signatures_above_1pct_attempted'))}/{_part(stats.get('signatures_above_1pct'))}"
    mut = f"{_part(stats.get('mutations_accepted'))}/{_part(stats.get('mutations_tried'))}"
    plan, wall = stats.get("max_time_to_first_plan_s"), stats.get("max_optimizer_wall_s")
    return (f"signatures won/att/all {sig}  >=1% att {above}  mut acc/tried {mut}  "
            f"0-call models {stats.get('models_without_agent_calls', 0)}  "
            f"plan s max {_part(plan, '.1f')}  opt s max {_part(wall, '.0f')}")  # fmt: skip
