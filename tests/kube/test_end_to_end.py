"""Tessera's workers against a real kube-apiserver, etcd and kube-controller-manager, with the
kubelet harness as the GPU nodes: the whole path a job takes in production."""

from __future__ import annotations

import pytest
from kubernetes import client

from agents import tasks
from billing.models import UsageInterval
from scheduling.models import ActionRequest
from tests.kube.conftest import NODES, TEAM, kube_job
from tests.workers.conftest import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def pod_of(core: client.CoreV1Api, job):
    pods = core.list_namespaced_pod(TEAM, label_selector=f"tessera.io/job-id={job.pk}").items
    return pods[0] if len(pods) == 1 else None


def test_a_job_is_bound_run_completed_and_billed_once(gpu_cluster, kube_workers, kube_admin):
    kube_workers.start()
    job = kube_job("e2e", gpus=1, runtime_s=2)
    result = kube_workers.run(tasks.run_cycle)
    assert result["ran"] and result["placed"] == [job.pk]
    wait_for(lambda: ActionRequest.objects.filter(job=job, kind="bind", state="confirmed").exists(),
             what="bind confirmed", timeout=30)
    core = client.CoreV1Api(kube_admin)
    pod = pod_of(core, job)
    assert pod.spec.node_name in {n.name for n in NODES} and pod.spec.priority_class_name == "training"
    assert pod.spec.priority == 200  # the Priority admission plugin found deploy/'s class
    wait_for(lambda: (pod_of(core, job).status.phase == "Succeeded"), what="pod succeeded", timeout=30)
    assert kube_workers.run(tasks.reconcile)["finished"] == {"completed": [job.pk]}
    job.refresh_from_db()
    assert job.status == "completed"
    (interval,) = UsageInterval.objects.filter(job=job)
    assert interval.ended_at is not None and interval.ended_at >= interval.started_at
    assert kube_workers.run(tasks.reconcile)["finished"] == {}  # a second look changes nothing
    assert UsageInterval.objects.filter(job=job).count() == 1
