"""Node and GPU rows follow the cluster's nodes (issue 13, "Inventory from the cluster"): the pure
mapping, the backend's count of GPUs that other pods hold, and the poll's sync against the fake
API server. tests/kube/test_inventory.py does the same against the real control plane."""

from datetime import timedelta

import pytest
from django.utils import timezone

from agents import runtime, services, tasks
from agents.backends.base import MigResource, NodeInventory
from agents.inventory import closing_taints, gpu_model_name, inventory_sync, node_values
from billing.models import UsageInterval
from scheduling.models import Gpu, JobEvent, MigInstance, Node
from scheduling.snapshot import OUTSIDE, build_snapshot
from tests.agents.placing import placed, vision_world

GFD = {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
       "nvidia.com/gpu.count": "8", "nvidia.com/gpu.memory": "81559", "nvidia.com/mig.strategy": "mixed",
       "nvidia.com/mig.capable": "true", "tessera.io/leaf-switch": "leaf-a1", "tessera.io/tier": "reserved"}
ALLOCATABLE = {"cpu": "224", "memory": "2063731088Ki", "nvidia.com/gpu": "8"}


def inventory(**fields) -> NodeInventory:
    base = dict(name="gpu-01", gpu_model="NVIDIA-H100-80GB-HBM3", gpu_count=8, gpu_memory_mib=81559,
                mig_strategy="mixed", leaf_switch="leaf-a1", tier="spot", ready=True, cpu_millicores=224000,
                memory_mib=2015362, allocatable_gpus=8, mig_capable=True,
                taints=("nvidia.com/gpu=present:NoSchedule",))
    return NodeInventory(**{**base, **fields})


# -- the pure mapping ------------------------------------------------------------------------------

def test_a_gfd_labelled_node_maps_to_the_engines_model_and_the_clusters_counts():
    values = node_values(inventory(allocatable_gpus=6, gpus_used_outside=2))
    assert (values.gpu_model, values.gpu_count, values.gpu_memory_gb, values.mig_capable) == ("H100-80GB", 8, 80, True)
    assert (values.cpu_cores, values.memory_gb, values.leaf_switch, values.tier) == (224, 1968, "leaf-a1", "spot")
    assert (values.allocatable_gpus, values.gpus_used_outside, values.schedulable) == (6, 2, True)


@pytest.mark.parametrize(("product", "model"), [
    ("NVIDIA-A100-SXM4-80GB", "A100-80GB"), ("NVIDIA-H200", "H200-141GB"), ("NVIDIA-L40S", "L40S"),
    ("Tesla-T4", "Tesla-T4"), (None, "unknown")])
def test_gfd_product_names_become_the_names_the_engine_and_rate_card_use(product, model):
    assert gpu_model_name(product) == model


def test_a_model_without_mig_geometry_takes_its_memory_from_gfd_and_is_not_mig_capable():
    values = node_values(inventory(gpu_model="NVIDIA-L40S", gpu_memory_mib=46068))
    assert (values.gpu_memory_gb, values.mig_capable) == (45.0, False)


@pytest.mark.parametrize(("fields", "schedulable"), [
    ({}, True),  # the GPU Operator's own taint: our pods tolerate it
    ({"ready": False}, False),
    ({"schedulable": False}, False),  # cordoned
    ({"taints": ("node.kubernetes.io/unschedulable=:NoSchedule",)}, False),
    ({"taints": ("maintenance=true:NoExecute",)}, False),
    ({"taints": ("maintenance=true:PreferNoSchedule",)}, True),
    ({"taints": ("tessera.io/reclaim-at=1700000000:NoSchedule",)}, True),  # the spot flow drains it
])
def test_readiness_cordons_and_taints_close_a_node_to_new_work(fields, schedulable):
    assert node_values(inventory(**fields)).schedulable is schedulable


def test_closing_taints_names_them_in_the_clusters_words():
    assert closing_taints(("a=b:NoSchedule", "nvidia.com/gpu=present:NoSchedule", "c=:NoExecute")) == \
        ["a=b:NoSchedule", "c=:NoExecute"]


SINGLE_MIG = dict(gpu_model="A100-SXM4-40GB", gpu_count=0, gpu_memory_mib=None, mig_strategy="single",
                  mig_resources=(MigResource("1g.5gb", 28, 4864),), allocatable_gpus=28, gpus_used_outside=3)


def test_a_single_strategy_mig_node_is_refused_and_says_nothing_of_its_gpu_rows():
    values = node_values(inventory(**SINGLE_MIG))
    assert (values.gpu_model, values.gpu_count, values.schedulable) == ("A100-SXM4-40GB", None, False)
    # MIG slices are not GPUs: neither the rows' allocatable nor their used count
    assert (values.allocatable_gpus, values.gpus_used_outside) == (None, 0)
    assert values.refusal.startswith("MIG strategy 'single': the device plugin offers 28 × 1g.5gb MIG devices")
    assert "mig.strategy to 'mixed'" in values.refusal


