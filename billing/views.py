"""Chargeback pages, the CSV export, the PDF statement and the procurement analysis (finance + staff)."""

from dataclasses import asdict, replace

from django.http import HttpResponse, StreamingHttpResponse
from django.shortcuts import render
from django.utils import timezone

from billing.breakeven import DEFAULTS, against_references, break_even
from billing.budgets import budget_statuses
from billing.chargeback import Report, chargeback_report
from billing.exports import csv_lines
from billing.focus import focus_lines
from billing.forms import BreakEvenForm, MonthForm, RangeForm, StatementForm
from billing.ledger import check_months
from billing.periods import Month, PeriodError
from billing.permissions import finance_required
from billing.procurement import commitments, tier_comparison
from portal.models import BusinessUnit


def _bad_request(request, errors, *, title="Cannot build the report"):
    """Bad input is the user's to fix: say what is wrong, with a 400, never a 500."""
    messages = [errors] if isinstance(errors, str) else [m for ms in errors.values() for m in ms]
    return render(request, "billing/error.html", {"title": title, "errors": messages}, status=400)


def _lines(report: Report) -> list[dict]:
    """The tree flattened into table lines: business unit, team, project, then tier × model."""
    lines = []
    for unit in report.units:
        lines.append({"level": 0, "node": unit})
        for team in unit.children.values():
            lines.append({"level": 1, "node": team})
            for project in team.children.values():
                lines.append({"level": 2, "node": project})
                lines.extend({"level": 3, "row": row} for row in project.rows)
    return lines


@finance_required
def chargeback(request):
    form = MonthForm(request.GET)
    if not form.is_valid():
        return _bad_request(request, form.errors)
    month = form.cleaned_data["month"]
    try:
        report = chargeback_report(month)
    except PeriodError as error:
        return _bad_request(request, str(error))
    current = Month.of(timezone.now())
    return render(request, "billing/chargeback.html", {
        "report": report, "month": month, "lines": _lines(report), "chart": report.chart,
        "previous": month.previous(), "next": month.next() if month < current else None,
        "month_to_date": month == current, "business_units": BusinessUnit.objects.all(),
        "budgets": budget_statuses(month, rows=[row for node in report.total.walk() for row in node.rows]),
    })


def _export(request, lines, prefix: str):
    """A streamed CSV of a month or a range; every month is checked before the first byte is sent."""
    form = RangeForm(request.GET)
    if not form.is_valid():
        return _bad_request(request, form.errors, title="Cannot export")
    months = form.cleaned_data["months"]
    now = timezone.now()
    try:
        check_months(months[0], months[-1], now=now)
    except PeriodError as error:
        return _bad_request(request, str(error), title="Cannot export")
    response = StreamingHttpResponse(lines(months, now=now), content_type="text/csv; charset=utf-8")
    name = str(months[0]) if len(months) == 1 else f"{months[0]}_{months[-1]}"
    response["Content-Disposition"] = f'attachment; filename="{prefix}-{name}.csv"'
    return response


@finance_required
def chargeback_csv(request):
    return _export(request, csv_lines, "chargeback")


@finance_required
def focus_csv(request):
    """The same lines in FinOps FOCUS 1.3 columns (billing/focus.py)."""
    return _export(request, focus_lines, "focus")


@finance_required
def statement(request):
    form = StatementForm(request.GET)
    if not form.is_valid():
        return _bad_request(request, form.errors, title="Cannot build the statement")
    month, unit = form.cleaned_data["month"], form.cleaned_data["business_unit"]
    try:
        report = chargeback_report(month)
    except PeriodError as error:
        return _bad_request(request, str(error), title="Cannot build the statement")
    from billing.statement import statement_pdf  # reportlab loads only when a PDF is asked for

    response = HttpResponse(statement_pdf(report, unit.name, generated=timezone.now()),
                            content_type="application/pdf")
    slug = unit.name.lower().replace(" ", "-")
    response["Content-Disposition"] = f'attachment; filename="statement-{slug}-{month}.pdf"'
    return response


@finance_required
def procurement(request):
    month_form = MonthForm(request.GET)
    calculator = BreakEvenForm(request.GET or None, initial=asdict(DEFAULTS))
    if not month_form.is_valid():
        return _bad_request(request, month_form.errors, title="Cannot build the analysis")
    month = month_form.cleaned_data["month"]
    try:
        tiers, plans = tier_comparison(month), commitments(month)
    except PeriodError as error:
        return _bad_request(request, str(error), title="Cannot build the analysis")
    status = 200
    inputs = DEFAULTS
    if calculator.is_bound:
        if calculator.is_valid():
            inputs = replace(DEFAULTS, **calculator.cleaned_data)
        else:
            status = 400
    tier_cost, tier_on_demand = sum(t.cost for t in tiers), sum(t.on_demand_cost for t in tiers)
    context = {
        "month": month, "tiers": tiers, "plans": plans, "calculator": calculator,
        "tier_cost": tier_cost, "tier_on_demand": tier_on_demand, "tier_saving": tier_on_demand - tier_cost,
        "result": break_even(inputs) if status == 200 else None,
        "references": against_references(inputs) if status == 200 else [],
    }
    return render(request, "billing/procurement.html", context, status=status)
