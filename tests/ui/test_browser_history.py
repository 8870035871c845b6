"""A member looks for last week's failed job in a real browser: nav → Jobs → filter → detail;
a backwards date range is a form error; another team's job is a 404."""

import pytest

from scheduling.defaults import defaults_ensure
from scheduling.models import CapacityTier, PriorityClass
from tests.browser import follow, shoot, sign_in
from tests.ui.test_history import history  # noqa: F401 (finished jobs of both teams)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def _defaults(transactional_db):
    """The tiers and priority classes a migration made, which the previous test's flush removed."""
    defaults_ensure(CapacityTier, PriorityClass)


def test_a_member_finds_a_failed_job_in_the_history(page, history):  # noqa: F811
    sign_in(page, "bob", "bob-test-pass")

    follow(page, "nav.topnav >> text=Jobs")
    page.wait_for_selector("#job-history")
    listed = page.locator("#job-history tbody").inner_text()
    assert "alpha-completed" in listed and "alpha-cancelled" in listed and "bravo-secret" not in listed

    page.check("input[name=status][value=failed]")
    page.click("#job-filters button[type=submit]")
    page.wait_for_url("**status=failed**")
    rows = page.locator("#job-history tbody tr")
    assert rows.count() == 1 and "alpha-failed" in rows.inner_text()
    assert page.is_checked("input[name=status][value=failed]")  # the form keeps what was asked
    shoot(page, "job-history.png")

    page.fill("#f-from", "2026-12-05")
    page.fill("#f-to", "2026-12-01")
    page.click("#job-filters button[type=submit]")
    assert "The range ends before it starts." in page.locator("#filter-errors").inner_text()

    page.goto("/jobs/")
    page.click("text=alpha-failed")
    page.wait_for_selector("h1:has-text('alpha-failed')")
    assert page.goto(f"/jobs/{history['bravo_done'].pk}/").status == 404


def test_a_member_reads_a_running_jobs_logs_and_gpu_charts(page, jobs, cluster, settings, tmp_path):
    from datetime import timedelta

    from django.utils import timezone

    from agents import embedded, runtime
    from agents.backends.simulated import SimNode
    from scheduling.models import GpuSample, Job

    settings.TESSERA_BACKEND = "simulated"
    settings.TESSERA_SIMULATED_STATE = str(tmp_path / "cluster.json")
    sim = runtime.simulated_backend(settings.TESSERA_SIMULATED_STATE)
    sim.ensure_node(SimNode(name="h100-t1", gpu_model="H100-80GB", gpu_count=8, gpu_memory_mib=81920))
    job = jobs["alpha_run"]
    Job.objects.filter(pk=job.pk).update(expected_runtime_s=10 * 3600)
    job.refresh_from_db()
    embedded.adopt(sim, job)
    sim.advance(3600)
    gpu = job.placements.get().gpu
    now = timezone.now()
    GpuSample.objects.bulk_create([GpuSample(gpu=gpu, at=now - timedelta(minutes=m), utilization=0.6 + m % 7 / 20,
                                             memory_used_gb=50 + m % 5) for m in range(1, 110)])

    sign_in(page, "bob", "bob-test-pass")
    page.goto(f"/jobs/{job.pk}/")
    page.wait_for_selector("#logs pre.log")
    assert "loss" in page.locator("#logs pre.log").inner_text()
    page.wait_for_function("document.querySelector('#job-memory .main-svg') !== null")
    assert "GPU utilisation (%)" in page.locator("#job-util").inner_text()
    page.click("#logs-refresh")
    page.wait_for_selector("#logs pre.log")
    shoot(page, "job-detail.png")
    assert page.goto(f"/jobs/{jobs['bravo_run'].pk}/logs/").status == 404
