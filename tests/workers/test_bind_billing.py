"""A placement is billed from when its pod started in the cluster, never before, however late the
bind came and however often it was tried (found by bench/fault_campaign.py: a 4-GPU job billed
2 s before its pod started, under load after a node loss)."""

import json
import time
from datetime import UTC, datetime

import pytest
from django.conf import settings
from django.db import OperationalError

from agents.actions import action_advance
from agents.backends.base import TransientBackendError
from billing.models import UsageInterval
from scheduling.cycle import decide_and_apply
from scheduling.models import ActionRequest
from tests.workers.conftest import job_add

pytestmark = pytest.mark.django_db
LATE_S = 2.5  # more than the campaign's bind slack


class SlowApi:
    """The cluster's API answers a bind only after LATE_S (throttled, or the worker stalled
    between reading the clock and the call): the pod exists from the end of the call."""

    def __init__(self, sim) -> None:
        self.sim = sim

    def __getattr__(self, name):
        return getattr(self.sim, name)

    def bind(self, req):
        time.sleep(LATE_S)
        return self.sim.bind(req)


class DiesAfterBind(SlowApi):
    """The pod is bound, then the worker loses its database before it records so."""

    def bind(self, req):
        self.sim.bind(req)
        raise OperationalError("server closed the connection unexpectedly")


def _place_four_gpu_job(sim):
    job = job_add("four", gpus=4, model="A100-80GB")
    decide_and_apply(policy=settings.TESSERA_POLICY)
    [bind] = ActionRequest.objects.filter(kind="bind", job=job)
    return job, bind


def _pod_started_at(sim, job) -> datetime:
    [pod] = [p for p in json.loads(sim.path.read_text())["pods"].values() if p["job_id"] == str(job.pk)]
    return datetime.fromtimestamp(pod["started_at"], tz=UTC)


def _billing_starts(job) -> list[datetime]:
    intervals = list(UsageInterval.objects.filter(job=job))
    assert len(intervals) == 4
    return [interval.started_at for interval in intervals]


def test_a_slow_bind_is_billed_from_when_its_pod_started(cluster):
    job, bind = _place_four_gpu_job(cluster)
    assert action_advance(action_id=bind.pk, backend=SlowApi(cluster)) == "confirmed"
    started = _pod_started_at(cluster, job)
    assert all(start >= started for start in _billing_starts(job)), (_billing_starts(job), started)


def test_a_bind_retried_after_its_pod_was_made_is_billed_from_that_pod(cluster):
    job, bind = _place_four_gpu_job(cluster)
    time.sleep(LATE_S)  # the bind comes late (a busy queue); its first try dies after the call
    with pytest.raises(OperationalError):
        action_advance(action_id=bind.pk, backend=DiesAfterBind(cluster))
    bind.refresh_from_db()
    assert bind.state == "requested"
    assert action_advance(action_id=bind.pk, backend=cluster) == "confirmed"  # the pod is there: already done
    started = _pod_started_at(cluster, job)
    for start in _billing_starts(job):  # from the pod's own start, as the cluster reports it
        assert abs((start - started).total_seconds()) < 0.01, (start, started)


def test_a_bind_to_a_silent_node_waits_for_it_instead_of_counting_a_refusal(cluster):
    """A node silent for a moment (not yet lost) made binds fail three times in a second and the
    job fail for good (the fault campaign's node losses); now the bind retries until the node
    answers, or until the node is written off and the job requeued."""
    cluster.lose_node("r-01")
    job, bind = _place_four_gpu_job(cluster)
    with pytest.raises(TransientBackendError):
        action_advance(action_id=bind.pk, backend=cluster)
    job.refresh_from_db()
    assert job.status == "running" and not job.events.filter(kind__startswith="bind-").exists()
    cluster.revive_node("r-01")
    assert action_advance(action_id=bind.pk, backend=cluster) == "confirmed"
    started = _pod_started_at(cluster, job)
    assert all(start >= started for start in _billing_starts(job))
