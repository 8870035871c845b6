"""Reads over the ledger: GPU-seconds and cost per group, aggregated by the database.

Each interval is clipped to the month and to every rate window in force inside it, in SQL, so an
interval that crosses a month boundary or a price change is split exactly; Python only ever sees
the grouped rows.
"""

import operator
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal
from functools import reduce

from django.db.models import Case, DecimalField, F, Max, Min, Q, Sum, Value, When
from django.db.models.functions import Coalesce, Greatest, Least
from django.utils import timezone

from billing.models import LineKind, Rate, UsageInterval
from billing.periods import Month, PeriodError, day_start, overlap_seconds, sql_moment
from portal.models import BusinessUnit, Project, Team
from scheduling.models import CapacityTier

CENT = Decimal("0.01")
SECONDS_PER_HOUR = Decimal(3600)
ON_DEMAND = "on-demand"


class NoRateError(PeriodError):
    """Usage in a month that no rate covers: the report cannot be priced."""


@dataclass(frozen=True)
class RateWindow:
    gpu_model: str
    tier_id: int
    tier: str
    low: datetime
    high: datetime
    price: Decimal


@dataclass
class Row:
    """GPU-seconds and cost of one (month, business unit, team, project, tier, GPU model)."""

    month: Month
    business_unit: str
    cost_center: str
    team: str
    project: str
    cost_code: str
    tier: str
    gpu_model: str
    gpu_seconds: Decimal
    cost: Decimal
    kind: str = LineKind.USAGE  # usage, idle reserved capacity or an adjustment (billing.models.LineKind)
    note: str = ""
    business_unit_id: int | None = None
    team_id: int | None = None
    project_id: int | None = None

    @property
    def gpu_hours(self) -> Decimal:
        return self.gpu_seconds / SECONDS_PER_HOUR


def as_of_for(month: Month, now: datetime | None = None) -> datetime:
    """Open intervals count until now, or until the month's end for a past month."""
    return min(now or timezone.now(), month.end)


def rate_windows(month: Month) -> list[RateWindow]:
    """Every rate in force during the month, its validity clipped to the month."""
    return rate_windows_between(month.start, month.end)


def rate_windows_between(start: datetime, end: datetime) -> list[RateWindow]:
    """Every rate in force between two UTC midnights, its validity clipped to them."""
    rates = Rate.objects.filter(valid_from__lt=end.date()).filter(
        Q(valid_to__isnull=True) | Q(valid_to__gt=start.date())).select_related("tier")
    windows = []
    for rate in rates:
        low = max(day_start(rate.valid_from), start)
        high = min(day_start(rate.valid_to), end) if rate.valid_to else end
        windows.append(RateWindow(rate.gpu_model, rate.tier_id, rate.tier.name, low, high, rate.price_per_gpu_hour))
    return sorted(windows, key=lambda w: (w.gpu_model, w.tier, w.low))


def intervals_between(start: datetime, end: datetime, as_of: datetime, business_unit_id: int | None = None):
    """Intervals with some time in [start, end) (open ones up to `as_of`)."""
    intervals = UsageInterval.objects.filter(started_at__lt=min(end, as_of)).filter(
        Q(ended_at__isnull=True) | Q(ended_at__gt=start))
    if business_unit_id is not None:
        intervals = intervals.filter(business_unit_id=business_unit_id)
    return intervals


def intervals_in(month: Month, as_of: datetime, business_unit_id: int | None = None):
    return intervals_between(month.start, month.end, as_of, business_unit_id)


def _span_annotations(start: datetime, end: datetime, as_of: datetime) -> dict:
    """SQL: the first and last moment of use inside [start, end), to check rates against."""
    return {"first": Min(Greatest(F("started_at"), sql_moment(start))),
            "last": Max(Least(Coalesce(F("ended_at"), sql_moment(as_of)), sql_moment(end)))}


def check_spans(spans, windows: list[RateWindow], period: str) -> None:
    """Raise NoRateError naming the model × tier and the moment when used time has no rate.

    `spans` are {gpu_model, tier_id, first, last} rows; gaps between rates inside a span count
    even if nothing ran in the gap, since rates are meant to be continuous.
    """
    by_pair, covered = defaultdict(list), {}
    for window in windows:
        by_pair[(window.gpu_model, window.tier_id)].append(window)
    for span in spans:
        key = (span["gpu_model"], span["tier_id"])
        first, last = span["first"], span["last"]
        if key in covered:
            first, last = min(first, covered[key][0]), max(last, covered[key][1])
        covered[key] = (first, last)
    tiers = dict(CapacityTier.objects.values_list("id", "name"))
    for (model, tier_id), (first, last) in covered.items():
        cursor = first
        for window in by_pair[(model, tier_id)]:
            if window.low > cursor:
                break
            cursor = max(cursor, window.high)
        if cursor < last:
            raise NoRateError(
                f"No rate is in force for {model} × {tiers.get(tier_id)} from {cursor:%Y-%m-%d %H:%M} UTC in "
                f"{period}, but it was used then. Add a rate in the admin (Billing › Rates) to price it.")


