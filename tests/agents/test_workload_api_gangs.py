"""Gangs from the Kubernetes Workload API (agents/backends/k8s_gangs.py), against a fake API server
that serves it as v1.37 does and checks every object against the official v1.37 schemas
(tests/agents/fake_workload_api.py): a pod names its PodGroup in spec.schedulingGroup, the PodGroup's
gang policy gives minCount, discovery finds the served version. The real control plane (v1.20)
serves none of it: tests/kube/test_podgroups.py checks that discovery says so there."""

import pytest
from kubernetes import client

from agents.backends import Outcome
from agents.backends import k8s_manifests as m
from agents.backends.k8s_gangs import (
    GangError,
    scheduling_group_name,
    scheduling_podgroup_min_count,
    workload_api_version,
)
from agents.backends.kubernetes import KubernetesBackend, KubernetesConfig
from agents.native import native_channel, native_intake
from portal.models import TeamNamespace
from scheduling.models import Job
from tests.agents.fake_workload_api import GROUP, VERSION, FakeWorkloadApi, assert_valid
from tests.scheduling.test_native_jobs import team  # noqa: F401 - a fixture

NS = "ml"


def workload(name: str, templates: dict) -> dict:
    """A Workload as a controller (a Job's, a JobSet's) writes it: a template per pod group."""
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "controllerRef": {"apiGroup": "batch", "kind": "Job", "name": name},
            "podGroupTemplates": [{"name": t, "schedulingPolicy": p} for t, p in templates.items()],
        },
    }


def podgroup(name: str, policy: dict, workload_name: str = "train", template: str = "workers") -> dict:
    """The runtime PodGroup the controller makes from a template, its policy copied in."""
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"workloadRef": {"workloadName": workload_name, "templateName": template}, "schedulingPolicy": policy},
    }


def pod(name: str, group: str | None) -> dict:
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "schedulerName": "tessera",
            "containers": [{"name": "train", "image": "pytorch:24", "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
        },
    }
    if group:
        body["spec"]["schedulingGroup"] = {"podGroupName": group}
    return body


GANG, BASIC = {"gang": {"minCount": 2}}, {"basic": {}}


def test_the_objects_we_read_are_valid_v1_37_objects():
    assert_valid(workload("train", {"workers": GANG}))
    assert_valid(podgroup("train-workers-0", GANG))
    assert_valid(pod("train-0", "train-workers-0"))


def test_a_podgroups_gang_policy_gives_its_count_and_basic_none():
    assert scheduling_podgroup_min_count(podgroup("g", GANG)) == 2
    assert scheduling_podgroup_min_count(podgroup("b", BASIC)) is None
    for bad in ({"gang": {"minCount": 0}}, {"gang": {}}, {}):
        with pytest.raises(GangError):
            scheduling_podgroup_min_count(podgroup("bad", bad))
    assert scheduling_group_name("train-workers-0") == "scheduling.k8s.io/train-workers-0"
    assert scheduling_group_name(None) is None
    with pytest.raises(GangError):
        scheduling_group_name("Not_A_Name")


def test_discovery_prefers_the_newest_version_serving_podgroups():
    served = {
        "scheduling.k8s.io/v1": ["priorityclasses"],
        "scheduling.k8s.io/v1alpha2": ["workloads", "podgroups"],
        "scheduling.k8s.io/v1beta1": ["workloads", "podgroups"],
        "scheduling.x-k8s.io/v1alpha1": ["podgroups"],  # scheduler-plugins' own: another group
    }
    assert workload_api_version(served, "podgroups") == "scheduling.k8s.io/v1beta1"
    assert workload_api_version({"scheduling.k8s.io/v1": ["priorityclasses"]}, "podgroups") is None


@pytest.fixture
def served(request):
    api = FakeWorkloadApi(served=getattr(request, "param", True))
    api.url = api.start()
    api.add_namespace(NS)
    api_client = client.ApiClient(client.Configuration(host=api.url))
    backend = KubernetesBackend(KubernetesConfig(api_client=api_client, request_timeout_s=5))
    yield api, backend, client.CustomObjectsApi(api_client)
    api_client.close()
    api.stop()


def create(objects: client.CustomObjectsApi, body: dict) -> None:
    plural = {"Workload": "workloads", "PodGroup": "podgroups"}[body["kind"]]
    objects.create_namespaced_custom_object(GROUP, VERSION, NS, plural, body)


