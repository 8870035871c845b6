"""`make demo`'s running jobs have a cost (issue 16): the workload places its jobs after the billing
demo opened the ledger's intervals, and a job with GPU-hours but no interval read "no GPU time used
yet" and was in no team's spend."""

import pytest

from billing.ledger import job_cost
from billing.models import UsageInterval
from scheduling.models import Job, Placement
from ui.demo import demo_load
from ui.demo_workload import TRAINING

pytestmark = pytest.mark.django_db


def test_every_running_demo_job_costs_what_it_used():
    demo_load(workload=True)  # as `manage.py load_demo` does
    open_placements = Placement.objects.filter(ended_at__isnull=True)
    assert set(UsageInterval.objects.filter(ended_at__isnull=True).values_list("placement_id", flat=True)) \
        == set(open_placements.values_list("pk", flat=True))
    for job in Job.objects.filter(name__in=[t[3] for t in TRAINING]):
        assert job_cost(job) > 0, job.name
