"""A team lead's day in a real browser: sign in, submit, see the queue, reorder, cancel.

Drives Debian's Chromium through Playwright (never Playwright's own download) against the live
server; saves screenshots of the dashboard and the cluster page for CI (artifacts/screenshots/). The
README's pictures come from a running `make demo` instead (tools/demo_screenshots.py).
"""

import os
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import connections
from django.utils import timezone

from portal.models import Team
from scheduling.cycle import decide_and_apply
from scheduling.models import Gpu, GpuSample, Job
from ui.demo import demo_load

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "artifacts" / "screenshots"
CHROMIUM = "/usr/bin/chromium"

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def page(live_server):
    sync_api = pytest.importorskip("playwright.sync_api")
    if not os.path.exists(CHROMIUM):
        pytest.skip("Debian's Chromium is not installed (apt-get install chromium)")
    os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # Playwright's sync API runs an event loop
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=[
            "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"])
        context = browser.new_context(viewport={"width": 1360, "height": 900}, base_url=live_server.url)
        yield context.new_page()
        browser.close()
        # Inside Playwright's event loop Django keeps separate connections; close them here so the
        # test database can be dropped afterwards.
        connections.close_all()


def _measured_cluster():
    """What the node agents and the scheduler would have written: samples, utilisation, reasons."""
    now = timezone.now()
    busy = Gpu.objects.filter(placements__ended_at__isnull=True).distinct()
    samples = [GpuSample(gpu=gpu, at=now - timedelta(hours=h), utilization=0.45 + 0.4 * ((h + gpu.index) % 5) / 5,
                         memory_used_gb=30) for gpu in busy for h in range(1, 24)]
    GpuSample.objects.bulk_create(samples)
    for gpu in busy:
        Gpu.objects.filter(pk=gpu.pk).update(utilization=0.55 + 0.08 * (gpu.index % 5))
    # Team search may hold one GPU, so its 2-GPU training jobs wait at the burst limit and say so.
    Team.objects.filter(name="search").update(guaranteed_gpus=1, burst_limit_gpus=1)
    _scheduler_writes_reasons()


def _scheduler_writes_reasons():
    """One real scheduling cycle: the engine places what fits and explains the rest."""
    decide_and_apply(policy="tessera")


def _shoot(page, name):
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / name), full_page=True)


def test_a_lead_submits_sees_reorders_and_cancels_a_job(page, live_server):
    demo_load()
    _measured_cluster()
    page.goto("/accounts/login/")
    page.fill("#id_username", "alice")
    page.fill("#id_password", "alice-demo-pass")
    page.click("button[type=submit]")
    page.wait_for_url("**/")

    page.click("text=Submit job")
    page.fill("#id_name", "browser-finetune")
    page.select_option("#id_kind", "training")
    page.select_option("#id_priority_class", "training")
    page.fill("#id_gpus", "2")
    page.fill("#id_checkpoint_interval_s", "900")
    page.fill("#id_image", "registry.example.com/search/finetune:1.4")
    page.click("#submit-form button[type=submit]")
    page.wait_for_selector("text=Submitted job")
    job = Job.objects.get(name="browser-finetune")
    _scheduler_writes_reasons()

    page.goto("/teams/search/")
    row = page.locator(f"#queue-body tr[data-job='{job.pk}']")
    assert row.locator("td").nth(0).inner_text() == "2"
    assert "burst limit of 1" in row.inner_text()
    page.wait_for_function("document.querySelector('#allocation .main-svg') !== null")
    _shoot(page, "dashboard.png")

    page.click("text=Priorities")
    page.click(f"button[aria-label='Move #{job.pk} up']")
    page.wait_for_load_state()
    moved = page.locator(f"#priorities tr[data-job='{job.pk}'] td.position")
    assert moved.inner_text() == "1"

    page.goto(f"/jobs/{job.pk}/")
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("#cancel-job")
    page.wait_for_selector("text=Cancelled job")
    job.refresh_from_db()
    assert job.status == "cancelled"
    assert "cancelled" in page.locator(".timeline").inner_text()

    page.goto("/cluster/")
    _shoot(page, "cluster.png")