def test_a_single_strategy_node_gfd_calls_invalid_is_refused_in_those_words():
    values = node_values(inventory(**{**SINGLE_MIG, "mig_resources": (MigResource("INVALID", 0, None),)}))
    assert not values.schedulable and "invalid MIG layout" in values.refusal


def test_a_single_strategy_node_without_mig_offers_whole_gpus():
    values = node_values(inventory(mig_strategy="single"))  # MIG off: GFD labels whole GPUs, as "none"
    assert (values.gpu_count, values.schedulable, values.refusal, values.allocatable_gpus) == (8, True, "", 8)


def test_a_tier_label_that_is_no_tier_of_ours_counts_as_none():
    assert node_values(inventory(tier="gold")).tier is None


# -- the backend -----------------------------------------------------------------------------------

def other_pod(name: str, node: str | None, gpus: int, phase: str = "Running", labels: dict | None = None) -> dict:
    limits = {"nvidia.com/gpu": str(gpus)} if gpus else {}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels or {}},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "x", "resources": {"limits": limits}}]},
            "status": {"phase": phase}}


def test_inventory_counts_gpus_other_pods_hold_and_reads_allocatable(backend, kube):
    kube.add_namespace("other")
    kube.add_node("gpu-01", GFD, {**ALLOCATABLE, "nvidia.com/gpu": "6"})
    kube.add_pod("other", other_pod("dcgm-exporter", "gpu-01", 0))
    kube.add_pod("other", other_pod("notebook", "gpu-01", 2))
    kube.add_pod("other", other_pod("done", "gpu-01", 4))
    kube.set_pod_phase("other", "done", "Succeeded")
    kube.add_pod("other", other_pod("unbound", None, 4, phase="Pending"))
    kube.add_pod("other", other_pod("ours", "gpu-01", 1, labels={"tessera.io/job-id": "7"}))
    listed = []
    list_pods = kube.list_pods
    kube.list_pods = lambda query, body, ns=None: listed.append(list_pods(query, body, ns)[1]) or (200, listed[-1])
    (node,) = backend.inventory()
    assert (node.gpu_count, node.allocatable_gpus, node.gpus_used_outside, node.mig_capable) == (8, 6, 2, True)
    # Our own pods stay on the server (the fake filters by label only; the real one by field too).
    assert "ours" not in {pod["metadata"]["name"] for pod in listed[0]["items"]}


def device_pod(name: str, node: str, limits: dict[str, str], labels: dict | None = None) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels or {}},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "x", "resources": {"limits": limits}}]},
            "status": {"phase": "Running"}}


def test_inventory_counts_mig_devices_other_pods_hold_by_profile(backend, kube):
    kube.add_namespace("other")
    kube.add_node("gpu-01", GFD, ALLOCATABLE)
    kube.add_pod("other", device_pod("inference", "gpu-01", {"nvidia.com/mig-1g.10gb": "2"}))
    kube.add_pod("other", device_pod("media", "gpu-01", {"nvidia.com/mig-1g.10gb.me": "1", "nvidia.com/gpu": "1"}))
    kube.add_pod("other", device_pod("done", "gpu-01", {"nvidia.com/mig-3g.40gb": "1"}))
    kube.set_pod_phase("other", "done", "Succeeded")
    kube.add_pod("other", device_pod("ours", "gpu-01", {"nvidia.com/mig-3g.40gb": "1"},
                                     labels={"tessera.io/job-id": "7"}))
    (node,) = backend.inventory()
    assert node.mig_used_outside == (("1g.10gb", 2), ("1g.10gb+me", 1))
    assert node.gpus_used_outside == 1


def mig_gpu(node: str, index: int, layout: list[tuple[str, int]]) -> Gpu:
    """The GPU in MIG mode with these (profile, start) instances, as a repartition leaves it."""
    gpu = Gpu.objects.get(node__name=node, index=index)
    Gpu.objects.filter(pk=gpu.pk).update(mig_enabled=True)
    for profile, start in layout:
        MigInstance.for_profile(gpu, profile, start).save()
    return gpu


def instance_users(node: str, index: int) -> list[tuple[str, int, str | None]]:
    engine_node = next(n for n in build_snapshot().nodes if n.name == node)
    gpu = next(g for g in engine_node.gpus if g.index == index)
    return [(i.profile, i.start, i.job_id) for i in gpu.mig_instances]


