"""The workers end a run's headless Service once the run is over, and never one whose run holds its
GPUs, even one bound after the reconcile read its jobs (against the fake API server)."""

import pytest

from agents.rendezvous import job_rendezvous, rendezvous_service, services_end
from scheduling.models import ActionRequest
from tests.agents.placing import placed, vision_world


@pytest.fixture
def running(db, kube):
    job, _bind, _placement = placed(vision_world(kube))
    return job


def service(kube, namespace: str, name: str, job_id: str) -> None:
    kube.services[(namespace, name)] = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {
                "app.kubernetes.io/managed-by": "tessera",
                "tessera.io/job-id": job_id,
                "tessera.io/rendezvous": name,
            },
        },
    }


def test_only_the_services_of_runs_that_are_over_go(running, backend, kube):
    team, current = running.team.name, rendezvous_service(running)
    service(kube, team, current, str(running.pk))
    service(kube, team, f"tessera-{running.pk}-1000", str(running.pk))  # an earlier run of the same job
    service(kube, team, "tessera-999-1000", "999")  # a job that is gone
    assert services_end(backend, [running]) == 2
    assert set(kube.services) == {(team, current)}
    assert services_end(backend, [running]) == 0  # a second look changes nothing


def test_a_run_bound_after_the_jobs_were_read_keeps_its_service(running, backend, kube):
    service(kube, running.team.name, rendezvous_service(running), str(running.pk))
    assert services_end(backend, holding=[]) == 0  # read again from the database: it holds its GPUs
    assert (running.team.name, rendezvous_service(running)) in kube.services


def test_a_finished_jobs_service_goes(running, backend, kube):
    service(kube, running.team.name, rendezvous_service(running), str(running.pk))
    type(running).objects.filter(pk=running.pk).update(status="completed")
    assert services_end(backend, holding=[]) == 1 and not kube.services


def test_ranks_count_each_members_gpus_in_member_order(running):
    def bind(member: int, gpus: int, profile=None):
        allocations = [{"gpu_index": i, "milli": 1000, "mig_profile": profile, "mig_start": None} for i in range(gpus)]
        return ActionRequest(
            payload={
                "job_id": running.pk,
                "member": member,
                "node": f"n{member}",
                "placements": [],
                "pod_name": f"p{member}",
                "allocations": allocations,
            }
        )

    binds = [bind(0, 8), bind(1, 4), bind(2, 1, profile="3g.40gb")]  # a slice runs one process
    ranks = [job_rendezvous(running, binds, member) for member in range(3)]
    assert [(r.nproc, r.first_rank) for r in ranks] == [(8, 0), (4, 8), (1, 12)]
    assert {(r.members, r.world_size, r.service) for r in ranks} == {(3, 13, rendezvous_service(running))}
