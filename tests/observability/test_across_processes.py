"""A Celery worker process runs the cycle and the bind; this process, standing for a portal
replica, serves /metrics and sees what the worker did: cycle events travel through Redis,
state through PostgreSQL."""

import pytest

from agents import tasks
from scheduling.models import ActionRequest
from tests.observability.conftest import job_add, scrape, value, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def test_what_a_worker_process_did_shows_in_another_process_metrics(cluster, workers, client):
    before = scrape(client)
    workers.start()
    job = job_add("two-gpus", gpus=2, model="A100-80GB")
    assert workers.run(tasks.run_cycle)["placed"] == [job.pk]
    wait_for(lambda: ActionRequest.objects.filter(job=job, kind="bind", state="confirmed").exists(),
             what="bind confirmed")
    after = scrape(client)
    added = lambda name: value(after, name) - value(before, name)  # noqa: E731
    assert added("tessera_cycle_duration_seconds_count") == 1 and added("tessera_cycle_binds_total") == 1
    assert value(after, "tessera_actions_total", kind="bind", outcome="confirmed") == 1
    assert value(after, "tessera_allocated_gpus", team="vision", tier="reserved", model="A100-80GB") == 2