def test_mig_devices_other_pods_hold_are_busy_instances_in_the_snapshot(db, kube, backend):
    kube.add_namespace("other")
    kube.add_node("gpu-01", GFD, ALLOCATABLE)
    poll(backend)
    mig_gpu("gpu-01", 0, [("3g.40gb", 0), ("1g.10gb", 4), ("1g.10gb", 5), ("1g.10gb", 6)])
    kube.add_pod("other", device_pod("inference", "gpu-01", {"nvidia.com/mig-1g.10gb": "2"}))
    assert poll(backend)["inventory"]["changed"] == ["gpu-01"]
    assert Node.objects.get(name="gpu-01").mig_used_outside == {"1g.10gb": 2}
    # Two of the three idle 1g instances are taken (the engine neither places on nor repartitions
    # them); the 3g one and the third 1g one stay free.
    assert instance_users("gpu-01", 0) == [("3g.40gb", 0, None), ("1g.10gb", 4, None), ("1g.10gb", 5, OUTSIDE),
                                           ("1g.10gb", 6, OUTSIDE)]
    kube.finish_deletion("other", "inference")
    poll(backend)
    assert Node.objects.get(name="gpu-01").mig_used_outside == {}
    assert [user for *_rest, user in instance_users("gpu-01", 0)] == [None] * 4


def test_more_mig_devices_held_than_instances_known_takes_them_all(db, kube, backend):
    kube.add_namespace("other")
    kube.add_node("gpu-01", GFD, ALLOCATABLE)
    poll(backend)
    mig_gpu("gpu-01", 0, [("1g.10gb", 0)])
    kube.add_pod("other", device_pod("inference", "gpu-01", {"nvidia.com/mig-1g.10gb": "3"}))
    poll(backend)
    assert instance_users("gpu-01", 0) == [("1g.10gb", 0, OUTSIDE)]


# -- the sync, as the poll runs it -------------------------------------------------------------------

A100_SINGLE = {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": "A100-SXM4-40GB-MIG-1g.5gb",
               "nvidia.com/gpu.count": "28", "nvidia.com/gpu.memory": "4864", "nvidia.com/mig.strategy": "single",
               "nvidia.com/mig.capable": "true"}


def test_a_single_strategy_node_joins_refused_with_its_reason_and_takes_nothing(db, kube, backend, caplog):
    kube.add_node("gpu-a100", A100_SINGLE, {**ALLOCATABLE, "nvidia.com/gpu": "28"})
    kube.add_node("gpu-01", GFD, ALLOCATABLE)
    assert poll(backend)["inventory"]["added"] == ["gpu-01", "gpu-a100"]
    node = Node.objects.get(name="gpu-a100")
    assert (node.schedulable, node.allocatable_gpus, node.gpus.count()) == (False, None, 0)
    assert "28 × 1g.5gb" in node.cluster_refusal and Node.objects.get(name="gpu-01").cluster_refusal == ""
    assert {n.name: n.state for n in build_snapshot().nodes}["gpu-a100"] == "draining"  # nothing new
    # Switched to mixed: the labels say GPUs and profiles again, and the node opens.
    kube.set_node_labels("gpu-a100", {"nvidia.com/mig.strategy": "mixed", "nvidia.com/gpu.product": "A100-SXM4-40GB",
                                      "nvidia.com/gpu.count": "4", "nvidia.com/gpu.memory": "40960",
                                      "nvidia.com/mig-1g.5gb.count": "28"})
    assert poll(backend)["inventory"]["changed"] == ["gpu-a100"]
    node.refresh_from_db()
    assert (node.schedulable, node.cluster_refusal, node.gpus.count()) == (True, "", 4)

class Silent:
    """No node agent answers: readiness comes from the cluster alone."""

    def read(self, nodes):
        return {}


def poll(backend, now=None):
    return services.agents_poll(backend=backend, telemetry=Silent(), now=now or timezone.now(), sync_inventory=True)


@pytest.fixture
def two_nodes(db, kube):
    kube.add_node("gpu-01", GFD, ALLOCATABLE)
    kube.add_node("gpu-02", {**GFD, "nvidia.com/gpu.count": "4", "tessera.io/tier": "spot"},
                  {**ALLOCATABLE, "nvidia.com/gpu": "4"}, ready=False)
    return kube


def test_new_cluster_nodes_join_and_only_a_ready_one_takes_work(two_nodes, backend):
    result = poll(backend)
    assert result["inventory"] == {"added": ["gpu-01", "gpu-02"], "changed": [], "removed": []}
    assert result["answered"] == ["gpu-01"]  # the cluster says Ready: no agent needed
    one, two = Node.objects.get(name="gpu-01"), Node.objects.get(name="gpu-02")
    assert (one.state, one.gpu_model, one.tier.name, one.leaf_switch.name) == \
        ("ready", "H100-80GB", "reserved", "leaf-a1")
    assert (two.state, two.tier.name, two.schedulable) == ("joining", "spot", False)
    assert list(one.gpus.values_list("index", "model", "memory_gb", "mig_capable")) == \
        [(i, "H100-80GB", 80.0, True) for i in range(8)]
    assert two.gpus.count() == 4
    assert poll(backend)["inventory"] == {"added": [], "changed": [], "removed": []}  # in step: nothing to do


