"""Redis is a cache: with it down the portal still signs people in and takes jobs, /healthz says
the process is alive and /readyz says exactly what is missing (issue 15, item 7)."""

import time

import pytest
from django.core.cache import cache
from django.test import Client
from django.urls import reverse

from agents.metrics import CYCLE_LAST_RUN, KEY
from scheduling.models import Job

pytestmark = pytest.mark.django_db
NOWHERE = "redis://127.0.0.1:9/0"  # the discard port: nothing answers


@pytest.fixture
def redis_down(settings):
    settings.CACHES = {"default": {**settings.CACHES["default"], "LOCATION": NOWHERE}}
    settings.REDIS_URL = NOWHERE


def test_sign_in_pages_and_submit_work_with_redis_down(users, jobs, redis_down):
    client = Client()
    assert client.get(reverse("login")).status_code == 200
    response = client.post(reverse("login"), {"username": "alice", "password": "alice-test-pass"})
    assert response.status_code == 302, response.content[:500]
    assert client.get(reverse("home"), follow=True).status_code == 200
    assert client.get(reverse("ui:dashboard", args=["alpha"])).status_code == 200
    data = {"team": "alpha", "name": "while-redis-is-down", "kind": "training", "priority_class": "training",
            "gpus": 1, "cpu_cores": 4, "memory_gb": 8, "gpu_memory_gb": 0, "gang": "on"}
    assert client.post(reverse("ui:job_new"), data).status_code == 302
    assert Job.objects.filter(name="while-redis-is-down").exists()
    api = client.post(reverse("api:job-list"), {**data, "name": "api-while-down", "gang": True},
                      content_type="application/json")
    assert api.status_code == 201, api.content


def test_healthz_is_liveness_and_readyz_names_what_is_missing(client, redis_down):
    assert client.get("/healthz").json() == {"status": "ok"}
    ready = client.get("/readyz")
    body = ready.json()
    assert ready.status_code == 200 and body["status"] == "degraded"
    assert body["checks"]["database"]["ok"] is True and body["checks"]["redis"]["ok"] is False


def test_readyz_is_ok_with_everything_up_and_degraded_when_cycles_stop(client, settings):
    cache.set(KEY.format(CYCLE_LAST_RUN), time.time(), timeout=None)
    body = client.get("/readyz").json()
    assert body["status"] == "ok", body
    cache.set(KEY.format(CYCLE_LAST_RUN), time.time() - 3600, timeout=None)
    body = client.get("/readyz").json()
    assert body["status"] == "degraded" and body["checks"]["cycle"]["ok"] is False
