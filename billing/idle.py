"""Idle reserved capacity: what the reservation costs beyond what teams used, and who carries it.

Reserved GPUs are paid for every hour whether busy or not (the amortised reservation: GPUs × hours
× the reserved rate in force). The part no usage row pays for is the idle cost, and the policy in
settings (TESSERA_IDLE_COST_POLICY) decides where it goes, as statement lines of kind "idle":

- `showback`: one line per GPU model under the "Unallocated" business unit, charged to no team;
- `chargeback-by-use`: spread over projects by their GPU-seconds on that reserved model;
- `chargeback-by-guarantee`: spread over teams by guaranteed GPUs, then over each team's
  projects by their GPU-seconds that month (all to its first project when it used nothing).

Capacity is today's inventory of GPUs on reserved-tier nodes (the ledger keeps no history of it),
counted from the ledger's first interval (before it, Tessera did not run the cluster);
months close frozen, so a later inventory change does not rewrite a closed month.
"""

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from decimal import ROUND_DOWN, Decimal

from django.conf import settings
from django.db.models import Count, Min

from billing.ledger import CENT, SECONDS_PER_HOUR, Row, as_of_for, rate_windows
from billing.models import LineKind, UsageInterval
from billing.periods import Month
from portal.models import Project, Team
from scheduling.models import Gpu

RESERVED = "reserved"
SHOWBACK, BY_USE, BY_GUARANTEE = "showback", "chargeback-by-use", "chargeback-by-guarantee"
POLICIES = (SHOWBACK, BY_USE, BY_GUARANTEE)
UNALLOCATED = "Unallocated"
SHOWBACK_CODE = "SHOWBACK"
STATEMENTS = {
    SHOWBACK: "shown separately under \"Unallocated\" and charged to no team (showback)",
    BY_USE: "charged to the projects that used each reserved GPU model, in proportion to their GPU-hours on it",
    BY_GUARANTEE: "charged to teams in proportion to their guaranteed GPUs, and within a team to its projects by "
                  "their GPU-hours",
}


@dataclass
class Reservation:
    """One GPU model's reserved capacity in a month: the amortised cost and how much of it was used."""

    gpu_model: str
    gpus: int
    capacity_hours: Decimal
    amortised_cost: Decimal
    used_cost: Decimal

    @property
    def idle_cost(self) -> Decimal:
        return max(self.amortised_cost - self.used_cost, Decimal(0))


def policy() -> str:
    return settings.TESSERA_IDLE_COST_POLICY


def policy_statement(chosen: str, idle_total: Decimal) -> str:
    """The sentence every statement (page, CSV, PDF) prints about idle reserved capacity."""
    return f"Idle reserved capacity (${idle_total:,.2f}) is {STATEMENTS[chosen]}."


def reservations(month: Month, usage: list[Row], *, now: datetime | None = None) -> list[Reservation]:
    """Per reserved GPU model: capacity × the reserved rate in force, hour by hour of the month so far."""
    as_of = as_of_for(month, now)
    gpus = dict(Gpu.objects.filter(node__tier__name=RESERVED).values("model").annotate(n=Count("id"))
                .values_list("model", "n"))
    used: dict[str, Decimal] = defaultdict(Decimal)
    for row in usage:
        if row.tier == RESERVED and row.kind == LineKind.USAGE:
            used[row.gpu_model] += row.cost
    # Before the ledger's first interval Tessera did not run the cluster: no capacity to account for.
    since = max(UsageInterval.objects.aggregate(first=Min("started_at"))["first"] or as_of, month.start)
    price_seconds: dict[str, Decimal] = defaultdict(Decimal)
    for window in rate_windows(month):
        if window.tier == RESERVED and window.gpu_model in gpus:
            seconds = max((min(window.high, as_of) - max(window.low, since)).total_seconds(), 0)
            price_seconds[window.gpu_model] += Decimal(str(seconds)) * window.price
    hours = Decimal(str(max((as_of - since).total_seconds(), 0))) / SECONDS_PER_HOUR
    return [Reservation(model, count, count * hours,
                        (count * price_seconds[model] / SECONDS_PER_HOUR).quantize(CENT), used[model])
            for model, count in sorted(gpus.items())]


