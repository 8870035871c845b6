"""Issue 16, item 10 in a real browser (Debian's Chromium through Playwright): where signing in
lands, the submit form's defaults and width, the bar at phone width, the cluster page's details
without a mouse, GPU units and one date format."""

import re

import pytest

PHONE = 375
WHEN = re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2} UTC")

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_signing_in_lands_on_the_team_dashboard_with_quotas_as_people_write_them(open_page):
    page = open_page("alice")
    assert page.url.endswith("/teams/search/")
    assert page.locator("h1").inner_text().startswith("search")
    assert "16 GPUs" in page.locator(".stats").inner_text()
    assert ".000" not in page.locator("main").inner_text()


def test_people_in_no_team_land_on_the_teams_they_may_see(open_page):
    page = open_page("fiona")
    assert page.url.endswith("/")
    assert "search" in page.locator("main").inner_text()
    assert ".000" not in page.locator("main").inner_text()


def test_the_submit_form_defaults_to_the_lowest_class_and_uses_the_page(open_page):
    page = open_page("alice")
    page.goto("/jobs/new/")
    chosen = page.locator("#id_priority_class").input_value()
    options = page.locator("#id_priority_class option").all_inner_texts()
    assert chosen == "best-effort" and options[-1].startswith("best-effort") and options[0].startswith("production")
    form = page.locator("#submit-form").bounding_box()
    main = page.locator("main").bounding_box()
    assert form["width"] > 0.6 * main["width"], "the form sits in a narrow column"
    page.select_option("#id_kind", "training")
    assert page.locator("#id_priority_class").input_value() == "best-effort"


PHONE_PAGES = ["/teams/search/", "/jobs/new/", "/cluster/", "/account/tokens/", "/teams/search/priorities/",
               "/billing/teams/search/", "/jobs/", "/account/notifications/"]


def test_nothing_is_wider_than_a_phone(open_page):
    """One phone-width browser visits every page: a test per page loaded the demo and started
    Chromium eight times over (about 8 s each) to read pages that change nothing."""
    page = open_page("alice", width=PHONE)
    for path in PHONE_PAGES:
        page.goto(path)
        nav = page.locator("nav.topnav").bounding_box()
        assert nav["width"] <= PHONE, path
        for link in page.locator("nav.topnav a, nav.topnav button").all():
            box = link.bounding_box()
            assert box["x"] >= 0 and box["x"] + box["width"] <= PHONE + 0.5, (path, link.inner_text())
        assert page.evaluate("document.documentElement.scrollWidth") <= PHONE, f"{path} scrolls sideways"


def test_the_cluster_details_open_from_the_keyboard(open_page):
    page = open_page("alice")
    page.goto("/cluster/")
    details = page.locator("tr:has-text('h100-04') details.gpu-details")
    assert not details.locator("li").first.is_visible()
    details.locator("summary").focus()
    page.keyboard.press("Enter")
    text = details.inner_text()
    assert "1g.10gb @ slot 0: search: #" in text and "ranker-serving" in text  # alice's team: names shown
    assert page.locator(".gpu[aria-label]").count() == 72


def test_dates_are_written_one_way(open_page):
    page = open_page("alice")
    page.goto("/account/tokens/")
    page.fill("#id_name", "laptop")
    page.click("button:has-text('Make token')")
    page.wait_for_selector("text=Your new token")
    texts = page.locator("main").inner_text()
    assert WHEN.search(texts) and "never" in texts
    assert not re.search(r"\d{4}-\d{2}-\d{2}(?! \d{2}:\d{2} UTC)", texts)
