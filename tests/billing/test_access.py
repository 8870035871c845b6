"""Who sees chargeback: finance and staff; leads, members and viewers get 403; anonymous signs in."""

from datetime import UTC, datetime

import pytest
from django.urls import reverse

from billing.periods import Month

pytestmark = pytest.mark.django_db
MONTH = str(Month.of(datetime.now(UTC)).previous())
PAGES = [("billing:chargeback", {}), ("billing:csv", {"month": MONTH}), ("billing:procurement", {}),
         ("billing:statement", {"month": MONTH, "business_unit": "BU"})]
API = ["billing-chargeback", "billing-cost-by-month", "billing-procurement", "billing-break-even",
       "billing-rate-list", "billing-interval-list"]
ALLOWED = {"admin": True, "fiona": True, "alice": False, "bob": False, "carol": False}


def _params(params):
    from portal.models import BusinessUnit

    return {k: (BusinessUnit.objects.first().pk if v == "BU" else v) for k, v in params.items()}


@pytest.mark.parametrize("username", list(ALLOWED))
def test_every_page_and_endpoint_by_role(signed_in, username):
    """One demo load per role: every billing page and API endpoint answers as the role allows."""
    client, expected = signed_in(username), 200 if ALLOWED[username] else 403
    answers = {name: client.get(reverse(name), _params(params)).status_code for name, params in PAGES}
    answers.update({name: client.get(reverse(name)).status_code for name in API})
    assert answers == dict.fromkeys(answers, expected)


def test_anonymous_visitors_sign_in_first_and_the_api_refuses_them(client, demo):
    for name, params in PAGES:
        response = client.get(reverse(name), _params(params))
        assert response.status_code == 302 and reverse("login") in response["Location"], name
    for name in API:
        assert client.get(reverse(name)).status_code in (401, 403), name


def test_the_api_takes_a_token(client, demo):
    from django.contrib.auth.models import User

    from portal.tokens import token_issue

    _token, secret = token_issue(User.objects.get(username="fiona"), "reports", days=1)
    response = client.get(reverse("billing-chargeback"), {"month": MONTH}, HTTP_AUTHORIZATION=f"Token {secret}")
    assert response.status_code == 200 and response.json()["month"] == MONTH
