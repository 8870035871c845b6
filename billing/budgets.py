"""Budgets per team or business unit: spend against the monthly amount, and alerts at thresholds.

Spend is the month's statement lines (billing.lines), so a budget counts exactly what the
statement charges: usage, idle capacity the policy places on the team, and adjustments. Each
threshold alerts once per month (BudgetAlert is unique on budget × month × threshold), through
notifications (mail, as each person's preferences say, and the team's webhooks) to the team's
leads, or for a business unit to the Finance group.
"""

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from decimal import ROUND_HALF_UP, Decimal

from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.utils import timezone

from billing.ledger import Row
from billing.lines import statement_rows
from billing.models import Budget, BudgetAlert, LineKind, parse_thresholds
from billing.periods import Month
from notifications.models import Event
from notifications.services import notice_add
from portal.models import FINANCE_GROUP, Membership


@dataclass
class BudgetStatus:
    budget: Budget
    month: Month
    spent: Decimal
    elapsed: Decimal  # share of the month gone (1 for a past month)
    one_off: Decimal = Decimal(0)  # adjustments inside `spent`: booked once, never extrapolated

    @property
    def percent(self) -> Decimal:
        return (self.spent / self.budget.monthly_amount * 100).quantize(Decimal("0.1"), rounding=ROUND_HALF_UP)

    @property
    def projected(self) -> Decimal | None:
        """Month-end spend at the pace so far; None once the month is over."""
        if self.elapsed >= 1 or not self.elapsed:
            return None
        return (self.one_off + (self.spent - self.one_off) / self.elapsed).quantize(Decimal("0.01"))

    @property
    def crossed(self) -> list[int]:
        return [t for t in parse_thresholds(self.budget.thresholds) if self.percent >= t]

    @property
    def state(self) -> str:
        if self.percent >= 100:
            return "over"
        return "warning" if self.crossed else "ok"


def spend(rows: list[Row], *, only=None) -> tuple[dict[int, Decimal], dict[int, Decimal]]:
    """(cost per team id, cost per business unit id) of the statement lines (those `only` keeps)."""
    teams: dict[int, Decimal] = defaultdict(Decimal)
    units: dict[int, Decimal] = defaultdict(Decimal)
    for row in rows:
        if only is not None and not only(row):
            continue
        if row.team_id is not None:
            teams[row.team_id] += row.cost
        if row.business_unit_id is not None:
            units[row.business_unit_id] += row.cost
    return teams, units


def _adjustment(row: Row) -> bool:
    return row.kind == LineKind.ADJUSTMENT


def elapsed_share(month: Month, now: datetime) -> Decimal:
    return Decimal(str(round(min(max((now - month.start) / (month.end - month.start), 0), 1), 6)))


def budget_statuses(month: Month, *, now: datetime | None = None, rows: list[Row] | None = None) -> list[BudgetStatus]:
    """Every budget against the month's statement lines (`rows` if already read)."""
    now = now or timezone.now()
    budgets = list(Budget.objects.select_related("team", "business_unit"))
    if not budgets:
        return []
    rows = rows if rows is not None else statement_rows(month, now=now)
    (teams, units), (team_once, unit_once) = spend(rows), spend(rows, only=_adjustment)
    elapsed, statuses = elapsed_share(month, now), []
    for budget in budgets:
        if budget.team_id:
            statuses.append(BudgetStatus(budget, month, teams[budget.team_id], elapsed, team_once[budget.team_id]))
        else:
            key = budget.business_unit_id
            statuses.append(BudgetStatus(budget, month, units[key], elapsed, unit_once[key]))
    return statuses


def recipients(budget: Budget) -> list:
    """Who hears of the budget's alerts: the team's leads, or for a business unit the Finance group."""
    users = get_user_model().objects.filter(is_active=True)
    if budget.team_id:
        users = users.filter(memberships__team_id=budget.team_id, memberships__role=Membership.Role.LEAD)
    else:
        users = users.filter(groups__name=FINANCE_GROUP)
    return list(users.distinct().order_by("username"))


def budget_alerts_send(*, now: datetime | None = None) -> list[BudgetAlert]:
    """Record and mail every threshold crossed this month that has not alerted yet; returns the new alerts."""
    now = now or timezone.now()
    month, sent = Month.of(now), []
    for status in budget_statuses(month, now=now):
        for threshold in status.crossed:
            alert = _alert(status, threshold)
            if alert is not None:
                sent.append(alert)
    return sent


def _alert(status: BudgetStatus, threshold: int) -> BudgetAlert | None:
    budget, people = status.budget, recipients(status.budget)
    try:
        # The row and its notice together; the notice's deliveries are sent, and retried, after the commit.
        with transaction.atomic():
            alert = BudgetAlert.objects.create(budget=budget, month=status.month.first_day, threshold=threshold,
                                               spent=status.spent,
                                               recipients=", ".join(sorted({u.email for u in people if u.email})))
            notice_add(key=f"budget-alert:{alert.pk}", event=Event.BUDGET, team_id=budget.team_id,
                       user_ids=[user.pk for user in people],
                       subject=f"{budget.owner_name} passed {threshold}% of its GPU budget for {status.month}",
                       text=_body(status, threshold))
    except IntegrityError:  # alerted already (or by a concurrent worker)
        return None
    return alert


def _body(status: BudgetStatus, threshold: int) -> str:
    budget = status.budget
    projected = f"\nAt this pace the month ends at ${status.projected:,.2f}." if status.projected else ""
    return (f"{budget.owner_name} has spent ${status.spent:,.2f} of its ${budget.monthly_amount:,.2f} budget for "
            f"{status.month.label} ({status.percent}%), passing the {threshold}% threshold.{projected}\n\n"
            f"Details: the team's spend page in Tessera (/billing/teams/<team>/) or the chargeback report.")
