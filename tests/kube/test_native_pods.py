"""Native submission on the real control plane (issue 14): pods others create with
`schedulerName: tessera` become jobs of the team their namespace maps to, are placed and bound as
they are, and are billed once; pods of an unmapped namespace get an Event and no job; a batch/v1
Job's pod is named after its Job, and a cancel from the portal deletes that Job; a pod deleted
while it runs ends its job in a clear state, billed once."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from agents import tasks
from agents.backends.k8s_native import read_native
from agents.native import native_need
from billing.models import UsageInterval
from portal.models import Membership, Team, TeamNamespace
from scheduling.clock import database_now
from scheduling.models import ActionRequest, Job, NativePod, PriorityClass
from scheduling.native import native_job_create
from scheduling.services import job_cancel
from tests.kube.conftest import IMAGE, NODES, TEAM, namespace_ensure
from tests.workers.conftest import wait_for

pytestmark = pytest.mark.django_db(transaction=True)
MAPPED = "ml-research"  # mapped to team vision in the admin
UNMAPPED = "stray"


def pod_body(name: str, *, gpus: int = 1, runtime_s: int = 3, priority_class: str = "training") -> dict:
    """A pod as a team writes it: our scheduler, a GPU request, nothing of Tessera's besides."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": _pod_spec(gpus=gpus, runtime_s=runtime_s, priority_class=priority_class),
    }


def _pod_spec(*, gpus: int, runtime_s: int, priority_class: str, restart: str = "Never") -> dict:
    return {
        "schedulerName": "tessera",
        "restartPolicy": restart,
        "priorityClassName": priority_class,
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "containers": [
            {
                "name": "train",
                "image": IMAGE,
                # the kubelet harness runs a pod this long (tests/kube/kubelet.py)
                "env": [{"name": "TESSERA_RUNTIME_S", "value": str(runtime_s)}],
                "resources": {"limits": {"nvidia.com/gpu": str(gpus)}},
            }
        ],
    }


@pytest.fixture
def native(gpu_cluster, kube_admin):
    """Namespace ml-research mapped to team vision (which may use every class); `stray` not mapped.
    Whatever the test created there is deleted after it."""
    core = client.CoreV1Api(kube_admin)
    for namespace in (MAPPED, UNMAPPED):
        namespace_ensure(core, namespace)
    team = Team.objects.get(name=TEAM)
    team.allowed_priority_classes.set(PriorityClass.objects.all())
    TeamNamespace.objects.create(namespace=MAPPED, team=team)
    yield core
    batch = client.BatchV1Api(kube_admin)
    for namespace in (MAPPED, UNMAPPED):
        for owner in batch.list_namespaced_job(namespace).items:
            batch.delete_namespaced_job(owner.metadata.name, namespace, propagation_policy="Background")
        core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)


def read_pod(core, namespace: str, name: str):
    try:
        return core.read_namespaced_pod(name, namespace)
    except ApiException as error:
        if error.status == 404:
            return None
        raise


def bound(job) -> bool:
    return ActionRequest.objects.filter(job=job, kind="bind", state="confirmed").exists()


