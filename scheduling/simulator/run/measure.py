"""Metrics of one policy's run: time integrals over [0, horizon] (horizon = last submit), plus
per-job samples. Everything is fed as piecewise-constant segments (value held from t0 to t1),
so the time averages are exact, not sampled.

Useful work is counted net of what a preemption or failure later rolls back: the segment since
the last checkpoint is added to `rolled_back` when it is lost, and utilisation is useful minus
rolled back. Cost is what the fleet bills: reserved nodes for every second they exist, used or
not; on-demand and spot nodes (elastic) from their first pod until they have stood empty for the
autoscaler's scale-down delay (see NodeBill)."""

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
        # Jobs unfinished at the horizon, at their age then (a lower bound on their completion
        # time), per kind: jct_p95_s over completed jobs alone rewards a policy for leaving its
        # slowest jobs unfinished (issue 18).
        self.unfinished_age: dict[str, list[float]] = defaultdict(list)
        self.waits: dict[str, list[float]] = defaultdict(list)        # every wait, per priority
        self.queue_delays: dict[str, list[float]] = defaultdict(list)  # submit to first start, per kind
        # |first start - the first estimated start the job was shown|, per kind (the portal's ETA)
        self.eta_errors: dict[str, list[float]] = defaultdict(list)
        self.counts: dict[str, float] = defaultdict(float)
        self.idle_gpu_s: dict[str, float] = defaultdict(float)  # idle GPU-seconds per cause
        self.lost_gpu_s: dict[str, float] = defaultdict(float)  # lost GPU-seconds per cause
        self.idle_now: tuple[float, dict[str, float]] = (0.0, {})  # since when, units per cause

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

    def hold(self, t0: float, t1: float, units: float, waste_gb: float, on_demand_price: float) -> None:
        """A job member held `units` of GPU capacity (and `waste_gb` unneeded GPU memory)."""
        seconds = self.add("allocated", t0, t1, units, series=True)
        self.add("memory_waste", t0, t1, waste_gb)
        self.on_demand_cost += units * seconds / 3600 * on_demand_price

    def capacity(self, t0: float, t1: float, gpus: int, memory_gb: float, price: float, tier: str) -> None:
        """A node existed over [t0, t1]; a reserved one bills all of it, used or not."""
        seconds = self.add("capacity", t0, t1, gpus, series=True)
        self.add("capacity_memory", t0, t1, memory_gb)
        self.capacity_cost += gpus * seconds / 3600 * price
        if tier == "reserved":
            self.cost_by_tier[tier] += gpus * seconds / 3600 * price

    def bill(self, t0: float, t1: float, gpus: int, price: float, tier: str) -> None:
        """An elastic (on-demand or spot) node billed over [t0, t1]."""
        self.cost_by_tier[tier] += gpus * max(0.0, min(self.horizon, t1) - max(0.0, t0)) / 3600 * price

    def useful(self, t0: float, t1: float, units: float) -> None:
        self.add("useful", t0, t1, units, series=True)

    def rolled_back(self, t0: float, t1: float, units: float) -> None:
        """Useful work done over [t0, t1] that a stop threw away: it no longer counts."""
        self.add("rolled_back", t0, t1, units, series=True)

    def idle(self, now: float, by_cause: dict[str, float]) -> None:
        """Idle GPU units per cause from now on (until the next call); the last call's held
        until now. Every idle unit has one cause, so the causes sum to the idle GPU-hours."""
        since, before = self.idle_now
        for cause, units in before.items():
            self.idle_gpu_s[cause] += units * max(0.0, min(self.horizon, now) - max(0.0, since))
        self.idle_now = (now, by_cause)

    def lost(self, cause: str, gpu_s: float) -> None:
        """Work thrown away (GPU-seconds since the last checkpoint) by a stop of this cause."""
        self.counts["lost_gpu_s"] += gpu_s
        self.lost_gpu_s[cause] += gpu_s

    def eta(self, kind: str, shown: float | None, started: float) -> None:
        """A job started; `shown` is the first start estimate it was shown while it waited."""
        if shown is None:
            self.counts["eta_unknown"] += 1
        else:
            self.eta_errors[kind].append(abs(started - shown))

    def result(self) -> dict:
        cap = self.integral["capacity"] or 1.0
        net_useful = self.integral["useful"] - self.integral["rolled_back"]
        jct = dict(sorted(self.jct.items()))
        order = [p for p in PRIORITY_CLASSES if p in self.waits]
        hours = self.horizon / 3600
        total = sum(self.cost_by_tier.values())
        return {
            "gpu_allocation": round(self.integral["allocated"] / cap, 4),
            "gpu_utilization": round(net_useful / cap, 4),
            "rolled_back_gpu_hours": round(self.integral["rolled_back"] / 3600, 2),
            "capacity_gpu_hours": round(cap / 3600, 1),
            "memory_waste": round(self.integral["memory_waste"] / (self.integral["capacity_memory"] or 1), 4),
            "completed": int(self.counts["completed"]),
            "jct_mean_s": {k: _round(sum(v) / len(v)) for k, v in jct.items()},
            "jct_p50_s": {k: _round(percentile(v, 50)) for k, v in jct.items()},
            "jct_p95_s": {k: _round(percentile(v, 95)) for k, v in jct.items()},
            "jct_p95_with_unfinished_s": {k: _round(percentile(jct.get(k, []) + self.unfinished_age.get(k, []), 95))
                                          for k in sorted(set(jct) | set(self.unfinished_age))},
            "queue_delay_p95_s": {k: _round(percentile(v, 95)) for k, v in sorted(self.queue_delays.items())},
            "eta_abs_error_p50_s": {k: _round(percentile(v, 50)) for k, v in sorted(self.eta_errors.items())},
            "eta_abs_error_p90_s": {k: _round(percentile(v, 90)) for k, v in sorted(self.eta_errors.items())},
            "eta_samples": {k: len(v) for k, v in sorted(self.eta_errors.items())},
            "eta_unknown": int(self.counts["eta_unknown"]),
            "wait_p95_s": {p: _round(percentile(self.waits[p], 95)) for p in order},
            "production_wait_p99_s": _round(percentile(self.waits.get("production", []), 99)),
            "oom_failures": int(self.counts["oom_failures"]),
            "preemptions": int(self.counts["preemptions"]),
            "spot_interruptions": int(self.counts["spot_interruptions"]),
            "mig_reconfigurations": int(self.counts["mig_reconfigurations"]),
            "mig_disruptions": int(self.counts["mig_disruptions"]),
            "lost_gpu_hours": round(self.counts["lost_gpu_s"] / 3600, 2),
            "lost_by_cause": _hours(self.lost_gpu_s),
            "idle_gpu_hours": round(sum(self.idle_gpu_s.values()) / 3600, 2),
            "idle_by_cause": _hours(self.idle_gpu_s),
            "training_goodput": round(self.counts["training_ideal_gpu_s"] / 3600 / hours, 3),
            "cost_total": round(total, 2),
            "cost_per_useful_gpu_hour": round(total / (net_useful / 3600), 3) if net_useful > 0 else None,
            "cost_by_tier": {t: round(c, 2) for t, c in self.cost_by_tier.items()},
            "on_demand_only_cost": round(self.on_demand_cost, 2),
            "capacity_cost": round(self.capacity_cost, 2),
            "horizon_s": self.horizon,
        }

    def series_result(self) -> dict:
        cap = self.series["capacity"]
        useful = [u - r for u, r in zip(self.series["useful"], self.series["rolled_back"], strict=True)]
        share = {name: [v / c if c else 0.0 for v, c in zip(values, cap, strict=True)]
                 for name, values in (("allocated", self.series["allocated"]), ("useful", useful))}
        return {"t_h": [(b + 0.5) * self.bin_s / 3600 for b in range(SERIES_BINS)], **share,
                "waits": {p: sorted(v) for p, v in self.waits.items()}}


