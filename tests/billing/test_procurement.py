"""Procurement: break-even against the published figures, the commitment rule, tier savings."""

from dataclasses import replace
from datetime import UTC, datetime
from decimal import Decimal

import pytest
from django.urls import reverse

from billing.breakeven import DEFAULTS, against_references, break_even, owned_running_cost
from billing.periods import Month
from billing.procurement import commitments, recommend, tier_comparison

# docs/reference/performance-figures.md §4: months to break even at 100% and 50% utilisation
PUBLISHED = {"AWS p5.48xlarge on-demand, before June 2025": ((3.7, 4.6), (8, 10)),
             "AWS p5.48xlarge on-demand, after the cut": ((7, 9), (16, 21)),
             "AWS p5.48xlarge Capacity Block": ((10, 13), (25, 36)),
             "AWS p5 1-year reservation": ((7.5, 9.4), (7.5, 9.4))}


def test_the_owned_running_cost_matches_the_worked_example():
    assert owned_running_cost(DEFAULTS) == Decimal("5632.50")  # 1,785 colo + 547.50 power + 3,300 support


@pytest.mark.parametrize("utilization, which", [(100, 0), (50, 1)])
def test_break_even_falls_in_the_published_ranges(utilization, which):
    for name, _, outcome in against_references(replace(DEFAULTS, utilization_percent=Decimal(utilization))):
        low, high = PUBLISHED[name][which]
        assert low <= outcome.months <= high, (name, outcome.months)


def test_owning_never_pays_back_when_the_cloud_is_cheaper_than_running_it():
    assert break_even(replace(DEFAULTS, utilization_percent=Decimal(5))).months is None


@pytest.mark.parametrize("samples, share, level", [
    ([8, 8, 8, 8], Decimal("0.5"), 8), ([10, 9, 2, 1], Decimal("0.5"), 9), ([10, 9, 2, 1], Decimal("0.75"), 2),
    ([4, 0, 0, 0], Decimal("0.5"), 0), ([], Decimal("0.5"), 0)])
def test_reserve_the_load_present_at_least_the_break_even_share_of_the_time(samples, share, level):
    assert recommend([Decimal(s) for s in samples], share) == level


@pytest.mark.django_db
def test_cheaper_tiers_save_against_on_demand(demo):
    month = Month.of(datetime.now(UTC)).previous()
    lines = tier_comparison(month)
    assert all(line.saving == 0 for line in lines if line.tier == "on-demand")
    assert all(line.saving > 0 for line in lines if line.tier != "on-demand")
    plans = {plan.gpu_model: plan for plan in commitments(month)}
    assert plans["H100-80GB"].reserved_gpus == 32 and 0 < plans["H100-80GB"].utilization <= 100


@pytest.mark.django_db
def test_the_page_shows_the_calculator_with_defaults(signed_in):
    response = signed_in("fiona").get(reverse("billing:procurement"))
    assert response.status_code == 200
    assert b"275000" in response.content and b"months" in response.content
