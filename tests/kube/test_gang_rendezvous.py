"""A portal gang over two nodes gets what torchrun needs, on the real control plane: a headless
Service per run whose Endpoints (what the cluster's DNS answers) name each member by hostname,
and each member's ranks; the Service goes once the run is over, however it ended."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from agents import tasks
from agents.rendezvous import rendezvous_service
from portal.models import Membership
from scheduling import services
from scheduling.models import ActionRequest, Job
from tests.kube.conftest import TEAM, kube_job
from tests.workers.conftest import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def running_gang(workers, core: client.CoreV1Api, job: Job) -> dict:
    """Place the job (two members of 4 GPUs) and wait until both pods run; member -> pod."""
    assert workers.run(tasks.run_cycle)["placed"] == [job.pk]
    wait_for(
        lambda: ActionRequest.objects.filter(job=job, kind="bind", state="confirmed").count() == 2,
        what="both binds confirmed",
        timeout=60,
    )

    def pods():
        found = core.list_namespaced_pod(TEAM, label_selector=f"tessera.io/job-id={job.pk}").items
        running = [p for p in found if p.status.phase == "Running" and p.status.pod_ip]

        return {int(_env(p)["NODE_RANK"]): p for p in running} if len(running) == 2 else None

    return wait_for(pods, what="both pods running", timeout=60)


def _env(pod) -> dict[str, str]:
    return {v.name: v.value for v in pod.spec.containers[0].env or []}


def service_of(core: client.CoreV1Api, name: str):
    try:
        return core.read_namespaced_service(name, TEAM)
    except ApiException as error:
        if error.status == 404:
            return None
        raise


def addresses(core: client.CoreV1Api, name: str) -> dict[str, str]:
    """hostname -> IP in the Service's Endpoints: the records <hostname>.<service> resolves to."""
    try:
        endpoints = core.read_namespaced_endpoints(name, TEAM)
    except ApiException as error:
        if error.status == 404:
            return {}
        raise
    return {a.hostname: a.ip for subset in endpoints.subsets or [] for a in subset.addresses or []}


def test_a_two_node_gang_finds_member_0_by_name_and_its_service_goes_when_it_completes(
    gpu_cluster, kube_workers, kube_admin
):
    core = client.CoreV1Api(kube_admin)
    kube_workers.start()
    job = kube_job("ddp", gpus=8, runtime_s=8)
    pods = running_gang(kube_workers, core, job)
    job.refresh_from_db()
    name = rendezvous_service(job)
    service = service_of(core, name)
    assert service.spec.cluster_ip == "None" and service.spec.publish_not_ready_addresses
    for member, pod in pods.items():
        env = _env(pod)
        assert (pod.spec.hostname, pod.spec.subdomain) == (f"member-{member}", name)
        assert env["MASTER_ADDR"] == f"member-0.{name}" and env["MASTER_PORT"] == "29500"
        assert (env["WORLD_SIZE"], env["RANK"], env["NNODES"], env["LOCAL_WORLD_SIZE"]) == (
            "8",
            str(4 * member),
            "2",
            "4",
        )
        shm = next(v for v in pod.spec.volumes if v.name == "dshm")
        assert shm.empty_dir.medium == "Memory"
    want = {f"member-{m}": pod.status.pod_ip for m, pod in pods.items()}
    wait_for(lambda: addresses(core, name) == want, what="both members in the Service's endpoints", timeout=60)

    wait_for(
        lambda: all(
            p.status.phase == "Succeeded"
            for p in core.list_namespaced_pod(TEAM, label_selector=f"tessera.io/job-id={job.pk}").items
        ),
        what="both pods succeeded",
        timeout=60,
    )
    result = kube_workers.run(tasks.reconcile)
    assert result["finished"] == {"completed": [job.pk]} and result["services_removed"] == 1
    assert service_of(core, name) is None
    assert len(core.list_namespaced_pod(TEAM, label_selector=f"tessera.io/job-id={job.pk}").items) == 2  # logs kept


def test_a_cancelled_gang_leaves_no_service(gpu_cluster, kube_workers, kube_admin):
    core = client.CoreV1Api(kube_admin)
    kube_workers.start()
    job = kube_job("ddp-cancelled", gpus=8, runtime_s=600)
    running_gang(kube_workers, core, job)
    job.refresh_from_db()
    name = rendezvous_service(job)
    assert service_of(core, name) is not None
    lead = get_user_model().objects.create_user("lead")
    Membership.objects.create(user=lead, team=job.team, role="lead")
    services.job_cancel(user=lead, job=job)

    def cancelled() -> bool:  # the stop, then the release once the harness has stopped both pods
        kube_workers.run(tasks.resume_actions)
        return Job.objects.get(pk=job.pk).status == "cancelled"

    wait_for(cancelled, what="cancelled", timeout=60, every=0.5)
    assert kube_workers.run(tasks.reconcile)["services_removed"] == 1
    assert service_of(core, name) is None
