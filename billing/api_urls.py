"""Billing endpoints under /api/v1/billing/ (the aggregates finance systems read)."""

from django.urls import include, path
from rest_framework.routers import DefaultRouter

from billing import api

router = DefaultRouter(trailing_slash=True)
router.include_root_view = False
router.register("rates", api.RateViewSet, basename="billing-rate")
router.register("intervals", api.UsageIntervalViewSet, basename="billing-interval")

urlpatterns = [
    path("chargeback/", api.ChargebackView.as_view(), name="billing-chargeback"),
    path("cost-by-month/", api.CostByMonthView.as_view(), name="billing-cost-by-month"),
    path("procurement/", api.ProcurementView.as_view(), name="billing-procurement"),
    path("break-even/", api.BreakEvenView.as_view(), name="billing-break-even"),
    path("", include(router.urls)),
]
