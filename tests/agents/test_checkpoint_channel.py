"""The checkpoint channel on Kubernetes (CONTRACTS.md), against the fake API server: the pod gets
the podinfo file, its token Secret and the env to confirm with; the workers read the confirmation
from the database, where the endpoint put it."""

import json
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from agents import actions
from agents.actions.checkpoint import CONFIRM_MARGIN_S
from agents.backends import BindRequest, Outcome, PreemptRequest
from agents.backends import k8s_manifests as m
from scheduling.models import ActionRequest, Job, Placement, run_id
from scheduling.services import placement_start
from tests.agents.k8s_schema import assert_valid
from tests.billing.factories import make_world

TOKEN = "0123456789abcdef" * 4


def _bind(**overrides):
    fields = dict(job_id="42", pod_name="vision-42-1700000000-0", namespace="vision", project="detector",
                  job_kind="training", image="nvcr.io/nvidia/pytorch:24.05-py3", command=("python", "train.py"),
                  node_name="gpu-h100-01", gpu_count=2, grace_seconds=75, checkpoint_token=TOKEN,
                  checkpoint_url="http://tessera-portal.tessera-system.svc/api/v1/checkpoints/")
    return BindRequest(**{**fields, **overrides})


def _env(pod):
    return {e["name"]: e["value"] for e in pod["spec"]["containers"][0]["env"]}


def test_the_pod_carries_the_channel_and_is_valid():
    pod = m.pod_manifest(_bind(), "tessera")
    assert_valid(pod)
    spec = pod["spec"]
    assert spec["terminationGracePeriodSeconds"] == 75
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["tessera-podinfo"]["downwardAPI"]["items"] == [
        {"path": "annotations", "fieldRef": {"fieldPath": "metadata.annotations"}}]
    assert volumes["tessera-checkpoint-token"]["secret"]["secretName"] == "vision-42-1700000000-0-checkpoint-token"
    mounts = {v["name"]: v for v in spec["containers"][0]["volumeMounts"]}
    assert mounts["tessera-podinfo"]["mountPath"] == "/etc/tessera/podinfo"
    assert mounts["tessera-checkpoint-token"] == {"name": "tessera-checkpoint-token", "readOnly": True,
                                                  "mountPath": "/var/run/secrets/tessera/checkpoint-token"}
    assert _env(pod) | {} == {
        "TESSERA_JOB_ID": "42", "TESSERA_PODINFO_DIR": "/etc/tessera/podinfo",
        "TESSERA_CHECKPOINT_URL": "http://tessera-portal.tessera-system.svc/api/v1/checkpoints/",
        "TESSERA_CHECKPOINT_TOKEN_FILE": "/var/run/secrets/tessera/checkpoint-token/token"}
    assert TOKEN not in json.dumps(pod)  # the token travels in the Secret only
    assert TOKEN not in repr(_bind())


def test_without_a_token_the_pod_gets_no_confirmation_channel():
    pod = m.pod_manifest(_bind(checkpoint_token="", grace_seconds=None), "tessera")
    assert_valid(pod)
    assert [v["name"] for v in pod["spec"]["volumes"]] == ["tessera-podinfo", "dshm"]  # no token Secret
    assert "TESSERA_CHECKPOINT_URL" not in _env(pod) and "terminationGracePeriodSeconds" not in pod["spec"]


def test_the_token_secret_is_valid_and_owned_by_its_pod():
    secret = m.token_secret_manifest(_bind(), "uid-7")
    assert_valid(secret)
    assert secret["stringData"] == {"token": TOKEN}
    assert secret["metadata"]["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Pod", "name": "vision-42-1700000000-0", "uid": "uid-7"}]


@pytest.fixture
def vision(kube):
    kube.add_namespace("vision")
    kube.add_node("gpu-h100-01", {"nvidia.com/gpu.present": "true"})
    return kube


def test_bind_creates_the_token_secret_before_the_binding_and_a_retry_reuses_it(backend, vision):
    assert backend.bind(_bind()) is Outcome.DONE
    secret = vision.secrets[("vision", "vision-42-1700000000-0-checkpoint-token")]
    pod = vision.pod("vision", "vision-42-1700000000-0")
    assert secret["metadata"]["ownerReferences"][0]["uid"] == pod["metadata"]["uid"]
    writes = [r for r in vision.requests if r[0] == "POST"]
    assert [path.rsplit("/", 1)[-1] for _, path in writes] == ["pods", "secrets", "binding", "events"]
    assert backend.bind(_bind()) is Outcome.ALREADY_DONE  # the Secret is there: a 409, taken as done
    assert len(vision.secrets) == 1


