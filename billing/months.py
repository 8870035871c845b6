"""The month-closing page: which months are final, what they would cost today, and the corrections."""

from dataclasses import dataclass
from decimal import Decimal

from django.contrib import messages
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_POST

from billing.closing import corrections, corrections_book, month_close
from billing.forms import CloseMonthForm, CorrectionsForm
from billing.ledger import Names
from billing.lines import live_rows
from billing.models import Adjustment, ClosedMonth
from billing.periods import Month, PeriodError
from billing.permissions import finance_required

MONTHS_SHOWN = 6
MONTHS_MAX = 24


@dataclass
class MonthLine:
    month: Month
    closed: ClosedMonth | None
    live_total: Decimal | None  # None: it cannot be priced today (a rate is missing)
    error: str = ""
    difference: Decimal | None = None  # closed: what projects would owe beyond billed and booked corrections


def _shown(now, closed: dict[Month, ClosedMonth]) -> list[Month]:
    """The last MONTHS_SHOWN ended months, reaching back to the latest closed one (at most MONTHS_MAX)."""
    months = [Month.of(now).previous()]
    while len(months) < MONTHS_MAX and (len(months) < MONTHS_SHOWN or max(closed, default=months[-1]) < months[-1]):
        months.append(months[-1].previous())
    return months


def _lines(now) -> list[MonthLine]:
    closed = {Month.of(c.month): c for c in ClosedMonth.objects.select_related("closed_by")}
    names, lines = Names(), []
    for month in _shown(now, closed):
        try:
            live = sum((row.cost for row in live_rows(month, now=now, names=names)), Decimal(0))
            unbooked = (sum((c.difference for c in corrections(month, now=now)), Decimal(0))
                        if month in closed else None)
            lines.append(MonthLine(month, closed.get(month), live, difference=unbooked))
        except PeriodError as error:
            lines.append(MonthLine(month, closed.get(month), None, str(error)))
    return lines


@finance_required
def months(request):
    now = timezone.now()
    return render(request, "billing/months.html", {
        "lines": _lines(now), "month": Month.of(now).previous(),
        "adjustments": Adjustment.objects.select_related("project__team", "created_by").order_by("-created_at")[:50],
    })


@finance_required
@require_POST
def close(request):
    form = CloseMonthForm(request.POST)
    if not form.is_valid():
        return _refused(request, [m for ms in form.errors.values() for m in ms])
    try:
        closed = month_close(month=form.cleaned_data["month"], by=request.user)
    except PeriodError as error:
        return _refused(request, [str(error)])
    messages.success(request, f"{form.cleaned_data['month']} is closed: ${closed.total_cost:,.2f} is final.")
    return redirect(reverse("billing:months"))


@finance_required
@require_POST
def book_corrections(request):
    form = CorrectionsForm(request.POST)
    if not form.is_valid():
        return _refused(request, [m for ms in form.errors.values() for m in ms])
    month = form.cleaned_data["month"]
    try:
        booked = corrections_book(month=month, reason=form.cleaned_data["reason"], by=request.user)
    except PeriodError as error:
        return _refused(request, [str(error)])
    total = sum((a.amount for a in booked), Decimal(0))
    messages.success(request, f"Booked {len(booked)} adjustment lines ({total:+,.2f} USD) correcting {month}.")
    return redirect(reverse("billing:months"))


def _refused(request, errors):
    return render(request, "billing/error.html", {"title": "Cannot do that", "errors": errors}, status=400)

