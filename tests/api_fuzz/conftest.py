"""The API as a client generated from /api/schema/ sees it: the demo's data, one session per role."""

from contextlib import contextmanager
from dataclasses import dataclass

import pytest
import schemathesis
from django.contrib.auth.models import User
from django.core import signals
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from django.test import Client

from ui.demo import demo_load

# The demo's cast: bob is a member of team search, alice its lead, admin on staff, fiona in finance.
USERNAMES = {"member": "bob", "lead": "alice", "staff": "admin", "finance": "fiona", "anonymous": None}
CSRF_SECRET = "fuzz" * 8  # any 32 characters: the cookie and the header only have to agree


@dataclass
class Api:
    schema: schemathesis.BaseSchema
    sessions: dict  # role → (headers, cookies) for schemathesis' calls

    def call(self, case, role):
        headers, cookies = self.sessions[role]
        return case.call(headers=headers, cookies=cookies)


@pytest.fixture(autouse=True)
def wsgi_host(settings):
    settings.ALLOWED_HOSTS = ["localhost", "testserver"]  # schemathesis' WSGI client, Django's
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def _session(username: str | None) -> tuple[dict, dict]:
    if username is None:
        return {}, {}
    client = Client()
    client.force_login(User.objects.get(username=username))
    # Session authentication checks CSRF on writes, as for a browser: send the token both ways.
    return {"X-CSRFToken": CSRF_SECRET}, {"sessionid": client.cookies["sessionid"].value, "csrftoken": CSRF_SECRET}


@pytest.fixture
def api(db):
    """The demo loaded, the schema as /api/schema/ serves it, and a signed-in session per role."""
    demo_load()
    sessions = {role: _session(username) for role, username in USERNAMES.items()}
    client = Client()
    client.force_login(User.objects.get(username="admin"))
    schema = schemathesis.openapi.from_dict(client.get("/api/schema/", {"format": "json"}).json())
    schema.app = get_wsgi_application()
    with _connection_kept():
        yield Api(schema, sessions)


@contextmanager
def _connection_kept():
    """Django's WSGI handler closes the database connection after each request, as in production;
    the test's transaction lives on it, so it stays open (as Django's test client keeps it)."""
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    try:
        yield
    finally:
        signals.request_started.connect(close_old_connections)
        signals.request_finished.connect(close_old_connections)
