"""A native pod (someone else's, spec.schedulerName: tessera) read into a job's need: whole GPUs, one
MIG device or a memory-bounded share, its owner and annotations. A pod Tessera cannot read is
refused with a reason and a sentence for its Event, never with any other exception."""

import pytest
from kubernetes.client import (
    V1Container,
    V1ObjectMeta,
    V1OwnerReference,
    V1Pod,
    V1PodSpec,
    V1ResourceRequirements,
)

from agents.backends import k8s_manifests as m
from agents.backends.k8s_native import NativeRefusal, RefusedPod, is_native, native_pod, read_native


def pod(
    requests=None,
    *,
    limits=None,
    annotations=None,
    labels=None,
    owners=None,
    init=None,
    scheduler="tessera",
    priority_class=None,
    priority=None,
):
    container = V1Container(
        name="main", image="pytorch:24", resources=V1ResourceRequirements(requests=requests, limits=limits)
    )
    inits = (
        [V1Container(name="init", image="busybox", resources=V1ResourceRequirements(requests=init))] if init else None
    )
    return V1Pod(
        metadata=V1ObjectMeta(
            name="train-0", namespace="ml", uid="u-1", annotations=annotations, labels=labels, owner_references=owners
        ),
        spec=V1PodSpec(
            containers=[container],
            init_containers=inits,
            scheduler_name=scheduler,
            priority_class_name=priority_class,
            priority=priority,
        ),
    )


def owner(kind, name, controller=True, api_version="batch/v1"):
    return V1OwnerReference(api_version=api_version, kind=kind, name=name, uid=f"uid-{name}", controller=controller)


def test_whole_gpus_cpu_and_memory_come_from_the_requests():
    need = native_pod(pod({"nvidia.com/gpu": "2", "cpu": "1500m", "memory": "8Gi"}))
    assert (need.gpus, need.mig_profile, need.shared) == (2, None, False)
    assert need.cpu_cores == 1.5 and need.memory_gb == 8.0
    assert (need.uid, need.namespace, need.name, need.image) == ("u-1", "ml", "train-0", "pytorch:24")


def test_a_limit_alone_is_the_request_as_kubernetes_defaults_it():
    assert native_pod(pod(limits={"nvidia.com/gpu": "4"})).gpus == 4


def test_an_init_container_counts_only_beyond_the_containers():
    assert native_pod(pod({"nvidia.com/gpu": "1"}, init={"nvidia.com/gpu": "2"})).gpus == 2


def test_a_mig_device_is_its_profile():
    assert native_pod(pod({"nvidia.com/mig-1g.10gb": "1"})).mig_profile == "1g.10gb"
    assert native_pod(pod({"nvidia.com/mig-1g.10gb.me": "1"})).mig_profile == "1g.10gb+me"


def test_a_share_takes_its_memory_from_the_annotation():
    need = native_pod(
        pod(
            {"nvidia.com/gpu.shared": "1"},
            annotations={"tessera.io/gpu-memory-gb": "12.5", "tessera.io/accepts-no-isolation": "true"},
        )
    )
    assert need.shared and need.gpu_memory_gb == 12.5 and need.gpus == 0 and need.accepts_no_isolation


@pytest.mark.parametrize(
    ("requests", "annotations", "reason", "words"),
    [
        ({}, None, "NoGpuRequest", "asks for no GPU"),
        ({"cpu": "1"}, None, "NoGpuRequest", "asks for no GPU"),
        ({"nvidia.com/gpu": "1", "nvidia.com/mig-1g.10gb": "1"}, None, "InvalidGpuRequest", "one kind of GPU"),
        ({"nvidia.com/gpu": "500m"}, None, "InvalidGpuRequest", "not a whole number"),
        ({"nvidia.com/gpu": "65"}, None, "InvalidGpuRequest", "runs on one node"),
        ({"nvidia.com/gpu": "lots"}, None, "InvalidGpuRequest", "does not parse"),
        ({"nvidia.com/mig-1g.10gb": "2"}, None, "InvalidGpuRequest", "one MIG device"),
        ({"nvidia.com/vgpu": "1"}, None, "InvalidGpuRequest", "not a GPU resource Tessera knows"),
        ({"nvidia.com/gpu.shared": "1"}, None, "InvalidGpuRequest", "tessera.io/gpu-memory-gb"),
        (
            {"nvidia.com/gpu.shared": "1"},
            {"tessera.io/gpu-memory-gb": "lots"},
            "InvalidGpuRequest",
            "not a memory size",
        ),
        ({"nvidia.com/gpu.shared": "1"}, {"tessera.io/gpu-memory-gb": "nan"}, "InvalidGpuRequest", "not a memory size"),
        ({"nvidia.com/gpu.shared": "1"}, {"tessera.io/gpu-memory-gb": "-3"}, "InvalidGpuRequest", "not a memory size"),
        ({"nvidia.com/gpu.shared": "2"}, {"tessera.io/gpu-memory-gb": "8"}, "InvalidGpuRequest", "one share"),
        ({"nvidia.com/gpu": "1"}, {"tessera.io/min-member": "zero"}, "InvalidPodGroup", "whole number"),
    ],
)
def test_a_request_tessera_cannot_read_is_refused_with_why(requests, annotations, reason, words):
    with pytest.raises(NativeRefusal) as refused:
        native_pod(pod(requests, annotations=annotations))
    assert refused.value.reason == reason and words in str(refused.value)
    listed = read_native(pod(requests, annotations=annotations))  # what the intake lists: a value, not a raise
    assert isinstance(listed, RefusedPod) and (listed.uid, listed.reason) == ("u-1", reason)


def test_the_controlling_owner_names_the_job():
    need = native_pod(
        pod({"nvidia.com/gpu": "1"}, owners=[owner("Workflow", "w", controller=False), owner("Job", "train-llm")])
    )
    assert need.display_name == "Job train-llm"
    assert (need.owner.kind, need.owner.uid, need.owner.controller) == ("Job", "uid-train-llm", True)


def test_a_pod_without_owner_is_named_as_itself():
    assert native_pod(pod({"nvidia.com/gpu": "1"})).display_name == "Pod train-0"


def test_project_priority_and_group_as_written():
    need = native_pod(
        pod(
            {"nvidia.com/gpu": "1"},
            annotations={"tessera.io/project": " detection ", "tessera.io/min-member": "4"},
            labels={"scheduling.x-k8s.io/pod-group": "llm"},
            priority_class="training",
            priority=200,
        )
    )
    assert (need.project, need.priority_class, need.priority) == ("detection", "training", 200)
    assert (need.group, need.min_member) == ("llm", 4)


def test_only_someone_elses_pods_for_our_scheduler_are_native():
    assert is_native(pod({"nvidia.com/gpu": "1"}), "tessera")
    assert not is_native(pod({"nvidia.com/gpu": "1"}, scheduler="default-scheduler"), "tessera")
    assert not is_native(pod({"nvidia.com/gpu": "1"}, labels={m.LABEL_MANAGED_BY: m.MANAGED_BY}), "tessera")


def test_the_label_patch_keeps_the_pods_labels_and_tests_its_uid():
    patch = m.native_label_patch("u-1", {"app": "train"}, "42", "vision")
    assert patch[0] == {"op": "test", "path": "/metadata/uid", "value": "u-1"}
    assert patch[1]["value"] == {"app": "train", m.LABEL_JOB: "42", m.LABEL_TEAM: "vision"}
