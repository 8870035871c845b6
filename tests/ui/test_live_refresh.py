"""The 10 s refresh (issue 16, item 8): the dashboard's and job page's live fragments are the same
templates as the first paint, so an ETA keeps its wording; they are scoped like the pages."""

from datetime import timedelta

import pytest
from django.utils import timezone

from portal import freshness
from portal.models import Team
from scheduling.models import Job
from tests.ui.conftest import BRAVO_SECRETS

pytestmark = pytest.mark.django_db

ETA = timedelta(hours=7, minutes=54, seconds=30)


def _eta_cell(html: str, job_id: int) -> str:
    """The queue row's ETA cell, as rendered."""
    row = html[html.index(f'data-job="{job_id}"'):]
    return row[row.index("<time"):row.index("</time>")]


def test_an_eta_reads_the_same_at_first_paint_and_on_refresh(clients, jobs):
    Job.objects.filter(pk=jobs["bob_wait"].pk).update(estimated_start=timezone.now() + ETA)
    page = clients["member"].get("/teams/alpha/").content.decode()
    live = clients["member"].get("/teams/alpha/live/").json()
    # A long wait is a rough guess whose likely range leaves out the estimate: the range is the headline.
    headline = ">likely 28\xa0minutes to 5\xa0hours, 55\xa0minutes</time>"
    assert headline in page and headline in live["queue_html"]
    assert _eta_cell(page, jobs["bob_wait"].pk) == _eta_cell(live["queue_html"], jobs["bob_wait"].pk)
    assert "says 7\xa0hours, 54\xa0minutes" in page  # the point estimate stays in the tooltip
    assert f'data-job="{jobs["bob_wait"].pk}"' in live["queue_html"] and "alpha-run" in live["running_html"]
    assert live["usage"]["running"] == 1 and live["usage"]["queued"] == 2 and "In use" in live["stats_html"]
    assert not any(secret in str(live) for secret in BRAVO_SECRETS)


def test_the_refresh_is_scoped_like_the_dashboard(clients, jobs):
    assert clients["other_lead"].get("/teams/alpha/live/").status_code == 404
    assert clients["anonymous"].get("/teams/alpha/live/").status_code == 302
    usage_only = clients["finance"].get("/teams/alpha/live/").json()
    assert "queue_html" not in usage_only and usage_only["usage"]["in_use"] == 1.0
    assert "queue_html" in clients["viewer"].get("/teams/alpha/live/").json()


def test_the_in_team_column_follows_a_reorder_at_once(clients, jobs):
    first, second = jobs["alice_wait"].pk, jobs["bob_wait"].pk
    clients["member"].get("/teams/alpha/live/")  # a cached copy from before the reorder
    answer = clients["lead"].post("/api/v1/teams/alpha/queue/reorder/", {"job_ids": [first, second]},
                                  content_type="application/json")
    assert answer.status_code == 200
    rows = clients["member"].get("/teams/alpha/live/").json()["queue_html"]
    assert rows.index(f'data-job="{first}"') < rows.index(f'data-job="{second}"')
    row = rows[rows.index(f'data-job="{first}"'):]
    assert row.split('<td class="num">')[1].startswith("1<")


def test_a_refused_reorder_says_why(clients, jobs):
    Job.objects.filter(pk=jobs["bob_wait"].pk).update(status="running")  # started meanwhile
    answer = clients["lead"].post("/api/v1/teams/alpha/queue/reorder/",
                                  {"job_ids": [jobs["alice_wait"].pk, jobs["bob_wait"].pk]},
                                  content_type="application/json")
    assert answer.status_code == 400 and "exactly once" in str(answer.json())


def test_the_job_page_refreshes_its_live_part(clients, jobs):
    job = jobs["bob_wait"]
    Job.objects.filter(pk=job.pk).update(estimated_start=timezone.now() + ETA)
    page = clients["member"].get(f"/jobs/{job.pk}/").content.decode()
    live = clients["member"].get(f"/jobs/{job.pk}/live/").content.decode()
    assert 'id="job-live" data-url="/jobs/' in page
    assert ">likely 28\xa0minutes to 5\xa0hours, 55\xa0minutes</time>" in page
    assert ">likely 28\xa0minutes to 5\xa0hours, 55\xa0minutes</time>" in live
    assert "Pending" in live and "Timeline" in live
    Job.objects.filter(pk=job.pk).update(status="running", started_at=timezone.now())
    assert "Running" in clients["member"].get(f"/jobs/{job.pk}/live/").content.decode()
    assert clients["member"].get(f"/jobs/{jobs['bravo_wait'].pk}/live/").status_code == 404


def test_a_near_estimate_stands_alone_and_none_says_cannot_tell(clients, jobs):
    Job.objects.filter(pk=jobs["bob_wait"].pk).update(estimated_start=timezone.now() + timedelta(minutes=5, seconds=30))
    rows = clients["member"].get("/teams/alpha/live/").json()["queue_html"]
    assert "5\xa0minutes</time>" in rows and "likely" not in rows
    assert "cannot tell" not in rows  # alice_wait has not been through a cycle yet: no estimate made
    Job.objects.filter(pk=jobs["alice_wait"].pk).update(queue_position_overall=2)  # a cycle found none
    freshness.teams_changed([jobs["alice_wait"].team_id])
    assert "cannot tell" in clients["member"].get("/teams/alpha/live/").json()["queue_html"]


def test_a_middling_estimate_leads_and_its_range_follows(clients, jobs):
    """Between 15 min and 4 h the likely range holds the estimate: the estimate leads, the range follows."""
    Job.objects.filter(pk=jobs["bob_wait"].pk).update(estimated_start=timezone.now() + timedelta(hours=3, seconds=30))
    page = clients["member"].get("/teams/alpha/").content.decode()
    rows = clients["member"].get("/teams/alpha/live/").json()["queue_html"]
    for html in (page, rows):
        assert ">3\xa0hours</time> <span" in html and "(likely 27\xa0minutes to 4\xa0hours, 37\xa0minutes)" in html
    assert "eta-rough" not in rows


def test_one_guaranteed_gpu_reads_singular(clients, jobs):
    assert "<dd>4 GPUs</dd>" in clients["member"].get("/teams/alpha/live/").json()["stats_html"]
    Team.objects.filter(name="alpha").update(guaranteed_gpus=1)
    freshness.teams_changed([jobs["bob_wait"].team_id])
    assert "<dd>1 GPU</dd>" in clients["member"].get("/teams/alpha/live/").json()["stats_html"]


@pytest.mark.parametrize("status", ["checkpointing", "running"])
def test_a_job_holding_gpus_has_no_queue_fields(clients, jobs, status):
    # A checkpointing job showed "— in team · — overall" and "Why it waits —" (it waits for nothing).
    job = jobs["bob_wait"]
    Job.objects.filter(pk=job.pk).update(status=status, started_at=timezone.now())
    live = clients["member"].get(f"/jobs/{job.pk}/live/").content.decode()
    assert "Timeline" in live and "Why it waits" not in live and "Estimated start" not in live
    Job.objects.filter(pk=job.pk).update(status="preempted")
    assert "Why it waits" in clients["member"].get(f"/jobs/{job.pk}/live/").content.decode()


def test_a_job_that_just_started_reads_just_now(clients, jobs):
    Job.objects.filter(pk=jobs["alpha_run"].pk).update(started_at=timezone.now())
    assert "<td>just now</td>" in clients["member"].get("/teams/alpha/live/").json()["running_html"]
