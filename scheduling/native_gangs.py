"""Gangs of native pods (docs/reference/native-submission.md, "Gangs"): the pods of one pod group in
one namespace are one job with a member per pod. The job is no candidate of the scheduler (reason
gang-incomplete, "3 of 4 members exist") until as many of its pods exist as the group's minMember;
then the engine places all of them at once or none, and each member's bind binds its own pod.

minMember is the PodGroup object's (the intake reads it from the cluster each poll, so one created
after the pods counts), else the pods' `tessera.io/min-member` annotations, kept on their rows.
The job's GPUs, cores and memory are the gang's whole: minMember times one pod's.
"""

from __future__ import annotations

from datetime import datetime

from django.core.exceptions import ValidationError
from django.db import transaction

from portal import freshness
from portal.models import Team
from scheduling.engine.reasons import WaitingReason
from scheduling.models import Job, NativePod
from scheduling.native import NativeNeed, native_job_create

INCOMPLETE = WaitingReason.GANG_INCOMPLETE.value


def gang_job_of(namespace: str, group: str) -> Job | None:
    """The group's active job: a group has one at a time (its next starts when this one ends)."""
    return (
        Job.objects.filter(namespace=namespace, native_pods__group=group, status__in=Job.ACTIVE_STATUSES)
        .select_related("team")
        .order_by("-pk")
        .first()
    )


@transaction.atomic
def gang_join(*, team: Team, need: NativeNeed, annotated: int | None, podgroup: int | None, at: datetime) -> Job:
    """Add a pod of a group to the group's waiting job, or start the job with it. `annotated`: the
    pod's min-member annotation; `podgroup`: the PodGroup object's minMember (None: no object).
    ValidationError, in the pod owner's words, when the pod cannot join."""
    Team.objects.select_for_update().filter(pk=team.pk).exists()  # two members taken in at once: one job
    job = gang_job_of(need.namespace, need.group)
    if job is None:
        job = native_job_create(team=team, need=need, at=at)
        Job.objects.filter(pk=job.pk).update(members=1)  # one pod so far: gang_size scales it
        NativePod.objects.filter(job=job).update(min_member=annotated)
    elif job.status in Job.HOLDING_STATUSES:
        raise ValidationError(
            {
                "group": f"Pod group {need.group} already runs as job #{job.pk} with its "
                f"{job.members} members; a group's pods are placed together, once."
            }
        )
    else:
        _same_need(job, need)
        _room_for_one_more(job, need.group, podgroup)
        NativePod.objects.create(
            job=job,
            uid=need.uid,
            namespace=need.namespace,
            name=need.pod_name,
            owner_api_version=need.owner[0],
            owner_kind=need.owner[1],
            owner_name=need.owner[2],
            owner_uid=need.owner[3],
            group=need.group,
            min_member=annotated,
            taken_at=at,
        )
    return gang_size(job.pk, podgroup=podgroup)


def _same_need(job: Job, need: NativeNeed) -> None:
    """The engine's members are alike: a pod asking for other GPUs than the gang's cannot join."""
    per_pod = job.gpus // (job.members or 1)
    if need.gpus != per_pod or (need.gpus == 0 and need.gpu_memory_gb != job.gpu_memory_gb):
        theirs = f"{per_pod} GPU(s)" if per_pod else f"a {job.gpu_memory_gb:g} GB share"
        mine = f"{need.gpus} GPU(s)" if need.gpus else f"a {need.gpu_memory_gb:g} GB share"
        raise ValidationError(
            {
                "group": f"The pods of group {need.group} must ask for the same GPUs: this one asks "
                f"for {mine}, the group's other pods for {theirs}."
            }
        )


def _room_for_one_more(job: Job, group: str, podgroup: int | None) -> None:
    """A pod beyond the gang's minMember stays out (Pending, told why), so the gang's members are
    the pods it binds; it joins if one of them goes before the gang is placed."""
    try:
        wanted = gang_min_member(job, podgroup)
    except ValidationError:
        return  # the group's pods disagree on their size: gang_size says so on the job
    if wanted is not None and job.native_pods.filter(vacant=False).count() >= wanted:
        raise ValidationError(
            {
                "group": f"Pod group {group} already has its {wanted} members (job #{job.pk}); "
                "this pod waits until one of them goes."
            }
        )


