"""Every manifest the Kubernetes backend builds passes the official schemas, strictly."""

import pytest
import yaml

from agents.backends import BindRequest, MigSlot
from agents.backends import k8s_manifests as m
from tests.agents.k8s_schema import assert_valid


def _bind(**overrides):
    fields = dict(
        job_id="42", pod_name="job-42-0", namespace="team-vision", project="detector",
        job_kind="training", image="nvcr.io/nvidia/pytorch:24.05-py3",
        command=("torchrun", "train.py"), node_name="gpu-h100-01", gpu_count=4,
        cpu_millicores=16000, memory_mib=65536,
    )
    fields.update(overrides)
    return BindRequest(**fields)


def test_whole_gpu_pod_is_valid_and_asks_for_gpus():
    pod = m.pod_manifest(_bind(priority_class="tessera-high", labels=(("owner", "alice"),)),
                         "tessera")
    assert_valid(pod)
    spec = pod["spec"]
    assert spec["schedulerName"] == "tessera" and "nodeName" not in spec
    assert spec["priorityClassName"] == "tessera-high"
    resources = spec["containers"][0]["resources"]
    assert resources["requests"]["nvidia.com/gpu"] == resources["limits"]["nvidia.com/gpu"] == "4"
    assert resources["requests"]["cpu"] == "16000m"
    assert pod["metadata"]["labels"] == {
        "owner": "alice", "app.kubernetes.io/managed-by": "tessera", "tessera.io/job-id": "42",
        "tessera.io/team": "team-vision", "tessera.io/project": "detector",
        "tessera.io/job-kind": "training",
    }


@pytest.mark.parametrize("profile, resource", [
    ("3g.40gb", "nvidia.com/mig-3g.40gb"),
    ("1g.10gb+me", "nvidia.com/mig-1g.10gb.me"),
])
def test_mig_pod_is_valid_and_asks_for_the_profile(profile, resource):
    pod = m.pod_manifest(_bind(gpu_count=0, mig_profile=profile), "tessera")
    assert_valid(pod)
    assert pod["spec"]["containers"][0]["resources"]["limits"][resource] == "1"


def test_single_strategy_mig_pod_asks_for_a_gpu():
    pod = m.pod_manifest(_bind(gpu_count=0, mig_profile="1g.10gb"), "tessera", mig_as_gpu=True)
    assert_valid(pod)
    assert pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"


def test_a_bind_wants_gpus_or_a_profile_not_both_nor_neither():
    with pytest.raises(ValueError):
        _bind(mig_profile="1g.10gb")
    with pytest.raises(ValueError):
        _bind(gpu_count=0)


@pytest.mark.parametrize("overrides", [
    {"namespace": "Team_Vision"}, {"pod_name": "job 42"}, {"project": "x" * 64},
    {"labels": (("owner", "-bad-"),)},
])
def test_names_the_api_server_would_refuse_are_refused_here(overrides):
    with pytest.raises(ValueError):
        m.pod_manifest(_bind(**overrides), "tessera")


def test_binding_is_valid():
    assert_valid(m.binding_manifest("job-42-0", "team-vision", "gpu-h100-01"))


def test_patches_are_valid_partial_objects():
    assert_valid({"apiVersion": "v1", "kind": "Pod",
                  **m.annotation_patch({m.ANNOTATION_CHECKPOINT: "ckpt-7"})})
    assert_valid({"apiVersion": "v1", "kind": "Node",
                  **m.label_patch({"nvidia.com/mig.config": "tessera-abc"})})


def test_mig_config_names_are_stable_and_valid_label_values():
    layout = {0: [MigSlot("3g.40gb", 4), MigSlot("2g.20gb", 0)], 1: []}
    same = {1: [], 0: [MigSlot("2g.20gb", 0), MigSlot("3g.40gb", 4)]}
    name = m.mig_config_name("gpu-h100-01", layout)
    assert name == m.mig_config_name("gpu-h100-01", same)
    assert name != m.mig_config_name("gpu-h100-02", layout)
    assert len(name) <= 63 and name.startswith("tessera-")
    node = {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "n", "labels": {"nvidia.com/mig.config": name}}}
    assert_valid(node)


def test_mig_parted_config_counts_profiles_per_device():
    layout = {1: [], 0: [MigSlot("1g.10gb", 2), MigSlot("1g.10gb", 3), MigSlot("3g.40gb", 4)]}
    assert m.mig_parted_config("tessera-x", layout) == {
        "version": "v1",
        "mig-configs": {"tessera-x": [
            {"devices": [0], "mig-enabled": True, "mig-devices": {"1g.10gb": 2, "3g.40gb": 1}},
            {"devices": [1], "mig-enabled": False},
        ]},
    }


def test_the_mig_parted_config_map_is_valid():
    layouts = {0: [MigSlot("1g.10gb", 0)]}
    text = yaml.safe_dump(m.mig_parted_config_merge(None, "tessera-x", layouts))
    assert_valid(m.config_map_manifest("tessera-mig-parted-config", "gpu-operator", {"config.yaml": text}))


def test_the_schema_check_has_teeth():
    import kubernetes_validate

    pod = m.pod_manifest(_bind(), "tessera")
    pod["spec"]["schedulername"] = pod["spec"].pop("schedulerName")  # a typo, strictly refused
    with pytest.raises(kubernetes_validate.ValidationError):
        assert_valid(pod)
