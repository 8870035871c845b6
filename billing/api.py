"""The chargeback aggregates for finance systems under /api/v1/billing/ (finance and staff only).

Money and GPU-hours are JSON strings of exact decimals, never floats. Bad input is a 400 in the
portal API's shape (ui/api/): `{"<field>": ["message", ...]}`, as DRF's ValidationError renders.
"""

from dataclasses import asdict, replace
from decimal import Decimal

from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import exceptions, serializers, viewsets
from rest_framework.response import Response
from rest_framework.settings import api_settings
from rest_framework.views import APIView

from billing.breakeven import DEFAULTS, against_references, break_even
from billing.chargeback import chargeback_report
from billing.forms import BreakEvenForm, MonthForm, RangeForm
from billing.lines import cost_by_business_unit
from billing.models import Rate, UsageInterval
from billing.periods import PeriodError
from billing.permissions import IsFinanceOrStaff
from billing.procurement import commitments, tier_comparison

NON_FIELD_ERRORS_KEY = api_settings.NON_FIELD_ERRORS_KEY
MONTH = OpenApiParameter("month", str, description="YYYY-MM; the last complete month when left out.")


def _invalid(errors) -> exceptions.ValidationError:
    """A form's errors (or {field: [message]}) as the 400 the portal API answers."""
    if hasattr(errors, "get_json_data"):
        errors = {NON_FIELD_ERRORS_KEY if field == "__all__" else field: [e["message"] for e in found]
                  for field, found in errors.get_json_data().items()}
    return exceptions.ValidationError(errors)


def _text(value) -> str | None:
    return None if value is None else str(value)


def _plain(values: dict) -> dict:
    """Decimals as exact strings; ints, strings and None as they are."""
    return {key: str(value) if isinstance(value, Decimal) else value for key, value in values.items()}


class BillingAPIView(APIView):
    permission_classes = [IsFinanceOrStaff]

    def month(self, request):
        form = MonthForm(request.query_params)
        if not form.is_valid():
            raise _invalid(form.errors)
        return form.cleaned_data["month"]


class ChargebackView(BillingAPIView):
    @extend_schema(parameters=[MONTH], responses=OpenApiTypes.OBJECT, summary="Monthly chargeback rows and totals")
    def get(self, request):
        month = self.month(request)
        try:
            report = chargeback_report(month)
        except PeriodError as problem:
            raise _invalid({"month": [str(problem)]}) from problem
        rows = [{"business_unit": r.business_unit, "cost_center": r.cost_center, "team": r.team,
                 "project": r.project, "cost_code": r.cost_code, "tier": r.tier, "gpu_model": r.gpu_model,
                 "gpu_hours": f"{r.gpu_hours:.6f}", "cost": str(r.cost), "line_type": r.kind, "note": r.note}
                for unit in report.units for team in unit.children.values()
                for project in team.children.values() for r in project.rows]
        units = [{"name": u.name, "cost_center": u.code, "gpu_hours": f"{u.gpu_hours:.6f}", "cost": str(u.cost),
                  "share_percent": str(u.share), "previous_cost": _text(u.previous_cost),
                  "change_percent": _text(u.change)} for u in report.units]
        return Response({"month": str(month), "currency": "USD", "total_cost": str(report.total.cost),
                         "total_gpu_hours": f"{report.total.gpu_hours:.6f}",
                         "previous_total_cost": _text(report.total.previous_cost),
                         "idle_cost_policy": report.idle_policy, "idle_cost": str(report.idle_total),
                         "idle_cost_statement": report.idle_statement, "closed": report.closed is not None,
                         "business_units": units, "rows": rows, "notes": report.notes})


