"""Inventory from the real cluster and events on pods (issue 13): nodes the kubelet harness
registers with GFD labels and allocatable become rows with the right GPUs, a pod Tessera did not
place takes GPUs from the free count, a node deleted from the cluster requeues its job, and the
pods carry Scheduled and Preempted events, as `kubectl describe pod` shows them. The workers'
steps run in-process, with the backend's deploy/rbac.yaml rights."""

from __future__ import annotations

import pytest
from kubernetes import client

from agents import actions, services
from agents.backends import PreemptRequest
from agents.backends.kubernetes import KubernetesBackend, KubernetesConfig
from billing.models import UsageInterval
from scheduling.models import ActionRequest, Gpu, MigInstance, Node
from scheduling.payloads import BindPayload
from scheduling.snapshot import OUTSIDE, build_snapshot
from tests.kube.conftest import TEAM, kube_job, team_rows
from tests.kube.kubelet import GpuNode
from tests.workers.conftest import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


class Silent:
    """No node agent answers: readiness is the cluster's word alone."""

    def read(self, nodes):
        return {}


@pytest.fixture
def backend(control_plane):
    api_client = control_plane.backend_client()
    yield KubernetesBackend(KubernetesConfig(api_client=api_client, namespaces=frozenset({TEAM})))
    api_client.close()


def poll(backend) -> dict:
    return services.agents_poll(backend=backend, telemetry=Silent(), sync_inventory=True)


def healthy(name: str) -> list[int]:
    node = next(n for n in build_snapshot().nodes if n.name == name)
    return [gpu.index for gpu in node.gpus if gpu.healthy]


def test_gfd_labelled_nodes_appear_with_the_gpus_the_cluster_offers(kubelet, backend):
    kubelet.add_node(GpuNode("inv-01", gpus=8, allocatable_gpus=6,
                             labels={"tessera.io/tier": "spot", "tessera.io/leaf-switch": "leaf-7"}))
    kubelet.add_node(GpuNode("inv-02", product="NVIDIA-A100-SXM4-80GB", gpus=4, memory_mib=81920))
    assert poll(backend)["inventory"]["added"] == ["inv-01", "inv-02"]
    h100, a100 = Node.objects.get(name="inv-01"), Node.objects.get(name="inv-02")
    assert (h100.state, h100.gpu_model, h100.tier.name, h100.leaf_switch.name) == \
        ("ready", "H100-80GB", "spot", "leaf-7")
    assert (h100.gpus.count(), h100.allocatable_gpus, h100.cpu_cores, h100.memory_gb) == (8, 6, 64, 512)
    assert healthy("inv-01") == [0, 1, 2, 3, 4, 5]  # 8 GPUs, 6 offered by the device plugin
    assert (a100.gpu_model, a100.gpus.count(), a100.gpus.first().memory_gb) == ("A100-80GB", 4, 80.0)


def test_a_cordoned_node_takes_no_new_work_until_uncordoned(kubelet, backend, kube_admin):
    kubelet.add_node(GpuNode("inv-07", gpus=2))
    kubelet.add_node(GpuNode("inv-08", gpus=2))
    core = client.CoreV1Api(kube_admin)
    core.patch_node("inv-07", {"spec": {"unschedulable": True}})  # kubectl cordon: the server adds its taint
    poll(backend)
    states = {n.name: n.state for n in build_snapshot().nodes}
    assert (states["inv-07"], states["inv-08"]) == ("draining", "ready")
    core.patch_node("inv-07", {"spec": {"unschedulable": False}})

    def reopened() -> bool:  # the node controller lifts its unschedulable taint a moment later
        poll(backend)
        return {n.name: n.state for n in build_snapshot().nodes}["inv-07"] == "ready"
    wait_for(reopened, what="uncordoned node open again", timeout=30, every=0.5)


def test_a_pod_tessera_did_not_place_holds_its_gpus(kubelet, backend, kube_admin):
    kubelet.add_node(GpuNode("inv-03", gpus=4))
    core = client.CoreV1Api(kube_admin)
    core.create_namespaced_pod(TEAM, {"metadata": {"name": "by-hand"}, "spec": {
        "nodeName": "inv-03", "restartPolicy": "Never",
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "containers": [{"name": "notebook", "image": "jupyter/base-notebook",
                        "env": [{"name": "TESSERA_RUNTIME_S", "value": "3600"}],  # the harness runs it that long
                        "resources": {"limits": {"nvidia.com/gpu": "2"}}}]}})
    try:
        wait_for(lambda: core.read_namespaced_pod("by-hand", TEAM).status.phase == "Running", what="pod running",
                 timeout=30)
        poll(backend)
        assert Node.objects.get(name="inv-03").gpus_used_outside == 2
        assert healthy("inv-03") == [0, 1]  # 2 fewer free
    finally:
        core.delete_namespaced_pod("by-hand", TEAM, grace_period_seconds=0)


