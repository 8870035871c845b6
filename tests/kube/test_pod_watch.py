"""Reconcile from a watch on the real control plane (issue 13 point 6): a pod the cluster removes is
seen through the watched cache, and the job is requeued with its billing closed as before, with no
full list of our pods once the cache is warm."""

from __future__ import annotations

import functools
import time

import pytest
from kubernetes import client

from agents import services
from agents.backends.kubernetes import KubernetesBackend, KubernetesConfig
from billing.models import UsageInterval
from scheduling.models import Job, JobEvent
from tests.kube.conftest import TEAM, kube_job
from tests.kube.test_disruptions import running_pod
from tests.workers.conftest import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def watched(control_plane):
    """The backend as the workers build it, with deploy/rbac.yaml's rights; full lists counted."""
    api_client = control_plane.backend_client()
    backend = KubernetesBackend(KubernetesConfig(api_client=api_client, watch_pods=True))
    listing = backend.core.list_pod_for_all_namespaces
    backend.lists = []

    @functools.wraps(listing)  # the client's watch reads the item type from the docstring
    def counted(*args, **kwargs):
        if not kwargs.get("watch"):
            backend.lists.append(time.monotonic())
        return listing(*args, **kwargs)

    backend.core.list_pod_for_all_namespaces = counted  # the cache's thread shares this client
    yield backend
    backend.pods.stop()
    api_client.close()


def test_a_pod_the_cluster_removed_is_seen_through_the_watch_and_requeues_its_job(gpu_cluster, kube_workers,
                                                                                 kube_admin, watched):
    core = client.CoreV1Api(kube_admin)
    kube_workers.start()
    job = kube_job("watched-drain", gpus=1, runtime_s=600)
    pod = running_pod(kube_workers, core, job)
    assert services.reconcile(backend=watched)["finished"] == {}  # cold: listed, and the watch starts
    wait_for(lambda: watched.pods.observations() is not None, what="cache warm", timeout=30)
    assert [o.pod_name for o in watched.pods.observations()] == [pod.metadata.name]
    lists = len(watched.lists)  # the reconcile's and the cache's first

    core.create_namespaced_pod_eviction(pod.metadata.name, TEAM, {  # kubectl drain
        "apiVersion": "policy/v1beta1", "kind": "Eviction", "metadata": {"name": pod.metadata.name, "namespace": TEAM}})
    wait_for(lambda: watched.pods.observations() == [], what="the deletion, through the watch", timeout=40)
    wait_for(lambda: job.pk in services.reconcile(backend=watched)["finished"].get("evicted", []),
             what="reconcile requeues the job", timeout=40, every=1.0)
    assert len(watched.lists) == lists  # no full list once warm
    job.refresh_from_db()
    assert job.status == "preempted"
    assert "The cluster removed pod" in JobEvent.objects.get(job=job, kind="evicted").message
    (interval,) = UsageInterval.objects.filter(job=job)
    assert interval.ended_at is not None
    assert Job.objects.get(pk=job.pk).status == "preempted"
