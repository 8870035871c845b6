"""Metrics of one policy's run: time integrals over [0, horizon] (horizon = last submit), plus
per-job samples. Everything is fed as piecewise-constant segments (value held from t0 to t1),
so the time averages are exact, not sampled."""

from __future__ import annotations

import math
from collections import defaultdict

from scheduling.engine.types import PRIORITY_CLASSES, TIERS

SERIES_BINS = 192  # points per time series in the HTML report


def percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100); None for no samples."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


class Meter:
    def __init__(self, horizon: float):
        self.horizon = max(horizon, 1.0)
        self.bin_s = self.horizon / SERIES_BINS
        self.integral: dict[str, float] = defaultdict(float)
        self.series: dict[str, list[float]] = defaultdict(lambda: [0.0] * SERIES_BINS)
        self.cost_by_tier: dict[str, float] = {t: 0.0 for t in TIERS}
        self.on_demand_cost = 0.0
        self.capacity_cost = 0.0
        self.jct: dict[str, list[float]] = defaultdict(list)
        self.waits: dict[str, list[float]] = defaultdict(list)
        self.counts: dict[str, float] = defaultdict(float)

    def add(self, name: str, t0: float, t1: float, value: float, series: bool = False) -> float:
        """Add `value` held over [t0, t1] to integral `name`; returns the seconds counted."""
        lo, hi = max(0.0, t0), min(self.horizon, t1)
        if hi <= lo or value == 0:
            return max(0.0, hi - lo)
        self.integral[name] += value * (hi - lo)
        if series:
            bins = self.series[name]
            first, last = int(lo / self.bin_s), min(SERIES_BINS - 1, int(hi / self.bin_s))
            for b in range(first, last + 1):
                start, end = b * self.bin_s, (b + 1) * self.bin_s
                bins[b] += value * max(0.0, min(hi, end) - max(lo, start)) / self.bin_s
        return hi - lo

    def hold(self, t0: float, t1: float, units: float, waste_gb: float, tier: str, price: float,
             on_demand_price: float) -> None:
        """A job member held `units` of GPU capacity (and `waste_gb` unneeded GPU memory)."""
        seconds = self.add("allocated", t0, t1, units, series=True)
        self.add("memory_waste", t0, t1, waste_gb)
        hours = units * seconds / 3600
        self.cost_by_tier[tier] += hours * price
        self.on_demand_cost += hours * on_demand_price

    def capacity(self, t0: float, t1: float, gpus: int, memory_gb: float, price: float) -> None:
        seconds = self.add("capacity", t0, t1, gpus, series=True)
        self.add("capacity_memory", t0, t1, memory_gb)
        self.capacity_cost += gpus * seconds / 3600 * price

    def useful(self, t0: float, t1: float, units: float) -> None:
        self.add("useful", t0, t1, units, series=True)

    def result(self) -> dict:
        cap = self.integral["capacity"] or 1.0
        jct = {k: {"p50": percentile(v, 50), "p95": percentile(v, 95), "n": len(v)}
               for k, v in sorted(self.jct.items())}
        order = [p for p in PRIORITY_CLASSES if p in self.waits]
        hours = self.horizon / 3600
        total = sum(self.cost_by_tier.values())
        return {
            "gpu_allocation": round(self.integral["allocated"] / cap, 4),
            "gpu_utilization": round(self.integral["useful"] / cap, 4),
            "memory_waste": round(self.integral["memory_waste"] / (self.integral["capacity_memory"] or 1), 4),
            "completed": int(self.counts["completed"]),
            "jct_p50_s": {k: _round(v["p50"]) for k, v in jct.items()},
            "jct_p95_s": {k: _round(v["p95"]) for k, v in jct.items()},
            "wait_p95_s": {p: _round(percentile(self.waits[p], 95)) for p in order},
            "production_wait_p99_s": _round(percentile(self.waits.get("production", []), 99)),
            "oom_failures": int(self.counts["oom_failures"]),
            "preemptions": int(self.counts["preemptions"]),
            "spot_interruptions": int(self.counts["spot_interruptions"]),
            "lost_gpu_hours": round(self.counts["lost_gpu_s"] / 3600, 2),
            "training_goodput": round(self.counts["training_ideal_gpu_s"] / 3600 / hours, 3),
            "cost_total": round(total, 2),
            "cost_by_tier": {t: round(c, 2) for t, c in self.cost_by_tier.items()},
            "on_demand_only_cost": round(self.on_demand_cost, 2),
            "capacity_cost": round(self.capacity_cost, 2),
            "horizon_s": self.horizon,
        }

    def series_result(self) -> dict:
        cap = self.series["capacity"]
        share = {name: [v / c if c else 0.0 for v, c in zip(self.series[name], cap, strict=True)]
                 for name in ("allocated", "useful")}
        return {"t_h": [(b + 0.5) * self.bin_s / 3600 for b in range(SERIES_BINS)], **share,
                "waits": {p: sorted(v) for p, v in self.waits.items()}}


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 1)
