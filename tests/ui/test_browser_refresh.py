"""The 10 s refresh in a real browser (issue 16, item 8): an ETA keeps its wording, the running
table and gauge follow the cluster, the job page follows its job, and a refused reorder says why."""

from datetime import timedelta

import pytest
from django.utils import timezone

from scheduling.defaults import defaults_ensure
from scheduling.models import CapacityTier, Job, PriorityClass
from tests.browser import shoot, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def _defaults(transactional_db):
    """The tiers and priority classes a migration made, which the previous test's flush removed."""
    defaults_ensure(CapacityTier, PriorityClass)


def test_the_dashboard_and_job_page_refresh_in_one_format(page, jobs):
    waiting = jobs["bob_wait"]
    Job.objects.filter(pk=waiting.pk).update(
        estimated_start=timezone.now() + timedelta(hours=7, minutes=54, seconds=40))
    sign_in(page, "bob", "bob-test-pass")
    page.goto("/teams/alpha/")
    eta = page.locator(f"#queue-body tr[data-job='{waiting.pk}'] time")
    assert eta.inner_text() == "likely 28\xa0minutes to 5\xa0hours, 55\xa0minutes"  # long: the range leads
    # The cluster moves on: the running job ends, a waiting one gets a new estimate.
    Job.objects.filter(pk=jobs["alpha_run"].pk).update(status="completed", finished_at=timezone.now())
    jobs["alpha_run"].placements.update(ended_at=timezone.now())
    Job.objects.filter(pk=waiting.pk).update(estimated_start=timezone.now() + timedelta(minutes=5, seconds=40))
    from portal import freshness
    freshness.teams_changed([waiting.team_id])
    page.wait_for_function("document.getElementById('running-count').textContent === '0 jobs'", timeout=25000)
    assert eta.inner_text() == "5\xa0minutes"  # the same wording, never an absolute date
    assert "Nothing running" in page.locator("#running-body").inner_text()
    assert page.locator("#in-use").inner_text() == "0"
    shoot(page, "dashboard-refreshed.png")

    page.goto(f"/jobs/{waiting.pk}/")
    assert "Pending" in page.locator("#job-live h1").inner_text()
    Job.objects.filter(pk=waiting.pk).update(status="running", started_at=timezone.now())
    page.wait_for_function("document.querySelector('#job-live h1').textContent.includes('Running')", timeout=25000)


def test_a_refused_reorder_says_why(page, jobs):
    sign_in(page, "alice", "alice-test-pass")
    page.goto("/teams/alpha/priorities/")
    first, second = jobs["bob_wait"].pk, jobs["alice_wait"].pk
    Job.objects.filter(pk=first).update(status="running")  # it started after the page was drawn
    page.drag_and_drop(f"#priorities tr[data-job='{second}'] td.grip", f"#priorities tr[data-job='{first}'] td.grip")
    page.wait_for_selector("#reorder-error")
    assert "exactly once" in page.locator("#reorder-error").inner_text()
    rows = page.locator("#priorities tbody tr[data-job]")
    assert [rows.nth(i).get_attribute("data-job") for i in range(2)] == [str(first), str(second)]
    shoot(page, "reorder-refused.png")
