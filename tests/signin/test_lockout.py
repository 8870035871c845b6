"""Issue 15 item 3: after too many wrong passwords, the right one no longer signs in for a while.

Before: after 100 wrong passwords the right one still signed in, on the portal's login, the admin's
and the API's token endpoint alike.
"""

from datetime import timedelta

import pytest
from axes.models import AccessAttempt
from django.contrib.auth.models import User
from django.test import Client

pytestmark = pytest.mark.django_db
PASSWORD = "the-right-password-7"
LIMIT = 5


@pytest.fixture(autouse=True)
def lockout(settings):
    settings.AXES_FAILURE_LIMIT = LIMIT
    settings.AXES_COOLOFF_TIME = timedelta(minutes=15)
    User.objects.create_user("victim", password=PASSWORD, is_staff=True)


def form_sign_in(url: str, password: str):
    return Client().post(url, {"username": "victim", "password": password})


def token_sign_in(password: str):
    return Client().post("/api/v1/token/", {"username": "victim", "password": password, "name": "ci"},
                         content_type="application/json")


def signed_in(response) -> bool:
    return response.status_code == 302 and "sessionid" in response.cookies


def cool_off_passes():
    AccessAttempt.objects.update(attempt_time=AccessAttempt.objects.get().attempt_time - timedelta(minutes=16))


@pytest.mark.parametrize("url", ["/accounts/login/", "/admin/login/"])
def test_the_right_password_is_refused_after_too_many_wrong_ones(url):
    for attempt in range(LIMIT):
        refused = form_sign_in(url, f"guess-{attempt}")
        assert not signed_in(refused)
    locked = form_sign_in(url, PASSWORD)
    assert locked.status_code == 429 and not signed_in(locked)
    assert b"Too many failed sign-ins" in locked.content and b"css/site.css" in locked.content
    cool_off_passes()
    assert signed_in(form_sign_in(url, PASSWORD))


def test_the_token_endpoint_locks_out_the_same_way():
    for attempt in range(LIMIT):
        assert token_sign_in(f"guess-{attempt}").status_code in (400, 429)
    locked = token_sign_in(PASSWORD)
    assert locked.status_code == 429 and "token" not in locked.json()
    assert locked.json()["detail"].startswith("Too many failed sign-ins") and locked["Retry-After"] == "900"
    cool_off_passes()
    assert token_sign_in(PASSWORD).status_code == 201


def test_fewer_failures_than_the_limit_do_not_lock_and_success_clears_them():
    for attempt in range(LIMIT - 1):
        form_sign_in("/accounts/login/", f"guess-{attempt}")
    assert signed_in(form_sign_in("/accounts/login/", PASSWORD))
    form_sign_in("/accounts/login/", "one-more-guess")
    assert signed_in(form_sign_in("/accounts/login/", PASSWORD))


def test_a_locked_username_does_not_lock_anyone_else():
    User.objects.create_user("bystander", password=PASSWORD)
    for attempt in range(LIMIT):
        form_sign_in("/accounts/login/", f"guess-{attempt}")
    response = Client().post("/accounts/login/", {"username": "bystander", "password": PASSWORD})
    assert signed_in(response)
