"""A native batch/v1 Job with the checkpoint channel (CONTRACTS.md, "Native pods"), preempted by
production inference on the real control plane (issue 14): Tessera creates the channel's Secret
where the Job's pod template mounts it, asks the pod for a checkpoint, the SDK in the test (the
workload, with the test playing the kubelet's projected volume) confirms over HTTP, the pod is
deleted, and the pod the Job controller makes again rejoins the same job at its saved progress: no
second job, and every GPU-second billed once."""

from __future__ import annotations

import base64

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse
from kubernetes import client

from agents import tasks
from agents.backends.k8s_manifests import ANNOTATION_CHECKPOINT, LABEL_JOB
from billing.models import UsageInterval
from checkpoints.models import CheckpointConfirmation, CheckpointToken
from portal.models import Membership
from scheduling.models import ActionRequest, Job, PriorityClass
from tessera_checkpoint import Checkpointer
from tests.kube import test_native_pods
from tests.kube.conftest import kube_job
from tests.kube.test_checkpoint_sdk import kubelet_writes_annotations
from tests.kube.test_native_pods import MAPPED, _pod_spec, bound, read_pod
from tests.workers.conftest import wait_for

pytestmark = pytest.mark.django_db(transaction=True)
core = test_native_pods.native  # namespace ml-research mapped to team vision, cleaned after
CHANNEL = "tessera-checkpoint-train-llm"


def job_with_channel(name: str) -> dict:
    """A team's own Job, with the two additions of the README's "Bring your own workloads"."""
    spec = _pod_spec(gpus=4, runtime_s=600, priority_class="training")
    spec["volumes"] = [{"name": "tessera", "projected": {"sources": [
        {"secret": {"name": f"tessera-checkpoint-{name}", "optional": True}},
        {"downwardAPI": {"items": [{"path": "annotations", "fieldRef": {"fieldPath": "metadata.annotations"}}]}},
    ]}}]
    spec["containers"][0]["volumeMounts"] = [{"name": "tessera", "mountPath": "/var/run/tessera", "readOnly": True}]
    # backoffLimit: before Kubernetes 1.26 a preempted pod that ended Failed may count as a failure.
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"backoffLimit": 3, "template": {"spec": spec}}}


def production(name: str, gpus: int, runtime_s: int) -> Job:
    job = kube_job(name, gpus=gpus, runtime_s=runtime_s)
    Job.objects.filter(pk=job.pk).update(
        kind="inference", priority_class=PriorityClass.objects.get(name="production"), preemptible=False)
    return Job.objects.get(pk=job.pk)


def controller_pods(core, exclude: str = "") -> list:
    pods = core.list_namespaced_pod(MAPPED, label_selector="job-name=train-llm").items
    return [p for p in pods if p.metadata.name != exclude and p.metadata.deletion_timestamp is None]


