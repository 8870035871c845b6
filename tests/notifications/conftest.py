"""Real receivers on loopback: an SMTP server (aiosmtpd) and an HTTP server that answers as told;
a team with a lead and a member who have mail addresses, and a running job of the member's."""

import json
import socket
import threading
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from aiosmtpd.controller import Controller
from celery import current_app
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from portal.models import BusinessUnit, Membership, Project, Team
from scheduling.models import Job, PriorityClass


def free_port() -> int:
    """A port the kernel says is free now (its ephemeral range, apart from the ranges people pick)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Inbox:
    """aiosmtpd's handler: keeps every message it is given."""

    def __init__(self):
        self.messages = []
        self.port = 0

    async def handle_DATA(self, server, session, envelope):
        self.messages.append({"to": envelope.rcpt_tos, "data": envelope.content.decode()})
        return "250 Message accepted"


@pytest.fixture
def smtp(settings):
    inbox = Inbox()
    controller = Controller(inbox, hostname="127.0.0.1", port=free_port())
    controller.start()
    inbox.port = controller.port
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", controller.port
    yield inbox
    controller.stop()


class Receiver:
    """An HTTP server on loopback that answers POSTs with the statuses it is given, then 200."""

    def __init__(self):
        self.statuses: list[int] = []
        self.posts: list[dict] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.posts.append({"path": self.path, "type": self.headers["Content-Type"],
                                       "json": json.loads(body)})
                self.send_response(receiver.statuses.pop(0) if receiver.statuses else 200)
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/hooks/T000/secret-token"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def receiver(settings):
    settings.TESSERA_WEBHOOKS_TO_PRIVATE = True  # it listens on loopback
    made = Receiver()
    yield made
    made.server.shutdown()
    made.server.server_close()


@pytest.fixture
def eager():
    """Tasks run in-process, retries too (at once, without their wait). Not propagating errors, as
    only then does Celery run an eager task's retries."""
    conf = current_app.conf
    before = conf.task_always_eager, conf.task_eager_propagates
    conf.task_always_eager, conf.task_eager_propagates = True, False
    yield
    conf.task_always_eager, conf.task_eager_propagates = before


@pytest.fixture(autouse=True)
def fast_passwords(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def cast(db):
    unit = BusinessUnit.objects.create(name="Research", cost_center="CC-1")
    teams = {name: Team.objects.create(name=name, business_unit=unit, guaranteed_gpus=Decimal(1),
                                       burst_limit_gpus=Decimal(2)) for name in ("vision", "speech")}
    for team in teams.values():
        Project.objects.create(team=team, name="main")
    people = {}
    for name, team, role in (("lena", "vision", "lead"), ("max", "vision", "member"), ("sara", "speech", "lead")):
        people[name] = User.objects.create_user(name, email=f"{name}@example.org", password=f"{name}-test-pass")
        Membership.objects.create(user=people[name], team=teams[team], role=role)
    return {"teams": teams, "users": people}


@pytest.fixture
def signed_in(cast):
    """signed_in("lena") → a client signed in as her, checking CSRF as a browser's requests are checked."""

    def sign_in(name):
        client = Client(enforce_csrf_checks=True)
        assert client.login(username=name, password=f"{name}-test-pass")
        client.get(reverse("notifications:preferences"))  # sets the CSRF cookie
        client.csrf = client.cookies["csrftoken"].value
        return client

    return sign_in


def job_add(cast, *, status="running", name="resnet", owner="max", team="vision") -> Job:
    team = cast["teams"][team]
    return Job.objects.create(team=team, project=team.projects.get(), submitted_by=cast["users"][owner], name=name,
                              kind="training", gpus=1,
                              priority_class=PriorityClass.objects.get_or_create(name="training",
                                                                                 defaults={"value": 200})[0],
                              status=status, started_at=timezone.now() if status == "running" else None)
