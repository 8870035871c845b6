"""What the cluster does to a running native job, on the real control plane (issue 14): an eviction
and a lost node requeue it as Tessera's own preemption does. Its GPUs are billed until the cluster
stopped it, once; the job waits, saying why, for its controller to make its pod again; the new pod
(the real Job controller's) rejoins the same job at its last confirmed checkpoint and is billed
again only from its own bind. A bare pod that nothing makes again ends its job as failed, saying
so. The test plays the kubelet: it marks a pod Failed as the kubelet's eviction does, or stops a
node's heartbeats (the real kube-controller-manager marks it NotReady)."""

from __future__ import annotations

import base64
import os
from datetime import UTC, datetime

import pytest
from django.conf import settings
from kubernetes import client
from rest_framework.test import APIClient

from agents import tasks
from agents.backends.k8s_gangs import MIN_MEMBER_ANNOTATION, POD_GROUP_LABEL
from billing.models import UsageInterval
from scheduling import engine
from scheduling.clock import database_now
from scheduling.models import ActionRequest, Job, Node
from scheduling.snapshot import build_snapshot
from tests.kube import test_native_pods
from tests.kube.test_disruptions import node_ready
from tests.kube.test_native_checkpoint import controller_pods, job_with_channel
from tests.kube.test_native_pods import MAPPED, _pod_spec, bound, pod_body, read_pod
from tests.workers.conftest import wait_for

pytestmark = pytest.mark.django_db(transaction=True)
core = test_native_pods.native  # namespace ml-research mapped to team vision, cleaned after
CHANNEL = "tessera-checkpoint-train-llm"


def evict(core, name: str) -> None:
    """What the kubelet writes when it evicts a pod under node pressure: the pod Failed with reason
    Evicted, its container killed."""
    pod = core.read_namespaced_pod(name, MAPPED)
    ended = datetime.now(UTC).isoformat()
    killed = {"terminated": {"exitCode": 137, "reason": "Error", "startedAt": ended, "finishedAt": ended}}
    containers = [{"name": c.name, "image": c.image, "imageID": "", "ready": False, "restartCount": 0,
                   "state": killed} for c in pod.spec.containers]
    core.patch_namespaced_pod_status(name, MAPPED, {"status": {
        "phase": "Failed", "reason": "Evicted", "message": "The node was low on resource: memory.",
        "containerStatuses": containers}})


def why_unplaced(core, job: Job, workers=None) -> str:
    """What a cycle that placed nothing saw: the job (status, waiting reason, its pod rows), the node
    rows as the cycle reads them, and the cluster's nodes now (Ready, taints)."""
    job.refresh_from_db()
    pods = list(job.native_pods.values_list("name", "vacant"))
    actions = list(ActionRequest.objects.filter(job=job).values_list("kind", "state", "key"))
    events = list(job.events.values_list("kind", flat=True))
    rows = list(Node.objects.values_list("name", "state", "schedulable", "allocatable_gpus", "gpus_used_outside",
                                         "cluster_refusal"))
    cluster = [(n.metadata.name, node_ready(core, n.metadata.name),
                [f"{t.key}:{t.effect}" for t in n.spec.taints or []]) for n in core.list_node().items]
    # The engine again, on the rows as the cycle left them (a cycle that placed nothing wrote nothing):
    # whether it places the job now tells a decision from a bind that apply skipped.
    plan = engine.schedule(build_snapshot(database_now()), settings.TESSERA_POLICY)
    decided = ([(b.member, b.node) for b in plan.binds if b.job_id == str(job.pk)], plan.pending.get(str(job.pk)))
    said = ""
    if workers is not None and workers.log and os.path.exists(workers.log):  # their warnings: a skipped bind
        with open(workers.log, errors="replace") as log:
            said = "".join(log.readlines()[-20:])
    return (f"job={job.status} {job.pending_reason_code}: {job.pending_reason!r} pods={pods} actions={actions} "
            f"events={events} nodes={rows} cluster={cluster} engine now={decided} workers said:\n{said}")


