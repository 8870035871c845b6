"""A team's own spend page: its statement lines and budget status, for its leads, finance and staff."""

from decimal import Decimal

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.shortcuts import get_object_or_404, render
from django.utils import timezone

from billing.budgets import BudgetStatus, elapsed_share
from billing.chargeback import Node, chargeback_report
from billing.forms import MonthForm
from billing.models import Budget, LineKind
from billing.periods import Month, PeriodError
from billing.permissions import sees_billing
from billing.views import _bad_request
from portal.access import LEAD, role_in
from portal.models import Team


def sees_team_spend(user, team: Team) -> bool:
    """Finance and staff see every team; a lead sees their own team; nobody else sees any."""
    return sees_billing(user) or role_in(user, team.pk) == LEAD


def team_node(report, team: Team) -> Node:
    for unit in report.units:
        if team.name in unit.children:
            return unit.children[team.name]
    return Node(name=team.name)


@login_required
def team_spend(request, team):
    team = get_object_or_404(Team, name=team)
    if not sees_team_spend(request.user, team):
        raise PermissionDenied("A team's spend is for its leads, finance and platform admins.")
    now = timezone.now()
    form = MonthForm(request.GET)
    if not form.is_valid():
        return _bad_request(request, form.errors)
    month = form.cleaned_data["month"] if request.GET.get("month") else Month.of(now)
    try:
        report = chargeback_report(month, now=now)
    except PeriodError as error:
        return _bad_request(request, str(error))
    node = team_node(report, team)
    budget = Budget.objects.filter(team=team).first()
    one_off = sum((row.cost for project in node.children.values() for row in project.rows
                   if row.kind == LineKind.ADJUSTMENT), Decimal(0))
    status = BudgetStatus(budget, month, node.cost, elapsed_share(month, now), one_off) if budget else None
    return render(request, "billing/team.html", {
        "team": team, "report": report, "node": node, "month": month, "budget": status,
        "projects": list(node.children.values()), "month_to_date": month == Month.of(now),
        "previous": month.previous(), "next": month.next() if month < Month.of(now) else None,
    })
