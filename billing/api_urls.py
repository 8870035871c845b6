"""Billing endpoints under /api/v1/billing/ (the aggregates finance systems read)."""

urlpatterns: list = []
