"""Every way a bind can be refused ends in a clear state (issue 13 point 1, issue 15 item 2), against
the fake API server with the real server's behaviours: admission refusals fail the job in the
cluster's words with nothing billed; a conflict requeues it a bounded number of times; an API
server that is restarting is retried and nothing is lost. tests/kube/ does the same for real."""

import pytest

from agents import actions
from agents.actions.bind import MAX_BIND_TRIES
from agents.backends import Refused
from agents.backends.base import TransientBackendError
from agents.backends.k8s_manifests import LABEL_JOB
from billing.models import UsageInterval
from scheduling.models import Job, JobEvent, NativePod
from tests.agents.placing import assert_nothing_billed, placed, vision_world
from tests.agents.test_kubernetes_backend import _bind

NO_CLASS = 'pods "{pod}" is forbidden: no PriorityClass with name training was found'
QUOTA = ('pods "{pod}" is forbidden: exceeded quota: gpus, requested: requests.nvidia.com/gpu=1, '
         'used: requests.nvidia.com/gpu=8, limited: requests.nvidia.com/gpu=8')
LIMIT_RANGE = 'pods "{pod}" is forbidden: maximum memory usage per Container is 16Gi, but limit is 64Gi'


# -- the backend: what each refusal becomes ------------------------------------------------------

@pytest.fixture
def cluster(kube):
    kube.add_namespace("team-vision")
    kube.add_node("gpu-h100-01", {"nvidia.com/gpu.present": "true"})
    return kube


@pytest.mark.parametrize("words", [NO_CLASS, QUOTA, LIMIT_RANGE])
def test_an_admission_refusal_is_refused_in_the_clusters_words(backend, cluster, words):
    cluster.refuse_pods(words.format(pod="job-42-0"))
    with pytest.raises(Refused) as refused:
        backend.bind(_bind())
    assert str(refused.value) == words.format(pod="job-42-0")


def test_an_rbac_denial_of_tesseras_own_rights_is_retried_not_blamed_on_the_job(backend, cluster):
    """A restarting API server denies until its RBAC cache has synced (seen on the real one)."""
    cluster.refuse_pods('pods "job-42-0" is forbidden: User "system:serviceaccount:tessera-system:tessera-backend" '
                        'cannot create resource "pods" in API group "" in the namespace "team-vision"')
    with pytest.raises(TransientBackendError, match="denied Tessera"):
        backend.bind(_bind())


def test_an_api_server_that_refuses_connections_is_transient_and_then_answers(backend, cluster):
    cluster.down()
    with pytest.raises(TransientBackendError):
        backend.bind(_bind())
    with pytest.raises(TransientBackendError):
        backend.poll_observations()
    cluster.up()
    assert backend.bind(_bind()).value == "done"
    assert cluster.pod("team-vision", "job-42-0")["spec"]["nodeName"] == "gpu-h100-01"


# -- the workers' bind step: the job's state, its ledger ------------------------------------------

@pytest.fixture
def world(db, kube):
    return vision_world(kube)


@pytest.mark.parametrize("words", [NO_CLASS, QUOTA, LIMIT_RANGE])
def test_an_admission_refusal_fails_the_job_in_the_clusters_words_and_bills_nothing(backend, kube, world, words):
    job, bind, _placement = placed(world)
    kube.refuse_pods(words.format(pod=bind.payload["pod_name"]))
    assert actions.action_advance(action_id=bind.pk, backend=backend) == "failed"
    job.refresh_from_db()
    assert job.status == "failed" and not job.placements.filter(ended_at__isnull=True).exists()
    event = JobEvent.objects.get(job=job, kind="bind-refused")
    assert words.format(pod=bind.payload["pod_name"]) in event.message
    assert_nothing_billed(job)
    assert actions.action_advance(action_id=bind.pk, backend=backend) == "failed"  # finished for good


def test_a_command_that_does_not_parse_fails_at_once_and_is_never_placed_again(backend, world):
    job, bind, _placement = placed(world, command='python train.py --name "unterminated')
    assert actions.action_advance(action_id=bind.pk, backend=backend) == "failed"
    job.refresh_from_db()
    assert job.status == "failed"
    assert "No closing quotation" in JobEvent.objects.get(job=job, kind="bind-refused").message
    assert_nothing_billed(job)


def test_a_conflicting_bind_is_requeued_a_bounded_number_of_times_then_fails(backend, kube, world):
    job = world.jobs[0]
    for attempt in range(1, MAX_BIND_TRIES + 1):
        job, bind, _placement = placed(world, ago_s=100 - attempt)
        # Another job's pod holds the name the bind wants (a stale pod, another installation).
        stale = {"name": bind.payload["pod_name"], "labels": {"tessera.io/job-id": "999"}}
        kube.add_pod(world.team.name, {"metadata": stale, "spec": {"containers": []}})
        assert actions.action_advance(action_id=bind.pk, backend=backend) == "failed"
        job.refresh_from_db()
        expected = "failed" if attempt == MAX_BIND_TRIES else "pending"
        assert job.status == expected, f"after refusal {attempt}"
    assert JobEvent.objects.filter(job=job, kind="bind-failed").count() == MAX_BIND_TRIES - 1
    assert "refused 3 binds" in JobEvent.objects.get(job=job, kind="bind-refused").message
    assert_nothing_billed(job)


