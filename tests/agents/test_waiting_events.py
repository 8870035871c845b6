"""Why a job waits, as an Event in its team's namespace (issue 13 point 6), against the fake API
server: once per reason, not per cycle; a return to an earlier reason counts on its event; bounded."""

import pytest
from kubernetes import client

from agents.backends.kubernetes import KubernetesBackend, KubernetesConfig
from agents.backends.simulated import SimulatedBackend
from agents.waiting_events import waiting_events_record
from scheduling.models import Job
from tests.billing.factories import make_world

QUOTA = "Its team uses its whole guarantee (2 GPUs) and no GPU is idle to borrow."
NO_GPUS = "Not enough free whole GPUs on any node it may use: 4 wanted, 2 at most free on one node."


@pytest.fixture
def world(db, kube):
    world = make_world(jobs=4, name="vision")
    kube.add_namespace(world.team.name)
    return world


def waits(job: Job, code: str, reason: str) -> None:
    Job.objects.filter(pk=job.pk).update(status="pending", pending_reason_code=code, pending_reason=reason)


def waiting_events(kube) -> list[dict]:
    return [event for event in kube.events.values() if event["reason"] == "Waiting"]


def test_a_waiting_job_is_told_once_per_reason_not_per_cycle(world, backend, kube):
    job = world.jobs[0]
    waits(job, "quota-no-idle", QUOTA)
    assert waiting_events_record(backend) == 1
    before = len(kube.requests)
    waits(job, "quota-no-idle", QUOTA.replace("2 GPUs", "3 GPUs"))  # the same reason in other figures
    assert waiting_events_record(backend) == 0 and waiting_events_record(backend) == 0
    assert len(kube.requests) == before  # nothing sent while the reason stays
    (event,) = waiting_events(kube)
    namespace = world.team.name
    assert event["metadata"]["namespace"] == namespace and event["message"] == QUOTA
    assert event["involvedObject"] == {"apiVersion": "tessera.io/v1", "kind": "TesseraJob",
                                       "name": f"job-{job.pk}", "namespace": namespace}
    assert (event["type"], event["count"], event["source"]["component"]) == ("Normal", 1, "tessera")
    assert event["metadata"]["labels"]["tessera.io/job-id"] == str(job.pk)


def test_a_new_reason_is_a_new_event_and_a_return_counts_on_the_first(world, backend, kube):
    job = world.jobs[0]
    waits(job, "quota-no-idle", QUOTA)
    waiting_events_record(backend)
    waits(job, "no-free-gpus", NO_GPUS)
    assert waiting_events_record(backend) == 1
    assert sorted(e["message"] for e in waiting_events(kube)) == sorted([QUOTA, NO_GPUS])
    waits(job, "quota-no-idle", QUOTA)
    assert waiting_events_record(backend) == 1
    counts = {e["message"]: e["count"] for e in waiting_events(kube)}
    assert counts == {QUOTA: 2, NO_GPUS: 1}


def test_new_jobs_and_running_ones_are_not_told(world, backend, kube):
    waits(world.jobs[0], "new", "Submitted; no scheduling cycle has looked at it yet.")
    Job.objects.filter(pk=world.jobs[1].pk).update(status="running", pending_reason_code="quota-no-idle")
    assert waiting_events_record(backend) == 0 and waiting_events(kube) == []


def test_a_cycle_sends_at_most_the_limit_and_the_rest_follow(world, backend, kube):
    for job in world.jobs:  # 4
        waits(job, "quota-no-idle", QUOTA)
    assert waiting_events_record(backend, limit=3) == 3
    assert waiting_events_record(backend, limit=3) == 1
    assert waiting_events_record(backend, limit=3) == 0
    assert len(waiting_events(kube)) == 4


def test_a_namespace_not_allowed_or_a_refusal_is_told_nowhere_and_not_retried(world, kube):
    waits(world.jobs[0], "quota-no-idle", QUOTA)
    api_client = client.ApiClient(client.Configuration(host=kube.url))
    fenced = KubernetesBackend(KubernetesConfig(api_client=api_client, request_timeout_s=5,
                                                namespaces=frozenset({"search"})))
    assert waiting_events_record(fenced) == 1 and waiting_events(kube) == []
    assert waiting_events_record(fenced) == 0  # not every cycle again
    api_client.close()


def test_the_simulated_cluster_has_nowhere_to_tell(tmp_path):
    assert SimulatedBackend(tmp_path / "state.json").record_waiting("1", "vision", "quota-no-idle", QUOTA, 1) is False


def test_the_cycle_task_tells_after_its_cycle_and_a_broken_cluster_never_fails_it(world, backend, kube, settings,
                                                                                  monkeypatch):
    from agents import runtime, tasks

    settings.TESSERA_BACKEND = "kubernetes"
    monkeypatch.setattr(runtime, "backend", lambda: backend)
    Job.objects.filter(pk__in=[job.pk for job in world.jobs]).update(gpus=64)  # more than the cluster has
    assert tasks.run_cycle.apply().get()["ran"]
    told = {e["involvedObject"]["name"] for e in waiting_events(kube)}
    assert told == {f"job-{job.pk}" for job in world.jobs}
    assert all(e["message"] == Job.objects.get(pk=int(e["metadata"]["labels"]["tessera.io/job-id"])).pending_reason
               for e in waiting_events(kube))
    monkeypatch.setattr(runtime, "backend", lambda: (_ for _ in ()).throw(RuntimeError("no cluster")))
    assert tasks.run_cycle.apply().get()["ran"]
