"""Cancelling a running job frees its GPUs only once its pods have stopped, so nothing else is
placed on GPUs a pod still holds (issue 15, item 7: 5% of binds under load were refused)."""

import pytest
from django.conf import settings
from django.contrib.auth.models import User

from agents.actions import action_advance
from agents.services import requested_actions
from portal.models import Membership, Team
from scheduling import services
from scheduling.cycle import decide_and_apply
from scheduling.models import ActionRequest, Job
from tests.workers.conftest import job_add

pytestmark = pytest.mark.django_db


def test_a_cancelled_running_job_keeps_its_gpus_until_its_pods_stop(cluster):
    lead = User.objects.create_user("lead")
    Membership.objects.create(user=lead, team=Team.objects.get(name="vision"), role="lead")
    job = job_add("to-cancel", gpus=4, model="A100-80GB")
    decide_and_apply(policy=settings.TESSERA_POLICY)
    for action_id in ActionRequest.objects.filter(kind="bind").values_list("id", flat=True):
        assert action_advance(action_id=action_id, backend=cluster) == "confirmed"
    assert [o.status for o in cluster.poll_observations()] == ["Running"]

    services.job_cancel(user=lead, job=job)
    job.refresh_from_db()
    assert job.placements.filter(ended_at__isnull=True).count() == 4, "GPUs freed while the pod still runs"
    waiting = job_add("waiting", gpus=4, model="A100-80GB")
    decide_and_apply(policy=settings.TESSERA_POLICY)
    assert not waiting.placements.exists()  # nothing is placed on GPUs the pod still holds

    for action_id in requested_actions():
        action_advance(action_id=action_id, backend=cluster)
    job.refresh_from_db()
    assert job.status == "cancelled" and not job.placements.filter(ended_at__isnull=True).exists()
    assert [o for o in cluster.poll_observations() if o.job_id == str(job.pk)] == []
    decide_and_apply(policy=settings.TESSERA_POLICY)
    assert Job.objects.get(pk=waiting.pk).placements.filter(ended_at__isnull=True).count() == 4
