"""Why a job waits, as an Event in its team's namespace, on a real API server (issue 13 point 6):
created with deploy/rbac.yaml's rights (create and patch on events), accepted by the server's event
validation with the job as involvedObject, listed once however many cycles tell it."""

from __future__ import annotations

import pytest
from kubernetes import client

from agents.backends.kubernetes import KubernetesBackend, KubernetesConfig
from agents.waiting_events import waiting_events_record
from portal.models import Team
from scheduling.models import Job
from tests.billing.factories import make_world
from tests.kube.conftest import TEAM

QUOTA = "Its team uses its whole guarantee and no GPU is idle to borrow."
NO_GPUS = "Not enough free whole GPUs on any node it may use."


@pytest.fixture
def job(db, kube_admin):
    world = make_world(jobs=1, name="waits")
    Team.objects.filter(pk=world.team.pk).update(name=TEAM)  # the namespace the control plane has
    yield world.jobs[0]
    client.CoreV1Api(kube_admin).delete_collection_namespaced_event(
        TEAM, label_selector=f"tessera.io/job-id={world.jobs[0].pk}")


@pytest.fixture
def backend(control_plane):
    with control_plane.backend_client() as api_client:
        yield KubernetesBackend(KubernetesConfig(api_client=api_client))


def waits(job: Job, code: str, reason: str) -> None:
    Job.objects.filter(pk=job.pk).update(status="pending", pending_reason_code=code, pending_reason=reason)


def events_of(kube_admin, job: Job) -> dict[str, tuple[str, int]]:
    """`kubectl get events -n vision --field-selector involvedObject.name=job-<id>`: reason code -> (message, count)."""
    listed = client.CoreV1Api(kube_admin).list_namespaced_event(
        TEAM, field_selector=f"involvedObject.kind=TesseraJob,involvedObject.name=job-{job.pk}")
    assert all(e.reason == "Waiting" and e.type == "Normal" for e in listed.items)
    return {e.metadata.name.rsplit(".waiting-", 1)[1]: (e.message, e.count) for e in listed.items}


def test_a_waiting_job_is_listed_once_per_reason_and_a_return_counts(job, backend, kube_admin):
    waits(job, "quota-no-idle", QUOTA)
    for _cycle in range(3):
        waiting_events_record(backend)
    assert events_of(kube_admin, job) == {"quota-no-idle": (QUOTA, 1)}
    waits(job, "no-free-gpus", NO_GPUS)
    waiting_events_record(backend)
    waits(job, "quota-no-idle", QUOTA)
    waiting_events_record(backend)
    waiting_events_record(backend)
    assert events_of(kube_admin, job) == {"quota-no-idle": (QUOTA, 2), "no-free-gpus": (NO_GPUS, 1)}
