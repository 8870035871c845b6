"""Run experiment output: the printed table, the JSON document, the HTML charts, and the
target check. Every file is written atomically (temp file + rename): never half a result."""

from __future__ import annotations

import json
from pathlib import Path

from .. import report

ROWS = (  # (label, metric key, sub-key or None, format)
    ("gpu_allocation", "gpu_allocation", None, "{:.3f}"),
    ("gpu_utilization (net)", "gpu_utilization", None, "{:.3f}"),
    ("rolled_back_gpu_hours", "rolled_back_gpu_hours", None, "{:.1f}"),
    ("memory_waste", "memory_waste", None, "{:.3f}"),
    ("completed", "completed", None, "{}"),
    ("training_goodput (GPU-h/h)", "training_goodput", None, "{:.1f}"),
    ("production_wait_p99_s", "production_wait_p99_s", None, "{:.0f}"),
    ("wait_p95_s interactive", "wait_p95_s", "interactive", "{:.0f}"),
    ("wait_p95_s training", "wait_p95_s", "training", "{:.0f}"),
    ("wait_p95_s best-effort", "wait_p95_s", "best-effort", "{:.0f}"),
    ("jct_mean_s training", "jct_mean_s", "training", "{:.0f}"),
    ("jct_p95_s training", "jct_p95_s", "training", "{:.0f}"),
    ("  ... unfinished at their age", "jct_p95_with_unfinished_s", "training", "{:.0f}"),
    ("jct_mean_s batch", "jct_mean_s", "batch", "{:.0f}"),
    ("queue_delay_p95_s inference", "queue_delay_p95_s", "inference", "{:.0f}"),
    ("queue_delay_p95_s training", "queue_delay_p95_s", "training", "{:.0f}"),
    ("eta_abs_error_p50_s training", "eta_abs_error_p50_s", "training", "{:.0f}"),
    ("eta_abs_error_p90_s training", "eta_abs_error_p90_s", "training", "{:.0f}"),
    ("  started with no estimate", "eta_unknown", None, "{}"),
    ("oom_failures", "oom_failures", None, "{}"),
    ("preemptions", "preemptions", None, "{}"),
    ("spot_interruptions", "spot_interruptions", None, "{}"),
    ("mig_reconfigurations", "mig_reconfigurations", None, "{}"),
    ("  jobs stopped by them", "mig_disruptions", None, "{}"),
    ("lost_gpu_hours", "lost_gpu_hours", None, "{:.1f}"),
    ("idle_gpu_hours", "idle_gpu_hours", None, "{:.1f}"),
    ("cost_total ($)", "cost_total", None, "{:,.0f}"),
    ("  reserved", "cost_by_tier", "reserved", "{:,.0f}"),
    ("  on-demand", "cost_by_tier", "on-demand", "{:,.0f}"),
    ("  spot", "cost_by_tier", "spot", "{:,.0f}"),
    ("on_demand_only_cost ($)", "on_demand_only_cost", None, "{:,.0f}"),
    ("cost_per_useful_gpu_hour ($)", "cost_per_useful_gpu_hour", None, "{:.2f}"),
    ("cycles", "cycles", None, "{}"),
    ("engine seconds", "engine_s", None, "{:.0f}"),
)


