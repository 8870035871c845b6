"""One journey per role through the portal in Chromium (issue 16): a team member, a team lead, finance
and a platform engineer, each from signing in to the end of what they came to do. The lead's
submit/reorder/cancel day is tests/ui/test_browser.py; the lead here reads the queue and the spend."""

import re

import pytest

from scheduling.cycle import decide_and_apply
from scheduling.models import Job
from tests.browser import follow
from tests.ui.test_browser_portal import WHEN
from ui.demo_workload import demo_workload_load

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_team_member_submits_finds_and_cancels_their_job(open_page):
    page = open_page("bob")
    assert page.url.endswith("/teams/search/")
    follow(page, "nav >> text=Submit job")
    assert page.locator("#id_priority_class").input_value() == "best-effort"
    assert "production" not in page.locator("#id_priority_class").inner_text()  # lead-only class
    page.fill("#id_name", "bob-embeddings")
    page.select_option("#id_kind", "batch")
    page.fill("#id_gpu_memory_gb", "10")
    page.click("#submit-form button[type=submit]")
    page.wait_for_selector("text=Submitted job")
    job = Job.objects.get(name="bob-embeddings")
    assert job.priority_class.name == "best-effort" and job.submitted_by.username == "bob"
    assert WHEN.search(page.locator("main").inner_text()) or "submitted" in page.locator("main").inner_text()
    page.goto("/jobs/")
    assert "bob-embeddings" in page.locator("main").inner_text()
    page.goto(f"/jobs/{job.pk}/")
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("#cancel-job")
    page.wait_for_selector("text=Cancelled job")
    job.refresh_from_db()
    assert job.status == "cancelled"


def test_a_team_lead_reads_the_queue_and_the_spend(open_page):
    page = open_page("alice")
    demo_workload_load()  # make demo's busy cluster: search runs beyond its guarantee, jobs wait
    decide_and_apply(policy="tessera")  # the first cycle gives every waiting job its reason
    page.reload()
    queue = page.locator("#queue-body").inner_text()
    waiting = Job.objects.filter(team__name="search", status="pending")
    assert waiting.count() >= 2 and all(job.name in queue for job in waiting)
    assert all(job.pending_reason for job in waiting)
    follow(page, "nav >> text=Priorities")
    assert page.locator("#priorities tbody tr").count() == waiting.count()
    follow(page, "nav >> text=Team spend")
    assert "search" in page.locator("h1").inner_text()
    assert not re.search(r"\d\.000\b", page.locator("main").inner_text())
    page.goto("/cluster/")
    page.locator("tr:has-text('h100-04') details.gpu-details summary").click()
    assert "ranker-serving" in page.locator("tr:has-text('h100-04') details.gpu-details").inner_text()


def test_finance_reads_the_month_exports_it_and_sees_no_job(open_page):
    page = open_page("fiona")
    assert page.locator("h1").inner_text().startswith("Welcome")  # no team: the list of teams
    follow(page, "nav >> text=Chargeback")
    assert "Idle-cost policy" in page.locator("#idle-policy").inner_text()
    assert page.request.get("/billing/export.csv").status == 200
    page.goto("/billing/procurement/")
    body = page.locator("main").inner_text()
    assert "$275k bought" in body and "Cost anchors" in body
    page.goto("/teams/search/")
    assert "Quota" in page.locator("main").inner_text()
    assert "ranker-serving" not in page.locator("main").inner_text()  # usage, never job internals
    assert page.goto("/jobs/new/").status == 403


def test_a_platform_engineer_checks_quotas_and_the_cluster(open_page):
    page = open_page("admin")
    assert page.locator("h1").inner_text().startswith("Welcome")
    follow(page, "nav >> text=Admin")
    page.goto("/admin/portal/team/")
    row = page.locator("#result_list tr:has(a:text-is('search'))").inner_text()
    assert "16" in row and "16.000" not in row
    page.click("#result_list a:text-is('search')")
    assert page.locator("#id_guaranteed_gpus").input_value() == "16"
    page.goto("/cluster/")
    details = page.locator("tr:has-text('h100-04') details.gpu-details")
    details.locator("summary").focus()
    page.keyboard.press("Enter")
    assert "search" in details.inner_text()
    assert page.request.get("/metrics").status == 200