class CostByMonthView(BillingAPIView):
    @extend_schema(parameters=[OpenApiParameter("from", str), OpenApiParameter("to", str)],
                   responses=OpenApiTypes.OBJECT, summary="Cost per business unit per month (the chart)")
    def get(self, request):
        form = RangeForm(request.query_params)
        if not form.is_valid():
            raise _invalid(form.errors)
        now, result = timezone.now(), []
        try:
            for month in form.cleaned_data["months"]:
                costs = cost_by_business_unit(month, now=now)
                result += [{"month": str(month), "business_unit": unit, "cost": str(cost)}
                           for unit, cost in sorted(costs.items())]
        except PeriodError as problem:
            raise _invalid({"month": [str(problem)]}) from problem
        return Response({"currency": "USD", "results": result})


class ProcurementView(BillingAPIView):
    @extend_schema(parameters=[MONTH], responses=OpenApiTypes.OBJECT, summary="Tier savings and commitments")
    def get(self, request):
        month = self.month(request)
        try:
            tiers, plans = tier_comparison(month), commitments(month)
        except PeriodError as problem:
            raise _invalid({"month": [str(problem)]}) from problem
        return Response({
            "month": str(month), "currency": "USD",
            "tiers": [{"tier": t.tier, "gpu_model": t.gpu_model, "gpu_hours": f"{t.gpu_hours:.6f}",
                       "cost": str(t.cost), "on_demand_cost": str(t.on_demand_cost), "saving": str(t.saving)}
                      for t in tiers],
            "commitments": [_plain({**asdict(plan), "utilization_percent": plan.utilization}) for plan in plans],
        })


class BreakEvenView(BillingAPIView):
    @extend_schema(parameters=[OpenApiParameter(name, str) for name in BreakEvenForm.base_fields],
                   responses=OpenApiTypes.OBJECT, summary="Months to break even for owned hardware")
    def get(self, request):
        form = BreakEvenForm(request.query_params)
        if not form.is_valid():
            raise _invalid(form.errors)
        inputs = replace(DEFAULTS, **form.cleaned_data)
        result = break_even(inputs)
        return Response({
            "inputs": _plain(asdict(inputs)),
            "result": _plain(asdict(result)),
            "references": [{"name": name, "cloud_per_server_hour": str(price), "months": _text(outcome.months)}
                           for name, price, outcome in against_references(inputs)],
        })


class RateSerializer(serializers.ModelSerializer):
    tier = serializers.SlugRelatedField(slug_field="name", read_only=True)

    class Meta:
        model = Rate
        fields = ["id", "gpu_model", "tier", "price_per_gpu_hour", "valid_from", "valid_to", "note"]


class UsageIntervalSerializer(serializers.ModelSerializer):
    team = serializers.SlugRelatedField(slug_field="name", read_only=True)
    business_unit = serializers.SlugRelatedField(slug_field="name", read_only=True)
    project = serializers.SlugRelatedField(slug_field="name", read_only=True)
    tier = serializers.SlugRelatedField(slug_field="name", read_only=True)
    node = serializers.SlugRelatedField(slug_field="name", read_only=True)

    class Meta:
        model = UsageInterval
        fields = ["id", "job", "team", "project", "business_unit", "node", "gpu", "gpu_model", "tier",
                  "gpu_fraction", "started_at", "ended_at", "end_reason"]


class RateViewSet(viewsets.ReadOnlyModelViewSet):
    queryset = Rate.objects.select_related("tier")
    serializer_class = RateSerializer
    permission_classes = [IsFinanceOrStaff]
    filterset_fields = ["gpu_model", "tier__name"]


class UsageIntervalViewSet(viewsets.ReadOnlyModelViewSet):
    """The ledger itself, for finance systems that reconcile line by line."""

    queryset = UsageInterval.objects.select_related("team", "project", "business_unit", "tier", "node").order_by("id")
    serializer_class = UsageIntervalSerializer
    permission_classes = [IsFinanceOrStaff]
    filterset_fields = {"business_unit__name": ["exact"], "team__name": ["exact"], "tier__name": ["exact"],
                        "gpu_model": ["exact"], "started_at": ["gte", "lt"], "ended_at": ["gte", "lt", "isnull"]}
