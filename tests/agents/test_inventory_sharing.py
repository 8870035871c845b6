"""Each node's GPU sharing mode comes from GPU Feature Discovery's labels (nvidia.com/gpu.sharing-strategy,
nvidia.com/gpu.replicas; docs/reference/gpu-sharing.md) through the poll into the rows and the engine's
snapshot; labels that do not read refuse the node instead of stopping the poll."""

import pytest
from django.utils import timezone

from agents import services
from agents.backends.k8s_reading import gpu_sharing
from scheduling.models import Node
from scheduling.snapshot import build_snapshot
from tests.agents.test_inventory import ALLOCATABLE, GFD, Silent, other_pod


def poll(backend):
    return services.agents_poll(backend=backend, telemetry=Silent(), now=timezone.now(), sync_inventory=True)


def engine_node(name):
    return next(n for n in build_snapshot().nodes if n.name == name)


@pytest.mark.parametrize(
    "labels, read",
    [
        ({}, ("none", 1, False)),
        (
            {"nvidia.com/gpu.sharing-strategy": "", "nvidia.com/gpu.replicas": "0"},
            ("none", 1, False),
        ),  # GFD, MIG single
        ({"nvidia.com/gpu.sharing-strategy": "none", "nvidia.com/gpu.replicas": "1"}, ("none", 1, False)),
        ({"nvidia.com/gpu.sharing-strategy": "mps", "nvidia.com/gpu.replicas": "4"}, ("mps", 4, False)),
        (
            {"nvidia.com/gpu.sharing-strategy": "time-slicing", "nvidia.com/gpu.replicas": "10"},
            ("time-slicing", 10, False),
        ),
        ({"nvidia.com/gpu.sharing-strategy": "hami", "nvidia.com/gpu.replicas": "4"}, ("none", 1, True)),
        ({"nvidia.com/gpu.sharing-strategy": "mps", "nvidia.com/gpu.replicas": "two"}, ("none", 1, True)),
        ({"nvidia.com/gpu.sharing-strategy": "mps", "nvidia.com/gpu.replicas": "1"}, ("none", 1, True)),
        ({"nvidia.com/gpu.sharing-strategy": "mps"}, ("none", 1, True)),
    ],
)
def test_sharing_labels_read_as_a_mode_or_a_problem(labels, read):
    mode, replicas, problem = gpu_sharing(labels)
    assert (mode, replicas, bool(problem)) == read


def test_an_mps_node_with_renamed_replicas_joins_sharing(db, kube, backend):
    kube.add_node(
        "mps-01",
        {**GFD, "nvidia.com/gpu.sharing-strategy": "mps", "nvidia.com/gpu.replicas": "4"},
        {**ALLOCATABLE, "nvidia.com/gpu": "0", "nvidia.com/gpu.shared": "32"},
    )
    poll(backend)
    node = Node.objects.get(name="mps-01")
    assert (node.gpu_sharing, node.gpu_replicas, node.allocatable_gpus, node.schedulable) == ("mps", 4, 8, True)
    seen = engine_node("mps-01")
    assert (seen.sharing, seen.share_replicas) == ("mps", 4)
    assert all(g.healthy for g in seen.gpus)  # 32 replicas are 8 GPUs, all offered


def test_time_sliced_replicas_not_renamed_keep_the_model_and_count_others_by_gpu(db, kube, backend):
    kube.add_namespace("other")
    kube.add_node(
        "ts-01",
        {
            **GFD,
            "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3-SHARED",
            "nvidia.com/gpu.sharing-strategy": "time-slicing",
            "nvidia.com/gpu.replicas": "2",
        },
        {**ALLOCATABLE, "nvidia.com/gpu": "16"},
    )
    kube.add_pod("other", other_pod("notebooks", "ts-01", 3))  # 3 replicas: 2 GPUs started
    poll(backend)
    node = Node.objects.get(name="ts-01")
    assert (node.gpu_model, node.gpu_sharing, node.gpu_replicas) == ("H100-80GB", "time-slicing", 2)
    assert (node.allocatable_gpus, node.gpus_used_outside) == (8, 2)


def test_unreadable_sharing_labels_refuse_the_node_and_the_poll_goes_on(db, kube, backend):
    kube.add_node(
        "odd-01",
        {**GFD, "nvidia.com/gpu.sharing-strategy": "mps", "nvidia.com/gpu.replicas": "many"},
        {**ALLOCATABLE, "nvidia.com/gpu.shared": "32"},
    )
    kube.add_node("gpu-01", GFD, ALLOCATABLE)
    assert poll(backend)["inventory"]["added"] == ["gpu-01", "odd-01"]
    odd = Node.objects.get(name="odd-01")
    assert not odd.schedulable and "nvidia.com/gpu.replicas='many'" in odd.cluster_refusal
    assert engine_node("odd-01").state == "draining"  # nothing new goes there
    assert Node.objects.get(name="gpu-01").schedulable
    kube.set_node_labels("odd-01", {"nvidia.com/gpu.replicas": "4"})  # the operator fixes the config
    assert poll(backend)["inventory"]["changed"] == ["odd-01"]
    odd.refresh_from_db()
    assert (odd.schedulable, odd.cluster_refusal, odd.gpu_sharing, odd.gpu_replicas) == (True, "", "mps", 4)