def write_atomic(path: str | Path, text: str) -> None:
    """report.write_atomic (never half a file), creating the folder first."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    report.write_atomic(path, text)


def _cell(metrics: dict, key: str, sub: str | None, fmt: str) -> str:
    value = metrics.get(key)
    if sub is not None:
        value = (value or {}).get(sub)
    return "-" if value is None else fmt.format(value)


def format_table(doc: dict) -> str:
    names = list(doc["policies"])
    width = max(12, *(len(n) + 2 for n in names))
    lines = ["metric".ljust(28) + "".join(n.rjust(width) for n in names)]
    for label, key, sub, fmt in ROWS:
        cells = [_cell(doc["policies"][n], key, sub, fmt) for n in names]
        lines.append(label.ljust(28) + "".join(c.rjust(width) for c in cells))
    return "\n".join(lines)


def format_causes(doc: dict, key: str, title: str) -> str:
    """GPU-hours per cause (idle_by_cause, lost_by_cause), one column per policy, the causes
    largest first over all policies."""
    names = list(doc["policies"])
    per = {n: doc["policies"][n].get(key, {}) for n in names}
    totals: dict[str, float] = {}
    for causes in per.values():
        for cause, hours in causes.items():
            totals[cause] = totals.get(cause, 0.0) + hours
    width = max(12, *(len(n) + 2 for n in names))
    lines = [title.ljust(36) + "".join(n.rjust(width) for n in names)]
    for cause in sorted(totals, key=lambda c: -totals[c]):
        cells = [f"{per[n][cause]:.1f}" if cause in per[n] else "-" for n in names]
        lines.append(f"  {cause}".ljust(36) + "".join(c.rjust(width) for c in cells))
    return "\n".join(lines)


def targets(doc: dict, ours: str = "tessera", base: str = "k8s-default") -> list[tuple[str, str, bool]]:
    """The issue's targets: (target, figure reached, met)."""
    p = doc["policies"]
    if ours not in p:
        return []
    t = p[ours]
    out = [("gpu_utilization >= 0.85", f"{t['gpu_utilization']:.3f}", t["gpu_utilization"] >= 0.85)]
    if base in p:
        b = p[base]
        util = t["gpu_utilization"] / b["gpu_utilization"] if b["gpu_utilization"] else float("inf")
        good = t["training_goodput"] / b["training_goodput"] if b["training_goodput"] else float("inf")
        out += [(f"gpu_utilization >= 2x {base}", f"{util:.2f}x", util >= 2),
                (f"training_goodput >= 1.3x {base}", f"{good:.2f}x", good >= 1.3)]
    ratio = t["cost_total"] / t["on_demand_only_cost"] if t["on_demand_only_cost"] else 0.0
    wait = t["production_wait_p99_s"]
    out += [("cost_total <= 0.5 x on_demand_only_cost", f"{ratio:.3f}", ratio <= 0.5),
            ("oom_failures == 0", str(t["oom_failures"]), t["oom_failures"] == 0),
            ("production_wait_p99_s <= 60", "-" if wait is None else f"{wait:.0f} s",
             wait is not None and wait <= 60)]
    return out


def format_targets(doc: dict) -> str:
    rows = targets(doc)
    if not rows:
        return ""
    lines = ["target (tessera)".ljust(44) + "reached".rjust(10) + "  met"]
    lines += [name.ljust(44) + value.rjust(10) + ("  yes" if ok else "  NO") for name, value, ok in rows]
    return "\n".join(lines)


def write_json(path: str | Path, doc: dict) -> None:
    write_atomic(path, json.dumps(doc, indent=2, sort_keys=False) + "\n")


def write_html(path: str | Path, doc: dict, series: dict[str, dict]) -> None:
    """A self-contained page (plotly.js inlined): allocation and utilisation over time, wait
    distributions per priority class, cost by tier."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    fig = make_subplots(rows=3, cols=1, vertical_spacing=0.08, subplot_titles=(
        "GPU allocation (solid) and utilisation (dotted) over time", "Queue wait per priority class",
        "Cost by tier vs on-demand only"))
    for name, s in series.items():
        fig.add_trace(go.Scatter(x=s["t_h"], y=s["allocated"], name=f"{name} allocation",
                                 legendgroup=name), row=1, col=1)
        fig.add_trace(go.Scatter(x=s["t_h"], y=s["useful"], name=f"{name} utilisation",
                                 legendgroup=name, line={"dash": "dot"}), row=1, col=1)
        for priority, waits in s["waits"].items():
            fig.add_trace(go.Box(y=waits, name=f"{name} / {priority}", legendgroup=name,
                                 showlegend=False, boxpoints=False), row=2, col=1)
    names = list(doc["policies"])
    for tier in ("reserved", "on-demand", "spot"):
        fig.add_trace(go.Bar(x=names, y=[doc["policies"][n]["cost_by_tier"][tier] for n in names],
                             name=f"cost {tier}"), row=3, col=1)
    fig.add_trace(go.Scatter(x=names, y=[doc["policies"][n]["on_demand_only_cost"] for n in names],
                             mode="markers", marker={"symbol": "x", "size": 12}, name="on-demand only"),
                  row=3, col=1)
    fig.update_layout(barmode="stack", height=1300, title="simulate run")
    fig.update_xaxes(title_text="hours", row=1, col=1)
    fig.update_yaxes(title_text="share of GPUs", range=[0, 1.05], row=1, col=1)
    fig.update_yaxes(title_text="seconds", type="log", row=2, col=1)
    fig.update_yaxes(title_text="USD", row=3, col=1)
    write_atomic(path, fig.to_html(include_plotlyjs=True, full_html=True))
