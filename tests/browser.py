"""The one way the tests drive a real browser: Debian's Chromium (never Playwright's own download)
through Playwright's sync API, against pytest-django's live server. tests/conftest.py registers the
fixtures: `page` (one blank page) and `open_page` (the demo loaded; open_page(user, width) signs in).
Screenshots go to artifacts/screenshots/ for CI; the README's come from tools/demo_screenshots.py."""

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from django.db import connections

CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts" / "screenshots"
LAUNCH_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]


@contextmanager
def chromium() -> Iterator:
    """A headless Chromium; the test is skipped where Playwright or Debian's Chromium is missing."""
    sync_api = pytest.importorskip("playwright.sync_api")
    if not os.path.exists(CHROMIUM):
        pytest.skip("Debian's Chromium is not installed (apt-get install chromium)")
    os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # Playwright's sync API runs an event loop
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=LAUNCH_ARGS)
        try:
            yield browser
        finally:
            browser.close()
            # Inside Playwright's event loop Django keeps separate connections; close them here so
            # the test database can be dropped afterwards.
            connections.close_all()


def shoot(page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / name), full_page=True)


def sign_in(page, user: str, password: str | None = None) -> None:
    """Sign in through the login form (the demo's password unless told) and wait to be let in."""
    page.goto("/accounts/login/")
    page.fill("#id_username", user)
    page.fill("#id_password", password or f"{user}-demo-pass")
    page.click("button[type=submit]")
    page.wait_for_url(lambda url: "/accounts/login/" not in url)


def follow(page, link: str) -> None:
    """Click a link and wait for the page it opens to load: a bare click returns once the click is
    sent, and reading the page at once can read a half-parsed one (a table with no rows yet)."""
    with page.expect_navigation():
        page.click(link)


@pytest.fixture
def page(live_server):
    """A blank page at desktop width on the live server."""
    with chromium() as browser:
        yield browser.new_context(viewport={"width": 1360, "height": 900}, base_url=live_server.url).new_page()


@pytest.fixture
def open_page(live_server):
    """open_page(user, width=1360): the demo loaded, a page signed in as one of its users."""
    from ui.demo import demo_load  # models: imported once Django is set up

    demo_load()
    with chromium() as browser:

        def open_page(user: str, width: int = 1360):
            context = browser.new_context(viewport={"width": width, "height": 800}, base_url=live_server.url)
            opened = context.new_page()
            sign_in(opened, user)
            return opened

        yield open_page
