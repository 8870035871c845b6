"""A memory-bounded share asks for one replica of the node's sharing device plugin, pinned by MPS to
its own need, and passes the official schemas (docs/reference/gpu-sharing.md)."""

from types import SimpleNamespace

import pytest

from agents.backends import GpuShare, Refused
from agents.backends import k8s_manifests as m
from agents.backends.k8s_reading import accepts_no_isolation, node_share
from tests.agents.k8s_schema import assert_valid
from tests.agents.test_k8s_manifests import _bind


def _container(share: GpuShare) -> dict:
    pod = m.pod_manifest(_bind(gpu_count=1, share=share), "tessera")
    assert_valid(pod)
    return pod["spec"]["containers"][0]


def test_an_mps_share_asks_for_one_renamed_replica_pinned_to_its_need():
    container = _container(GpuShare(memory_mib=10240, resource="nvidia.com/gpu.shared", mps=True))
    resources = container["resources"]
    assert resources["requests"]["nvidia.com/gpu.shared"] == resources["limits"]["nvidia.com/gpu.shared"] == "1"
    assert "nvidia.com/gpu" not in resources["limits"]
    assert {"name": "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "value": "0=10240M"} in container["env"]


def test_a_time_sliced_share_asks_for_one_replica_and_sets_no_limit():
    container = _container(GpuShare(memory_mib=30720, resource="nvidia.com/gpu", mps=False))
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "1"  # one replica, whatever the memory
    assert all(var["name"] != "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT" for var in container["env"])


def node(labels: dict, allocatable: dict):
    return SimpleNamespace(
        metadata=SimpleNamespace(name="n-1", labels=labels), status=SimpleNamespace(allocatable=allocatable)
    )


@pytest.mark.parametrize(
    "labels, allocatable, resource, mps",
    [
        (
            {"nvidia.com/gpu.sharing-strategy": "mps", "nvidia.com/gpu.replicas": "4"},
            {"nvidia.com/gpu.shared": "32"},
            "nvidia.com/gpu.shared",
            True,
        ),
        (
            {"nvidia.com/gpu.sharing-strategy": "mps", "nvidia.com/gpu.replicas": "4"},
            {"nvidia.com/gpu": "32"},
            "nvidia.com/gpu",
            True,
        ),
        (
            {"nvidia.com/gpu.sharing-strategy": "time-slicing", "nvidia.com/gpu.replicas": "2"},
            {"nvidia.com/gpu.shared": "16"},
            "nvidia.com/gpu.shared",
            False,
        ),
    ],
)
def test_the_node_says_how_its_replicas_are_asked_for(labels, allocatable, resource, mps):
    share = node_share(node(labels, allocatable), GpuShare(memory_mib=4096))
    assert (share.resource, share.mps, share.memory_mib) == (resource, mps, 4096)


@pytest.mark.parametrize(
    "labels",
    [
        {},
        {"nvidia.com/gpu.sharing-strategy": "none"},
        {"nvidia.com/gpu.sharing-strategy": "mps", "nvidia.com/gpu.replicas": "x"},
    ],
)
def test_a_node_that_does_not_share_refuses_a_share(labels):
    with pytest.raises(Refused, match="this node offers no GPU sharing"):
        node_share(node(labels, {"nvidia.com/gpu": "8"}), GpuShare(memory_mib=4096))


@pytest.mark.parametrize(
    "annotations, accepts",
    [
        (None, False),
        ({}, False),
        ({"tessera.io/accepts-no-isolation": "true"}, True),
        ({"tessera.io/accepts-no-isolation": "True "}, True),
        ({"tessera.io/accepts-no-isolation": "yes"}, False),
    ],
)
def test_only_a_true_annotation_accepts_time_slicing(annotations, accepts):
    assert accepts_no_isolation(annotations) is accepts
