"""A pod read from the Kubernetes API says when it started and when its containers ended, so a job
is billed from its pod's start and until its last container's end, not until a poll noticed."""

from datetime import UTC, datetime

from kubernetes.client import (
    V1ContainerState,
    V1ContainerStateRunning,
    V1ContainerStateTerminated,
    V1ContainerStatus,
    V1ObjectMeta,
    V1Pod,
    V1PodSpec,
    V1PodStatus,
)

from agents.backends import k8s_manifests as m
from agents.backends.base import JobStatus
from agents.backends.k8s_reading import pod_observation

STARTED = datetime(2026, 12, 4, 10, 0, 0, tzinfo=UTC)


def _container(name, *, ended=None):
    state = V1ContainerState(terminated=V1ContainerStateTerminated(exit_code=0, reason="Completed",
                                                                   finished_at=ended)) if ended else \
        V1ContainerState(running=V1ContainerStateRunning(started_at=STARTED))
    return V1ContainerStatus(name=name, image="i", image_id="", ready=ended is None, restart_count=0, state=state)


def _pod(phase, containers):
    return V1Pod(metadata=V1ObjectMeta(name="vision-1-0", namespace="vision", labels={m.LABEL_JOB: "1"}),
                 spec=V1PodSpec(containers=[], node_name="r-01"),
                 status=V1PodStatus(phase=phase, start_time=STARTED, container_statuses=containers))


def test_a_succeeded_pod_ends_when_its_last_container_ended():
    first, last = datetime(2026, 12, 4, 10, 5, tzinfo=UTC), datetime(2026, 12, 4, 10, 7, tzinfo=UTC)
    seen = pod_observation(_pod("Succeeded", [_container("a", ended=last), _container("b", ended=first)]))
    assert seen.status == JobStatus.SUCCEEDED
    assert seen.started_at == STARTED.timestamp()
    assert seen.finished_at == last.timestamp()


def test_a_pod_with_a_container_still_running_has_no_end():
    ended = datetime(2026, 12, 4, 10, 5, tzinfo=UTC)
    seen = pod_observation(_pod("Running", [_container("a", ended=ended), _container("b")]))
    assert seen.finished_at is None
    assert seen.started_at == STARTED.timestamp()


def test_a_pod_not_yet_started_has_neither():
    pod = V1Pod(metadata=V1ObjectMeta(name="p", namespace="vision", labels={m.LABEL_JOB: "1"}),
                spec=V1PodSpec(containers=[]), status=V1PodStatus(phase="Pending"))
    seen = pod_observation(pod)
    assert (seen.started_at, seen.finished_at) == (None, None)
