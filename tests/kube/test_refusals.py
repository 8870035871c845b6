"""Refusals on a real API server end in a clear state (issue 13 point 1, issue 15 item 2): the
Priority, ResourceQuota and LimitRange admission plugins refuse the pod (403) and the job fails in
the cluster's words with nothing billed; an API server restarted mid-cycle is retried and the job
runs to the end with one interval. tests/agents/test_bind_refusals.py does the same on the fake."""

from __future__ import annotations

import time

import pytest
from kubernetes import client

from agents import tasks
from billing.models import UsageInterval
from scheduling.models import ActionRequest, JobEvent
from tests.kube.conftest import TEAM, kube_job
from tests.workers.conftest import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def bind_state(job) -> str | None:
    action = ActionRequest.objects.filter(job=job, kind="bind").order_by("-id").first()
    return action and action.state


def refused(workers, job) -> str:
    """Place the job through a worker; the bind must fail; returns what the job's owner reads."""
    result = workers.run(tasks.run_cycle)
    assert result["placed"] == [job.pk]
    wait_for(lambda: bind_state(job) == "failed", what="bind refused", timeout=40)
    job.refresh_from_db()
    assert job.status == "failed"
    for interval in UsageInterval.objects.filter(job=job):
        assert interval.ended_at == interval.started_at, "billed for time that never ran"
    assert workers.run(tasks.run_cycle)["placed"] == []  # never placed again
    return JobEvent.objects.get(job=job, kind="bind-refused").message


@pytest.fixture
def scheduling_api(kube_admin):
    return client.SchedulingV1Api(kube_admin)


def test_a_priority_class_the_cluster_lacks_fails_the_job_in_its_words(gpu_cluster, kube_workers, scheduling_api):
    kept = scheduling_api.read_priority_class("best-effort")
    scheduling_api.delete_priority_class("best-effort")
    try:
        kube_workers.start()
        job = kube_job("no-class", gpus=1)
        job.priority_class = job.priority_class.__class__.objects.get(name="best-effort")
        job.save(update_fields=["priority_class"])
        message = refused(kube_workers, job)
    finally:
        scheduling_api.create_priority_class({"metadata": {"name": "best-effort", "labels": kept.metadata.labels},
                                              "value": kept.value, "preemptionPolicy": kept.preemption_policy,
                                              "description": kept.description})
    assert "is forbidden: no PriorityClass with name best-effort was found" in message


QUOTA = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "gpus"},
         "spec": {"hard": {"requests.nvidia.com/gpu": "0"}}}
LIMITS = {"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "memory"},
          "spec": {"limits": [{"type": "Container", "max": {"memory": "16Gi"}}]}}


@pytest.mark.parametrize(("policy", "words"), [
    (QUOTA, "is forbidden: exceeded quota: gpus, requested: requests.nvidia.com/gpu=1"),
    (LIMITS, "is forbidden: maximum memory usage per Container is 16Gi, but limit is 64Gi"),
])
def test_a_quota_or_limit_range_refusal_fails_the_job_in_the_clusters_words(gpu_cluster, kube_workers, kube_admin,
                                                                             policy, words):
    core = client.CoreV1Api(kube_admin)
    kind = policy["kind"]
    create, delete = ((core.create_namespaced_resource_quota, core.delete_namespaced_resource_quota)
                      if kind == "ResourceQuota" else
                      (core.create_namespaced_limit_range, core.delete_namespaced_limit_range))
    create(TEAM, policy)
    try:
        kube_workers.start()
        job = kube_job(f"refused-by-{kind.lower()}", gpus=1)
        message = refused(kube_workers, job)
    finally:
        delete(policy["metadata"]["name"], TEAM)
    assert words in message


def test_an_api_server_restarted_mid_cycle_is_retried_and_nothing_is_lost(gpu_cluster, kube_workers, control_plane,
                                                                          kube_admin):
    kube_workers.start()
    job = kube_job("through-a-restart", gpus=1, runtime_s=2)
    control_plane.stop_apiserver()
    try:
        result = kube_workers.run(tasks.run_cycle)  # decides in the database; the bind meets a closed port
        assert result["placed"] == [job.pk]
        time.sleep(3)  # the worker's bind meets the closed port and is retried (a rollback leaves no trace)
    finally:
        control_plane.start_apiserver()

    def bound() -> bool:  # the task's own retries (backoff), or beat's resume_actions, carry it out
        if bind_state(job) == "confirmed":
            return True
        kube_workers.run(tasks.resume_actions)
        return False

    try:
        wait_for(bound, what="bind confirmed after the restart", timeout=120, every=2.0)
    except AssertionError as late:
        binds = ActionRequest.objects.filter(job=job, kind="bind").values_list("state", "attempts", "last_error")
        raise AssertionError(f"{late}: {list(binds)}") from late
    core = client.CoreV1Api(kube_admin)
    wait_for(lambda: any(p.status.phase == "Succeeded" for p in core.list_namespaced_pod(
        TEAM, label_selector=f"tessera.io/job-id={job.pk}").items), what="pod succeeded", timeout=60)
    assert kube_workers.run(tasks.reconcile)["finished"] == {"completed": [job.pk]}
    job.refresh_from_db()
    assert job.status == "completed" and UsageInterval.objects.filter(job=job).count() == 1
