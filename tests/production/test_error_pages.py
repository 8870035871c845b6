"""Issue 15 item 5: errors are pages in the portal's style for people, JSON for API clients."""

import pytest
from django.contrib.auth.models import User
from django.test import Client

pytestmark = pytest.mark.django_db
PORTAL_STYLE = b"css/site.css"


@pytest.fixture
def signed_in(client):
    client.force_login(User.objects.create_user("petra"))
    return client


@pytest.fixture
def failing(settings, client):
    settings.ROOT_URLCONF = "tests.production.urls"
    client.raise_request_exception = False
    return client


def test_an_unknown_page_is_a_404_in_the_portals_style(signed_in):
    response = signed_in.get("/no-such-page/")
    assert response.status_code == 404
    assert PORTAL_STYLE in response.content and b"Page not found" in response.content
    assert b"petra" in response.content  # the usual navigation, for a signed-in user


@pytest.mark.parametrize("path", ["/api/v1/no-such-thing/", "/api/v1/jobs/999999999/"])
def test_an_unknown_api_path_is_a_json_404(signed_in, path):
    response = signed_in.get(path)
    assert response.status_code == 404
    assert response["Content-Type"] == "application/json" and "detail" in response.json()


def test_a_client_that_accepts_only_json_gets_json(signed_in):
    response = signed_in.get("/no-such-page/", HTTP_ACCEPT="application/json")
    assert response.status_code == 404 and response.json() == {"detail": "Not found."}


@pytest.mark.parametrize("name, status", [("boom", 500), ("denied", 403), ("suspicious", 400)])
def test_errors_are_json_under_the_api_and_styled_pages_elsewhere(failing, name, status):
    api = failing.get(f"/api/v1/{name}/")
    assert api.status_code == status
    assert api["Content-Type"] == "application/json" and api.json()["detail"]
    page = failing.get(f"/pages/{name}/")
    assert page.status_code == status
    assert page["Content-Type"].startswith("text/html") and PORTAL_STYLE in page.content


def test_a_403_page_says_why(failing):
    assert b"Only leads may do this." in failing.get("/pages/denied/").content


def test_a_form_posted_without_its_csrf_token_gets_a_styled_403():
    response = Client(enforce_csrf_checks=True).post("/accounts/login/", {"username": "x", "password": "y"})
    assert response.status_code == 403
    assert PORTAL_STYLE in response.content and b"Reload the page" in response.content