def test_a_native_job_is_preempted_with_a_confirmed_checkpoint_and_rejoined_by_its_new_pod_billed_once(
        core, kube_workers, kube_admin, control_plane, live_server, tmp_path):
    owner = client.BatchV1Api(kube_admin).create_namespaced_job(MAPPED, job_with_channel("train-llm"))
    wait_for(lambda: controller_pods(core), what="the Job controller's pod", timeout=30)
    filler = production("filler", gpus=4, runtime_s=600)  # holds the other node: the GPU must come from the Job
    kube_workers.env["TESSERA_CHECKPOINT_URL"] = f"{live_server.url}/api/v1/checkpoints/"
    kube_workers.start()
    (job_id,) = kube_workers.run(tasks.poll_agents)["native"]["taken"]
    job = Job.objects.get(pk=job_id)
    assert job.checkpoint_interval_s == 3600, "the intake saw the channel in the pod template"
    assert sorted(kube_workers.run(tasks.run_cycle)["placed"]) == sorted([job.pk, filler.pk])
    wait_for(lambda: bound(job), what="bind confirmed", timeout=30)
    (first,) = controller_pods(core)

    # Tessera made the channel's Secret, owned by the Job; the test plays the kubelet's volume.
    secret = core.read_namespaced_secret(CHANNEL, MAPPED)
    assert [(r.kind, r.uid) for r in secret.metadata.owner_references] == [("Job", owner.metadata.uid)]
    channel = tmp_path / "channel"
    channel.mkdir()
    for key in ("token", "url"):
        (channel / key).write_text(base64.b64decode(secret.data[key]).decode())
    kubelet_writes_annotations(control_plane, first.metadata.name, channel / "annotations", namespace=MAPPED)
    ckpt = Checkpointer.from_env(tmp_path / "ckpt", handle_sigterm=False, env={"TESSERA_CHANNEL_DIR": str(channel)})
    step = ckpt.resume()

    serving = production("serving", gpus=1, runtime_s=2)
    assert kube_workers.run(tasks.run_cycle)["placed"] == []
    (stop,) = ActionRequest.objects.filter(job=job, kind="preempt")
    while ckpt.last_answer is None:  # the training loop, the kubelet refreshing its file
        step += 1
        kubelet_writes_annotations(control_plane, first.metadata.name, channel / "annotations", namespace=MAPPED)
        if ckpt.should_save(step):
            open(ckpt.path_for(step), "w").close()
            ckpt.saved(step, ckpt.path_for(step))
        assert step < 600, "no checkpoint request reached the loop"

    assert ckpt.last_answer.status == 201
    (confirmed,) = CheckpointConfirmation.objects.filter(job=job)
    assert (confirmed.checkpoint_id, confirmed.step, confirmed.pod_name) == (f"preempt-{stop.pk}", step, CHANNEL)
    wait_for(lambda: ActionRequest.objects.get(pk=stop.pk).state == "confirmed", what="stopped", timeout=90, every=0.5)
    wait_for(lambda: read_pod(core, MAPPED, first.metadata.name) is None, what="its pod deleted", timeout=30)
    job.refresh_from_db()
    assert (job.status, job.pending_reason_code) == ("preempted", "pods-gone")
    assert job.progress_s == confirmed.progress_s == ckpt.latest.progress_s
    kinds = list(job.events.values_list("kind", flat=True))
    assert {"checkpoint-requested", "checkpointed", "preempted"} <= set(kinds) and "failed" not in kinds
    first_run = list(UsageInterval.objects.filter(job=job))
    assert len(first_run) == 4 and all(i.ended_at is not None for i in first_run)
    assert kube_workers.run(tasks.run_cycle)["placed"] == [serving.pk]

    # The Job controller's new pod rejoins the same job: no second job, waiting for room.
    (second,) = wait_for(lambda: controller_pods(core, exclude=first.metadata.name), what="a new pod", timeout=30)
    assert kube_workers.run(tasks.poll_agents)["native"]["taken"] == [job.pk]
    assert Job.objects.filter(namespace=MAPPED).count() == 1
    assert read_pod(core, MAPPED, second.metadata.name).metadata.labels[LABEL_JOB] == str(job.pk)
    job.refresh_from_db()
    assert (job.status, job.pending_reason_code) == ("preempted", "new")

    # Once serving is done the job runs again in the new pod, billed from its new bind only.
    wait_for(lambda: kube_workers.run(tasks.reconcile)["finished"].get("completed") == [serving.pk],
             what="serving done", timeout=60, every=0.5)
    assert kube_workers.run(tasks.run_cycle)["placed"] == [job.pk]
    wait_for(lambda: ActionRequest.objects.filter(job=job, kind="bind", state="confirmed").count() == 2,
             what="the new pod bound", timeout=30)
    assert read_pod(core, MAPPED, second.metadata.name).spec.node_name
    conditions = client.BatchV1Api(kube_admin).read_namespaced_job("train-llm", MAPPED).status.conditions or []
    assert not [c for c in conditions if c.type == "Failed"], conditions
    intervals = UsageInterval.objects.filter(job=job)
    second_run = [i for i in intervals if i.ended_at is None]
    assert len(intervals) == 8 and len(second_run) == 4
    assert min(i.started_at for i in second_run) >= max(i.ended_at for i in first_run), "no GPU-second twice"
    assert CheckpointToken.objects.get(job=job).revoked_at is None  # its channel is live again
    assert Checkpointer.from_env(tmp_path / "ckpt", handle_sigterm=False, env={}).resume() == step
    assert ANNOTATION_CHECKPOINT not in (read_pod(core, MAPPED, second.metadata.name).metadata.annotations or {})

    # The portal's job page shows the confirmed checkpoint.
    viewer = get_user_model().objects.create_user("viewer")
    Membership.objects.create(user=viewer, team=job.team, role="member")
    browser = Client()
    browser.force_login(viewer)
    page = browser.get(reverse("ui:job_detail", kwargs={"pk": job.pk})).content.decode()
    assert f"at step {step}" in page and 'id="last-checkpoint"' in page
