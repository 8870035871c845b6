"""What the cluster does to a running job, on the real control plane, through the real workers
(issue 13, "Build"): its node goes silent, it is drained, its node gets a spot reclaim notice, it
is preempted and confirms its checkpoint.

The node's status comes from the cluster: the kubelet harness stops renewing its Lease and the
real kube-controller-manager marks it NotReady (12 s grace in tests, 40 s in a stock cluster).
"""

from __future__ import annotations

import base64
import time
from datetime import UTC, datetime

import pytest
from kubernetes import client
from rest_framework.test import APIClient

from agents import tasks
from agents.actions.checkpoint import CONFIRM_MARGIN_S
from agents.backends.base import RECLAIM_TAINT
from agents.backends.k8s_manifests import ANNOTATION_CHECKPOINT, TOKEN_KEY, token_secret_name
from billing.models import UsageInterval
from scheduling.engine.reasons import PreemptReason
from scheduling.models import ActionRequest, Job, JobEvent, Node
from scheduling.payloads import PreemptPayload
from tests.kube.conftest import NODES, TEAM, kube_job
from tests.workers.conftest import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def running_pod(workers, core: client.CoreV1Api, job: Job):
    """Place the job through a worker and wait until the harness runs its pod; returns the pod."""
    assert workers.run(tasks.run_cycle)["placed"] == [job.pk]
    wait_for(lambda: ActionRequest.objects.filter(job=job, kind="bind", state="confirmed").exists(),
             what="bind confirmed", timeout=40)

    def pod():
        pods = core.list_namespaced_pod(TEAM, label_selector=f"tessera.io/job-id={job.pk}").items
        return pods[0] if len(pods) == 1 and pods[0].status.phase == "Running" else None

    wait_for(lambda: pod() is not None, what="pod running", timeout=40)
    return pod()


def node_ready(core: client.CoreV1Api, name: str) -> str:
    conditions = core.read_node(name).status.conditions or []
    return next((c.status for c in conditions if c.type == "Ready"), "Unknown")


def test_a_silent_node_requeues_its_job_billed_to_the_last_heartbeat(gpu_cluster, kube_workers, kube_admin):
    core = client.CoreV1Api(kube_admin)
    kube_workers.start()
    job = kube_job("silent-node", gpus=1, runtime_s=600)
    node_name = running_pod(kube_workers, core, job).spec.node_name
    assert node_name in kube_workers.run(tasks.poll_agents)["answered"]  # Ready in the cluster: a heartbeat

    gpu_cluster.silence(node_name)
    silenced_at = time.time()
    wait_for(lambda: node_ready(core, node_name) != "True", what="the controller manager's NotReady", timeout=60)
    wait_for(lambda: "node.kubernetes.io/unreachable" in {t.key for t in core.read_node(node_name).spec.taints or []},
             what="the node lifecycle controller's unreachable taint", timeout=30)
    # The polls go on; the silent node no longer answers and is lost after 2 missed 1 s polls.
    wait_for(lambda: node_name in kube_workers.run(tasks.poll_agents)["lost"], what="node lost", timeout=30,
             every=1.0)

    job.refresh_from_db()
    node = Node.objects.get(name=node_name)
    assert job.status == "preempted" and node.state == Node.State.LOST
    (interval,) = UsageInterval.objects.filter(job=job)
    assert interval.ended_at == node.last_heartbeat  # not a moment of the silence is billed
    assert interval.ended_at.timestamp() <= silenced_at + 2.5  # the last poll that saw it Ready
    assert JobEvent.objects.filter(job=job, kind="node-lost").exists()


def test_a_drained_node_requeues_its_job(gpu_cluster, kube_workers, kube_admin):
    """`kubectl drain`: cordon, then the Eviction API; the kubelet stops the pod and it is gone."""
    core = client.CoreV1Api(kube_admin)
    kube_workers.start()
    job = kube_job("drained", gpus=1, runtime_s=600)
    pod = running_pod(kube_workers, core, job)
    core.patch_node(pod.spec.node_name, {"spec": {"unschedulable": True}})
    core.create_namespaced_pod_eviction(pod.metadata.name, TEAM, {
        "apiVersion": "policy/v1beta1", "kind": "Eviction",
        "metadata": {"name": pod.metadata.name, "namespace": TEAM}})
    wait_for(lambda: not core.list_namespaced_pod(TEAM, label_selector=f"tessera.io/job-id={job.pk}").items,
             what="evicted pod gone", timeout=40)

    # A pod missing from the list counts as removed once its bind is 10 s old (a newer one may not be
    # listed yet: agents/services.py, SEEN_AFTER); the reconcile loop then requeues the job.
    wait_for(lambda: job.pk in kube_workers.run(tasks.reconcile)["finished"].get("evicted", []),
             what="reconcile requeues the evicted job", timeout=40, every=2.0)
    job.refresh_from_db()
    assert job.status == "preempted"
    assert "The cluster removed pod" in JobEvent.objects.get(job=job, kind="evicted").message
    (interval,) = UsageInterval.objects.filter(job=job)
    assert interval.ended_at is not None
    kube_workers.run(tasks.poll_agents)  # the cordon reaches the node rows
    assert kube_workers.run(tasks.run_cycle)["placed"] == [job.pk]
    wait_for(lambda: ActionRequest.objects.filter(job=job, kind="bind", state="confirmed").count() == 2,
             what="second bind confirmed", timeout=40)
    pods = core.list_namespaced_pod(TEAM, label_selector=f"tessera.io/job-id={job.pk}").items
    assert [p.spec.node_name for p in pods] != [pod.spec.node_name]  # not back on the drained node


