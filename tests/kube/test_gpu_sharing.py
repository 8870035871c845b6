"""Sharing that is real on Kubernetes (issue 14), against the real control plane: the harness plays a
node whose device plugin shares by MPS (GFD's sharing labels, `nvidia.com/gpu.shared` replicas) and
one that does not share. A share binds to the MPS node as one replica pinned to its memory need; on
the plain node it waits with the reason the team reads, and a bind forced there is refused."""

from __future__ import annotations

import pytest
from kubernetes import client

from agents import actions, services
from agents.backends import BindRequest, GpuShare, Refused
from agents.backends.kubernetes import KubernetesBackend, KubernetesConfig
from scheduling.models import ActionRequest, Node
from scheduling.payloads import BindPayload
from tests.kube.conftest import IMAGE, TEAM, kube_job, team_rows
from tests.kube.kubelet import GpuNode
from tests.workers.conftest import wait_for

pytestmark = pytest.mark.django_db(transaction=True)

MPS_LABELS = {"nvidia.com/gpu.sharing-strategy": "mps", "nvidia.com/gpu.replicas": "4"}
# renameByDefault: the plugin offers 8 GPUs × 4 replicas as nvidia.com/gpu.shared, no whole GPU.
MPS_NODE = GpuNode("share-mps", gpus=8, allocatable_gpus=0, labels=MPS_LABELS, devices={"nvidia.com/gpu.shared": "32"})
# An L4 (no MIG) with a plain device plugin: whole GPUs only, nothing to slice either.
PLAIN_NODE = GpuNode(
    "share-none", product="NVIDIA-L4", gpus=2, memory_mib=23034, labels={"nvidia.com/mig.capable": "false"}
)


class Silent:
    def read(self, nodes):
        return {}


@pytest.fixture
def backend(control_plane):
    api_client = control_plane.backend_client()
    yield KubernetesBackend(KubernetesConfig(api_client=api_client, namespaces=frozenset({TEAM})))
    api_client.close()


def share_job(name: str, memory_gb: float):
    job = kube_job(name, gpus=0)
    job.gpu_memory_gb = memory_gb
    job.save(update_fields=["gpu_memory_gb"])
    return job


def synced(kubelet, backend, node: GpuNode) -> None:
    kubelet.add_node(node)
    team_rows()
    services.agents_poll(backend=backend, telemetry=Silent(), sync_inventory=True)


def test_an_mps_share_binds_as_one_replica_pinned_to_its_need(kubelet, backend, kube_admin):
    synced(kubelet, backend, MPS_NODE)
    assert (Node.objects.get(name="share-mps").gpu_sharing, Node.objects.get(name="share-mps").gpu_replicas) == (
        "mps",
        4,
    )
    job = share_job("mps-share", 10)
    assert services.cycle_run()["placed"] == [job.pk]
    bind = ActionRequest.objects.get(job=job, kind="bind")
    assert actions.action_advance(action_id=bind.pk, backend=backend) == "confirmed"
    pod_name = BindPayload.from_payload(bind.payload).pod_name
    core = client.CoreV1Api(kube_admin)
    pod = wait_for(
        lambda: (p := core.read_namespaced_pod(pod_name, TEAM)).status.phase == "Running" and p,
        what="share pod running",
        timeout=60,
    )
    container = pod.spec.containers[0]
    assert pod.spec.node_name == "share-mps"
    assert container.resources.limits["nvidia.com/gpu.shared"] == "1"
    assert "nvidia.com/gpu" not in container.resources.limits
    assert {(e.name, e.value) for e in container.env} >= {("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "0=10240M")}
    (scheduled,) = core.list_namespaced_event(
        TEAM, field_selector=f"involvedObject.name={pod_name},reason=Scheduled"
    ).items
    assert scheduled.message.endswith("to share-mps (a 10240 MiB share of a GPU)")


def test_a_share_waits_on_a_node_without_sharing_and_a_forced_bind_is_refused(kubelet, backend, kube_admin):
    synced(kubelet, backend, PLAIN_NODE)
    assert Node.objects.get(name="share-none").gpu_sharing == "none"
    job = share_job("no-share", 4)
    assert services.cycle_run()["placed"] == []
    job.refresh_from_db()
    assert job.pending_reason_code == "no-sharing"
    assert "this node offers no GPU sharing" in job.pending_reason
    # A placement made on stale rows (the labels changed since) is refused by the cluster's word.
    request = BindRequest(
        job_id=str(job.pk),
        pod_name=f"no-share-{job.pk}",
        namespace=TEAM,
        project="detection",
        job_kind="training",
        image=IMAGE,
        command=("sleep", "1"),
        node_name="share-none",
        gpu_count=1,
        share=GpuShare(memory_mib=4096),
    )
    with pytest.raises(Refused, match="this node offers no GPU sharing"):
        backend.bind(request)
    core = client.CoreV1Api(kube_admin)
    assert [p.spec.node_name for p in core.list_namespaced_pod(TEAM).items if p.metadata.name == request.pod_name] in (
        [],
        [None],
    )  # never bound to the node
