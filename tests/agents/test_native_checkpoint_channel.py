"""The checkpoint channel of native pods (CONTRACTS.md, "Native pods"): the intake sees the volume
the pod's owner declared; the bind puts the channel's Secret where that volume looks; a native job
without the channel is stopped unasked and requeued, saying no checkpoint was confirmed (not
failed); the pod its controller makes again rejoins the same job. tests/kube/test_native_checkpoint.py
does the whole of it on the real control plane."""

import json

import pytest
from django.test import Client
from django.utils import timezone
from kubernetes.client import (
    V1Container,
    V1ObjectMeta,
    V1OwnerReference,
    V1Pod,
    V1PodSpec,
    V1ProjectedVolumeSource,
    V1ResourceRequirements,
    V1SecretProjection,
    V1SecretVolumeSource,
    V1Volume,
    V1VolumeProjection,
)

from agents import actions
from agents.backends.k8s_channel import channel_name
from agents.backends.k8s_manifests import ANNOTATION_CHECKPOINT, LABEL_JOB
from agents.backends.k8s_native import native_pod, read_native
from checkpoints.models import CheckpointToken
from scheduling.engine.reasons import PreemptReason, WaitingReason
from scheduling.models import ActionRequest, Job, NativePod
from scheduling.native import NativeNeed, native_rejoin, native_stopping
from scheduling.payloads import PreemptPayload
from scheduling.snapshot import build_snapshot
from tests.agents.placing import placed, vision_world

OWNER_UID = "uid-train"


def pod_with(volumes=None, annotations=None, *, owner="train", group=None):
    refs = [V1OwnerReference(api_version="batch/v1", kind="Job", name=owner, uid=OWNER_UID, controller=True)]
    return V1Pod(
        metadata=V1ObjectMeta(name="train-x7k2p", namespace="ml", uid="u-1", annotations=annotations,
                              labels={"scheduling.x-k8s.io/pod-group": group} if group else None,
                              owner_references=refs if owner else None),
        spec=V1PodSpec(scheduler_name="tessera", volumes=volumes, containers=[V1Container(
            name="main", image="pytorch:24", resources=V1ResourceRequirements(limits={"nvidia.com/gpu": "1"}))]),
    )


def projected(secret: str) -> list[V1Volume]:
    source = V1VolumeProjection(secret=V1SecretProjection(name=secret, optional=True))
    return [V1Volume(name="tessera", projected=V1ProjectedVolumeSource(sources=[source]))]


# -- what the intake reads --------------------------------------------------------------------------


def test_the_channel_is_named_after_the_group_else_the_owner_else_the_pod():
    assert channel_name("ddp", "train", "train-x7k2p") == "tessera-checkpoint-ddp"
    assert channel_name(None, "train", "train-x7k2p") == "tessera-checkpoint-train"
    assert channel_name(None, None, "train-0") == "tessera-checkpoint-train-0"
    assert channel_name(None, None, "x" * 250) == ""  # no Secret can have that name


def test_a_pod_that_mounts_its_channel_takes_checkpoints_every_hour_or_as_annotated():
    assert native_pod(pod_with(projected("tessera-checkpoint-train"))).checkpoint_interval_s == 3600
    plain = [V1Volume(name="t", secret=V1SecretVolumeSource(secret_name="tessera-checkpoint-train", optional=True))]
    assert native_pod(pod_with(plain)).checkpoint_interval_s == 3600
    annotated = pod_with(projected("tessera-checkpoint-train"), {"tessera.io/checkpoint-interval-s": "900"})
    assert native_pod(annotated).checkpoint_interval_s == 900
    gang = pod_with(projected("tessera-checkpoint-ddp"), group="ddp")
    assert native_pod(gang).checkpoint_interval_s == 3600


def test_a_pod_without_its_channel_takes_none():
    assert native_pod(pod_with()).checkpoint_interval_s is None
    assert native_pod(pod_with(projected("tessera-checkpoint-other"))).checkpoint_interval_s is None
    # a gang's channel is its group's, not its Job's
    assert native_pod(pod_with(projected("tessera-checkpoint-train"), group="ddp")).checkpoint_interval_s is None


def test_an_interval_that_is_no_number_is_refused_with_a_reason():
    refused = read_native(pod_with(projected("tessera-checkpoint-train"), {"tessera.io/checkpoint-interval-s": "1h"}))
    assert refused.reason == "InvalidCheckpointInterval" and "'1h'" in refused.message


# -- the workers' steps, against the fake API server ----------------------------------------------------


@pytest.fixture
def native_job(db, kube):
    """A running native job of one pod, whose owner is batch/v1 Job `train`, its bind still to do."""
    world = vision_world(kube)
    job, bind, _placement = placed(world)
    namespace, pod_name = world.team.name, bind.payload["pod_name"]
    Job.objects.filter(pk=job.pk).update(namespace=namespace)
    owner = {"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": OWNER_UID, "controller": True}
    kube.add_pod(namespace, {"metadata": {"name": pod_name, "labels": {LABEL_JOB: str(job.pk)},
                                          "ownerReferences": [owner]},
                             "spec": {"schedulerName": "tessera", "containers": [{"name": "main", "image": "x"}]}})
    NativePod.objects.create(job=job, uid=kube.pod(namespace, pod_name)["metadata"]["uid"], namespace=namespace,
                             name=pod_name, owner_api_version="batch/v1", owner_kind="Job", owner_name="train",
                             owner_uid=OWNER_UID, taken_at=job.started_at)
    return Job.objects.get(pk=job.pk), bind


