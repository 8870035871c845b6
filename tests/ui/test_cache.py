"""The dashboard and queue caches: a write shows at once, and the plain API rows match the serializers."""

import json
import re

import pytest
from django.core.cache import cache
from django.utils import timezone
from rest_framework.renderers import JSONRenderer
from rest_framework.test import APIRequestFactory

from portal import freshness
from scheduling import engine
from scheduling.apply import apply_plan
from scheduling.models import Job
from tests.ui.conftest import make_job
from ui.api import serializers as s

pytestmark = pytest.mark.django_db

QUEUE_URL = "/api/v1/teams/alpha/queue/"


@pytest.fixture(autouse=True)
def empty_cache():
    cache.clear()


def _dashboard_queue(client) -> list[int]:
    html = client.get("/teams/alpha/").content.decode()
    body = html[html.index('id="queue-body"'):]
    return [int(pk) for pk in re.findall(r'data-job="(\d+)"', body)]


def _api_queue(client) -> list[int]:
    return [row["id"] for row in client.get(QUEUE_URL).json()["results"]]


def _warm(client) -> list[int]:
    """Read both views twice so the second answer comes from the cache."""
    for _ in range(2):
        shown = _dashboard_queue(client)
        assert _api_queue(client) == shown
    return shown


def test_a_reorder_shows_at_once_on_the_dashboard_and_queue_api(clients, jobs):
    lead = clients["lead"]
    before = _warm(lead)
    assert before == [jobs["bob_wait"].pk, jobs["alice_wait"].pk]
    response = lead.post(QUEUE_URL + "reorder/", {"job_ids": before[::-1]}, content_type="application/json")
    assert response.status_code == 200
    assert _dashboard_queue(lead) == before[::-1]
    assert _api_queue(lead) == before[::-1]


def test_a_move_on_the_priorities_page_and_a_cancel_show_at_once(clients, jobs):
    lead = clients["lead"]
    before = _warm(lead)
    lead.post("/teams/alpha/queue/move/", {"job": before[1], "direction": "up"})
    assert _dashboard_queue(lead) == _api_queue(lead) == before[::-1]
    lead.post(f"/jobs/{before[0]}/cancel/")
    assert _dashboard_queue(lead) == _api_queue(lead) == [before[1]]
    assert "1 waiting" in lead.get("/teams/alpha/").content.decode()


def test_a_scheduling_cycle_shows_its_positions_at_once(clients, jobs):
    lead = clients["lead"]
    _warm(lead)
    waiting = jobs["alice_wait"]
    plan = engine.Plan(policy="test", pending={str(waiting.pk): engine.PendingInfo(
        job_id=str(waiting.pk), reason="quota", message="Waits for the cycle test.", eta=None,
        team_position=7, overall_position=9)})
    apply_plan(plan, now=timezone.now())
    row = next(r for r in lead.get(QUEUE_URL).json()["results"] if r["id"] == waiting.pk)
    assert (row["position_team"], row["reason"]) == (7, "Waits for the cycle test.")
    assert "Waits for the cycle test." in lead.get("/teams/alpha/").content.decode()


def test_the_version_survives_a_lost_key(teams):
    team_id = teams["alpha"].pk
    first = freshness.team_version(team_id)
    freshness.teams_changed([team_id])
    assert freshness.team_version(team_id) > first
    cache.clear()
    assert freshness.team_version(team_id) > first  # a fresh start never reuses an old number


def test_plain_rows_match_the_serializers(clients, users, jobs):
    make_job(jobs["bob_wait"].team, None, "nobody-submitted", queue_order=3, checkpoint_interval_s=600)
    request = APIRequestFactory().get("/")
    for url, serializer, queryset in [
        ("/api/v1/jobs/", s.JobSerializer, Job.objects.filter(team__name="alpha")
         .order_by("-submitted_at", "-pk")),
        (QUEUE_URL, s.QueueEntrySerializer, Job.objects.filter(team__name="alpha", status="pending")
         .order_by("queue_order", "submitted_at", "pk")),
    ]:
        expected = serializer(queryset, many=True, context={"request": request}).data
        got = clients["lead"].get(url).json()["results"]
        assert got == [_json(row) for row in expected], url


def _json(row) -> dict:
    return json.loads(JSONRenderer().render(row))
