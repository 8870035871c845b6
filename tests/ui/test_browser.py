"""A team lead's day in a real browser: sign in, submit, see the queue, reorder, cancel.

Drives Debian's Chromium through Playwright (never Playwright's own download) against the live
server; saves screenshots of the dashboard and the cluster page for CI (artifacts/screenshots/). The
README's pictures come from a running `make demo` instead (tools/demo_screenshots.py).
"""

from datetime import timedelta

import pytest
from django.utils import timezone

from portal.models import Team
from scheduling.cycle import decide_and_apply
from scheduling.models import Gpu, GpuSample, Job
from tests.browser import shoot, sign_in
from ui.demo import demo_load

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


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


def test_a_lead_submits_sees_reorders_and_cancels_a_job(page, live_server):
    demo_load()
    _measured_cluster()
    sign_in(page, "alice")

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
    shoot(page, "dashboard.png")

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
    shoot(page, "cluster.png")
