"""One member cannot flood the queue (issue 15, item 1): per-team limits on waiting jobs (400) and
submissions per minute (429, with Retry-After), and a per-user API request rate (429)."""

import pytest
from django.urls import reverse

pytestmark = pytest.mark.django_db

GOOD = {"team": "alpha", "name": "one-more", "kind": "training", "priority_class": "training", "gpus": 1}
FORM = {"cpu_cores": 4, "memory_gb": 8, "gpu_memory_gb": 0, "gang": "on", **GOOD}


def _limit(team, **limits):
    for name, value in limits.items():
        setattr(team, name, value)
    team.save()


def _submit(client):
    return client.post(reverse("api:job-list"), GOOD, content_type="application/json")


def test_a_team_at_its_waiting_limit_gets_a_400_saying_so(clients, jobs, teams):
    _limit(teams["alpha"], max_waiting_jobs=2)  # bob's and alice's jobs wait
    response = _submit(clients["member"])
    assert response.status_code == 400
    assert "Team alpha already has 2 jobs waiting, its limit of 2" in response.json()["team"][0]
    form = clients["member"].post(reverse("ui:job_new"), FORM)
    assert form.status_code == 400 and 'id="team-errors"' in form.content.decode()
    assert "its limit of 2" in form.content.decode()


def test_the_waiting_limit_frees_as_jobs_leave_the_queue(clients, jobs, teams):
    _limit(teams["alpha"], max_waiting_jobs=2)
    assert clients["lead"].post(reverse("api:job-cancel", args=[jobs["bob_wait"].pk])).status_code == 200
    assert _submit(clients["member"]).status_code == 201


def test_a_team_at_its_submit_rate_gets_a_429_with_when_to_retry(clients, jobs, teams):
    _limit(teams["alpha"], max_submits_per_minute=4)  # the cast submitted 3 of alpha's jobs just now
    assert _submit(clients["member"]).status_code == 201
    refused = _submit(clients["lead"])  # the limit is the team's, whoever submits
    assert refused.status_code == 429
    assert 1 <= int(refused["Retry-After"]) <= 60
    assert "Team alpha has submitted 4 jobs in the last minute, its limit; try again in" in refused.json()["detail"]
    form = clients["member"].post(reverse("ui:job_new"), FORM)
    assert form.status_code == 429 and "its limit; try again in" in form.content.decode()


def test_another_team_is_not_limited_by_alphas_flood(clients, jobs, teams):
    _limit(teams["alpha"], max_submits_per_minute=1, max_waiting_jobs=1)
    response = clients["other_lead"].post(reverse("api:job-list"), {**GOOD, "team": "bravo"},
                                          content_type="application/json")
    assert response.status_code == 201, response.content


def test_the_limits_are_set_on_the_team_in_the_admin(clients, teams):
    page = clients["staff"].get(reverse("admin:portal_team_change", args=[teams["alpha"].pk])).content.decode()
    assert 'name="max_waiting_jobs"' in page and 'name="max_submits_per_minute"' in page


def test_api_requests_beyond_the_users_rate_get_a_429(clients, jobs, settings):
    settings.TESSERA_API_REQUESTS_PER_MINUTE = 3
    url = reverse("api:job-list")
    answers = [clients["member"].get(url).status_code for _ in range(4)]
    assert answers == [200, 200, 200, 429]
    assert clients["lead"].get(url).status_code == 200  # counted per user
