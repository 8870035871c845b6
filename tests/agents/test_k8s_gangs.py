"""Reading gangs of native pods: the scheduler-plugins pod-group label, the PodGroup object's
minMember, the tessera.io/min-member fallback, and the Workload API found by discovery."""

import hashlib
from pathlib import Path

import pytest
import yaml

from agents.backends.k8s_gangs import (
    MIN_MEMBER_ANNOTATION,
    POD_GROUP_LABEL,
    PODGROUP_GROUP,
    PODGROUP_PLURAL,
    PODGROUP_VERSION,
    GangError,
    annotation_min_member,
    pod_group_name,
    podgroup_min_member,
    workload_api_version,
)

CRD = Path(__file__).resolve().parents[1] / "kube" / "crds" / "podgroups.scheduling.x-k8s.io.yaml"


def podgroup(name="train", **spec):
    return {
        "apiVersion": f"{PODGROUP_GROUP}/{PODGROUP_VERSION}",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "vision"},
        "spec": spec,
    }


def test_the_vendored_crd_is_as_published_and_names_what_we_read():
    recorded = (CRD.parent / "README.md").read_text()
    assert f"`{CRD.name}`: `{hashlib.sha256(CRD.read_bytes()).hexdigest()}`" in recorded
    crd = yaml.safe_load(CRD.read_text())
    assert crd["spec"]["group"] == PODGROUP_GROUP and crd["spec"]["names"]["plural"] == PODGROUP_PLURAL
    (version,) = crd["spec"]["versions"]
    assert version["name"] == PODGROUP_VERSION
    assert version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["minMember"]["minimum"] == 1


def test_a_pod_without_the_label_is_in_no_group():
    assert pod_group_name({"app": "x"}) is None and pod_group_name(None) is None
    assert pod_group_name({POD_GROUP_LABEL: "train.v2"}) == "train.v2"


@pytest.mark.parametrize("name", ["Train", "a_b", "-x", "x" * 64])
def test_a_label_that_names_no_podgroup_is_refused(name):
    with pytest.raises(GangError, match=POD_GROUP_LABEL):
        pod_group_name({POD_GROUP_LABEL: name})


def test_the_podgroup_object_says_min_member():
    assert podgroup_min_member(podgroup(minMember=4)) == 4


@pytest.mark.parametrize("spec", [{}, {"minMember": 0}, {"minMember": "4"}, {"minMember": True}, {"minMember": 4.5}])
def test_a_podgroup_without_a_usable_min_member_is_refused(spec):
    with pytest.raises(GangError, match="PodGroup train"):
        podgroup_min_member(podgroup(**spec))


def test_the_annotation_is_the_fallback():
    assert annotation_min_member({MIN_MEMBER_ANNOTATION: " 4 "}) == 4
    assert annotation_min_member({}) is None and annotation_min_member(None) is None


@pytest.mark.parametrize("value", ["four", "4.0", "-1", "0", "", "99999"])
def test_a_bad_annotation_is_refused_with_its_value(value):
    with pytest.raises(GangError, match=MIN_MEMBER_ANNOTATION):
        annotation_min_member({MIN_MEMBER_ANNOTATION: value})


def test_the_workload_api_is_found_by_discovery_only_where_served():
    v120 = {
        "scheduling.k8s.io/v1": ["priorityclasses"],
        "scheduling.k8s.io/v1beta1": ["priorityclasses"],
        f"{PODGROUP_GROUP}/{PODGROUP_VERSION}": ["podgroups"],
    }
    assert workload_api_version(v120) is None
    v135 = {**v120, "scheduling.k8s.io/v1alpha1": ["workloads"]}
    assert workload_api_version(v135) == "scheduling.k8s.io/v1alpha1"
    later = {
        **v135,
        "scheduling.k8s.io/v1alpha2": ["workloads", "podgroups"],
        "scheduling.k8s.io/v1beta1": ["priorityclasses", "workloads"],
    }
    assert workload_api_version(later) == "scheduling.k8s.io/v1beta1"
