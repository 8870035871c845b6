"""Events on a job's pods (issue 13, point 6), against the fake API server: what Tessera did shows
in `kubectl describe pod`, a repeat is counted on one event, and a cluster that refuses events
never fails the action. tests/kube/test_inventory.py reads them back from the real API server."""

from agents.backends import CheckpointRequest, Outcome, PreemptRequest, k8s_events
from tests.agents.fake_kube_wire import ApiError
from tests.agents.k8s_schema import assert_valid
from tests.agents.test_kubernetes_backend import _bind, cluster  # noqa: F401 - the fixture

NS, POD = "team-vision", "job-42-0"


def events(kube, reason=None) -> list[dict]:
    return [e for (ns, _name), e in sorted(kube.events.items())
            if ns == NS and e["involvedObject"]["name"] == POD and reason in (None, e["reason"])]


def test_the_event_is_a_valid_core_v1_event_about_the_pod():
    body = k8s_events.event_manifest(pod={"name": POD, "namespace": NS, "uid": "u-1"}, reason="Scheduled",
                            message="x" * 5000, warning=False, at="2026-12-04T10:00:00Z", instance="worker-1")
    assert_valid(body)
    assert len(body["message"]) == 1024 and body["type"] == "Normal"
    assert body["involvedObject"] == {"apiVersion": "v1", "kind": "Pod", "name": POD, "namespace": NS, "uid": "u-1"}


def test_a_bind_says_scheduled_on_the_pod(backend, cluster):  # noqa: F811
    assert backend.bind(_bind()) is Outcome.DONE
    (event,) = events(cluster)
    assert (event["reason"], event["type"], event["count"]) == ("Scheduled", "Normal", 1)
    assert event["message"] == f"Successfully assigned {NS}/{POD} to gpu-h100-01 (2 GPU(s))"
    assert event["involvedObject"]["uid"] == cluster.pod(NS, POD)["metadata"]["uid"]
    assert event["source"] == {"component": "tessera"} and event["reportingComponent"] == "tessera"
    assert backend.bind(_bind()) is Outcome.ALREADY_DONE
    assert len(events(cluster)) == 1  # nothing new happened: nothing new said


def test_a_checkpoint_request_and_a_preemption_are_said_on_the_pod(backend, cluster):  # noqa: F811
    backend.bind(_bind())
    ask = CheckpointRequest(job_id="42", pod_name=POD, namespace=NS, checkpoint_id="c-1", reason="interval")
    assert backend.request_checkpoint(ask) is Outcome.DONE
    (asked,) = events(cluster, "CheckpointRequested")
    assert asked["message"] == "Tessera asked for checkpoint c-1 (interval)"
    stop = PreemptRequest(job_id="42", pod_name=POD, namespace=NS, grace_seconds=90, reason="preempt")
    assert backend.preempt(stop) is Outcome.DONE
    (preempted,) = events(cluster, "Preempted")
    assert preempted["message"] == "Preempted by Tessera (preempt): stopping with 90 s to checkpoint"


def test_a_repeat_is_counted_on_one_event(backend, cluster):  # noqa: F811
    backend.bind(_bind())
    pod = backend._read_pod(NS, POD)
    first = backend.events.record(pod, "Waiting", "same words")
    assert backend.events.record(pod, "Waiting", "same words") == first
    assert backend.events.record(pod, "Waiting", "same words") == first
    (event,) = events(cluster, "Waiting")
    assert event["count"] == 3 and event["lastTimestamp"] >= event["firstTimestamp"]


def test_a_cluster_that_refuses_events_never_fails_the_action(backend, cluster):  # noqa: F811
    cluster.event_refusal = ApiError(403, "Forbidden", 'events is forbidden: User "system:serviceaccount:'
                                                      'tessera-system:tessera-backend" cannot create resource')
    assert backend.bind(_bind()) is Outcome.DONE
    assert cluster.pod(NS, POD)["spec"]["nodeName"] == "gpu-h100-01"
    assert cluster.events == {}
