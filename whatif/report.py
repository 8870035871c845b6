"""A finished what-if as people read it: figures side by side with the difference, per team, and
the chart data (plotly draws it on the page, static/js/whatif.js)."""

from __future__ import annotations

# (label, metric key, sub-key or None, kind, better): kind formats the value; better says which
# way is good, so the difference can say "better" or "worse".
ROWS = (
    ("GPUs in the cluster", "gpus", None, "count", None),
    ("GPU allocation", "gpu_allocation", None, "share", "higher"),
    ("GPU utilisation (net of rolled-back work)", "gpu_utilization", None, "share", "higher"),
    ("Jobs completed", "completed", None, "count", "higher"),
    ("Production wait, p99", "production_wait_p99_s", None, "duration", "lower"),
    ("Training wait, p95", "wait_p95_s", "training", "duration", "lower"),
    ("Training queue delay (submit to first start), p95", "queue_delay_p95_s", "training", "duration", "lower"),
    ("Training completion time, mean", "jct_mean_s", "training", "duration", "lower"),
    ("Batch completion time, mean", "jct_mean_s", "batch", "duration", "lower"),
    ("Preemptions", "preemptions", None, "count", "lower"),
    ("Cost, total", "cost_total", None, "money", "lower"),
    ("Cost per useful GPU-hour", "cost_per_useful_gpu_hour", None, "money2", "lower"),
)


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds} s"
    minutes = seconds // 60
    if minutes < 60:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60:02d} min"


def formatted(value, kind: str) -> str:
    if value is None:
        return "–"
    if kind == "share":
        return f"{value * 100:.1f}%"
    if kind == "duration":
        return duration(value)
    if kind == "money":
        return f"${value:,.0f}"
    if kind == "money2":
        return f"${value:,.2f}"
    return f"{value:,}"


def _value(side: dict, key: str, sub: str | None):
    value = side.get(key)
    return (value or {}).get(sub) if sub is not None else value


def _verdict(before, after, better: str | None) -> str:
    if better is None or before is None or after is None or before == after:
        return ""
    return "better" if (after < before) == (better == "lower") else "worse"


def _difference(before, after, kind: str) -> str:
    if before is None or after is None or before == after:
        return ""
    change = after - before
    if kind == "share":
        return f"{change * 100:+.1f} pts"
    if kind == "duration":
        return ("+" if change > 0 else "−") + duration(abs(change))
    if kind in ("money", "money2"):
        return ("+" if change > 0 else "−") + formatted(abs(change), kind)
    return f"{change:+,}"


def _hours(value: float | None) -> str:
    return "–" if value is None else f"{value:,.0f}"


def comparison(result: dict) -> dict:
    base, changed = result["baseline"], result["changed"]
    rows = []
    for label, key, sub, kind, better in ROWS:
        before, after = _value(base, key, sub), _value(changed, key, sub)
        rows.append({"label": label, "baseline": formatted(before, kind), "changed": formatted(after, kind),
                     "difference": _difference(before, after, kind), "verdict": _verdict(before, after, better)})
    teams = []
    for name in sorted(set(base["teams"]) | set(changed["teams"])):
        b, c = base["teams"].get(name, {}), changed["teams"].get(name, {})
        teams.append({"team": name, "jobs": b.get("jobs", c.get("jobs")),
                      "wait": [duration(b.get("wait_p95_s")), duration(c.get("wait_p95_s"))],
                      "wait_verdict": _verdict(b.get("wait_p95_s"), c.get("wait_p95_s"), "lower"),
                      "jct": [duration(b.get("jct_mean_s")), duration(c.get("jct_mean_s"))],
                      "jct_verdict": _verdict(b.get("jct_mean_s"), c.get("jct_mean_s"), "lower"),
                      "not_started": [b.get("not_started"), c.get("not_started")],
                      "gpu_hours": [_hours(b.get("gpu_hours")), _hours(c.get("gpu_hours"))],
                      "cost": [formatted(b.get("cost"), "money"), formatted(c.get("cost"), "money")]})
    return {"rows": rows, "team_rows": teams, "policies": (base["policy"], changed["policy"])}


def charts(result: dict) -> dict:
    base, changed = result["baseline"], result["changed"]
    names = sorted(set(base["teams"]) | set(changed["teams"]))

    def waits(side: dict) -> list:
        return [round((side["teams"].get(n, {}).get("wait_p95_s") or 0) / 60, 1) for n in names]
    return {"t_h": base["series"]["t_h"],
            "allocation": {"baseline": base["series"]["allocated"], "changed": changed["series"]["allocated"]},
            "useful": {"baseline": base["series"]["useful"], "changed": changed["series"]["useful"]},
            "teams": names, "wait_min": {"baseline": waits(base), "changed": waits(changed)}}