def test_a_native_pod_is_taken_in_bound_as_it_is_run_and_billed_once(native, kube_workers):
    created = native.create_namespaced_pod(MAPPED, pod_body("train-0", runtime_s=4))
    kube_workers.start()
    intake = kube_workers.run(tasks.poll_agents)["native"]
    (job,) = Job.objects.filter(native_pods__uid=created.metadata.uid)
    assert intake == {"taken": [job.pk], "refused": {}}
    assert (job.team.name, job.namespace, job.name, job.priority_class.name, job.gpus) == (
        TEAM,
        MAPPED,
        "Pod train-0",
        "training",
        1,
    )
    assert kube_workers.run(tasks.poll_agents)["native"] == {"taken": [], "refused": {}}  # labelled: once
    assert Job.objects.filter(namespace=MAPPED).count() == 1 and NativePod.objects.count() == 1

    assert kube_workers.run(tasks.run_cycle)["placed"] == [job.pk]
    wait_for(lambda: bound(job), what="bind confirmed", timeout=30)
    pod = read_pod(native, MAPPED, "train-0")
    assert pod.metadata.uid == created.metadata.uid, "the user's own pod is bound, no new one"
    assert pod.spec.node_name in {n.name for n in NODES}
    wait_for(lambda: read_pod(native, MAPPED, "train-0").status.phase == "Running", what="running", timeout=30)
    assert kube_workers.run(tasks.reconcile)["finished"] == {}
    job.refresh_from_db()
    assert job.status == "running"
    wait_for(lambda: read_pod(native, MAPPED, "train-0").status.phase == "Succeeded", what="succeeded", timeout=30)
    assert kube_workers.run(tasks.reconcile)["finished"] == {"completed": [job.pk]}
    assert kube_workers.run(tasks.reconcile)["finished"] == {}
    job.refresh_from_db()
    assert job.status == "completed"
    (interval,) = UsageInterval.objects.filter(job=job)
    assert interval.ended_at is not None and interval.ended_at > interval.started_at
    assert kube_workers.run(tasks.poll_agents)["native"] == {"taken": [], "refused": {}}


def test_a_pod_of_an_unmapped_namespace_gets_an_event_and_no_job(native, kube_workers):
    created = native.create_namespaced_pod(UNMAPPED, pod_body("lost-0"))
    kube_workers.start()
    assert kube_workers.run(tasks.poll_agents)["native"] == {"taken": [], "refused": {"NamespaceNotMapped": 1}}
    assert not Job.objects.exists()
    events = native.list_namespaced_event(UNMAPPED, field_selector=f"involvedObject.uid={created.metadata.uid}").items
    (event,) = [e for e in events if e.reason == "NamespaceNotMapped"]
    assert event.type == "Warning" and "stray is not mapped to a Tessera team" in event.message
    assert "/admin/portal/teamnamespace/" in event.message
    pod = read_pod(native, UNMAPPED, "lost-0")
    assert pod.status.phase == "Pending" and pod.spec.node_name is None

    # A platform engineer maps it: the next poll takes the same pod in.
    TeamNamespace.objects.create(namespace=UNMAPPED, team=Team.objects.get(name=TEAM))
    taken = kube_workers.run(tasks.poll_agents)["native"]["taken"]
    assert [job.pk for job in Job.objects.filter(native_pods__uid=created.metadata.uid)] == taken


def batch_job(name: str, runtime_s: int) -> dict:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "backoffLimit": 0,
            "template": {"spec": _pod_spec(gpus=2, runtime_s=runtime_s, priority_class="training")},
        },
    }


def test_a_batch_job_pod_is_named_after_its_job_and_a_portal_cancel_deletes_the_job(native, kube_workers, kube_admin):
    batch = client.BatchV1Api(kube_admin)
    owner = batch.create_namespaced_job(MAPPED, batch_job("train-llm", runtime_s=600))
    wait_for(
        lambda: native.list_namespaced_pod(MAPPED, label_selector="job-name=train-llm").items,
        what="the Job controller's pod",
        timeout=30,
    )
    kube_workers.start()
    (job_id,) = kube_workers.run(tasks.poll_agents)["native"]["taken"]
    job = Job.objects.get(pk=job_id)
    (row,) = job.native_pods.all()
    assert (job.name, job.gpus, row.owner_kind, row.owner_name, row.owner_uid) == (
        "Job train-llm",
        2,
        "Job",
        "train-llm",
        owner.metadata.uid,
    )
    assert kube_workers.run(tasks.run_cycle)["placed"] == [job.pk]
    wait_for(lambda: bound(job), what="bind confirmed", timeout=30)

    lead = get_user_model().objects.create_user("lead")
    Membership.objects.create(user=lead, team=job.team, role="lead")
    job_cancel(user=lead, job=job)
    (cancel,) = ActionRequest.objects.filter(job=job, kind="preempt")
    wait_for(lambda: kube_workers.run(tasks.execute_action, cancel.pk) == "confirmed", what="cancel", timeout=120)

    def owner_gone() -> bool:
        try:
            batch.read_namespaced_job("train-llm", MAPPED)
        except ApiException as error:
            return error.status == 404
        return False

    wait_for(owner_gone, what="the owning Job deleted", timeout=30)
    wait_for(
        lambda: not native.list_namespaced_pod(MAPPED, label_selector="job-name=train-llm").items,
        what="its pods gone, none made again",
        timeout=60,
    )
    job.refresh_from_db()
    assert job.status == "cancelled"
    intervals = UsageInterval.objects.filter(job=job)  # one a GPU: two GPUs, two placements
    assert sorted(i.placement_id for i in intervals) == sorted(job.placements.values_list("pk", flat=True))
    assert len(intervals) == 2 and all(i.ended_at is not None for i in intervals)
    assert kube_workers.run(tasks.poll_agents)["native"] == {"taken": [], "refused": {}}