def confirm_checkpoint(core, job: Job, progress_s: float) -> None:
    """The workload confirms a checkpoint of its own over the channel Tessera made for its Job."""
    secret = core.read_namespaced_secret(CHANNEL, MAPPED)
    token = base64.b64decode(secret.data["token"]).decode()
    answer = APIClient().post("/api/v1/checkpoints/", {
        "checkpoint_id": "periodic", "step": 100, "progress_s": progress_s,
        "saved_at": datetime.now(UTC).isoformat()}, format="json", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert answer.status_code == 201, answer.content


def one_pod_taken_in_placed_and_bound(core, kube_workers) -> Job:
    """The workers start, take the one pending pod in as a job, place it and see its bind confirmed."""
    kube_workers.start()
    (job_id,) = kube_workers.run(tasks.poll_agents)["native"]["taken"]
    job = Job.objects.get(pk=job_id)
    placed = kube_workers.run(tasks.run_cycle)["placed"]
    assert placed == [job.pk], why_unplaced(core, job, kube_workers)
    wait_for(lambda: bound(job), what="bind confirmed", timeout=30)
    return job


def running_job_of_the_job_controller(core, kube_admin, kube_workers) -> tuple[Job, object]:
    client.BatchV1Api(kube_admin).create_namespaced_job(MAPPED, job_with_channel("train-llm"))
    wait_for(lambda: controller_pods(core), what="the Job controller's pod", timeout=30)
    job = one_pod_taken_in_placed_and_bound(core, kube_workers)
    (first,) = controller_pods(core)
    wait_for(lambda: read_pod(core, MAPPED, first.metadata.name).status.phase == "Running", what="running", timeout=30)
    confirm_checkpoint(core, job, progress_s=240.0)
    return job, first


def rejoined_and_billed_again(core, kube_workers, job: Job, first, first_run: list) -> None:
    """The Job controller's new pod takes the job's vacant place: no second job; bound again, and
    billed from that bind only."""
    (second,) = wait_for(lambda: controller_pods(core, exclude=first.metadata.name), what="a new pod", timeout=60)
    assert kube_workers.run(tasks.poll_agents)["native"]["taken"] == [job.pk]
    assert Job.objects.filter(namespace=MAPPED).count() == 1
    job.refresh_from_db()
    assert (job.status, job.pending_reason_code, job.progress_s) == ("preempted", "new", 240.0)
    placed = kube_workers.run(tasks.run_cycle)["placed"]
    assert placed == [job.pk], why_unplaced(core, job, kube_workers)
    wait_for(lambda: ActionRequest.objects.filter(job=job, kind="bind", state="confirmed").count() == 2,
             what="the new pod bound", timeout=30)
    assert read_pod(core, MAPPED, second.metadata.name).spec.node_name
    intervals = UsageInterval.objects.filter(job=job)
    second_run = [i for i in intervals if i.ended_at is None]
    assert len(intervals) == 8 and len(second_run) == 4
    assert min(i.started_at for i in second_run) >= max(i.ended_at for i in first_run), "no GPU-second twice"


def test_an_evicted_native_pod_requeues_its_job_and_the_controllers_new_pod_rejoins_it(
        core, kube_workers, kube_admin):
    job, first = running_job_of_the_job_controller(core, kube_admin, kube_workers)
    evict(core, first.metadata.name)
    evicted_at = datetime.now(UTC)
    # The Job controller makes a new pod at once; an intake before reconcile leaves it waiting, untaken.
    wait_for(lambda: controller_pods(core, exclude=first.metadata.name), what="a new pod", timeout=60)
    assert kube_workers.run(tasks.poll_agents)["native"] == {"taken": [], "refused": {}}
    assert kube_workers.run(tasks.reconcile)["finished"] == {"evicted": [job.pk]}
    job.refresh_from_db()
    assert (job.status, job.pending_reason_code, job.progress_s) == ("preempted", "pods-gone", 240.0)
    assert job.pending_reason.startswith(f"The cluster removed pod {first.metadata.name} (Evicted: The node was low")
    assert job.pending_reason.endswith("It waits for Job train-llm to make its pods again.")
    first_run = list(UsageInterval.objects.filter(job=job))
    assert len(first_run) == 4 and all(i.ended_at is not None for i in first_run)
    assert max(i.ended_at for i in first_run) <= evicted_at  # billed until the kubelet killed it, once
    assert kube_workers.run(tasks.reconcile)["finished"] == {}
    assert UsageInterval.objects.filter(job=job).count() == 4

    rejoined_and_billed_again(core, kube_workers, job, first, first_run)
    assert "failed" not in set(job.events.values_list("kind", flat=True))


def test_a_lost_node_requeues_its_native_job_and_the_controllers_new_pod_rejoins_it(
        core, gpu_cluster, kube_workers, kube_admin):
    job, first = running_job_of_the_job_controller(core, kube_admin, kube_workers)
    node_name = read_pod(core, MAPPED, first.metadata.name).spec.node_name
    assert node_name in kube_workers.run(tasks.poll_agents)["answered"]

    gpu_cluster.silence(node_name)
    wait_for(lambda: node_ready(core, node_name) != "True", what="the controller manager's NotReady", timeout=60)
    wait_for(lambda: node_name in kube_workers.run(tasks.poll_agents)["lost"], what="node lost", timeout=30, every=1.0)
    job.refresh_from_db()
    node = Node.objects.get(name=node_name)
    assert (job.status, job.pending_reason_code, job.progress_s) == ("preempted", "pods-gone", 240.0)
    assert job.pending_reason.startswith(f"Node {node_name} stopped answering")
    assert job.pending_reason.endswith("It waits for Job train-llm to make its pods again.")
    first_run = list(UsageInterval.objects.filter(job=job))
    assert len(first_run) == 4 and all(i.ended_at == node.last_heartbeat for i in first_run)

    # Reconcile stops the pod left on the lost node; the Job controller makes a new one, which goes
    # to the other node.
    kube_workers.run(tasks.reconcile)

    def stopped() -> bool:
        left = read_pod(core, MAPPED, first.metadata.name)
        return left is None or left.metadata.deletion_timestamp is not None

    wait_for(stopped, what="the pod on the lost node stopped", timeout=30)
    rejoined_and_billed_again(core, kube_workers, job, first, first_run)


def test_an_evicted_bare_pod_ends_its_job_as_failed_saying_it_has_no_controller(core, kube_workers):
    core.create_namespaced_pod(MAPPED, pod_body("bare-0", runtime_s=600))
    job = one_pod_taken_in_placed_and_bound(core, kube_workers)
    wait_for(lambda: read_pod(core, MAPPED, "bare-0").status.phase == "Running", what="running", timeout=30)
    evict(core, "bare-0")
    assert kube_workers.run(tasks.reconcile)["finished"] == {"evicted": [job.pk]}
    job.refresh_from_db()
    assert job.status == "failed"
    assert "has no controller to make it again" in job.events.get(kind="evicted").message
    (interval,) = UsageInterval.objects.filter(job=job)
    assert interval.ended_at is not None
    assert kube_workers.run(tasks.reconcile)["finished"] == {}
    assert UsageInterval.objects.filter(job=job).count() == 1


def test_an_evicted_gang_member_requeues_the_gang_whole_and_the_new_pods_rejoin_it(core, kube_admin, kube_workers):
    """A member evicted: the gang cannot go on without it, so Tessera stops the other one (billed
    once, to the eviction); the Job controller makes both again, and they rejoin the same job."""
    template = {"metadata": {"labels": {POD_GROUP_LABEL: "ddp"}, "annotations": {MIN_MEMBER_ANNOTATION: "2"}},
                "spec": _pod_spec(gpus=2, runtime_s=600, priority_class="training")}
    client.BatchV1Api(kube_admin).create_namespaced_job(MAPPED, {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "ddp"},
        "spec": {"parallelism": 2, "completions": 2, "backoffLimit": 4, "template": template}})

    def live() -> list:
        pods = core.list_namespaced_pod(MAPPED, label_selector="job-name=ddp").items
        return [p for p in pods if p.metadata.deletion_timestamp is None and p.status.phase != "Failed"]

    wait_for(lambda: len(live()) == 2, what="the Job controller's 2 pods", timeout=60)
    kube_workers.start()
    intake = kube_workers.run(tasks.poll_agents)["native"]
    (job_id,) = set(intake["taken"])  # one job, a member per pod
    job = Job.objects.get(pk=job_id)
    assert len(intake["taken"]) == 2 and not intake["refused"], (intake, why_unplaced(core, job, kube_workers))
    assert (job.members, job.gpus) == (2, 4)
    placed = kube_workers.run(tasks.run_cycle)["placed"]
    assert placed == [job.pk], why_unplaced(core, job, kube_workers)
    wait_for(lambda: ActionRequest.objects.filter(job=job, kind="bind", state="confirmed").count() == 2,
             what="both members bound", timeout=60)
    first = {p.metadata.name for p in live()}
    wait_for(lambda: all(p.status.phase == "Running" for p in live()), what="running", timeout=30)

    evict(core, sorted(first)[0])
    wait_for(lambda: {p.metadata.name for p in live()} - first, what="a new pod", timeout=60)
    assert kube_workers.run(tasks.poll_agents)["native"] == {"taken": [], "refused": {}}  # waits, no refusal
    assert kube_workers.run(tasks.reconcile)["finished"] == {"evicted": [job.pk]}
    job.refresh_from_db()
    assert (job.status, job.pending_reason_code) == ("preempted", "pods-gone")
    assert job.pending_reason.endswith("It waits for Job ddp to make its pods again.")
    first_run = list(UsageInterval.objects.filter(job=job))
    assert len(first_run) == 4 and len({i.ended_at for i in first_run}) == 1  # every GPU closed at once

    wait_for(lambda: not ({p.metadata.name for p in live()} & first) and len(live()) == 2,
             what="the other member stopped and both made again", timeout=60)
    wait_for(lambda: kube_workers.run(tasks.poll_agents) and not job.native_pods.filter(vacant=True).exists(),
             what="both new pods rejoined", timeout=30, every=1.0)
    assert Job.objects.filter(namespace=MAPPED).count() == 1
    placed = kube_workers.run(tasks.run_cycle)["placed"]
    assert placed == [job.pk], why_unplaced(core, job, kube_workers)
    wait_for(lambda: ActionRequest.objects.filter(job=job, kind="bind", state="confirmed").count() == 4,
             what="the new pods bound", timeout=60)
    second_run = UsageInterval.objects.filter(job=job, ended_at__isnull=True)
    assert second_run.count() == 4
    assert min(i.started_at for i in second_run) >= first_run[0].ended_at, "no GPU-second twice"
