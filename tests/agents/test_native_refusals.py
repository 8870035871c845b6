"""A refused native pod is told why once (agents/native.py): every poll looks at it again, but a
poll that finds the same refusal says nothing new; a new reason is said. The real control plane
test (tests/kube/test_native_gangs.py) reads the one Event back from the API server."""

from dataclasses import dataclass, field

import pytest
from django.core.cache import cache

from agents.backends import Outcome
from agents.backends.k8s_native import NativePod, RefusedPod
from agents.native import native_intake
from portal.models import TeamNamespace
from tests.scheduling.test_native_jobs import team  # noqa: F401 - a fixture

pytestmark = pytest.mark.django_db


@dataclass
class Cluster:
    """The intake's side of a backend: the pods it lists, the Events it was asked for."""

    pods: list = field(default_factory=list)
    said: list[tuple[str, str]] = field(default_factory=list)

    def native_pods(self):
        return list(self.pods)

    def namespace_allowed(self, namespace: str) -> bool:
        return True

    def native_refuse(self, refused: RefusedPod) -> None:
        self.said.append((refused.name, refused.reason))

    def native_label(self, pod, job_id: str, team_name: str) -> Outcome:
        self.pods.remove(pod)  # labelled: out of the intake's list, as on a cluster
        return Outcome.DONE


@pytest.fixture(autouse=True)
def _forget():
    cache.clear()
    yield
    cache.clear()


def member(index: int) -> NativePod:
    return NativePod(
        uid=f"u-{index}", namespace="ml", name=f"ddp-{index}", gpus=1, cpu_cores=1, group="ddp", min_member=2
    )


def test_a_pod_beyond_its_gang_is_told_once_over_two_polls(team):  # noqa: F811
    TeamNamespace.objects.create(namespace="ml", team=team)
    cluster = Cluster(pods=[member(0), member(1), member(2)])
    for _poll in range(2):
        assert native_intake(backend=cluster)["refused"] == {"InvalidPodGroup": 1}
    assert cluster.said == [("ddp-2", "InvalidPodGroup")]


def test_a_new_reason_is_said_and_the_same_one_is_not_said_again(team):  # noqa: F811
    lost = NativePod(uid="u-9", namespace="stray", name="lost-0", gpus=1, cpu_cores=1)
    unreadable = RefusedPod("u-9", "stray", "lost-0", "NoGpuRequest", "The pod asks for no GPU.")
    cluster = Cluster(pods=[lost])
    native_intake(backend=cluster)
    native_intake(backend=cluster)
    cluster.pods = [unreadable]  # the same pod, now read otherwise
    native_intake(backend=cluster)
    native_intake(backend=cluster)
    assert cluster.said == [("lost-0", "NamespaceNotMapped"), ("lost-0", "NoGpuRequest")]
