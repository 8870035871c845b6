"""Rates: no overlapping validity (in clean, the service and the database), no negative prices."""

from datetime import date
from decimal import Decimal

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.urls import reverse

from billing.models import Rate
from billing.services import rate_save
from scheduling.models import CapacityTier

pytestmark = pytest.mark.django_db


@pytest.fixture
def spot():
    tier = CapacityTier.objects.get(name="spot")
    Rate.objects.create(gpu_model="H100-80GB", tier=tier, price_per_gpu_hour=Decimal("2.75"),
                        valid_from=date(2026, 1, 1), valid_to=date(2026, 7, 1))
    return tier


def rate(tier, start, end=None, price="3.00", model="H100-80GB"):
    return Rate(gpu_model=model, tier=tier, price_per_gpu_hour=Decimal(price), valid_from=start, valid_to=end)


@pytest.mark.parametrize("start, end", [(date(2026, 6, 30), None), (date(2025, 6, 1), date(2026, 1, 2)),
                                        (date(2026, 2, 1), date(2026, 3, 1)), (date(2025, 1, 1), None)])
def test_it_refuses_overlapping_validity(spot, start, end):
    with pytest.raises(ValidationError, match="Overlaps"):
        rate_save(rate=rate(spot, start, end))
    assert Rate.objects.count() == 1


def test_adjacent_rates_and_other_models_or_tiers_are_fine(spot):
    rate_save(rate=rate(spot, date(2026, 7, 1)))
    rate_save(rate=rate(spot, date(2025, 1, 1), date(2026, 1, 1)))
    rate_save(rate=rate(spot, date(2026, 2, 1), model="A100-80GB"))
    rate_save(rate=rate(CapacityTier.objects.get(name="reserved"), date(2026, 2, 1)))
    assert Rate.objects.count() == 5


def test_the_database_refuses_overlaps_that_skip_validation(spot):
    with pytest.raises(IntegrityError), transaction.atomic():
        rate(spot, date(2026, 3, 1)).save()


@pytest.mark.parametrize("price", ["-0.01", "-5"])
def test_negative_prices_are_refused_by_clean_and_the_database(spot, price):
    with pytest.raises(ValidationError, match="price"):
        rate_save(rate=rate(spot, date(2027, 1, 1), price=price))
    with pytest.raises(IntegrityError), transaction.atomic():
        rate(spot, date(2027, 1, 1), price=price).save()


def test_the_end_must_follow_the_start(spot):
    with pytest.raises(ValidationError, match="after the start"):
        rate_save(rate=rate(spot, date(2027, 2, 1), date(2027, 1, 1)))


def test_the_admin_shows_an_overlap_as_a_form_error_and_saves_nothing(admin_client, spot):
    url = reverse("admin:billing_rate_add")
    data = {"gpu_model": "H100-80GB", "tier": spot.pk, "price_per_gpu_hour": "3.10", "valid_from": "2026-03-01",
            "valid_to": "", "note": ""}
    response = admin_client.post(url, data)
    assert response.status_code == 200 and b"Overlaps" in response.content
    assert Rate.objects.count() == 1
    data["valid_from"] = "2026-07-01"
    assert admin_client.post(url, data).status_code == 302
    assert Rate.objects.count() == 2
