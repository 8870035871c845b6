"""Single sign-on with OpenID Connect against a real provider on loopback (tests/oidc/conftest.py).

The provider's groups map to teams and roles (TESSERA_OIDC_GROUP_MAP); local accounts stay.
"""

from decimal import Decimal

import pytest
from django.contrib.auth.models import User

from portal.models import FINANCE_GROUP, BusinessUnit, Membership, Team
from tests.oidc.conftest import sign_in_through

pytestmark = pytest.mark.django_db


@pytest.fixture
def teams(db):
    unit = BusinessUnit.objects.create(name="Unit")
    return {name: Team.objects.create(name=name, business_unit=unit, guaranteed_gpus=Decimal(1),
                                      burst_limit_gpus=Decimal(2)) for name in ("search", "vision", "fraud")}


def roles(user) -> dict[str, str]:
    return dict(Membership.objects.filter(user=user).values_list("team__name", "role"))


def test_a_provider_user_signs_in_and_gets_the_teams_and_roles_of_their_groups(sso, client, teams):
    sso.seed(users={"olivia": {"password": "olivia-at-the-idp", "email": "olivia@example.org",
                               "groups": ["gpu-search", "gpu-search-leads", "gpu-vision", "finance-team", "other"]}})
    answer = sign_in_through(sso, client, "olivia", "olivia-at-the-idp")
    assert answer.status_code == 302 and answer["Location"] == "/"
    olivia = User.objects.get(username="olivia")
    assert roles(olivia) == {"search": "lead", "vision": "viewer"}  # the higher of two roles in a team
    assert olivia.groups.filter(name=FINANCE_GROUP).exists() and not olivia.is_staff
    assert olivia.email == "olivia@example.org" and not olivia.has_usable_password()
    assert b"olivia" in client.get("/", follow=True).content


def test_each_sign_in_follows_the_groups_as_they_change(sso, client, teams):
    sso.seed(users={"pablo": {"password": "pablo-at-the-idp", "groups": ["gpu-search-leads", "platform-admins"]}})
    sign_in_through(sso, client, "pablo", "pablo-at-the-idp")
    pablo = User.objects.get(username="pablo")
    Membership.objects.create(user=pablo, team=teams["fraud"], role="viewer")  # by hand: fraud is not mapped
    assert roles(pablo)["search"] == "lead" and pablo.is_staff

    sso.seed(users={"pablo": {"password": "pablo-at-the-idp", "groups": ["gpu-vision"]}})
    client.logout()
    sign_in_through(sso, client, "pablo", "pablo-at-the-idp")
    pablo.refresh_from_db()
    assert roles(pablo) == {"vision": "viewer", "fraud": "viewer"} and not pablo.is_staff


def test_a_provider_user_never_takes_over_a_local_account_of_the_same_name(sso, client, teams):
    User.objects.create_user("alice", password="alice-local-password")
    sso.seed(users={"alice": {"password": "someone-else", "groups": ["platform-admins", "gpu-search-leads"]}})
    answer = sign_in_through(sso, client, "alice", "someone-else")
    assert answer.status_code == 302 and answer["Location"] == "/accounts/login/"
    page = client.get("/accounts/login/")
    assert b"Single sign-on did not sign you in" in page.content
    alice = User.objects.get(username="alice")
    assert not alice.is_staff and roles(alice) == {} and alice.check_password("alice-local-password")
    assert client.get("/").status_code == 302  # not signed in


def test_local_accounts_still_sign_in_and_the_login_page_offers_sso(sso, client):
    User.objects.create_user("demo", password="demo-local-password")
    page = client.get("/accounts/login/")
    assert b"Sign in with Example Corp" in page.content
    answer = client.post("/accounts/login/", {"username": "demo", "password": "demo-local-password"})
    assert answer.status_code == 302 and answer["Location"] == "/"


def test_a_forged_callback_signs_nobody_in(sso, client):
    client.get("/oidc/authenticate/")
    answer = client.get("/oidc/callback/?code=forged&state=not-the-one-we-sent")
    assert answer.status_code == 400
    assert client.get("/").status_code == 302


def test_without_configuration_there_is_no_sso(client):
    assert client.get("/oidc/authenticate/").status_code == 404
    assert b"Sign in with" not in client.get("/accounts/login/").content