def labelled_by_hand(api: FakeWorkloadApi, backend: KubernetesBackend) -> None:
    """The fake takes merge patches only; the intake's label is a JSON patch (uid test): set it in
    the fake's store, as the real server would, so the next list leaves the pod out."""

    def native_label(found, job_id: str, team_name: str) -> Outcome:
        api.pods[(found.namespace, found.name)]["metadata"].setdefault("labels", {})[m.LABEL_JOB] = job_id
        return Outcome.DONE

    backend.native_label = native_label


@pytest.mark.django_db
def test_pods_naming_a_gang_podgroup_are_one_job_sized_by_its_min_count(served, team):  # noqa: F811
    api, backend, objects = served
    TeamNamespace.objects.create(namespace=NS, team=team)
    labelled_by_hand(api, backend)
    create(objects, workload("train", {"workers": GANG, "driver": BASIC}))
    create(objects, podgroup("train-workers-0", GANG))
    create(objects, podgroup("train-driver-0", BASIC, template="driver"))
    for body in (pod("w-0", "train-workers-0"), pod("driver", "train-driver-0"), pod("late-0", "late")):
        assert_valid(body)
        backend.core.create_namespaced_pod(NS, body)

    native_intake(backend=backend)
    gang, driver, late = (Job.objects.get(native_pods__name=name) for name in ("w-0", "driver", "late-0"))
    assert (gang.members, gang.pending_reason_code) == (2, "gang-incomplete")
    assert gang.pending_reason == (
        "Pod group scheduling.k8s.io/train-workers-0: 1 of 2 members exist; none is placed before all 2 do."
    )
    assert driver.members in (None, 1) and driver.native_pods.get().group == ""  # basic: a pod on its own
    assert "PodGroup late (scheduling.k8s.io), which they name in spec.schedulingGroup, is not there" in (
        late.pending_reason
    )

    backend.core.create_namespaced_pod(NS, pod("w-1", "train-workers-0"))
    native_intake(backend=backend)
    gang.refresh_from_db()
    assert (gang.members, gang.gpus, gang.native_pods.count(), gang.pending_reason_code) == (2, 2, 2, "new")


def test_an_invalid_object_is_refused_as_the_api_server_would(served):
    _api, _backend, objects = served
    with pytest.raises(client.ApiException) as refused:
        create(objects, {**podgroup("bad", GANG), "spec": {"schedulingPolicy": {"gangs": {}}}})
    assert refused.value.status == 422


@pytest.mark.parametrize("served", [False], indirect=True)
def test_where_the_api_is_not_served_nothing_is_listed(served):
    api, backend, _objects = served
    assert backend.podgroups.podgroup_api() is None
    assert backend.scheduling_pod_groups(NS) == {}
    assert not [path for _method, path in api.requests if path.endswith("/podgroups")]


def with_channel(body: dict, secret: str) -> dict:
    """The pod with the checkpoint channel's volume (README, "Bring your own workloads")."""
    sources = [{"secret": {"name": secret, "optional": True}}]
    body["spec"]["volumes"] = [{"name": "tessera", "projected": {"sources": sources}}]
    return body


@pytest.mark.django_db
def test_a_basic_podgroups_pod_has_one_channel_name_at_intake_and_at_bind(served, team):  # noqa: F811
    """A `basic` PodGroup's pods are jobs of their own: the channel is theirs (the pod's name here,
    it has no owner), not the group's, which several jobs would share. The intake reads the volume
    with the name the bind gives the Secret it creates (native_channel)."""
    api, backend, objects = served
    TeamNamespace.objects.create(namespace=NS, team=team)
    labelled_by_hand(api, backend)
    create(objects, podgroup("train-driver-0", BASIC, template="driver"))
    backend.core.create_namespaced_pod(NS, with_channel(pod("own", "train-driver-0"), "tessera-checkpoint-own"))
    backend.core.create_namespaced_pod(
        NS, with_channel(pod("groups", "train-driver-0"), "tessera-checkpoint-train-driver-0")
    )

    native_intake(backend=backend)
    own, groups = (Job.objects.get(native_pods__name=name) for name in ("own", "groups"))
    assert own.checkpoint_interval_s == 3600 and native_channel(own, "own") == "tessera-checkpoint-own"
    assert groups.checkpoint_interval_s is None and native_channel(groups, "groups") == ""
