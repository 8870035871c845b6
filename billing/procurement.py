"""Procurement analysis: what the tiers saved, how full the reservation is, what to commit to.

The sums run in the database (the same clipped-overlap SQL as the chargeback); Python only sees
grouped rows and the load samples (one number per GPU model per sample time).
"""

import math
from collections import defaultdict
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal

from django.db.models import Case, Count, DecimalField, F, Q, Sum, Value, When

from billing.idle import RESERVED, reservations
from billing.ledger import (
    ON_DEMAND,
    ROW_FIELDS,
    SECONDS_PER_HOUR,
    RateWindow,
    as_of_for,
    grouped,
    intervals_in,
    money,
    rate_windows,
    usage_rows,
)
from billing.periods import Month
from scheduling.models import CapacityTier, Gpu

SAMPLE_STEP = timedelta(hours=2)


@dataclass
class TierLine:
    tier: str
    gpu_model: str
    gpu_hours: Decimal
    cost: Decimal
    on_demand_cost: Decimal

    @property
    def saving(self) -> Decimal:
        return self.on_demand_cost - self.cost


@dataclass
class Commitment:
    gpu_model: str
    reserved_gpus: int
    capacity_hours: Decimal
    used_hours: Decimal
    idle_cost: Decimal
    mean_load: Decimal
    peak_load: Decimal
    break_even_share: Decimal | None  # reserved price ÷ on-demand price
    recommended_gpus: int | None
    cost_at_current: Decimal | None
    cost_at_recommended: Decimal | None

    @property
    def utilization(self) -> Decimal | None:
        return (self.used_hours / self.capacity_hours * 100).quantize(Decimal("0.1")) if self.capacity_hours else None


def tier_comparison(month: Month, *, now=None) -> list[TierLine]:
    """Actual cost per tier × model next to the same GPU-hours at the on-demand price."""
    tiers = dict(CapacityTier.objects.values_list("id", "name"))
    lines: dict[tuple[str, str], TierLine] = {}
    for values in grouped(month, ROW_FIELDS, now=now, on_demand=True):
        key = (tiers[values["tier_id"]], values["gpu_model"])
        line = lines.setdefault(key, TierLine(*key, Decimal(0), Decimal(0), Decimal(0)))
        line.gpu_hours += Decimal(values["gpu_seconds"] or 0) / SECONDS_PER_HOUR
        line.cost += money(values["cost"])
        line.on_demand_cost += money(values["on_demand_cost"])
    # A model with no on-demand price claims no saving rather than a 100% one.
    listed = {window.gpu_model for window in rate_windows(month) if window.tier == ON_DEMAND}
    for line in lines.values():
        if line.gpu_model not in listed:
            line.on_demand_cost = line.cost
    return sorted(lines.values(), key=lambda line: (line.tier, line.gpu_model))


def load_samples(month: Month, as_of, step: timedelta = SAMPLE_STEP) -> dict[str, list[Decimal]]:
    """GPU units in use per model at each sample time (every `step` from the month's start)."""
    times = []
    moment = month.start
    while moment < as_of:
        times.append(moment)
        moment += step
    sums = {f"s{i}": Sum(Case(When(Q(started_at__lte=t) & (Q(ended_at__isnull=True) | Q(ended_at__gt=t)),
                                   then=F("gpu_fraction")), default=Value(Decimal(0)), output_field=DecimalField()))
            for i, t in enumerate(times)}
    if not sums:
        return {}
    rows = intervals_in(month, as_of).values("gpu_model").annotate(**sums).order_by("gpu_model")
    return {row["gpu_model"]: [Decimal(row[f"s{i}"] or 0) for i in range(len(times))] for row in rows}


def _price(windows: list[RateWindow], model: str, tier: str) -> Decimal | None:
    """The price in force at the end of the month (the one a new commitment would pay)."""
    matching = [w for w in windows if w.gpu_model == model and w.tier == tier]
    return matching[-1].price if matching else None


def _modelled_cost(samples, level: int, hours: Decimal, reserved: Decimal, on_demand: Decimal, step_h) -> Decimal:
    """A month with `level` GPUs reserved and everything above them bought on demand."""
    overflow = sum((max(load - level, Decimal(0)) for load in samples), Decimal(0)) * step_h
    return (level * hours * reserved + overflow * on_demand).quantize(Decimal("0.01"))


def recommend(samples: list[Decimal], share: Decimal) -> int:
    """Reserve the load that is present at least `share` of the time (reserved ÷ on-demand price).

    A reserved GPU costs `share` of an on-demand one around the clock, so it pays for itself when
    it is busy more than that share of the hours: the classic newsvendor level.
    """
    ordered = sorted(samples, reverse=True)
    index = max(math.ceil(share * len(ordered)) - 1, 0)
    return int(ordered[index]) if ordered else 0


def commitments(month: Month, *, now=None) -> list[Commitment]:
    as_of = as_of_for(month, now)
    windows = rate_windows(month)
    hours = Decimal(str(round(month.hours(as_of), 6)))
    reserved_gpus = dict(Gpu.objects.filter(node__tier__name=RESERVED).values("model").annotate(n=Count("id"))
                         .values_list("model", "n"))
    used = defaultdict(Decimal)
    reserved_tier = CapacityTier.objects.get(name=RESERVED).pk
    for row in grouped(month, ["tier_id", "gpu_model"], now=now):
        if row["tier_id"] == reserved_tier:
            used[row["gpu_model"]] += Decimal(row["gpu_seconds"] or 0) / SECONDS_PER_HOUR
    samples = load_samples(month, as_of)
    step_h = Decimal(SAMPLE_STEP.total_seconds()) / SECONDS_PER_HOUR
    idle = {r.gpu_model: r.idle_cost for r in reservations(month, usage_rows(month, now=now, check=False), now=now)}
    result = []
    for model in sorted(set(reserved_gpus) | set(samples)):
        result.append(_commitment(model, reserved_gpus.get(model, 0), hours, used[model], samples.get(model, []),
                                  windows, step_h, idle.get(model, Decimal(0))))
    return result


def _commitment(model, gpus, hours, used, samples, windows, step_h, idle_cost) -> Commitment:
    # The modelled costs use the prices in force at the month's end; the idle cost is billing.idle's.
    reserved, on_demand = _price(windows, model, RESERVED), _price(windows, model, ON_DEMAND)
    capacity = gpus * hours
    share = (reserved / on_demand).quantize(Decimal("0.001")) if reserved is not None and on_demand else None
    recommended = recommend(samples, share) if share is not None and samples else None
    priced = recommended is not None
    return Commitment(
        gpu_model=model, reserved_gpus=gpus, capacity_hours=capacity, used_hours=used, idle_cost=max(idle_cost, 0),
        mean_load=(sum(samples, Decimal(0)) / len(samples)).quantize(Decimal("0.01")) if samples else Decimal(0),
        peak_load=max(samples, default=Decimal(0)).quantize(Decimal("0.01")), break_even_share=share,
        recommended_gpus=recommended,
        cost_at_current=_modelled_cost(samples, gpus, hours, reserved, on_demand, step_h) if priced else None,
        cost_at_recommended=(_modelled_cost(samples, recommended, hours, reserved, on_demand, step_h)
                             if priced else None))
