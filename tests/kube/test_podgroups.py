"""The gang objects on the real control plane: the vendored scheduler-plugins PodGroup CRD installs
and validates minMember, the backend reads PodGroups with deploy/rbac.yaml's rights (and may not
write them), and API discovery finds no Workload API on v1.20."""

from __future__ import annotations

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from agents.backends.k8s_gangs import PODGROUP_GROUP, PODGROUP_PLURAL, PODGROUP_VERSION, podgroup_min_member
from agents.backends.k8s_podgroups import PodGroups
from tests.kube.conftest import TEAM


def podgroup(name: str, min_member) -> dict:
    return {
        "apiVersion": f"{PODGROUP_GROUP}/{PODGROUP_VERSION}",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": TEAM},
        "spec": {"minMember": min_member},
    }


@pytest.fixture
def backend_groups(control_plane):
    api_client = control_plane.backend_client()
    yield PodGroups(api_client, request_timeout_s=30)
    api_client.close()


@pytest.fixture
def custom(kube_admin, podgroup_crd):
    objects = client.CustomObjectsApi(kube_admin)
    yield objects
    for item in objects.list_namespaced_custom_object(PODGROUP_GROUP, PODGROUP_VERSION, TEAM, PODGROUP_PLURAL)["items"]:
        objects.delete_namespaced_custom_object(
            PODGROUP_GROUP, PODGROUP_VERSION, TEAM, PODGROUP_PLURAL, item["metadata"]["name"]
        )


def create(custom, body: dict) -> None:
    custom.create_namespaced_custom_object(PODGROUP_GROUP, PODGROUP_VERSION, TEAM, PODGROUP_PLURAL, body)


def test_the_backend_reads_a_podgroups_min_member(custom, backend_groups):
    create(custom, podgroup("ddp", 4))
    found = backend_groups.in_namespace(TEAM)
    assert list(found) == ["ddp"]
    assert podgroup_min_member(found["ddp"]) == 4
    assert backend_groups.in_namespace("default") == {}


@pytest.mark.parametrize("min_member", [0, "four"])
def test_the_crds_schema_refuses_a_min_member_below_one(custom, min_member):
    with pytest.raises(ApiException) as refused:
        create(custom, podgroup("bad", min_member))
    assert refused.value.status == 422 and "minMember" in refused.value.body


def test_the_backend_may_not_write_podgroups(custom, control_plane):
    with control_plane.backend_client() as api_client:
        with pytest.raises(ApiException) as denied:
            create(client.CustomObjectsApi(api_client), podgroup("mine", 2))
    assert denied.value.status == 403


def test_discovery_finds_no_workload_api_on_v1_20(backend_groups):
    assert backend_groups.workload_api() is None
    assert backend_groups.podgroup_api() is None  # no Kubernetes PodGroups: nothing is listed
    assert backend_groups.scheduling_in_namespace(TEAM) == {}


def test_discovery_reads_what_each_scheduling_version_serves(backend_groups):
    """The check above is no accident of a failed lookup: v1.20's scheduling.k8s.io serves priority classes."""
    assert backend_groups._resources("scheduling.k8s.io/v1") == ["priorityclasses"]
    assert backend_groups._resources("scheduling.k8s.io/v1alpha9") == []
