"""Two running jobs of two teams, each with a bound pod and its checkpoint token."""

from dataclasses import dataclass
from datetime import timedelta

import pytest
from django.utils import timezone

from checkpoints.services import token_issue
from scheduling.models import ActionRequest, Job, Placement, run_id
from scheduling.services import placement_start
from tests.billing.factories import make_world


@dataclass
class Running:
    job: Job
    pod: str
    token: str
    interval: ActionRequest  # a checkpoint request made to the job: confirm "interval-<id>"


def _running(name: str) -> Running:
    world = make_world(jobs=1, name=name)
    job = world.jobs[0]
    started = timezone.now() - timedelta(minutes=10)
    Job.objects.filter(pk=job.pk).update(status="running", started_at=started, checkpoint_interval_s=600)
    placement_start(placement=Placement.objects.create(job=job, gpu=world.whole, started_at=started))
    pod = f"{world.team.name}-{job.pk}-0"
    token = token_issue(job=job, pod_name=pod, pod_key=f"bind:{job.pk}:0:{run_id(started)}", at=started)
    interval = ActionRequest.objects.create(key=f"checkpoint:{job.pk}:1", kind="checkpoint", job=job,
                                            payload={"job_id": job.pk})
    job.refresh_from_db()
    return Running(job, pod, token, interval)


@pytest.fixture
def mine(db):
    return _running("mine")


@pytest.fixture
def theirs(db):
    return _running("theirs")