class NodeBill:
    """When an elastic node is billed: from its first pod until it has stood empty for
    `linger_s` (the autoscaler's scale-down delay), as a cluster autoscaler adds and removes
    whole nodes. Periods closer than the delay merge into one."""

    def __init__(self, linger_s: float):
        self.linger_s = linger_s
        self.pods = 0
        self.start: float | None = None
        self.idle_since: float | None = None

    def bind(self, now: float) -> tuple[float, float] | None:
        """A pod arrives; returns a finished billing period, if this starts a new one."""
        done = None
        if self.pods == 0:
            if self.start is not None and self.idle_since is not None and now - self.idle_since > self.linger_s:
                done = (self.start, self.idle_since + self.linger_s)
                self.start = None
            if self.start is None:
                self.start = now
            self.idle_since = None
        self.pods += 1
        return done

    def release(self, now: float) -> None:
        self.pods -= 1
        if self.pods == 0:
            self.idle_since = now

    def close(self, now: float) -> tuple[float, float] | None:
        """The node goes away (or the horizon ends): the open period, if any."""
        if self.start is None:
            return None
        end = now if self.idle_since is None else min(now, self.idle_since + self.linger_s)
        period, self.start, self.idle_since, self.pods = (self.start, end), None, None, 0
        return period


def _hours(seconds: dict[str, float]) -> dict[str, float]:
    """GPU-seconds per cause as GPU-hours, largest first."""
    return {k: round(v / 3600, 2) for k, v in sorted(seconds.items(), key=lambda kv: -kv[1]) if v >= 18}


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 1)
