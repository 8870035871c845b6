"""A spot node the provider takes back bills its jobs up to its deadline, not up to whenever the
workers get round to releasing them (found by bench/fault_campaign.py)."""

import time
from datetime import UTC, datetime, timedelta

import pytest
from django.conf import settings

from agents.actions import action_advance
from agents.services import agents_poll, requested_actions
from billing.models import UsageInterval
from scheduling.cycle import decide_and_apply
from scheduling.models import ActionRequest
from tests.workers.conftest import job_add

pytestmark = pytest.mark.django_db


def test_a_reclaimed_job_is_billed_up_to_the_providers_deadline(cluster):
    job = job_add("on-spot", gpus=4, model="H100-80GB")
    decide_and_apply(policy=settings.TESSERA_POLICY)
    for action_id in ActionRequest.objects.filter(kind="bind").values_list("id", flat=True):
        assert action_advance(action_id=action_id, backend=cluster) == "confirmed"
    cluster.reclaim_node("s-01", notice_s=0.5)
    agents_poll(backend=cluster, telemetry=cluster)
    [action] = ActionRequest.objects.filter(kind="preempt", state="requested")
    deadline = datetime.fromtimestamp(action.payload["notice_deadline"], tz=UTC)
    time.sleep(2.0)  # the workers come to it late; the node went at its deadline
    for action_id in requested_actions():
        action_advance(action_id=action_id, backend=cluster)
    job.refresh_from_db()
    assert job.status == "preempted"
    for interval in UsageInterval.objects.filter(job=job):
        assert interval.ended_at <= deadline + timedelta(seconds=0.05), (interval.ended_at, deadline)