def test_preemption_tells_why_without_asking_for_another_checkpoint(backend, vision):
    backend.bind(_bind())
    pod = vision.pod("vision", "vision-42-1700000000-0")
    backend.preempt(PreemptRequest("42", "vision-42-1700000000-0", "vision", grace_seconds=75, reason="quota"))
    annotations = vision.pod("vision", "vision-42-1700000000-0")["metadata"]["annotations"]
    assert annotations == {m.ANNOTATION_PREEMPTED: "quota"}
    assert pod["metadata"].get("annotations") is None


# -- through the workers' steps and the real endpoint ------------------------------------------------

@pytest.fixture
def bound(db, backend, kube):
    """A training job whose pod the workers bound through the Kubernetes backend."""
    world = make_world(jobs=1, name="vision")
    kube.add_namespace(world.team.name)
    kube.add_node(world.node.name, {"nvidia.com/gpu.present": "true"})
    started = timezone.now() - timedelta(minutes=5)
    Job.objects.filter(pk=world.jobs[0].pk).update(status="running", started_at=started, checkpoint_interval_s=600,
                                                   checkpoint_save_s=45, image="nvcr.io/nvidia/pytorch:24.05-py3")
    job = Job.objects.get(pk=world.jobs[0].pk)
    placement = Placement.objects.create(job=job, gpu=world.whole, started_at=started)
    placement_start(placement=placement)
    attempt = run_id(started)
    pod = f"{world.team.name}-{job.pk}-{attempt}-0"
    bind = ActionRequest.objects.create(
        key=f"bind:{job.pk}:0:{attempt}", kind="bind", job=job, node=world.node,
        payload={"job_id": job.pk, "member": 0, "node": world.node.name, "placements": [placement.pk],
                 "pod_name": pod, "allocations": [{"gpu_index": 0, "milli": 1000, "mig_profile": None,
                                                   "mig_start": None}]})
    assert actions.action_advance(action_id=bind.pk, backend=backend) == "confirmed"
    secret = kube.secrets[(world.team.name, f"{pod}-checkpoint-token")]
    return job, pod, secret["stringData"]["token"]


def test_a_bound_pod_confirms_with_its_secret_and_the_workers_see_it(bound, backend, kube):
    job, pod_name, token = bound
    pod = kube.pod(job.team.name, pod_name)
    assert pod["spec"]["terminationGracePeriodSeconds"] == 45 + CONFIRM_MARGIN_S
    ask = ActionRequest.objects.create(key=f"checkpoint:{job.pk}:9", kind="checkpoint", job=job,
                                       payload={"job_id": job.pk})
    assert actions.action_advance(action_id=ask.pk, backend=backend) == "requested"
    request_id = kube.pod(job.team.name, pod_name)["metadata"]["annotations"][m.ANNOTATION_CHECKPOINT]
    assert request_id == f"interval-{ask.pk}"
    assert actions.action_advance(action_id=ask.pk, backend=backend) == "requested"  # nothing confirmed yet
    body = {"checkpoint_id": request_id, "step": 300, "progress_s": 290.0, "saved_at": timezone.now().isoformat()}
    answer = Client().post("/api/v1/checkpoints/", json.dumps(body), content_type="application/json",
                           HTTP_AUTHORIZATION=f"Bearer {token}")
    assert answer.status_code == 201, answer.content
    assert actions.action_advance(action_id=ask.pk, backend=backend) == "confirmed"
    job.refresh_from_db()
    assert (job.status, job.progress_s) == ("running", 290.0)


def test_a_checkpoint_nobody_confirms_fails_in_time(bound, backend, kube, settings):
    job, _pod, _token = bound
    ask = ActionRequest.objects.create(key=f"checkpoint:{job.pk}:9", kind="checkpoint", job=job,
                                       payload={"job_id": job.pk})
    actions.action_advance(action_id=ask.pk, backend=backend)
    later = timezone.now() + timedelta(seconds=settings.TESSERA_PREEMPT_GRACE_S + 1)
    assert actions.action_advance(action_id=ask.pk, backend=backend, now=later) == "failed"
    ask.refresh_from_db()
    assert ask.last_error == "The checkpoint was not confirmed in time."


def test_the_token_in_the_secret_is_stored_only_as_a_digest(bound):
    job, _pod, token = bound
    row = job.checkpoint_tokens.get()
    assert row.digest != token and len(row.digest) == 64
