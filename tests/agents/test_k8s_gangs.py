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
    Gang,
    GangError,
    gang_waiting,
    group_gang,
    pod_gang,
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


def test_a_pod_without_the_label_is_no_gang():
    assert pod_gang({"app": "x"}, {MIN_MEMBER_ANNOTATION: "4"}, None) is None
    assert pod_gang(None, None, None) is None


def test_the_podgroup_object_says_min_member_and_beats_the_annotation():
    gang = pod_gang({POD_GROUP_LABEL: "train"}, {MIN_MEMBER_ANNOTATION: "2"}, podgroup(minMember=4))
    assert (gang.name, gang.min_member) == ("train", 4)
    assert gang.source == "PodGroup train (scheduling.x-k8s.io/v1alpha1)"


def test_the_annotation_is_the_fallback_where_no_podgroup_exists():
    gang = pod_gang({POD_GROUP_LABEL: "train"}, {MIN_MEMBER_ANNOTATION: " 4 "}, None)
    assert gang == Gang("train", 4, f"annotation {MIN_MEMBER_ANNOTATION}")


def test_with_neither_the_count_is_unknown():
    gang = pod_gang({POD_GROUP_LABEL: "train"}, {}, None)
    assert gang.min_member is None
    assert "create PodGroup train" in gang_waiting(gang, 2)


@pytest.mark.parametrize("value", ["four", "4.0", "-1", "0", "", "99999"])
def test_a_bad_annotation_is_refused_with_its_value(value):
    with pytest.raises(GangError, match=MIN_MEMBER_ANNOTATION):
        pod_gang({POD_GROUP_LABEL: "train"}, {MIN_MEMBER_ANNOTATION: value}, None)


@pytest.mark.parametrize("spec", [{}, {"minMember": 0}, {"minMember": "4"}, {"minMember": True}, {"minMember": 4.5}])
def test_a_podgroup_without_a_usable_min_member_is_refused(spec):
    with pytest.raises(GangError, match="PodGroup train"):
        pod_gang({POD_GROUP_LABEL: "train"}, None, podgroup(**spec))


@pytest.mark.parametrize("name", ["Train", "a_b", "-x", "x" * 64])
def test_a_label_that_names_no_podgroup_is_refused(name):
    with pytest.raises(GangError, match=POD_GROUP_LABEL):
        pod_gang({POD_GROUP_LABEL: name}, None, None)


def test_members_that_disagree_on_the_annotation_are_refused():
    said = [pod_gang({POD_GROUP_LABEL: "g"}, {MIN_MEMBER_ANNOTATION: n}, None) for n in ("4", "3", "4")]
    with pytest.raises(GangError, match="disagree on tessera.io/min-member: 3, 4"):
        group_gang("g", said)


def test_a_member_without_the_annotation_takes_the_others_count():
    said = [pod_gang({POD_GROUP_LABEL: "g"}, annotations, None) for annotations in ({}, {MIN_MEMBER_ANNOTATION: "3"})]
    assert group_gang("g", said).min_member == 3
    assert group_gang("g", [said[0]]).min_member is None


def test_the_podgroup_object_decides_for_the_whole_group():
    said = [
        pod_gang({POD_GROUP_LABEL: "g"}, {MIN_MEMBER_ANNOTATION: "2"}, podgroup("g", minMember=4)),
        pod_gang({POD_GROUP_LABEL: "g"}, {MIN_MEMBER_ANNOTATION: "3"}, None),
    ]
    assert group_gang("g", said).min_member == 4


def test_the_waiting_sentence_counts_members():
    gang = Gang("train", 4, "PodGroup train")
    assert gang_waiting(gang, 3) == "Gang train: 3 of 4 members exist; none is placed before all 4 do."
    assert gang_waiting(gang, 4) is None and gang_waiting(gang, 5) is None


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
