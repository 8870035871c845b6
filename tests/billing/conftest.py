"""The billing cast: the demo's users (finance fiona, staff admin, lead alice, member bob, viewer carol)."""

import pytest

from ui.demo import demo_load

PASSWORDS = {"admin": "admin-demo-pass", "fiona": "fiona-demo-pass", "alice": "alice-demo-pass",
             "bob": "bob-demo-pass", "carol": "carol-demo-pass"}


@pytest.fixture(autouse=True)
def fast_passwords(settings):
    # The demo hashes seven passwords; PBKDF2 would make each demo-backed test seconds slower.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def demo(db):
    demo_load()


@pytest.fixture
def signed_in(client, demo):
    """signed_in("fiona") → a client signed in as that demo user."""

    def sign_in(username):
        assert client.login(username=username, password=PASSWORDS[username])
        return client

    return sign_in
