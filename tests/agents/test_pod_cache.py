"""Reconcile reads our pods from a watched cache, not a full list per run (issue 13 point 6),
against the fake API server: events applied, 410 Gone relisted, a cold cache listed through."""

import time

import pytest
from kubernetes import client

from agents import actions, services
from agents.backends import JobStatus
from agents.backends.k8s_manifests import MANAGED_SELECTOR
from agents.backends.k8s_pod_cache import PodCache
from agents.backends.kubernetes import KubernetesBackend, KubernetesConfig
from tests.agents.placing import placed, vision_world
from tests.agents.test_cluster_removals import later
from tests.agents.test_kubernetes_backend import _bind


def full_lists(kube) -> int:
    return kube.requests.count(("GET", "/api/v1/pods"))


def wait_until(condition, timeout=10.0, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError(f"{what}: not within {timeout} s")


@pytest.fixture
def cache(backend):
    return PodCache(backend.core, MANAGED_SELECTOR, request_timeout_s=5, watch_s=1)


@pytest.fixture
def watched(kube):
    """A backend as the workers build it: its pods kept by the watch thread."""
    api_client = client.ApiClient(client.Configuration(host=kube.url))
    backend = KubernetesBackend(KubernetesConfig(api_client=api_client, request_timeout_s=5, watch_pods=True))
    backend.pods.watch_s = 1
    yield backend
    backend.pods.stop()
    api_client.close()


def pods(cache) -> dict[str, JobStatus]:
    return {o.pod_name: o.status for o in cache.observations() or []}


def test_a_list_then_the_watch_events_keep_the_picture(backend, cache, kube):
    kube.add_namespace("team-vision")
    backend.bind(_bind())
    backend.bind(_bind(job_id="43", pod_name="job-43-0"))
    assert cache.observations() is None  # cold: never filled
    cache.sync()
    assert pods(cache) == {"job-42-0": JobStatus.PENDING, "job-43-0": JobStatus.PENDING}
    kube.set_pod_phase("team-vision", "job-43-0", "Running")
    kube.finish_deletion("team-vision", "job-42-0")  # PodGC: gone from the API
    backend.bind(_bind(job_id="44", pod_name="job-44-0"))
    cache.sync()
    assert pods(cache) == {"job-43-0": JobStatus.RUNNING, "job-44-0": JobStatus.PENDING}
    assert cache.lists == 1  # the changes came through the watch


def test_a_watch_too_old_to_resume_lists_again(backend, cache, kube):
    kube.add_namespace("team-vision")
    backend.bind(_bind())
    cache.sync()
    kube.set_pod_phase("team-vision", "job-42-0", "Succeeded", exit_code=0)
    kube.compact()  # etcd compaction: the watch's resourceVersion is gone (410)
    cache.sync()
    assert cache.lists == 2 and pods(cache) == {"job-42-0": JobStatus.SUCCEEDED}
    kube.set_pod_phase("team-vision", "job-42-0", "Failed", reason="Evicted")
    cache.sync()  # and resumes watching from the new list
    assert cache.lists == 2 and pods(cache) == {"job-42-0": JobStatus.FAILED}


def test_a_stale_cache_answers_nothing(backend, kube):
    now = [100.0]
    cache = PodCache(backend.core, MANAGED_SELECTOR, request_timeout_s=5, clock=lambda: now[0])
    cache.sync()
    assert cache.observations() == []
    now[0] += 5.1  # no watch has ended cleanly since: the server may be away
    assert cache.observations() is None


def test_a_forked_process_does_not_read_its_parents_picture(backend, cache, kube, monkeypatch):
    cache.sync()
    assert cache.observations() == []
    monkeypatch.setattr("agents.backends.k8s_pod_cache.os.getpid", lambda: -1)
    assert cache.observations() is None and not cache.running()


def test_polls_read_the_cache_once_it_is_warm(watched, kube):
    kube.add_namespace("team-vision")
    watched.bind(_bind())
    assert [o.pod_name for o in watched.poll_observations()] == ["job-42-0"]  # cold: listed
    wait_until(lambda: watched.pods.observations() is not None, what="cache warm")
    before = full_lists(kube)
    kube.set_pod_phase("team-vision", "job-42-0", "Running")
    wait_until(lambda: [o.status for o in watched.poll_observations()] == [JobStatus.RUNNING], what="watched")
    for _ in range(20):
        watched.poll_observations()
    assert full_lists(kube) == before


def test_a_stopped_watch_sends_polls_back_to_listing(watched, kube):
    watched.poll_observations()
    wait_until(lambda: watched.pods.observations() is not None, what="cache warm")
    watched.pods.stop()
    wait_until(lambda: watched.pods.observations() is None, timeout=8, what="cache cold")
    before = full_lists(kube)
    watched.poll_observations()
    # The poll lists for itself and starts the watch again, whose first list runs beside it
    # (asserting +1 right away raced with that thread: CI saw +2).
    wait_until(lambda: watched.pods.observations() is not None, what="cache warm again")
    assert full_lists(kube) == before + 2
    watched.poll_observations()
    assert full_lists(kube) == before + 2


def test_reconcile_requeues_a_pod_the_cluster_removed_through_the_watch(db, watched, kube):
    world = vision_world(kube)
    job, bind, _placement = placed(world)
    assert actions.action_advance(action_id=bind.pk, backend=watched) == "confirmed"
    pod = bind.payload["pod_name"]
    kube.set_pod_phase(world.team.name, pod, "Running")
    assert services.reconcile(backend=watched, now=later())["finished"] == {}
    wait_until(lambda: watched.pods.observations() is not None, what="cache warm")
    before = full_lists(kube)
    kube.finish_deletion(world.team.name, pod)  # PodGC, a drain's kubelet: gone from the API
    wait_until(lambda: watched.pods.observations() == [], what="deletion watched")
    assert services.reconcile(backend=watched, now=later())["finished"] == {"evicted": [job.pk]}
    assert full_lists(kube) == before
    job.refresh_from_db()
    assert job.status == "preempted"


def test_the_watch_goes_cold_while_the_api_server_is_away_and_resumes_after(watched, kube):
    kube.add_namespace("team-vision")
    watched.bind(_bind())
    watched.poll_observations()
    wait_until(lambda: watched.pods.observations() is not None, what="cache warm")
    kube.down()  # restarting: connections refused
    wait_until(lambda: watched.pods.observations() is None, timeout=8, what="cache cold")
    kube.up()
    kube.set_pod_phase("team-vision", "job-42-0", "Running")  # changed while the watch was away
    wait_until(lambda: [o.status for o in watched.pods.observations() or []] == [JobStatus.RUNNING], timeout=20,
               what="watch resumed")
    assert watched.pods.lists == 1  # resumed from its resourceVersion, no new list