def test_a_bind_while_the_api_server_restarts_is_retried_and_nothing_is_lost(backend, kube, world):
    job, bind, _placement = placed(world)
    kube.down()
    with pytest.raises(TransientBackendError):  # the task retries it with backoff
        actions.action_advance(action_id=bind.pk, backend=backend)
    bind.refresh_from_db()
    job.refresh_from_db()
    assert (bind.state, job.status) == ("requested", "running")
    assert UsageInterval.objects.filter(job=job, ended_at__isnull=True).count() == 1
    kube.up()
    assert actions.action_advance(action_id=bind.pk, backend=backend) == "confirmed"
    assert kube.pod(world.team.name, bind.payload["pod_name"])["spec"]["nodeName"] == world.node.name


@pytest.mark.parametrize("namespace", ["kube-system", "kube-public", "default"])
def test_a_system_namespace_is_never_a_jobs(backend, cluster, namespace):
    cluster.add_namespace(namespace)
    with pytest.raises(Refused, match="not one Tessera may place pods in"):
        backend.bind(_bind(namespace=namespace))
    assert cluster.pod(namespace, "job-42-0") is None and not [r for r in cluster.requests if r[0] == "POST"]


def test_only_the_allowed_namespaces_get_pods(kube, cluster):
    from kubernetes import client

    from agents.backends.kubernetes import KubernetesBackend, KubernetesConfig

    cluster.add_namespace("team-audio")
    with client.ApiClient(client.Configuration(host=kube.url)) as api_client:
        allowed = KubernetesBackend(KubernetesConfig(api_client=api_client, namespaces=frozenset({"team-vision"})))
        with pytest.raises(Refused):
            allowed.bind(_bind(namespace="team-audio"))
        assert allowed.bind(_bind()).value == "done"


def test_a_native_pod_refused_for_good_stays_pending_with_a_warning_event_saying_why(backend, kube, world):
    """Someone else's pod: Tessera neither deletes it nor queues it again (it is labelled as the
    failed job's), so the Event on it is where its owner learns why it waits and what to do."""
    job, bind, _placement = placed(world)
    namespace, pod_name = world.team.name, bind.payload["pod_name"]
    Job.objects.filter(pk=job.pk).update(namespace=namespace)
    kube.add_pod(namespace, {"metadata": {"name": pod_name, "labels": {LABEL_JOB: str(job.pk)}},
                             "spec": {"schedulerName": "tessera", "containers": [{"name": "main", "image": "x"}]}})
    uid = kube.pod(namespace, pod_name)["metadata"]["uid"]
    NativePod.objects.create(job=job, uid=uid, namespace=namespace, name=pod_name, taken_at=job.started_at)
    words = 'admission webhook "policy.example.com" denied the request: GPU pods need a cost-center label'
    kube.refuse_bindings(words, code=400, reason="BadRequest")

    assert actions.action_advance(action_id=bind.pk, backend=backend) == "failed"
    job.refresh_from_db()
    assert job.status == "failed"
    pod = kube.pod(namespace, pod_name)
    assert pod is not None and not pod["spec"].get("nodeName"), "left as it came: Pending, unbound"
    (event,) = [e for e in kube.events.values() if e["involvedObject"].get("uid") == uid]
    assert (event["type"], event["reason"]) == ("Warning", "FailedScheduling")
    assert words in event["message"] and f"Tessera job {job.pk} failed" in event["message"]
    assert "will not queue it again" in event["message"]
    assert_nothing_billed(job)


def test_a_native_pod_whose_bind_may_pass_later_gets_no_event(backend, kube, world):
    job, bind, _placement = placed(world)
    namespace, pod_name = world.team.name, bind.payload["pod_name"]
    Job.objects.filter(pk=job.pk).update(namespace=namespace)
    kube.add_pod(namespace, {"metadata": {"name": pod_name, "labels": {LABEL_JOB: str(job.pk)}},
                             "spec": {"schedulerName": "tessera", "nodeName": "elsewhere",
                                      "containers": [{"name": "main", "image": "x"}]}})
    uid = kube.pod(namespace, pod_name)["metadata"]["uid"]
    NativePod.objects.create(job=job, uid=uid, namespace=namespace, name=pod_name, taken_at=job.started_at)
    assert actions.action_advance(action_id=bind.pk, backend=backend) == "failed"  # a conflict: requeued
    job.refresh_from_db()
    assert job.status == "pending"
    assert not [e for e in kube.events.values() if e["involvedObject"].get("uid") == uid]