def gang_min_member(job: Job, podgroup: int | None) -> int | None:
    """The PodGroup's minMember, else the one its pods' annotations agree on; None: nothing says."""
    if podgroup is not None:
        return podgroup
    said = set(job.native_pods.exclude(min_member=None).values_list("min_member", flat=True))
    if len(said) > 1:
        raise ValidationError(
            {"group": f"The pods of the group disagree on tessera.io/min-member: {', '.join(map(str, sorted(said)))}."}
        )
    return said.pop() if said else None


def gang_waiting(group: str, min_member: int | None, present: int) -> str | None:
    """Why the gang cannot be placed yet, in one sentence; None once enough members exist."""
    if min_member is None and "/" in group:  # `scheduling.k8s.io/<name>`: the pods name a Kubernetes PodGroup
        api, _, name = group.rpartition("/")
        return (
            f"Pod group {group}: {present} member(s) exist and PodGroup {name} ({api}), which they name in "
            "spec.schedulingGroup, is not there yet (or the API server no longer serves it)."
        )
    if min_member is None:
        return (
            f"Pod group {group}: {present} member(s) exist and nothing says how many it needs: create "
            f"PodGroup {group} (scheduling.x-k8s.io/v1alpha1) with spec.minMember, or annotate its pods "
            f"tessera.io/min-member."
        )
    if present < min_member:
        return f"Pod group {group}: {present} of {min_member} members exist; none is placed before all {min_member} do."
    return None


@transaction.atomic
def gang_size(job_id: int, *, podgroup: int | None) -> Job:
    """Size a waiting gang's job to its minMember and say whether it may be placed: gang-incomplete
    with the count until enough pods exist, else ready for the next cycle. A gang whose pods
    disagree on their annotation waits, saying so."""
    job = Job.objects.select_for_update().select_related("team").get(pk=job_id)
    if job.status not in Job.WAITING_STATUSES or job.native_pods.filter(vacant=True).exists():
        return job  # running, or stopped and waiting for its pods again (scheduling/native.py, native_rejoin)
    present = job.native_pods.count()
    group = job.native_pods.values_list("group", flat=True).first() or ""
    try:
        min_member = gang_min_member(job, podgroup)
        waiting = gang_waiting(group, min_member, present)
    except ValidationError as disagreement:
        min_member, waiting = None, " ".join(disagreement.messages)
    before = (job.gpus, job.cpu_cores, job.memory_gb, job.members, job.pending_reason_code, job.pending_reason)
    old, size = job.members or 1, min_member or present
    job.gpus, job.cpu_cores, job.memory_gb = (
        job.gpus // old * size,
        job.cpu_cores / old * size,
        job.memory_gb / old * size,
    )
    job.members = size
    if waiting is not None:
        job.pending_reason_code, job.pending_reason = INCOMPLETE, waiting[:500]
    elif job.pending_reason_code == INCOMPLETE:
        job.pending_reason_code = WaitingReason.NEW
        job.pending_reason = f"All {min_member} members exist; waiting for the next scheduling cycle."
    if before == (job.gpus, job.cpu_cores, job.memory_gb, job.members, job.pending_reason_code, job.pending_reason):
        return job  # every poll looks again; the portal's views change only when the gang does
    job.save(
        update_fields=[
            "gpus",
            "cpu_cores",
            "memory_gb",
            "members",
            "pending_reason_code",
            "pending_reason",
            "updated_at",
        ]
    )
    freshness.teams_changed([job.team_id])
    return job


def waiting_gangs() -> list[tuple[int, str, str]]:
    """(job id, namespace, group) of every waiting gang: the intake re-reads their PodGroups."""
    rows = (
        NativePod.objects.filter(job__status__in=Job.WAITING_STATUSES, job__members__isnull=False)
        .exclude(group="")
        .values_list("job_id", "namespace", "group")
        .distinct()
    )
    return sorted(set(rows))


@transaction.atomic
def gang_member_gone(row: NativePod) -> bool:
    """A waiting gang's pod was deleted: its row goes, and the gang waits for another at once (the
    next cycle must not place it). False for a pod of no gang, or a gang's last (the caller ends
    the job as for a single pod)."""
    if not row.group or NativePod.objects.filter(job_id=row.job_id, vacant=False).count() <= 1:
        return False
    job = Job.objects.get(pk=row.job_id)
    known = job.members if job.pending_reason_code != INCOMPLETE else None  # sized: its minMember
    row.delete()
    gang_size(row.job_id, podgroup=known)  # the next poll re-reads the PodGroup itself
    return True