def test_a_cluster_in_step_costs_a_read_and_no_write(db, django_assert_max_num_queries):
    items = [inventory(name=f"gpu-{i:02d}") for i in range(20)]
    inventory_sync(inventory=items, now=timezone.now())
    with django_assert_max_num_queries(3):  # nodes, their GPUs (500 nodes: 0.7 s under load, measured)
        assert inventory_sync(inventory=items, now=timezone.now())["changed"] == []


def test_a_changed_node_changes_its_rows_and_a_missing_label_keeps_what_was_typed(two_nodes, backend):
    poll(backend)
    two_nodes.set_node_labels("gpu-01", {"tessera.io/tier": "spot", "tessera.io/leaf-switch": None,
                                         "nvidia.com/gpu.count": "6"})
    two_nodes.nodes["gpu-01"]["spec"]["unschedulable"] = True  # kubectl cordon
    assert poll(backend)["inventory"]["changed"] == ["gpu-01"]
    node = Node.objects.get(name="gpu-01")
    assert (node.tier.name, node.leaf_switch.name, node.schedulable) == ("spot", "leaf-a1", False)
    assert node.gpus.count() == 6
    engine_node = next(n for n in build_snapshot().nodes if n.name == "gpu-01")
    assert engine_node.state == "draining"  # cordoned: nothing new goes there


def test_gpus_other_pods_hold_or_the_plugin_does_not_offer_count_as_used(two_nodes, backend):
    two_nodes.add_namespace("other")
    two_nodes.nodes["gpu-01"]["status"]["allocatable"]["nvidia.com/gpu"] = "7"  # one GPU failed
    two_nodes.add_pod("other", other_pod("notebook", "gpu-01", 2))
    poll(backend)
    node = Node.objects.get(name="gpu-01")
    assert (node.allocatable_gpus, node.gpus_used_outside) == (7, 2)
    engine_node = next(n for n in build_snapshot().nodes if n.name == "gpu-01")
    assert [g.index for g in engine_node.gpus if g.healthy] == [0, 1, 2, 3, 4]  # 8 rows, 7 offered, 2 taken


def test_a_node_the_cluster_removed_requeues_its_jobs_and_leaves_the_snapshot(db, kube, backend):
    world = vision_world(kube)
    kube.nodes[world.node.name]["status"]["allocatable"]["nvidia.com/gpu"] = "3"
    kube.add_node("gpu-01", GFD, ALLOCATABLE)
    job, _bind, _placement = placed(world)
    first = timezone.now()
    poll(backend, first)
    Node.objects.filter(pk=world.node.pk).update(last_heartbeat=first)
    del kube.nodes[world.node.name]  # kubectl delete node
    result = poll(backend, first + timedelta(seconds=15))
    assert result["inventory"]["removed"] == [world.node.name]
    job.refresh_from_db()
    assert job.status == "preempted"  # requeued
    assert "was removed from the cluster" in JobEvent.objects.filter(job=job).latest("id").message
    assert not UsageInterval.objects.filter(job=job, ended_at__isnull=True).exists()
    assert UsageInterval.objects.get(job=job).ended_at == first  # billed to its last heartbeat
    assert Node.objects.get(pk=world.node.pk).state == "lost"  # its bills name it: kept, as lost
    assert world.node.name not in {n.name for n in build_snapshot().nodes}
    assert poll(backend, first + timedelta(seconds=30))["inventory"]["removed"] == []  # once


def test_a_node_without_history_is_deleted_when_the_cluster_drops_it(two_nodes, backend):
    poll(backend)
    del two_nodes.nodes["gpu-02"]
    assert poll(backend)["inventory"]["removed"] == ["gpu-02"]
    assert not Node.objects.filter(name="gpu-02").exists() and not Gpu.objects.filter(node__name="gpu-02").exists()


def test_an_empty_node_list_removes_nothing(two_nodes, backend):
    poll(backend)
    two_nodes.nodes.clear()  # a wrong node selector looks like this
    assert poll(backend)["inventory"]["removed"] == []
    assert Node.objects.count() == 2


def test_the_poll_task_syncs_only_a_real_cluster(two_nodes, backend, settings, monkeypatch):
    monkeypatch.setattr(runtime, "backend", lambda: backend)
    monkeypatch.setattr(runtime, "telemetry", lambda: Silent())
    settings.TESSERA_BACKEND = "simulated"
    assert "inventory" not in tasks.poll_agents.apply().get()
    assert not Node.objects.exists()  # the demo's rows are the demo loader's
    settings.TESSERA_BACKEND = "kubernetes"
    assert tasks.poll_agents.apply().get()["inventory"]["added"] == ["gpu-01", "gpu-02"]
