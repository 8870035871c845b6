"""A pod the cluster removes or cannot start ends its job's run in a clear state (issue 13 point 4),
against the fake API server: reconcile, as the workers run it, through the Kubernetes backend."""

import time
from datetime import timedelta

import pytest
from django.utils import timezone

from agents import actions, services
from agents.actions.bind import MAX_BIND_TRIES
from billing.models import UsageInterval
from scheduling.models import JobEvent
from tests.agents.placing import assert_nothing_billed, placed, vision_world


@pytest.fixture
def world(db, kube):
    return vision_world(kube)


@pytest.fixture
def bound(world, backend, kube):
    """A job whose pod is bound and running; returns (job, pod name)."""
    job, bind, _placement = placed(world)
    assert actions.action_advance(action_id=bind.pk, backend=backend) == "confirmed"
    pod = bind.payload["pod_name"]
    kube.set_pod_phase(world.team.name, pod, "Running")
    return job, pod


def later(seconds: float = 30):
    return timezone.now() + timedelta(seconds=seconds)


def test_a_drained_pod_requeues_its_job_and_closes_its_billing(bound, backend, kube):
    job, pod = bound
    namespace = job.team.name
    kube.evict(namespace, pod)  # kubectl drain: the eviction deletes the pod with its grace
    assert services.reconcile(backend=backend, now=later())["finished"] == {}  # still stopping
    kube.set_pod_phase(namespace, pod, "Failed", reason="Error", exit_code=143)  # SIGTERM
    seen = later()
    assert services.reconcile(backend=backend, now=seen)["finished"] == {"evicted": [job.pk]}
    job.refresh_from_db()
    assert job.status == "preempted"  # requeued, from its last checkpoint
    (interval,) = UsageInterval.objects.filter(job=job)
    assert interval.ended_at == seen and interval.ended_at > interval.started_at
    assert "The cluster removed pod" in JobEvent.objects.get(job=job, kind="evicted").message
    assert services.reconcile(backend=backend, now=later(40))["finished"] == {}  # once


def test_a_pod_the_cluster_deleted_outright_requeues_its_job(bound, backend, kube):
    job, pod = bound
    kube.finish_deletion(job.team.name, pod)  # PodGC, or the taint manager after its toleration
    assert services.reconcile(backend=backend, now=later())["finished"] == {"evicted": [job.pk]}
    job.refresh_from_db()
    assert job.status == "preempted" and not UsageInterval.objects.filter(job=job, ended_at__isnull=True).exists()


def test_a_pod_bound_after_the_list_was_read_is_not_taken_for_removed(world, backend, kube):
    job, bind, _placement = placed(world)
    assert actions.action_advance(action_id=bind.pk, backend=backend) == "confirmed"
    kube.finish_deletion(job.team.name, bind.payload["pod_name"])
    assert services.reconcile(backend=backend, now=timezone.now())["finished"] == {}  # too new to judge
    job.refresh_from_db()
    assert job.status == "running"


def test_a_pod_evicted_by_its_kubelet_requeues_its_job(bound, backend, kube):
    job, pod = bound
    kube.set_pod_phase(job.team.name, pod, "Failed", reason="Evicted",
                       message="The node was low on resource: memory.")
    assert services.reconcile(backend=backend, now=later())["finished"] == {"evicted": [job.pk]}


@pytest.mark.parametrize(("reason", "words"), [
    ("ImagePullBackOff", 'Back-off pulling image "nvcr.io/nvidia/pytorch:24.05-py3"'),
    ("ErrImagePull", "failed to pull and unpack image: not found"),
    ("CreateContainerConfigError", 'secret "wandb-key" not found'),
])
def test_a_pod_that_cannot_start_fails_its_job_with_the_reason_and_bills_nothing(world, backend, kube, reason,
                                                                                 words):
    job, bind, _placement = placed(world)
    actions.action_advance(action_id=bind.pk, backend=backend)
    kube.wait_container(job.team.name, bind.payload["pod_name"], reason, words)
    assert services.reconcile(backend=backend, now=later())["finished"] == {"cannot-start": [job.pk]}
    job.refresh_from_db()
    assert job.status == "failed"
    assert f"{reason}: {words}" in JobEvent.objects.get(job=job, kind="failed").message
    assert_nothing_billed(job)
    assert kube.pod(job.team.name, bind.payload["pod_name"]) is None  # stopped (not bound to a kubelet: gone)


def test_a_kubelet_admission_refusal_requeues_then_fails_a_bounded_number_of_times(world, backend, kube):
    for attempt in range(1, MAX_BIND_TRIES + 1):
        time.sleep(1.05)  # each run in a second of its own (bind keys end in the run's start second)
        job, bind, _placement = placed(world, ago_s=0)  # billed from its bind: after the last run's
        actions.action_advance(action_id=bind.pk, backend=backend)
        kube.set_pod_phase(job.team.name, bind.payload["pod_name"], "Failed", reason="OutOfnvidia.com/gpu",
                           message="Pod Node didn't have enough resource: nvidia.com/gpu, requested: 1, used: 8, "
                                   "capacity: 8")
        services.reconcile(backend=backend, now=later())
        job.refresh_from_db()
        assert job.status == ("failed" if attempt == MAX_BIND_TRIES else "pending"), f"refusal {attempt}"
    assert "OutOfnvidia.com/gpu: Pod Node didn't have enough resource" in \
        JobEvent.objects.get(job=job, kind="bind-refused").message
    assert_nothing_billed(job)
