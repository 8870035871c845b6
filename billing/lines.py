"""The lines of a month's statement: frozen once the month is closed, else computed live.

A live month is its usage rows (billing.ledger), its idle reserved capacity (billing.idle) and the
adjustment lines booked in it. A closed
month is read back from its FrozenLine rows, so a later rate edit or a late interval cannot
change what was billed; corrections go into an open month as adjustments (billing.closing).
"""

from collections import defaultdict
from decimal import Decimal

from billing.idle import idle_rows, policy
from billing.ledger import Row, usage_rows
from billing.models import Adjustment, ClosedMonth, FrozenLine, LineKind
from billing.periods import Month
from portal.models import Project

ADJUSTMENT_TIER = "adjustment"


def sort_key(row: Row):
    return (row.business_unit, row.team, row.project, row.kind != LineKind.USAGE, row.tier, row.gpu_model, row.note)


def closed_month(month: Month) -> ClosedMonth | None:
    return ClosedMonth.objects.filter(month=month.first_day).select_related("closed_by").first()


def frozen_rows(month: Month, closed: ClosedMonth) -> list[Row]:
    return [Row(month=month, business_unit=line.business_unit_name, cost_center=line.cost_center,
                team=line.team_name, project=line.project_name, cost_code=line.cost_code, tier=line.tier,
                gpu_model=line.gpu_model, gpu_seconds=line.gpu_seconds, cost=line.cost, kind=line.kind,
                note=line.note, business_unit_id=line.business_unit_id, team_id=line.team_id,
                project_id=line.project_id)
            for line in FrozenLine.objects.filter(closed_month=closed).order_by("id")]


def adjustment_rows(month: Month) -> list[Row]:
    """One line per adjustment booked in the month, saying which month it corrects, who and why."""
    adjustments = Adjustment.objects.filter(month=month.first_day).select_related(
        "project__team__business_unit", "created_by")
    rows = []
    for adjustment in adjustments:
        project: Project = adjustment.project
        team, unit = project.team, project.team.business_unit
        rows.append(Row(
            month=month, business_unit=unit.name, cost_center=unit.cost_center, team=team.name, project=project.name,
            cost_code=project.cost_code, tier=ADJUSTMENT_TIER, gpu_model="", gpu_seconds=Decimal(0),
            cost=adjustment.amount, kind=LineKind.ADJUSTMENT,
            note=f"Correction to {adjustment.corrects:%Y-%m} by {adjustment.created_by.get_username()} on "
                 f"{adjustment.created_at:%Y-%m-%d}: {adjustment.reason}",
            business_unit_id=unit.pk, team_id=team.pk, project_id=project.pk))
    return rows


def live_rows(month: Month, *, now=None, check=True, names=None) -> list[Row]:
    """What the month's statement would say if it were closed now: usage, idle capacity, adjustments."""
    usage = usage_rows(month, now=now, check=check, names=names)
    return sorted([*usage, *idle_rows(month, usage, now=now), *adjustment_rows(month)], key=sort_key)


def statement_rows(month: Month, *, now=None, check=True, names=None) -> list[Row]:
    """The month's statement lines: frozen if the month is closed, else live (see live_rows)."""
    closed = closed_month(month)
    if closed is not None:
        return frozen_rows(month, closed)
    return live_rows(month, now=now, check=check, names=names)


def statement_policy(month: Month, closed: ClosedMonth | None = None) -> str:
    """The idle-cost policy a month's statement follows: the one it was closed under, else today's."""
    closed = closed or closed_month(month)
    return closed.idle_policy if closed is not None else policy()


def cost_by_business_unit(month: Month, *, now=None, names=None) -> dict[str, Decimal]:
    """Cost per business unit for one month (the chart), summed from the same cent-rounded lines as the table."""
    totals: dict[str, Decimal] = defaultdict(Decimal)
    for row in statement_rows(month, now=now, names=names):
        totals[row.business_unit] += row.cost
    return dict(totals)
