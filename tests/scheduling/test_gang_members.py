"""A gang submitted on the cluster (a pod group) has one member per pod, as many as its group says,
not one per node: four pods of 2 GPUs are four binds, two on each 4-GPU node. Until all its pods
exist it is no candidate at all, and keeps the sentence that says how many exist."""

import pytest

from scheduling.cycle import decide_and_apply
from scheduling.engine.reasons import WaitingReason
from scheduling.models import ActionRequest, Job
from scheduling.payloads import BindPayload
from scheduling.snapshot import build_snapshot
from tests.kube.conftest import NODES, cluster_rows
from tests.workers.conftest import job_add

pytestmark = pytest.mark.django_db


@pytest.fixture
def cluster():
    cluster_rows(NODES)  # two 4-GPU nodes under one leaf, team vision


def gang(name: str, *, gpus: int, members: int, **fields) -> Job:
    job = job_add(name, gpus=gpus)
    Job.objects.filter(pk=job.pk).update(members=members, **fields)
    job.refresh_from_db()
    return job


def binds(job: Job) -> list[BindPayload]:
    return [BindPayload.from_payload(a.payload) for a in ActionRequest.objects.filter(job=job, kind="bind")]


def test_a_gang_of_four_pods_is_four_members_placed_together(cluster):
    job = gang("ddp", gpus=8, members=4)
    (pending,) = build_snapshot().pending
    assert (pending.gpus, pending.gang_size) == (2, 4)

    assert decide_and_apply(policy="tessera").applied.bound_jobs == [job.pk]
    placed = binds(job)
    assert sorted(b.member for b in placed) == [0, 1, 2, 3]
    assert all(len(b.allocations) == 2 for b in placed)
    assert sorted(b.node for b in placed) == ["gpu-01", "gpu-01", "gpu-02", "gpu-02"]

    running = [r for r in build_snapshot().running if r.job.id == str(job.pk)]
    assert sorted(r.member for r in running) == [0, 1, 2, 3]  # not one per node
    assert all(len(r.allocations) == 2 and r.job.gang_size == 4 for r in running)


def test_four_one_gpu_pods_share_one_node_as_four_members(cluster):
    job = gang("small", gpus=4, members=4)
    assert decide_and_apply(policy="tessera").applied.bound_jobs == [job.pk]
    placed = binds(job)
    assert len(placed) == 4 and len({b.node for b in placed}) == 1
    assert sorted(a.gpu_index for b in placed for a in b.allocations) == [0, 1, 2, 3]


def test_an_incomplete_gang_is_not_placed_and_keeps_its_reason(cluster):
    why = "Gang ddp: 3 of 4 members exist; none is placed before all 4 do."
    job = gang("ddp", gpus=8, members=4, pending_reason_code=WaitingReason.GANG_INCOMPLETE, pending_reason=why)
    assert build_snapshot().pending == ()
    assert decide_and_apply(policy="tessera").applied.bound_jobs == []
    job.refresh_from_db()
    assert (job.status, job.pending_reason_code, job.pending_reason) == ("pending", "gang-incomplete", why)
    assert not ActionRequest.objects.filter(job=job).exists()
