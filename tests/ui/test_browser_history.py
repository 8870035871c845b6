"""A member looks for last week's failed job in a real browser: nav → Jobs → filter → detail;
a backwards date range is a form error; another team's job is a 404."""

import pytest

from tests.ui.test_browser import _shoot, page  # noqa: F401 (the Chromium fixture)
from tests.ui.test_history import history  # noqa: F401 (finished jobs of both teams)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_member_finds_a_failed_job_in_the_history(page, history):  # noqa: F811
    page.goto("/accounts/login/")
    page.fill("#id_username", "bob")
    page.fill("#id_password", "bob-test-pass")
    page.click("button[type=submit]")
    page.wait_for_url("**/")

    page.click("nav.topnav >> text=Jobs")
    page.wait_for_selector("#job-history")
    listed = page.locator("#job-history tbody").inner_text()
    assert "alpha-completed" in listed and "alpha-cancelled" in listed and "bravo-secret" not in listed

    page.check("input[name=status][value=failed]")
    page.click("#job-filters button[type=submit]")
    page.wait_for_url("**status=failed**")
    rows = page.locator("#job-history tbody tr")
    assert rows.count() == 1 and "alpha-failed" in rows.inner_text()
    assert page.is_checked("input[name=status][value=failed]")  # the form keeps what was asked
    _shoot(page, "job-history.png")

    page.fill("#f-from", "2026-12-05")
    page.fill("#f-to", "2026-12-01")
    page.click("#job-filters button[type=submit]")
    assert "The range ends before it starts." in page.locator("#filter-errors").inner_text()

    page.goto("/jobs/")
    page.click("text=alpha-failed")
    page.wait_for_selector("h1:has-text('alpha-failed')")
    assert page.goto(f"/jobs/{history['bravo_done'].pk}/").status == 404
