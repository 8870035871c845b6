"""The rows of a native gang (scheduling/native_gangs.py): one job for a group's pods, sized by its
PodGroup or their annotations, no candidate until minMember pods exist, and the refusals a member
gets. The real control plane tests (tests/kube/test_native_gangs.py) run the whole path."""

from dataclasses import replace

import pytest
from django.core.exceptions import ValidationError

from scheduling.models import Job, NativePod
from scheduling.native import refusal_reason
from scheduling.native_gangs import gang_join, gang_member_gone, gang_size
from tests.scheduling.test_native_jobs import AT, NEED, team  # noqa: F401 - team: a fixture

pytestmark = pytest.mark.django_db
GANG = replace(NEED, group="ddp")


def pod(index: int, **changes):
    return replace(GANG, uid=f"u-{index}", pod_name=f"ddp-{index}", **changes)


def join(team, index: int, *, annotated=None, podgroup=None, **changes) -> Job:  # noqa: F811
    return gang_join(team=team, need=pod(index, **changes), annotated=annotated, podgroup=podgroup, at=AT)


def test_a_groups_pods_are_one_job_sized_by_its_podgroup(team):  # noqa: F811
    first = join(team, 0, podgroup=3)
    assert (first.members, first.gpus, first.cpu_cores, first.pending_reason_code) == (3, 6, 12, "gang-incomplete")
    assert first.pending_reason == "Pod group ddp: 1 of 3 members exist; none is placed before all 3 do."
    join(team, 1, podgroup=3)
    job = join(team, 2, podgroup=3)
    assert job.pk == first.pk and Job.objects.count() == 1 and job.native_pods.count() == 3
    assert (job.pending_reason_code, job.pending_reason) == (
        "new",
        "All 3 members exist; waiting for the next scheduling cycle.",
    )


def test_without_a_podgroup_the_annotations_size_it_and_must_agree(team):  # noqa: F811
    job = join(team, 0)
    assert "nothing says how many it needs" in job.pending_reason
    job = join(team, 1, annotated=3)
    assert (job.members, job.gpus) == (3, 6) and "2 of 3 members" in job.pending_reason
    job = join(team, 2, annotated=2)
    assert job.pending_reason == "The pods of the group disagree on tessera.io/min-member: 2, 3."
    assert job.pending_reason_code == "gang-incomplete"


@pytest.mark.parametrize(
    "changes, words",
    [({"gpus": 1}, "this one asks for 1 GPU(s), the group's other pods for 2"), ({}, "already has its 1 members")],
)
def test_a_pod_that_cannot_join_is_refused_as_invalid_pod_group(team, changes, words):  # noqa: F811
    join(team, 0, podgroup=1 if not changes else 2)
    with pytest.raises(ValidationError) as refused:
        join(team, 1, podgroup=1 if not changes else 2, **changes)
    reason, message = refusal_reason(refused.value)
    assert reason == "InvalidPodGroup" and words in message


def test_a_member_gone_while_the_gang_waits_makes_it_incomplete_again(team):  # noqa: F811
    for index in range(2):
        job = join(team, index, podgroup=2)
    assert job.pending_reason_code == "new"
    assert gang_member_gone(NativePod.objects.get(uid="u-1"))
    job.refresh_from_db()
    assert (job.pending_reason_code, job.members, job.native_pods.count()) == ("gang-incomplete", 2, 1)
    assert "1 of 2 members exist" in job.pending_reason
    assert not gang_member_gone(NativePod.objects.get(uid="u-0"))  # its last: the job ends as a single pod's


def test_a_running_gang_takes_no_new_member(team):  # noqa: F811
    job = join(team, 0, podgroup=1)
    Job.objects.filter(pk=job.pk).update(status="running")
    with pytest.raises(ValidationError, match="already runs"):
        join(team, 1, podgroup=1)
    assert gang_size(job.pk, podgroup=5).members == 1  # a running gang is not resized
