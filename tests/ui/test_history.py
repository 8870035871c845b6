"""Job history (issue 16, item 5): finished, failed and cancelled jobs stay findable, by state, kind,
user, dates and GPU model, a page at a time, and only within the user's own teams."""

from datetime import timedelta

import pytest
from django.utils import timezone

from scheduling.models import Job
from tests.ui.conftest import BRAVO_SECRETS, make_job, run_on

pytestmark = pytest.mark.django_db


@pytest.fixture
def history(jobs, teams, users, cluster):
    """Three finished alpha jobs (one per end state, a week apart) and a finished bravo one."""
    alpha, bravo = teams["alpha"], teams["bravo"]
    gpus = list(cluster["h100"].gpus.order_by("index"))
    made = {}
    for days, (status, kind, user) in enumerate([("completed", "training", "lead"), ("failed", "batch", "member"),
                                                 ("cancelled", "inference", "member")]):
        job = make_job(alpha, users[user], f"alpha-{status}", status=status, kind=kind)
        made[status] = job
        at = timezone.now() - timedelta(days=7 * (days + 1))
        Job.objects.filter(pk=job.pk).update(submitted_at=at, finished_at=at + timedelta(hours=1))
    run_on(made["completed"], gpus[2])
    Job.objects.filter(pk=made["completed"].pk).update(status="completed")
    made["bravo_done"] = make_job(bravo, users["other_lead"], "bravo-secret-done", status="completed")
    return made


def _names(response) -> set[str]:
    return {job.name for job in response.context["rows"]}


def test_finished_failed_and_cancelled_jobs_are_listed_with_active_ones(clients, history):
    response = clients["member"].get("/jobs/")
    assert response.status_code == 200
    assert {"alpha-completed", "alpha-failed", "alpha-cancelled", "alpha-run", "alpha-bob-wait"} <= _names(response)
    assert b"Cancelled" in response.content and b'href="/jobs/' in response.content


@pytest.mark.parametrize(("query", "expected"), [
    ("status=failed&status=cancelled", {"alpha-failed", "alpha-cancelled"}),
    ("kind=batch", {"alpha-failed"}),
    ("submitted_by=alice&status=completed", {"alpha-completed"}),
    ("gpu_model=H100-80GB&status=completed", {"alpha-completed"}),
    ("q=cancel", {"alpha-cancelled"}),
])
def test_each_filter_narrows_the_list(clients, history, query, expected):
    response = clients["member"].get(f"/jobs/?{query}")
    assert response.status_code == 200
    assert _names(response) == expected


def test_a_date_range_includes_both_days(clients, history):
    day = Job.objects.get(pk=history["failed"].pk).submitted_at.date()
    response = clients["member"].get(f"/jobs/?submitted_from={day}&submitted_to={day}")
    assert _names(response) == {"alpha-failed"}


def test_the_list_is_paged(clients, history, teams, users):
    for index in range(30):
        make_job(teams["alpha"], users["lead"], f"bulk-{index}", status="completed")
    first = clients["member"].get("/jobs/?status=completed")
    assert len(first.context["rows"]) == 25 and first.context["page"].paginator.count == 31
    assert b"page=2" in first.content and b"status=completed" in first.content
    second = clients["member"].get("/jobs/?status=completed&page=2")
    assert len(second.context["rows"]) == 6
    assert not _names(first) & _names(second)
    assert clients["member"].get("/jobs/?page=banana").status_code == 200  # the first page


@pytest.mark.parametrize("query", ["status=exploded", "kind=quantum", "submitted_from=yesterday",
                                   "submitted_from=2026-12-05&submitted_to=2026-12-01", "q=" + "x" * 200])
def test_bad_filters_are_a_form_error_not_a_500(clients, history, query):
    response = clients["member"].get(f"/jobs/?{query}")
    assert response.status_code == 400
    assert b'id="filter-errors"' in response.content
    assert not response.context["rows"]


def test_another_teams_jobs_never_show(clients, history):
    for query in ("", "team=bravo", "q=bravo-secret", "status=completed", f"q={history['bravo_done'].pk}"):
        response = clients["member"].get(f"/jobs/?{query}")
        assert response.status_code == 200
        body = response.content.decode()
        assert not any(secret in body for secret in (*BRAVO_SECRETS, "bravo-secret-done")), query
    assert clients["member"].get(f"/jobs/{history['bravo_done'].pk}/").status_code == 404
    # bravo's lead sees bravo only; staff sees both
    assert _names(clients["other_lead"].get("/jobs/?status=completed")) == {"bravo-secret-done"}
    assert {"bravo-secret-done", "alpha-completed"} <= _names(clients["staff"].get("/jobs/?status=completed"))


def test_who_gets_the_page(clients, history):
    assert clients["anonymous"].get("/jobs/").status_code == 302
    assert not clients["finance"].get("/jobs/").context["rows"]  # finance sees usage, not jobs
    assert b'href="/jobs/">Jobs</a>' in clients["viewer"].get("/teams/alpha/").content
    assert b'href="/jobs/">Jobs</a>' not in clients["finance"].get("/").content


def test_the_api_list_takes_the_same_filters(clients, history):
    body = clients["member"].get("/api/v1/jobs/?status=failed&status=cancelled&gpu_model=&q=alpha").json()
    assert {row["name"] for row in body["results"]} == {"alpha-failed", "alpha-cancelled"}
    body = clients["member"].get("/api/v1/jobs/?gpu_model=H100-80GB&status=completed").json()
    assert [row["name"] for row in body["results"]] == ["alpha-completed"]
    bad = clients["member"].get("/api/v1/jobs/?submitted_from=2026-12-05&submitted_to=2026-12-01")
    assert bad.status_code == 400 and "submitted_to" in bad.json()
    assert clients["member"].get("/api/v1/jobs/?team=bravo").json()["count"] == 0
