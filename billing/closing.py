"""Closing a month (its statement becomes final) and correcting it later with adjustment lines.

Services in the HackSoft style (keyword-only, `<entity>_<action>`). Months close in order, once a
month has ended; closing copies the live statement lines into FrozenLine rows in one transaction.
A later change (a rate edited, a late interval) never rewrites the closed month: the difference
per project is booked, with who and why, as adjustment lines in the next open month.
"""

from collections import defaultdict
from dataclasses import dataclass
from decimal import Decimal

from django.db import IntegrityError, transaction
from django.utils import timezone

from billing.idle import policy
from billing.lines import closed_month, frozen_rows, live_rows
from billing.models import Adjustment, ClosedMonth, FrozenLine
from billing.periods import Month, PeriodError
from portal.models import Project


class ClosingError(PeriodError):
    """A close or an adjustment that would break the rules; the message says which and what to do."""


@dataclass(frozen=True)
class Correction:
    project: Project
    billed: Decimal
    now: Decimal

    @property
    def difference(self) -> Decimal:
        return self.now - self.billed


def latest_closed() -> Month | None:
    latest = ClosedMonth.objects.order_by("-month").values_list("month", flat=True).first()
    return Month.of(latest) if latest else None


def next_open_month(after: Month) -> Month:
    """The first month after `after` that is not closed: where corrections to `after` are booked."""
    month = after.next()
    closed = {Month.of(day) for day in ClosedMonth.objects.filter(month__gt=after.first_day)
              .values_list("month", flat=True)}
    while month in closed:
        month = month.next()
    return month


@transaction.atomic
def month_close(*, month: Month, by=None, now=None) -> ClosedMonth:
    """Freeze the month's statement as it stands now; NoRateError (a PeriodError) if it cannot be priced."""
    now = now or timezone.now()
    if month.end > now:
        raise ClosingError(f"{month} has not ended yet; it can be closed from {month.end:%Y-%m-%d} 00:00 UTC.")
    latest = latest_closed()
    if latest is not None and month <= latest:
        already = closed_month(month) is not None
        raise ClosingError(f"{month} is already closed." if already else
                           f"Months close in order and {latest} is already closed; {month} stays open.")
    rows = live_rows(month, now=now)
    try:
        with transaction.atomic():
            closed = ClosedMonth.objects.create(month=month.first_day, closed_at=now, closed_by=by,
                                                idle_policy=policy(),
                                                total_cost=sum((row.cost for row in rows), Decimal(0)))
    except IntegrityError as error:  # another finance user closed it a moment ago
        raise ClosingError(f"{month} is already closed.") from error
    FrozenLine.objects.bulk_create([FrozenLine(
        closed_month=closed, kind=row.kind, business_unit_id=row.business_unit_id, team_id=row.team_id,
        project_id=row.project_id, business_unit_name=row.business_unit, cost_center=row.cost_center,
        team_name=row.team, project_name=row.project, cost_code=row.cost_code, tier=row.tier,
        gpu_model=row.gpu_model, gpu_seconds=row.gpu_seconds, cost=row.cost, note=row.note[:300]) for row in rows])
    return closed


def corrections(month: Month, *, now=None) -> list[Correction]:
    """Per project, what a closed month would cost today against what was billed and corrected so far
    (only the differences)."""
    closed = closed_month(month)
    if closed is None:
        raise ClosingError(f"{month} is not closed; an open month is always computed live.")
    billed: dict[int, Decimal] = defaultdict(Decimal)
    current: dict[int, Decimal] = defaultdict(Decimal)
    for row in frozen_rows(month, closed):
        if row.project_id is not None:
            billed[row.project_id] += row.cost
    for project_id, amount in Adjustment.objects.filter(corrects=month.first_day).values_list("project_id", "amount"):
        billed[project_id] += amount  # corrections booked already
    for row in live_rows(month, now=now):
        if row.project_id is not None:
            current[row.project_id] += row.cost
    projects = Project.objects.select_related("team").in_bulk(set(billed) | set(current))
    found = [Correction(projects[pk], billed[pk], current[pk]) for pk in projects if billed[pk] != current[pk]]
    return sorted(found, key=lambda c: (c.project.team.name, c.project.name))


@transaction.atomic
def adjustment_create(*, corrects: Month, project: Project, amount: Decimal, reason: str, by) -> Adjustment:
    """Book a correction to a closed month as a line in the next open month."""
    reason = (reason or "").strip()
    if not reason:
        raise ClosingError("Say why: an adjustment needs a reason.")
    if not amount:
        raise ClosingError("An adjustment of $0.00 changes nothing.")
    if closed_month(corrects) is None:
        raise ClosingError(f"{corrects} is not closed; its statement is still computed live, so nothing to correct.")
    return Adjustment.objects.create(month=next_open_month(corrects).first_day, corrects=corrects.first_day,
                                     project=project, amount=amount, reason=reason[:200], created_by=by)


@transaction.atomic
def corrections_book(*, month: Month, reason: str, by, now=None) -> list[Adjustment]:
    """Book every project's difference (see `corrections`) as adjustments in the next open month."""
    return [adjustment_create(corrects=month, project=c.project, amount=c.difference, reason=reason, by=by)
            for c in corrections(month, now=now)]
