"""A platform engineer's what-if in Chromium (issue 16, item 4): from the bar to the form, a refusal
in words, then a run on the demo cluster followed to its comparison and charts. The run takes the
embedded demo's path (tasks eager, so the what-if runs on a thread and the page polls)."""

import pytest

from tests.browser import follow
from ui.demo_workload import demo_workload_load
from whatif.models import WhatIfRun

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
SCREENSHOT = "/tmp/tessera-whatif.png"


def test_a_platform_engineer_asks_what_two_more_h100_nodes_would_do(open_page, settings):
    settings.CELERY_TASK_ALWAYS_EAGER = True
    page = open_page("admin")
    demo_workload_load()  # make demo's busy cluster: a queue from the start
    follow(page, "nav >> text=What-if")
    assert page.locator("h1").inner_text() == "What-if"
    page.click("#whatif-form button[type=submit]")  # nothing changed yet
    assert "Change something" in page.locator("#whatif-form").inner_text()
    page.select_option("#id_team", "vision")
    page.fill("#id_guarantee_delta", "8")
    page.select_option("#id_add_model", "H100-80GB")
    page.fill("#id_add_count", "2")
    page.fill("#id_ahead_hours", "6")
    page.click("#whatif-form button[type=submit]")
    page.wait_for_selector("#whatif-summary", timeout=180_000)
    run = WhatIfRun.objects.get()
    assert (run.state, run.progress) == ("done", 1.0)
    summary = page.locator("#whatif-summary").inner_text()
    assert "GPUs in the cluster\t72\t88\t+16" in summary
    changes = page.locator("#whatif-changes").inner_text()
    assert changes == "vision: guarantee +8 GPUs; 2 more H100-80GB node(s), reserved"
    teams = page.locator("#whatif-team-table").inner_text()
    assert all(team in teams for team in ("search", "recsys", "llm-platform", "vision", "fraud"))
    page.wait_for_selector("#whatif-allocation .main-svg")
    page.wait_for_selector("#whatif-teams .main-svg")
    page.screenshot(path=SCREENSHOT, full_page=True)
    assert page.request.get(f"/whatif/{run.pk}/jobs.csv").status == 200
    page.click("text=← All what-ifs")
    assert f"#{run.pk}" in page.locator("#whatif-runs").inner_text()