def test_a_cordoned_node_gets_no_new_job(gpu_cluster, kube_workers, kube_admin):
    core = client.CoreV1Api(kube_admin)
    kube_workers.start()
    for node in NODES:
        core.patch_node(node.name, {"spec": {"unschedulable": True}})
    kube_workers.run(tasks.poll_agents)
    kube_job("cordoned", gpus=1, runtime_s=600)
    assert kube_workers.run(tasks.run_cycle)["placed"] == []


def test_a_spot_notice_taint_asks_for_a_checkpoint_then_requeues(gpu_cluster, kube_workers, kube_admin):
    core = client.CoreV1Api(kube_admin)
    kube_workers.start()
    job = kube_job("spot", gpus=1, runtime_s=600, interval_s=300)
    pod = running_pod(kube_workers, core, job)
    deadline = int(time.time()) + 30
    core.patch_node(pod.spec.node_name, {"spec": {"taints": [
        {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
        {"key": RECLAIM_TAINT, "value": str(deadline), "effect": "NoSchedule"}]}})

    assert kube_workers.run(tasks.poll_agents)["reclaim_actions"]
    assert Node.objects.get(name=pod.spec.node_name).state == Node.State.DRAINING

    def asked() -> str | None:
        annotations = core.read_namespaced_pod(pod.metadata.name, TEAM).metadata.annotations or {}
        return annotations.get(ANNOTATION_CHECKPOINT)

    wait_for(lambda: asked() is not None, what="checkpoint request on the pod", timeout=30)
    # The worker annotates the pod before its transaction, which writes the event, commits.
    wait_for(lambda: JobEvent.objects.filter(job=job, kind="checkpoint-requested").exists(),
             what="the checkpoint-requested event", timeout=30)
    # No confirmation comes: at the provider's deadline the pod is stopped and the job requeued,
    # billed no later than the deadline.
    wait_for(lambda: Job.objects.get(pk=job.pk).status == "preempted", what="requeued", timeout=60, every=1.0)
    (interval,) = UsageInterval.objects.filter(job=job)
    assert interval.ended_at.timestamp() <= deadline


def test_a_preemption_with_a_confirmed_checkpoint_requeues_at_the_saved_progress(gpu_cluster, kube_workers,
                                                                                 kube_admin):
    """The whole channel: the request reaches the pod as an annotation, the workload confirms with the
    token the backend mounted from a Secret, then the pod is stopped and the job resumes from there."""
    core = client.CoreV1Api(kube_admin)
    kube_workers.start()
    job = kube_job("preempted", gpus=1, runtime_s=600, interval_s=3600)
    pod = running_pod(kube_workers, core, job)
    # SIGTERM means "save now": whoever deletes the pod (Tessera, a drain) gives it the job's save
    # time (TESSERA_CHECKPOINT_SAVE_S=3 in the worker tests) and the confirmation's margin.
    assert pod.spec.termination_grace_period_seconds == 3 + CONFIRM_MARGIN_S
    job.refresh_from_db()
    payload = PreemptPayload(job_id=job.pk, for_job_id=None, reason=PreemptReason.PREEMPT, notice_deadline=None)
    action = ActionRequest.objects.create(key=f"preempt:{job.pk}", kind="preempt", job=job,
                                          payload=payload.as_payload())
    tasks.execute_action.apply_async((action.pk,), queue=kube_workers.queue)

    def asked() -> str | None:
        annotations = core.read_namespaced_pod(pod.metadata.name, TEAM).metadata.annotations or {}
        return annotations.get(ANNOTATION_CHECKPOINT)

    wait_for(lambda: asked() is not None, what="checkpoint request on the pod", timeout=30)
    secret = core.read_namespaced_secret(token_secret_name(pod.metadata.name), TEAM)
    token = base64.b64decode(secret.data[TOKEN_KEY]).decode()
    answer = APIClient().post("/api/v1/checkpoints/", {
        "checkpoint_id": asked(), "step": 1200, "progress_s": 240.0,
        "saved_at": datetime.now(UTC).isoformat()}, format="json", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert answer.status_code == 201, answer.content

    wait_for(lambda: not core.list_namespaced_pod(TEAM, label_selector=f"tessera.io/job-id={job.pk}").items,
             what="pod stopped", timeout=60)
    wait_for(lambda: ActionRequest.objects.get(pk=action.pk).state == "confirmed", what="preemption done",
             timeout=60, every=1.0)
    job.refresh_from_db()
    assert job.status == "preempted" and job.progress_s == 240.0
    assert JobEvent.objects.filter(job=job, kind="checkpointed").count() == 1
    assert not JobEvent.objects.filter(job=job, kind="checkpoint-missed").exists()
    (interval,) = UsageInterval.objects.filter(job=job)
    assert interval.ended_at is not None