def test_mig_devices_a_pod_tessera_did_not_place_holds_are_busy_instances(kubelet, backend, kube_admin):
    kubelet.add_node(GpuNode("inv-09", gpus=2, allocatable_gpus=1, devices={"nvidia.com/mig-1g.10gb": "7"}))
    poll(backend)
    gpu = Gpu.objects.get(node__name="inv-09", index=1)  # in MIG mode, seven 1g.10gb, as mig-manager left it
    Gpu.objects.filter(pk=gpu.pk).update(mig_enabled=True)
    for start in range(7):
        MigInstance.for_profile(gpu, "1g.10gb", start).save()
    core = client.CoreV1Api(kube_admin)
    core.create_namespaced_pod(TEAM, {"metadata": {"name": "mig-by-hand"}, "spec": {
        "nodeName": "inv-09", "restartPolicy": "Never",
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "containers": [{"name": "inference", "image": "nvcr.io/nvidia/tritonserver:24.05-py3",
                        "env": [{"name": "TESSERA_RUNTIME_S", "value": "3600"}],
                        "resources": {"limits": {"nvidia.com/mig-1g.10gb": "3"}}}]}})
    try:
        wait_for(lambda: core.read_namespaced_pod("mig-by-hand", TEAM).status.phase == "Running",
                 what="pod running", timeout=30)
        poll(backend)
        assert Node.objects.get(name="inv-09").mig_used_outside == {"1g.10gb": 3}
        node = next(n for n in build_snapshot().nodes if n.name == "inv-09")
        users = [i.job_id for i in node.gpus[1].mig_instances]
        assert users == [None] * 4 + [OUTSIDE] * 3
    finally:
        core.delete_namespaced_pod("mig-by-hand", TEAM, grace_period_seconds=0)


def test_a_single_strategy_mig_node_is_refused_with_its_reason(kubelet, backend):
    """GFD's single strategy: every GPU one profile, its MIG devices offered as nvidia.com/gpu."""
    kubelet.add_node(GpuNode("inv-10", product="A100-SXM4-40GB-MIG-1g.5gb", gpus=28, memory_mib=4864,
                             labels={"nvidia.com/mig.strategy": "single"}))
    kubelet.add_node(GpuNode("inv-11", gpus=2))
    assert poll(backend)["inventory"]["added"] == ["inv-10", "inv-11"]
    node = Node.objects.get(name="inv-10")
    assert (node.gpu_model, node.schedulable, node.allocatable_gpus, node.gpus.count()) == \
        ("A100-SXM4-40GB", False, None, 0)
    assert node.cluster_refusal.startswith("MIG strategy 'single': the device plugin offers 28 × 1g.5gb")
    states = {n.name: n.state for n in build_snapshot().nodes}
    assert (states["inv-10"], states["inv-11"]) == ("draining", "ready")


def bound_job(backend, name: str):
    """A 4-GPU job placed by a cycle on the synced rows and bound on the cluster: (job, pod, node)."""
    team_rows()
    poll(backend)
    job = kube_job(name, gpus=4)
    assert services.cycle_run()["placed"] == [job.pk]
    bind = ActionRequest.objects.get(job=job, kind="bind")
    assert actions.action_advance(action_id=bind.pk, backend=backend) == "confirmed"
    payload = BindPayload.from_payload(bind.payload)
    return job, payload.pod_name, payload.node


def pod_events(core: client.CoreV1Api, pod: str) -> dict[str, str]:
    """What `kubectl describe pod` lists under Events: reason -> message."""
    listed = core.list_namespaced_event(TEAM, field_selector=f"involvedObject.name={pod}")
    return {event.reason: event.message for event in listed.items}


def test_a_scheduled_then_preempted_pod_says_so_in_its_events(kubelet, backend, kube_admin):
    kubelet.add_node(GpuNode("inv-04", gpus=4))
    job, pod, node = bound_job(backend, "events")
    core = client.CoreV1Api(kube_admin)
    assert pod_events(core, pod)["Scheduled"] == f"Successfully assigned {TEAM}/{pod} to {node} (4 GPU(s))"
    stop = PreemptRequest(job_id=str(job.pk), pod_name=pod, namespace=TEAM, grace_seconds=5, reason="preempt")
    backend.preempt(stop)
    events = pod_events(core, pod)
    assert events["Preempted"] == "Preempted by Tessera (preempt): stopping with 5 s to checkpoint"
    (scheduled,) = core.list_namespaced_event(TEAM, field_selector=f"involvedObject.name={pod},reason=Scheduled").items
    assert (scheduled.source.component, scheduled.reporting_component, scheduled.type) == \
        ("tessera", "tessera", "Normal")


def test_a_node_deleted_from_the_cluster_requeues_its_job(kubelet, backend):
    kubelet.add_node(GpuNode("inv-05", gpus=4))
    job, _pod, node = bound_job(backend, "removed")
    kubelet.add_node(GpuNode("inv-06", gpus=2))  # an empty node list is taken for a misconfiguration
    kubelet.remove_node(node)
    assert poll(backend)["inventory"]["removed"] == [node]
    job.refresh_from_db()
    assert job.status == "preempted"  # requeued
    assert not UsageInterval.objects.filter(job=job, ended_at__isnull=True).exists()
    assert node not in {n.name for n in build_snapshot().nodes}