def test_a_native_pod_deleted_while_it_runs_ends_its_job_billed_once(native, kube_workers):
    native.create_namespaced_pod(MAPPED, pod_body("doomed-0", runtime_s=600))
    kube_workers.start()
    (job_id,) = kube_workers.run(tasks.poll_agents)["native"]["taken"]
    job = Job.objects.get(pk=job_id)
    assert kube_workers.run(tasks.run_cycle)["placed"] == [job.pk]
    wait_for(lambda: read_pod(native, MAPPED, "doomed-0").status.phase == "Running", what="running", timeout=30)
    native.delete_namespaced_pod("doomed-0", MAPPED, grace_period_seconds=0)
    wait_for(lambda: read_pod(native, MAPPED, "doomed-0") is None, what="pod deleted", timeout=30)
    # Reconcile counts a pod missing once its bind is SEEN_AFTER old (agents/services.py).
    wait_for(lambda: kube_workers.run(tasks.reconcile)["finished"], what="the job ended", timeout=60, every=1)
    job.refresh_from_db()
    assert job.status == "cancelled"
    assert "deleted outside Tessera" in job.events.get(kind="pod-deleted").message
    (interval,) = UsageInterval.objects.filter(job=job)
    assert interval.ended_at is not None
    assert kube_workers.run(tasks.reconcile)["finished"] == {}
    assert kube_workers.run(tasks.run_cycle)["placed"] == []  # never placed again
    assert UsageInterval.objects.filter(job=job).count() == 1


def test_a_worker_that_died_before_labelling_the_pod_leaves_one_job(native, kube_workers):
    created = native.create_namespaced_pod(MAPPED, pod_body("crash-0"))
    # What a worker killed between its commit and its label left: the rows, the pod unlabelled.
    need = native_need(read_native(read_pod(native, MAPPED, "crash-0")))
    job = native_job_create(team=Team.objects.get(name=TEAM), need=need, at=database_now())
    kube_workers.start()
    assert kube_workers.run(tasks.poll_agents)["native"]["taken"] == [job.pk]
    assert Job.objects.count() == 1 and NativePod.objects.get().uid == created.metadata.uid
    assert read_pod(native, MAPPED, "crash-0").metadata.labels["tessera.io/job-id"] == str(job.pk)


def test_a_native_pod_deleted_while_it_waits_ends_its_job(native, kube_workers):
    native.create_namespaced_pod(MAPPED, pod_body("gone-0"))  # no cycle runs: it waits
    kube_workers.start()
    (job_id,) = kube_workers.run(tasks.poll_agents)["native"]["taken"]
    native.delete_namespaced_pod("gone-0", MAPPED, grace_period_seconds=0)
    wait_for(
        lambda: kube_workers.run(tasks.reconcile)["finished"] == {"pod-deleted": [job_id]},
        what="the waiting job ended",
        timeout=60,
        every=1,
    )
    assert Job.objects.get(pk=job_id).status == "cancelled"
    assert not UsageInterval.objects.filter(job_id=job_id).exists()
