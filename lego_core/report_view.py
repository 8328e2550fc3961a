"""A finished report.json read for display: the CLI summary and the run page share these.

Pure functions of the report dict; this module imports no torch (the web
process renders pages with it), so it lives apart from ``lego_core.report``,
which builds the report from a search.  Old reports without a key give None.
"""
from __future__ import annotations

import math

from lego_core.phases import PHASES, SEQUENTIAL

PHASE_LABELS = {"e2e_check": "end-to-end check", "launch_variants": "launch variants"}
OTHER_PHASE = "_other"


def _number(value) -> float | None:
    """``value`` as a float when it is a finite real number (not a bool), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def phase_breakdown(report: dict | None) -> dict | None:
    """Where a run's time went, from ``report["phases_s"]``, for display;
    None when the report has no phases (a report from before they existed).

    ``{"wall_s", "rows"}``; each row: ``name``, ``label`` (``e2e_check`` ->
    "end-to-end check"), ``seconds``, ``description`` (``phases.PHASES``),
    ``inside_search`` (a phase outside ``phases.SEQUENTIAL``: its seconds are
    inside the search's), ``busy`` (busy seconds, summed over work that runs
    in parallel, so they can exceed the search's wall seconds), ``share_of_wall``
    (seconds / wall for a sequential stage; None inside the search or without
    a wall time) and ``fraction`` (0..1, for a bar: seconds over the largest of
    the wall time and every phase's seconds).  Rows are in ``PHASES`` order
    whatever order the dict came in (PostgreSQL's jsonb sorts keys), unknown
    names after them; a last row ``_other`` ("other") holds the wall time no
    sequential stage covers when that is over 1% of it."""
    phases = (report or {}).get("phases_s")
    if not isinstance(phases, dict):
        return None
    seconds = {name: max(0.0, s) for name, s in ((n, _number(v)) for n, v in phases.items()) if s is not None and not str(name).startswith("_")}
    wall = _number(phases.get("_wall"))
    if not seconds and wall is None:
        return None
    names = [n for n in PHASES if n in seconds] + [n for n in seconds if n not in PHASES]
    rows = []
    for name in names:
        inside = name not in SEQUENTIAL
        description = PHASES.get(name, "")
        rows.append({
            "name": name, "label": PHASE_LABELS.get(name, name.replace("_", " ")), "seconds": seconds[name],
            "description": description, "inside_search": inside, "busy": inside and "busy" in description,
            "share_of_wall": seconds[name] / wall if wall and not inside else None,
        })
    if wall:
        other = wall - sum(seconds[n] for n in names if n in SEQUENTIAL)
        if other > 0.01 * wall:
            rows.append({
                "name": OTHER_PHASE, "label": "other", "seconds": round(other, 3),
                "description": "the rest of the wall time, outside the stages above (building the report, bookkeeping between stages)",
                "inside_search": False, "busy": False, "share_of_wall": other / wall,
            })
    scale = max([wall or 0.0] + [row["seconds"] for row in rows])
    for row in rows:
        row["fraction"] = row["seconds"] / scale if scale > 0 else 0.0
    return {"wall_s": wall, "rows": rows}


def signature_counts(report: dict | None) -> dict | None:
    """``report["metrics"]["signatures"]`` with every field present (counts
    as ints or None, ``not_attempted`` a list of ``{label, share, why}``), or
    None when the report has none (a report from before they existed)."""
    metrics = (report or {}).get("metrics") or {}
    sig = metrics.get("signatures")
    if not isinstance(sig, dict):
        return None

    def count(key):
        value = _number(sig.get(key))
        return None if value is None else int(value)

    missed = []
    for item in sig.get("not_attempted") or []:
        if isinstance(item, dict):
            missed.append({"label": str(item.get("label") or "?"), "share": _number(item.get("share")), "why": str(item.get("why") or "")})
    return {
        "distinct": count("distinct"), "attempted": count("attempted"), "won": count("won"),
        "above_1pct": count("above_1pct"), "above_1pct_attempted": count("above_1pct_attempted"),
        "not_attempted": missed,
    }


def host_load(timing: dict | None) -> dict | None:
    """How busy the host was while the report's timings were taken, from
    ``report["timing"]["host"]``: ``load`` (1-minute load average), ``cpus``
    (None when unknown), ``busy`` (load per CPU, None when unknown),
    ``interleaved`` (eager and the plan timed interleaved) and ``text``
    ("host load 3.2 on 16 CPUs while timing"); None when the report does
    not say."""
    host = timing.get("host") if isinstance(timing, dict) else None
    if not isinstance(host, dict):
        return None
    load, cpus, busy = _number(host.get("load_avg_1m")), _number(host.get("cpus")), _number(host.get("busy"))
    if load is None:
        return None
    cpus = int(cpus) if cpus else None
    if busy is None and cpus:
        busy = load / cpus
    text = f"host load {load:.1f}" + (f" on {cpus} CPU{'s' if cpus != 1 else ''}" if cpus else "") + " while timing"
    return {"load": load, "cpus": cpus, "busy": busy, "interleaved": bool(timing.get("interleaved")), "text": text}
