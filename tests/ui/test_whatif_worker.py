"""A what-if the production way: the form's request commits, the task travels through Redis to a real
Celery worker on the test database, and the page's progress endpoint follows it to 100%."""

import time

import pytest
from django.urls import reverse

from scheduling.defaults import defaults_ensure
from scheduling.models import CapacityTier, PriorityClass
from tests.celery_worker import celery_worker
from tests.ui.test_whatif import VALID
from whatif.models import WhatIfRun

pytestmark = pytest.mark.django_db(transaction=True)
PATIENCE_S = 180  # a bound on hanging on a loaded machine, not a performance claim


@pytest.fixture(autouse=True)
def _defaults(transactional_db):
    """The tiers and priority classes a migration made, which a previous transactional test's flush removed."""
    defaults_ensure(CapacityTier, PriorityClass)


@pytest.fixture
def worker():
    with celery_worker(PATIENCE_S) as process:
        yield process


def test_a_real_worker_runs_the_what_if_and_the_page_follows_it(clients, jobs, worker):
    response = clients["staff"].post(reverse("whatif:new"), {
        **VALID, "add_model": "H100-80GB", "add_count": "1", "ahead_hours": "12"})
    assert response.status_code == 302
    run = WhatIfRun.objects.get()
    seen, deadline = [], time.monotonic() + PATIENCE_S
    while time.monotonic() < deadline:
        progress = clients["staff"].get(reverse("whatif:progress", args=[run.pk])).json()
        seen.append(progress["percent"])
        if progress["state"] in ("done", "failed"):
            break
        time.sleep(0.1)
    run.refresh_from_db()
    assert (run.state, run.error, seen[-1]) == ("done", "", 100)
    assert seen == sorted(seen)
    assert run.result["changed"]["gpus"] == run.result["baseline"]["gpus"] + 8
    assert run.started_at and run.finished_at and run.jobs_csv.startswith("job_id,")
