"""Issue 15 item 3: API tokens are named, expire, can be revoked, and users manage them in the portal.

Before: one token per user, never expiring, made only by an operator's `manage.py api_token`.
"""

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from portal.models import ApiToken
from portal.tokens import token_issue

pytestmark = pytest.mark.django_db
PAGE = "/account/tokens/"


@pytest.fixture
def ursula(client):
    user = User.objects.create_user("ursula")
    client.force_login(user)
    return user


def api_get(secret: str):
    return Client().get("/api/v1/jobs/", HTTP_AUTHORIZATION=f"Token {secret}")


def test_a_user_makes_a_token_in_the_portal_and_sees_it_once(client, ursula):
    made = client.post(PAGE, {"name": "laptop", "days": 7})
    assert made.status_code == 201 and "no-store" in made["Cache-Control"]
    secret = made.context["secret"]
    assert secret.startswith("tsr_") and secret.encode() in made.content
    assert api_get(secret).status_code == 200

    listed = client.get(PAGE)
    assert b"laptop" in listed.content and secret.encode() not in listed.content
    token = ApiToken.objects.get(user=ursula)
    assert token.digest != secret and secret not in token.digest  # only a digest is kept
    assert timedelta(days=6, hours=23) < token.expires_at - timezone.now() <= timedelta(days=7)
    assert token.last_used_at is not None


def test_an_expired_token_is_refused():
    user = User.objects.create_user("old-timer")
    token, secret = token_issue(user, "ci", days=1)
    assert api_get(secret).status_code == 200
    ApiToken.objects.filter(pk=token.pk).update(created_at=timezone.now() - timedelta(days=3),
                                                expires_at=timezone.now() - timedelta(seconds=1))
    refused = api_get(secret)
    assert refused.status_code in (401, 403) and "expired" in refused.json()["detail"]


def test_a_revoked_token_is_refused_and_leaves_the_list(client, ursula):
    token, secret = token_issue(ursula, "ci", days=30)
    response = client.post(f"{PAGE}{token.pk}/revoke/")
    assert response.status_code == 302
    assert api_get(secret).status_code in (401, 403)
    assert b"ci" not in client.get(PAGE).content.split(b"Your tokens", 1)[1]


def test_nobody_revokes_or_sees_someone_elses_token(client, ursula):
    other = User.objects.create_user("victor")
    theirs, secret = token_issue(other, "victors-secret-name", days=30)
    assert client.post(f"{PAGE}{theirs.pk}/revoke/").status_code == 404
    assert api_get(secret).status_code == 200
    assert b"victors-secret-name" not in client.get(PAGE).content


@pytest.mark.parametrize("data, field", [({"name": "", "days": 7}, "name"), ({"name": "x", "days": 0}, "days"),
                                         ({"name": "x", "days": 100000}, "days"),
                                         ({"name": "x\x00y", "days": 7}, "name")])
def test_bad_input_is_a_form_error_not_a_500(client, ursula, data, field):
    response = client.post(PAGE, data)
    assert response.status_code == 200 and field in response.context["form"].errors
    assert not ApiToken.objects.exists()


def test_two_live_tokens_cannot_share_a_name(client, ursula):
    client.post(PAGE, {"name": "ci", "days": 7})
    again = client.post(PAGE, {"name": "ci", "days": 7})
    assert again.status_code == 200 and "already have a live token" in str(again.context["form"].errors)


def test_the_token_endpoint_makes_a_named_expiring_token():
    User.objects.create_user("tom", password="toms-password-123")
    made = Client().post("/api/v1/token/", {"username": "tom", "password": "toms-password-123", "name": "ci",
                                            "days": 2}, content_type="application/json")
    assert made.status_code == 201, made.content
    assert made.json()["name"] == "ci" and api_get(made.json()["token"]).status_code == 200
    assert ApiToken.objects.get().expires_at <= timezone.now() + timedelta(days=2)


@pytest.mark.parametrize("body", [{}, {"username": "tom", "password": "wrong"}, {"username": ["x"]},
                                  {"username": "tom", "password": "toms-password-123", "days": 10 ** 12}])
def test_the_token_endpoint_refuses_bad_input_with_a_400(body):
    User.objects.create_user("tom", password="toms-password-123")
    response = Client().post("/api/v1/token/", body, content_type="application/json")
    assert response.status_code == 400 and response["Content-Type"] == "application/json"