def preempt(job: Job) -> ActionRequest:
    payload = PreemptPayload(job_id=job.pk, for_job_id=None, reason=PreemptReason.PREEMPT, notice_deadline=None)
    return ActionRequest.objects.create(key=f"preempt:{job.pk}", kind="preempt", job=job, payload=payload.as_payload())


def need_of(job: Job, uid: str, *, owner_uid: str = OWNER_UID) -> NativeNeed:
    return NativeNeed(uid=uid, namespace=job.namespace, pod_name=f"train-{uid}", name=job.name, image="x",
                      gpus=job.gpus, gpu_memory_gb=job.gpu_memory_gb, mig_profile=None, cpu_cores=1, memory_gb=1,
                      priority_class=None, priority=None, project=None, owner=("batch/v1", "Job", "train", owner_uid))


def test_a_native_job_without_the_channel_is_stopped_unasked_and_requeued_not_failed(backend, kube, native_job):
    job, bind = native_job
    assert actions.action_advance(action_id=bind.pk, backend=backend) == "confirmed"
    pod_name = bind.payload["pod_name"]
    stop = preempt(job)
    assert actions.action_advance(action_id=stop.pk, backend=backend) == "requested"  # its pod terminates
    assert ANNOTATION_CHECKPOINT not in kube.pod(job.namespace, pod_name)["metadata"].get("annotations", {})
    assert native_stopping(need_of(job, "u-early"))  # a pod its controller makes now waits for the release
    kube.finish_deletion(job.namespace, pod_name)
    assert actions.action_advance(action_id=stop.pk, backend=backend) == "confirmed"

    job.refresh_from_db()
    assert job.status == Job.Status.PREEMPTED and job.progress_s == 0
    assert "mount no checkpoint channel" in job.events.get(kind="checkpoint-skipped").message
    assert not job.events.filter(kind="failed").exists() and not CheckpointToken.objects.filter(job=job).exists()
    assert job.pending_reason_code == WaitingReason.PODS_GONE and "Job train" in job.pending_reason
    assert list(job.native_pods.values_list("vacant", flat=True)) == [True]
    assert not job.placements.filter(ended_at__isnull=True).exists()
    assert job.pk not in {int(j.id) for j in build_snapshot().pending}  # no cycle places it without its pod

    # The Job controller's new pod takes the vacant place: the same job, ready for the next cycle.
    assert native_rejoin(need=need_of(job, "u-other", owner_uid="uid-someone-else"), at=timezone.now()) is None
    assert not native_stopping(need_of(job, "u-new"))
    assert native_rejoin(need=need_of(job, "u-new"), at=timezone.now()) == job
    job.refresh_from_db()
    (row,) = job.native_pods.all()
    assert (row.uid, row.vacant, job.pending_reason_code) == ("u-new", False, WaitingReason.NEW)
    assert job.pk in {int(j.id) for j in build_snapshot().pending}


def test_the_bind_puts_the_channels_secret_where_the_owner_mounts_it_and_its_token_confirms(
        backend, kube, native_job, settings):
    job, bind = native_job
    Job.objects.filter(pk=job.pk).update(checkpoint_interval_s=3600)
    assert actions.action_advance(action_id=bind.pk, backend=backend) == "confirmed"
    secret = kube.secrets[(job.namespace, "tessera-checkpoint-train")]
    assert secret["stringData"]["url"] == settings.TESSERA_CHECKPOINT_URL
    assert secret["metadata"]["ownerReferences"] == [
        {"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": OWNER_UID}]
    token = secret["stringData"]["token"]
    (row,) = CheckpointToken.objects.filter(job=job)
    assert (row.pod_name, row.revoked_at) == ("tessera-checkpoint-train", None)

    stop = preempt(job)
    assert actions.action_advance(action_id=stop.pk, backend=backend) == "requested"  # asked; waits
    asked = kube.pod(job.namespace, bind.payload["pod_name"])["metadata"]["annotations"][ANNOTATION_CHECKPOINT]
    assert asked == f"preempt-{stop.pk}"
    body = {"checkpoint_id": asked, "step": 1200, "progress_s": 3600.0, "saved_at": "2026-01-31T12:00:00Z"}
    answer = Client().post("/api/v1/checkpoints/", json.dumps(body), content_type="application/json",
                           HTTP_AUTHORIZATION=f"Bearer {token}")
    assert answer.status_code == 201, answer.content
    assert actions.action_advance(action_id=stop.pk, backend=backend) == "requested"  # stopping its pod
    kube.finish_deletion(job.namespace, bind.payload["pod_name"])
    assert actions.action_advance(action_id=stop.pk, backend=backend) == "confirmed"
    job.refresh_from_db()
    assert (job.status, job.progress_s, job.pending_reason_code) == ("preempted", 3600.0, WaitingReason.PODS_GONE)
    assert "at step 1200" in job.events.get(kind="checkpointed").message
    row.refresh_from_db()
    assert row.revoked_at is not None  # the run is over: its token with it, until the next bind
