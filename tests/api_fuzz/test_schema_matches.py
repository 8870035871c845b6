"""Each response the schema once misdescribed (issue 15, item 8) is checked against /api/schema/.

A generated client breaks on these: a page described as one node, a list described as a page,
and a job whose submitter was deleted (submitted_by null) where the schema promised a string.
"""

import pytest
from schemathesis.specs.openapi.checks import response_schema_conformance

from portal.models import Team
from scheduling.models import Job

pytestmark = pytest.mark.django_db


def _check(api, role, method, path, *, path_parameters=None, body=None, status=200):
    sent = {} if body is None else {"body": body, "media_type": "application/json"}
    case = api.schema[path][method].Case(path_parameters=path_parameters or {}, **sent)
    response = api.call(case, role)
    assert response.status_code == status, response.text[:500]
    case.validate_response(response, checks=[response_schema_conformance])
    return response


def _queue_with_an_orphan():
    """Team search's waiting jobs, the first one's submitter gone (the column is nullable)."""
    search = Team.objects.get(name="search")
    waiting = list(Job.objects.filter(team=search, status__in=Job.WAITING_STATUSES).order_by("queue_order"))
    Job.objects.filter(pk=waiting[0].pk).update(submitted_by=None)
    return search, [job.pk for job in waiting]


def test_the_cluster_page_is_described_as_a_page_with_free_capacity(api):
    body = _check(api, "member", "GET", "/api/v1/cluster/").json()
    assert body["results"] and body["free_by_model"]


def test_a_reorder_answers_the_list_the_schema_describes(api):
    team, job_ids = _queue_with_an_orphan()
    body = _check(api, "lead", "POST", "/api/v1/teams/{name}/queue/reorder/", path_parameters={"name": team.name},
                  body={"job_ids": job_ids[::-1]}).json()
    assert [entry["id"] for entry in body] == job_ids[::-1]


def test_a_job_without_a_submitter_matches_the_schema(api):
    team, job_ids = _queue_with_an_orphan()
    _check(api, "lead", "GET", "/api/v1/jobs/{id}/", path_parameters={"id": job_ids[0]})
    _check(api, "lead", "GET", "/api/v1/jobs/")


def test_a_queue_entry_without_a_submitter_matches_the_schema(api):
    team, _ = _queue_with_an_orphan()
    body = _check(api, "lead", "GET", "/api/v1/teams/{name}/queue/", path_parameters={"name": team.name}).json()
    assert None in [entry["submitted_by"] for entry in body["results"]]


def test_quotas_are_numbers_as_the_schema_says(api):
    """Issue 16: quotas came as "16.000" strings (DRF's DecimalField); a client wants the number."""
    team = _check(api, "lead", "GET", "/api/v1/teams/{name}/", path_parameters={"name": "search"}).json()
    assert team["guaranteed_gpus"] == Team.objects.get(name="search").guaranteed_gpus
    assert isinstance(team["guaranteed_gpus"], int | float) and isinstance(team["burst_limit_gpus"], int | float)
    fields = api.schema.raw_schema["components"]["schemas"]["Team"]["properties"]
    assert fields["guaranteed_gpus"]["type"] == fields["burst_limit_gpus"]["type"] == "number"
    listed = _check(api, "staff", "GET", "/api/v1/teams/").json()["results"]
    assert all(not isinstance(row["guaranteed_gpus"], str) for row in listed)
    Team.objects.filter(name="search").update(guaranteed_gpus="0.5", burst_limit_gpus="2.25")
    half = _check(api, "lead", "GET", "/api/v1/teams/{name}/", path_parameters={"name": "search"}).json()
    assert (half["guaranteed_gpus"], half["burst_limit_gpus"]) == (0.5, 2.25)