def split(amount: Decimal, weights: dict) -> dict:
    """`amount` in cents over the keys by weight, largest remainders first, so the parts add up exactly."""
    total = sum(weights.values(), Decimal(0))
    if not total or not amount:
        return {}
    cents = int(amount / CENT)
    exact = {key: Decimal(cents) * Decimal(weight) / total for key, weight in weights.items()}
    parts = {key: int(value.to_integral_value(ROUND_DOWN)) for key, value in exact.items()}
    for key in sorted(exact, key=lambda k: (parts[k] - exact[k], str(k)))[:cents - sum(parts.values())]:
        parts[key] += 1
    return {key: Decimal(part) * CENT for key, part in parts.items() if part}


def idle_rows(month: Month, usage: list[Row], *, now=None, chosen: str | None = None) -> list[Row]:
    """The idle lines of a month under the chosen policy (the one in settings by default)."""
    chosen = chosen or policy()
    rows: list[Row] = []
    for reservation in reservations(month, usage, now=now):
        if reservation.idle_cost:
            rows += _place(month, reservation, usage, chosen)
    return rows


def _place(month: Month, reservation: Reservation, usage: list[Row], chosen: str) -> list[Row]:
    """Charge the idle cost as the policy says; whatever nobody can carry stays shown separately."""
    model, idle = reservation.gpu_model, reservation.idle_cost
    parts, how = {}, ""
    if chosen == BY_USE:
        parts = split(idle, _seconds_by_project(usage, lambda r: r.tier == RESERVED and r.gpu_model == model))
        how = "by use"
    if not parts and chosen in (BY_USE, BY_GUARANTEE):  # by use with no use falls back to guarantees
        parts, how = _by_guarantee(idle, usage), "by guaranteed GPUs"
    rows = _project_rows(month, model, parts, f"Idle reserved {model} capacity, charged {how}") if parts else []
    rest = idle - sum(parts.values(), Decimal(0))
    if rest:
        rows.append(Row(month=month, business_unit=UNALLOCATED, cost_center="", team="idle reserved capacity",
                        project="not charged to a team", cost_code=SHOWBACK_CODE, tier=RESERVED, gpu_model=model,
                        gpu_seconds=Decimal(0), cost=rest, kind=LineKind.IDLE,
                        note=f"Idle reserved {model} capacity, shown separately"))
    return rows


def _seconds_by_project(usage: list[Row], keep) -> dict[int, Decimal]:
    seconds: dict[int, Decimal] = defaultdict(Decimal)
    for row in usage:
        if row.kind == LineKind.USAGE and row.project_id is not None and keep(row):
            seconds[row.project_id] += row.gpu_seconds
    return {key: value for key, value in seconds.items() if value}


def _by_guarantee(idle: Decimal, usage: list[Row]) -> dict[int, Decimal]:
    """Teams by guaranteed GPUs, then each team's share over its projects by GPU-seconds."""
    teams = {team.pk: team for team in Team.objects.filter(guaranteed_gpus__gt=0).prefetch_related("projects")}
    parts: dict[int, Decimal] = defaultdict(Decimal)
    for team_id, share in split(idle, {pk: team.guaranteed_gpus for pk, team in teams.items()}).items():
        within = _seconds_by_project(usage, lambda row, team_id=team_id: row.team_id == team_id)
        if not within:
            first = min(teams[team_id].projects.all(), key=lambda p: p.name, default=None)
            if first is None:
                continue
            within = {first.pk: Decimal(1)}
        for project_id, part in split(share, within).items():
            parts[project_id] += part
    return parts


def _project_rows(month: Month, model: str, parts: dict[int, Decimal], note: str) -> list[Row]:
    projects = Project.objects.select_related("team__business_unit").in_bulk(list(parts))
    rows = []
    for project_id, cost in parts.items():
        project = projects[project_id]
        unit = project.team.business_unit
        rows.append(Row(month=month, business_unit=unit.name, cost_center=unit.cost_center, team=project.team.name,
                        project=project.name, cost_code=project.cost_code, tier=RESERVED, gpu_model=model,
                        gpu_seconds=Decimal(0), cost=cost, kind=LineKind.IDLE, note=note,
                        business_unit_id=unit.pk, team_id=project.team_id, project_id=project.pk))
    return rows
