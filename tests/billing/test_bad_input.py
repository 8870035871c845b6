"""Bad input gets a clear message and a 400, never a 500."""

from datetime import date

import pytest
from django.urls import reverse

from billing.models import Rate

pytestmark = pytest.mark.django_db
CASES = [
    ("billing:chargeback", {"month": "2026-13"}, b"not a month"),
    ("billing:chargeback", {"month": "next"}, b"use YYYY-MM"),
    ("billing:chargeback", {"month": "2099-01"}, b"has not started"),
    ("billing:csv", {"from": "2026-05", "to": "2026-01"}, b"comes before"),
    ("billing:csv", {"from": "2001-01", "to": "2026-01"}, b"At most 60 months"),
    ("billing:csv", {"month": "x"}, b"not a month"),
    ("billing:statement", {"month": "2026-01"}, b"Choose a business unit"),
    ("billing:statement", {"month": "2026-01", "business_unit": "999999"}, b"no such business unit"),
    ("billing:statement", {"month": "2026-01", "business_unit": "abc"}, b"no such business unit"),
    ("billing:procurement", {"utilization_percent": "500"}, b"less than or equal to 100"),
    ("billing:procurement", {"capital_cost": "lots"}, b"Enter a number"),
    ("billing:procurement", {"power_kw": "0"}, b"greater than or equal to 0.1"),
]


@pytest.mark.parametrize("name, params, message", CASES)
def test_pages_answer_bad_input_with_a_400_and_a_message(signed_in, name, params, message):
    response = signed_in("fiona").get(reverse(name), params)
    assert response.status_code == 400 and message in response.content


@pytest.mark.parametrize("name, params, field", [
    ("billing-chargeback", {"month": "2026-00"}, "month"),
    ("billing-cost-by-month", {"from": "2026-05", "to": "2026-01"}, "non_field_errors"),
    ("billing-procurement", {"month": "2099-12"}, "month"),
    ("billing-break-even", {"utilization_percent": "0"}, "utilization_percent"),
    ("billing-break-even", {"cloud_per_server_hour": "-3"}, "cloud_per_server_hour"),
])
def test_the_api_answers_bad_input_with_a_400_naming_the_field(signed_in, name, params, field):
    response = signed_in("fiona").get(reverse(name), params)
    assert response.status_code == 400 and field in response.json()


def test_a_month_without_rates_is_a_400_with_the_reason_everywhere(signed_in):
    Rate.objects.filter(tier__name="reserved", gpu_model="H100-80GB").update(valid_from=date(2099, 1, 1))
    client = signed_in("fiona")
    for name in ("billing:chargeback", "billing:csv", "billing:procurement"):
        response = client.get(reverse(name))
        assert response.status_code == 400 and b"No rate is in force for H100-80GB" in response.content
    response = client.get(reverse("billing-chargeback"))
    assert response.status_code == 400 and "No rate" in response.json()["month"][0]


def test_the_billing_api_answers_bad_input_in_the_portal_apis_shape(signed_in):
    """{field: [message, ...]}, as DRF renders a ValidationError in ui/api/, so one client handles both."""
    portal = signed_in("fiona").post(reverse("api:job-list"), {"team": "no such", "name": "x", "kind": "?"},
                                     content_type="application/json")
    billing = signed_in("fiona").get(reverse("billing-chargeback"), {"month": "2026-00"})
    for response in (portal, billing):
        body = response.json()
        assert response.status_code == 400 and body and all(
            isinstance(messages, list) and all(isinstance(m, str) for m in messages) for messages in body.values())
