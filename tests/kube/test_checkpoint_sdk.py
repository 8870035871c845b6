"""The checkpoint SDK (sdk/, tessera_checkpoint) answers a preemption on the real control plane.

Tessera's workers annotate the running pod through the real API server; the test plays the
kubelet's two parts of the channel: it writes the pod's annotations into the downward-API file in
the kubelet's own format (kubectl's go-template `printf "%q"`, the formatting of the kubelet's
fieldpath.FormatMap) and mounts the token from the pod's Secret. The training loop is the SDK's
three lines; it confirms over HTTP to the portal on Django's live server. The job is then stopped
and requeued at the progress the SDK reported.
"""

from __future__ import annotations

import base64
import subprocess
import time

import pytest
from kubernetes import client

from agents import tasks
from agents.backends.k8s_manifests import ANNOTATION_CHECKPOINT, PODINFO_DIR, TOKEN_KEY, token_secret_name
from checkpoints.models import CheckpointConfirmation
from scheduling.engine.reasons import PreemptReason
from scheduling.models import ActionRequest, Job
from scheduling.payloads import PreemptPayload
from tessera_checkpoint import Checkpointer
from tests.kube.conftest import TEAM, kube_job
from tests.kube.test_deploy_apply import kubectl_binary
from tests.kube.test_disruptions import running_pod
from tests.workers.conftest import wait_for

pytestmark = pytest.mark.django_db(transaction=True)

FORMAT_MAP = '{{range $k, $v := .metadata.annotations}}{{$k}}={{printf "%q" $v}}{{"\\n"}}{{end}}'


def kubelet_writes_annotations(control_plane, pod_name: str, path, namespace: str = TEAM) -> None:
    """What the kubelet does for a downwardAPI item of metadata.annotations, renamed into place."""
    text = subprocess.run([str(kubectl_binary()), f"--kubeconfig={control_plane.folder / 'admin.kubeconfig'}",
                           "get", "pod", pod_name, "-n", namespace, "-o", f"go-template={FORMAT_MAP}"],
                          capture_output=True, text=True, timeout=60, check=True).stdout
    partial = path.with_name(".annotations.partial")
    partial.write_text(text)
    partial.replace(path)


def test_the_sdk_confirms_a_preemption_request_and_the_job_resumes_from_it(
        gpu_cluster, kube_workers, kube_admin, control_plane, live_server, tmp_path):
    core = client.CoreV1Api(kube_admin)
    kube_workers.start()
    job = kube_job("sdk", gpus=1, runtime_s=600, interval_s=3600)
    pod = running_pod(kube_workers, core, job)
    env = {item.name: item.value for item in pod.spec.containers[0].env}
    assert env["TESSERA_PODINFO_DIR"] == PODINFO_DIR and env["TESSERA_CHECKPOINT_TOKEN_FILE"]
    podinfo, token_file = tmp_path / "podinfo", tmp_path / "token"
    podinfo.mkdir()
    secret = core.read_namespaced_secret(token_secret_name(pod.metadata.name), TEAM)
    token_file.write_text(base64.b64decode(secret.data[TOKEN_KEY]).decode())
    kubelet_writes_annotations(control_plane, pod.metadata.name, podinfo / "annotations")

    ckpt = Checkpointer.from_env(tmp_path / "ckpt", handle_sigterm=False, env={
        "TESSERA_PODINFO_DIR": str(podinfo), "TESSERA_CHECKPOINT_TOKEN_FILE": str(token_file),
        "TESSERA_CHECKPOINT_URL": f"{live_server.url}/api/v1/checkpoints/"})
    step = ckpt.resume()
    payload = PreemptPayload(job_id=job.pk, for_job_id=None, reason=PreemptReason.PREEMPT, notice_deadline=None)
    action = ActionRequest.objects.create(key=f"preempt:{job.pk}", kind="preempt", job=job,
                                          payload=payload.as_payload())
    tasks.execute_action.apply_async((action.pk,), queue=kube_workers.queue)

    deadline = time.monotonic() + 60
    while ckpt.last_answer is None:  # the training loop, with the kubelet refreshing the file
        assert time.monotonic() < deadline, "no checkpoint request reached the loop"
        step += 1
        time.sleep(0.2)
        kubelet_writes_annotations(control_plane, pod.metadata.name, podinfo / "annotations")
        if ckpt.should_save(step):
            open(ckpt.path_for(step), "w").close()
            ckpt.saved(step, ckpt.path_for(step))

    asked = core.read_namespaced_pod(pod.metadata.name, TEAM).metadata.annotations[ANNOTATION_CHECKPOINT]
    assert asked == f"preempt-{action.pk}" and ckpt.last_answer.status == 201
    (confirmed,) = CheckpointConfirmation.objects.filter(job=job)
    assert (confirmed.checkpoint_id, confirmed.step, confirmed.pod_name) == (asked, step, pod.metadata.name)
    wait_for(lambda: ActionRequest.objects.get(pk=action.pk).state == "confirmed", what="preemption done",
             timeout=90, every=1.0)
    job.refresh_from_db()
    assert job.status == Job.Status.PREEMPTED and job.progress_s == confirmed.progress_s == ckpt.latest.progress_s