def check_months(first: Month, last: Month, *, now=None) -> None:
    """One query for a whole range: raise NoRateError if some usage in it has no rate in force."""
    as_of = min(now or timezone.now(), last.end)
    spans = intervals_between(first.start, last.end, as_of).values("gpu_model", "tier_id").annotate(
        **_span_annotations(first.start, last.end, as_of)).order_by()
    label = str(first) if first == last else f"{first} to {last}"
    check_spans(spans, rate_windows_between(first.start, last.end), label)


def cost_expression(windows: list[RateWindow], as_of: datetime, *, by_tier: bool = True):
    """SQL: price × seconds summed over the rate windows that match the row's model (and tier)."""
    by_key = defaultdict(list)
    for window in windows:
        by_key[(window.gpu_model, window.tier_id) if by_tier else window.gpu_model].append(window)
    whens = []
    for key, group in by_key.items():
        match = Q(gpu_model=key[0], tier_id=key[1]) if by_tier else Q(gpu_model=key)
        parts = [overlap_seconds(w.low, w.high, as_of) * Value(w.price, output_field=DecimalField())
                 for w in group]
        whens.append(When(match, then=reduce(operator.add, parts)))
    zero = Value(Decimal(0), output_field=DecimalField())
    return Case(*whens, default=zero, output_field=DecimalField()) if whens else zero


def money(price_seconds) -> Decimal:
    """Price × GPU-seconds to dollars, rounded to the cent once per row (so totals add up)."""
    return (Decimal(price_seconds or 0) / SECONDS_PER_HOUR).quantize(CENT, rounding=ROUND_HALF_UP)


def grouped(month: Month, fields: list[str], *, now=None, business_unit_id=None, on_demand=False, check=True):
    """Rows grouped by `fields` (ids, for a narrow and fast GROUP BY) with gpu_seconds and cost in
    price-seconds (on_demand_cost too if asked). With `check`, the rows are read at once and the
    rates are checked against the first and last use each row carries; NoRateError if uncovered."""
    as_of = as_of_for(month, now)
    windows = rate_windows(month)
    if check:
        fields = list(dict.fromkeys([*fields, "gpu_model", "tier_id"]))
    annotations = {
        "gpu_seconds": Sum(F("gpu_fraction") * overlap_seconds(month.start, month.end, as_of)),
        "cost": Sum(F("gpu_fraction") * cost_expression(windows, as_of)),
    }
    if on_demand:
        listed = [w for w in windows if w.tier == ON_DEMAND]
        annotations["on_demand_cost"] = Sum(F("gpu_fraction") * cost_expression(listed, as_of, by_tier=False))
    if check:
        annotations.update(_span_annotations(month.start, month.end, as_of))
    query = intervals_in(month, as_of, business_unit_id).values(*fields).annotate(**annotations).order_by()
    if not check:
        return query
    rows = list(query)
    check_spans(rows, windows, str(month))
    return rows


def job_cost(job, *, now: datetime | None = None) -> Decimal | None:
    """What a job's GPU time has cost so far at the rates in force (None: it has used none yet).
    Time with no rate in force counts as free here; the monthly report refuses it loudly."""
    now = now or timezone.now()
    intervals = UsageInterval.objects.filter(job=job)
    first = intervals.aggregate(first=Min("started_at"))["first"]
    if first is None:
        return None
    windows = rate_windows_between(day_start(first.date()), day_start(now.date()) + timedelta(days=1))
    return money(intervals.aggregate(cost=Sum(F("gpu_fraction") * cost_expression(windows, now)))["cost"])


class Names:
    """Id → label lookups for the small tenancy tables, read once per report."""

    def __init__(self):
        self.units = {pk: (name, code) for pk, name, code in BusinessUnit.objects.values_list("id", "name",
                                                                                               "cost_center")}
        self.teams = dict(Team.objects.values_list("id", "name"))
        self.projects = {pk: (name, code) for pk, name, code in Project.objects.values_list("id", "name",
                                                                                             "cost_code")}
        self.tiers = dict(CapacityTier.objects.values_list("id", "name"))


ROW_FIELDS = ["business_unit_id", "team_id", "project_id", "tier_id", "gpu_model"]


def usage_rows(month: Month, *, now=None, check=True, names=None) -> list[Row]:
    """The live usage rows of a month, one per business unit × team × project × tier × model, by name.

    Their number is bounded by the tenancy (units × teams × projects × tiers × models), never by the
    number of intervals. Statements read billing.lines.statement_rows, which freezes closed months.
    """
    names = names or Names()
    rows = []
    for values in grouped(month, ROW_FIELDS, now=now, check=check):
        unit, cost_center = names.units[values["business_unit_id"]]
        project, cost_code = names.projects[values["project_id"]]
        rows.append(Row(month=month, business_unit=unit, cost_center=cost_center,
                        team=names.teams[values["team_id"]], project=project, cost_code=cost_code,
                        tier=names.tiers[values["tier_id"]], gpu_model=values["gpu_model"],
                        gpu_seconds=Decimal(values["gpu_seconds"] or 0), cost=money(values["cost"]),
                        business_unit_id=values["business_unit_id"], team_id=values["team_id"],
                        project_id=values["project_id"]))
    return rows
