"""Every write to a job's life: submit, cancel, reprioritise, reorder (from the portal and the API),
and the release that ends a run (from the scheduler and the workers).

Submit-side services check the caller's role themselves (views may forget; services may not), raise
PermissionDenied or a ValidationError keyed by field, and record the change on the job's timeline.
Release-side services are idempotent: calling one again for a job or placement already in the
asked state changes nothing, so a retried or duplicated task is harmless. Ledger intervals open
and close through the signals in scheduling/signals.py, which billing answers in the same
transaction (scheduling sits below billing in the layer order and never imports it).
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Sequence
from datetime import datetime, timedelta

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from portal import access, freshness
from portal.models import Project, Team
from scheduling import signals, sizing
from scheduling.clock import database_now
from scheduling.engine.reasons import PreemptReason, WaitingReason
from scheduling.engine.types import PRODUCTION
from scheduling.engine.wording import gpu_count
from scheduling.kube_names import attachment_errors
from scheduling.models import ActionRequest, Job, JobEvent, Placement, PriorityClass
from scheduling.payloads import PreemptPayload
from scheduling.selectors import cluster_gpu_models, priority_classes_for, share_refusal, team_queue

MAX_CPU_CORES = 512
MIN_CHECKPOINT_INTERVAL_S = 60
MAX_CHECKPOINT_SAVE_S = 3600
# A checkpoint interval or expected runtime above a year is a typo, and far below the column's 2**31 - 1.
MAX_JOB_SECONDS = 366 * 24 * 3600

RELEASE_STATUSES = {
    "preempted": Job.Status.PREEMPTED,
    "reclaimed": Job.Status.PREEMPTED,
    "moved": Job.Status.PREEMPTED,  # consolidation: restarted from its checkpoint elsewhere
    "node-lost": Job.Status.PREEMPTED,
    "evicted": Job.Status.PREEMPTED,  # the cluster removed its pod (drain, taint eviction, PodGC)
    "spot-reclaimed": Job.Status.PREEMPTED,
    "bind-failed": Job.Status.PENDING,
    "bind-refused": Job.Status.FAILED,  # the cluster will not run it (agents/actions/bind.py)
    "completed": Job.Status.COMPLETED,
    "failed": Job.Status.FAILED,
    "cancelled": Job.Status.CANCELLED,
    "pod-deleted": Job.Status.CANCELLED,  # a native job's pod deleted outside Tessera (agents/native.py)
}
# A native job waits again only while its pod does (a refused bind leaves it Pending); any other
# release that would requeue it ends it: its pod is gone, and Tessera cannot create someone else's.
NATIVE_REQUEUE = {"bind-failed"}
# ... except Tessera's own stops: the pods' controller makes them again, and they rejoin the job
# (agents/native.py, native_rejoin), which resumes from its saved progress, billed from the new bind.
NATIVE_STOPPED = {"preempted", "reclaimed", "moved", "spot-reclaimed"}
# ... and the cluster's removals (an eviction, a lost node), for pods a controller makes again; a
# pod without owner cannot come back, and its job fails, saying so. Any other job is requeued.
CLUSTER_REMOVALS = {"node-lost", "evicted"}


class TooManySubmits(Exception):
    """The team's submissions-per-minute limit is reached; a slot frees in `retry_after_s`."""

    def __init__(self, team, retry_after_s: int):
        self.retry_after_s = retry_after_s
        super().__init__(f"Team {team} has submitted {team.max_submits_per_minute} jobs in the last minute, its "
                         f"limit; try again in {retry_after_s} s. A portal admin can raise the team's limit.")


def _submit_limits_check(team, now: datetime) -> None:
    """The team's limits on waiting jobs (a 400) and submissions per minute (TooManySubmits, a 429)."""
    waiting = Job.objects.filter(team=team, status__in=Job.WAITING_STATUSES).count()
    if waiting >= team.max_waiting_jobs:
        raise ValidationError({"team": f"Team {team} already has {waiting} jobs waiting, its limit of "
                                       f"{team.max_waiting_jobs}; submit again once some have started or been "
                                       f"cancelled. A portal admin can raise the team's limit."})
    window = timedelta(seconds=60)
    recent = list(Job.objects.filter(team=team, submitted_at__gt=now - window).order_by("-submitted_at")
                  .values_list("submitted_at", flat=True)[:team.max_submits_per_minute])
    if len(recent) >= team.max_submits_per_minute:
        raise TooManySubmits(team, max(1, math.ceil((recent[-1] + window - now).total_seconds())))


class StateConflict(ValidationError):
    """The job moved on (cancelled, finished) since the caller looked: a 409, not a 400."""


def job_event_add(*, job: Job, at: datetime, kind: str, message: str = "") -> JobEvent:
    return JobEvent.objects.create(job=job, at=at, kind=kind, message=message[:500])


def placement_start(*, placement: Placement) -> None:
    """A placement row just written: its ledger interval opens at its start."""
    signals.placement_started.send(sender=Placement, placement=placement)


@transaction.atomic
def placements_bound(*, placement_ids, at: datetime) -> None:
    """The pod holding these placements was bound at `at`: the GPUs are held, and billed, from then,
    not from the cycle that placed it (the bind may come seconds later, after a retry or a dead worker)."""
    moved = list(Placement.objects.filter(pk__in=placement_ids, ended_at__isnull=True, started_at__lt=at)
                 .values_list("pk", flat=True))
    if moved:
        Placement.objects.filter(pk__in=moved).update(started_at=at)
        signals.placement_bound.send(sender=Placement, placement_ids=moved, at=at)


@transaction.atomic
def job_release(*, job_id: int, at: datetime, reason: str, progress_s: float | None = None,
                message: str = "") -> bool:
    """Close every open placement of the job at `at` (its ledger intervals with them) and move
    the job to the status the reason implies. Requeued jobs keep the progress of their last
    checkpoint. Returns False when there was nothing left to release (a repeated call)."""
    job = Job.objects.select_for_update().get(pk=job_id)
    placements = list(job.placements.select_for_update().filter(ended_at__isnull=True))
    target = RELEASE_STATUSES[reason]
    if not placements and (job.status in Job.FINISHED_STATUSES or job.status == target):
        return False
    ended = max(at, *(p.started_at for p in placements)) if placements else at
    for placement in placements:
        placement.ended_at = ended
        placement.end_reason = reason
        placement.save(update_fields=["ended_at", "end_reason"])
        signals.placement_ended.send(sender=Placement, placement=placement, at=ended, reason=reason)
    status = job.status if job.status in Job.FINISHED_STATUSES else target
    controlled = job.native and all(row.owner_uid for row in job.native_pods.all())
    if job.native and status in Job.WAITING_STATUSES and reason in NATIVE_STOPPED:
        message = _native_vacate(job, message)
    elif job.native and status in Job.WAITING_STATUSES and reason in CLUSTER_REMOVALS and controlled:
        message = _native_vacate(job, message, removed=message)
    elif job.native and status in Job.WAITING_STATUSES and reason in CLUSTER_REMOVALS:
        status = Job.Status.FAILED
        message = (f"{message} Its pod has no controller to make it again, and Tessera does not recreate a "
                   "pod it did not create: the job failed.").strip()
    elif reason in CLUSTER_REMOVALS and status in Job.WAITING_STATUSES:
        message = f"{message} Requeued from its last checkpoint.".strip()
    elif job.native and status in Job.WAITING_STATUSES and reason not in NATIVE_REQUEUE:
        status = Job.Status.FAILED
        message = (f"{message} Its pod is gone and Tessera does not recreate a pod it did not create; "
                   "its controller, if it has one, makes a new pod, which queues as a new job.").strip()
    job.status = status
    if progress_s is not None:
        job.progress_s = progress_s
    if status in Job.FINISHED_STATUSES:
        job.finished_at = max(ended, job.submitted_at)
    job.borrowed = False
    job.save(update_fields=["status", "progress_s", "finished_at", "borrowed", "pending_reason_code", "pending_reason",
                            "updated_at"])
    job_event_add(job=job, at=ended, kind=reason, message=message)
    freshness.teams_changed([job.team_id])
    return True


def _native_vacate(job: Job, message: str, removed: str = "") -> str:
    """A native job stopped by Tessera, or whose pods the cluster `removed` (the release's words),
    waits for its pods' controller to make them again: its pod rows become vacant places (the new
    pods take them), and no cycle places it meanwhile."""
    rows = job.native_pods.all()
    rows.update(vacant=True)
    owner = next((row.owner for row in rows if row.owner), "")
    job.pending_reason_code = WaitingReason.PODS_GONE
    if removed:
        job.pending_reason = f"{removed} It waits for {owner} to make its pods again."[:500]
    else:
        job.pending_reason = (f"Its pods were stopped; it waits for {owner or 'them'} to make them again "
                              "(a bare pod: create it again under its name).")
    return f"{message} It resumes when its pods are made again.".strip()


def _resources_errors(*, gpus, gpu_memory_gb, gpu_models, gang, cpu_cores, memory_gb,
                      checkpoint_interval_s, checkpoint_save_s=None, expected_runtime_s=None) -> dict[str, str]:
    errors = {}
    models = cluster_gpu_models()
    if gpus < 0:
        errors["gpus"] = "GPUs cannot be negative."
    if gpu_memory_gb < 0:
        errors["gpu_memory_gb"] = "Memory cannot be negative."
    if gpus == 0 and gpu_memory_gb <= 0 and "gpus" not in errors:
        errors["gpus"] = "Ask for whole GPUs or give a memory need."
    unknown = [model for model in gpu_models if model not in models]
    if unknown:
        errors["gpu_models"] = f"No {', '.join(unknown)} GPUs in the cluster; known: {', '.join(models) or 'none'}."
    candidates = {m: models[m] for m in gpu_models if m in models} or models
    largest = max((m["memory_gb"] for m in candidates.values()), default=0)
    if gpu_memory_gb > largest:
        errors["gpu_memory_gb"] = f"{gpu_memory_gb:g} GiB is more than any GPU here has ({largest:g} GiB)."
    total = sum(m["count"] for m in candidates.values())
    if gpus > total:
        what = "A gang" if gang else "A job"
        errors["gpus"] = f"{what} of {gpu_count(gpus)} is larger than the cluster ({gpu_count(total)})."
    if not 0 < cpu_cores <= MAX_CPU_CORES:
        errors["cpu_cores"] = f"CPU cores must be above 0 and at most {MAX_CPU_CORES}."
    if memory_gb < 0:
        errors["memory_gb"] = "Memory cannot be negative."
    if checkpoint_interval_s is not None and checkpoint_interval_s < MIN_CHECKPOINT_INTERVAL_S:
        errors["checkpoint_interval_s"] = f"Checkpoint at most every {MIN_CHECKPOINT_INTERVAL_S} s."
    if checkpoint_save_s is not None and not 1 <= checkpoint_save_s <= MAX_CHECKPOINT_SAVE_S:
        errors["checkpoint_save_s"] = f"A checkpoint's save time must be from 1 to {MAX_CHECKPOINT_SAVE_S} s."
    for name, seconds in (("checkpoint_interval_s", checkpoint_interval_s), ("expected_runtime_s", expected_runtime_s)):
        if seconds is not None and seconds > MAX_JOB_SECONDS:
            errors[name] = f"At most {MAX_JOB_SECONDS} s (a year)."
    return errors


def _workload_errors(*, image: str, command: str) -> dict[str, str]:
    """What the cluster would refuse only at bind time, refused at submit instead."""
    errors = {}
    if settings.TESSERA_BACKEND == "kubernetes" and not image.strip():  # the simulated cluster runs none
        errors["image"] = "Name the container image the job runs in."
    try:
        shlex.split(command)
    except ValueError as error:
        errors["command"] = f"The command does not parse ({error}); check its quotes."
    return errors


def _priority_class(user, team, name: str) -> PriorityClass:
    chosen = priority_classes_for(user, team).filter(name=name).first()
    if chosen is None:
        raise ValidationError({"priority_class": f"Priority class {name!r} is not one you may use in {team}."})
    return chosen


def _profile_need(mig_profile: str, gpu_models: Sequence[str]) -> tuple[float, list[str]]:
    """Memory need and models implied by a MIG profile name (among the pinned models, if any)."""
    found = sizing.profile_memory_gb(mig_profile, gpu_models or cluster_gpu_models())
    if not found:
        raise ValidationError({"mig_profile": f"Unknown MIG profile {mig_profile!r} for the cluster's GPUs."})
    return min(found.values()), sorted(found)


def _project(team, name: str | None) -> Project:
    if not name:
        return team.projects.order_by("name").first() or Project.objects.create(team=team, name="default")
    project = team.projects.filter(name=name).first()
    if project is None:
        raise ValidationError({"project": f"No project {name!r} in {team}."})
    return project


@transaction.atomic
def job_submit(*, user, team, name: str, kind: str, priority_class: str, gpus: int = 0,
               gpu_memory_gb: float = 0.0, mig_profile: str = "", gpu_models: Sequence[str] = (),
               project: str | None = None, cpu_cores: float = 1.0, memory_gb: float = 8.0,
               gang: bool = True, checkpoint_interval_s: int | None = None, checkpoint_save_s: int | None = None,
               expected_runtime_s: int | None = None, image: str = "", command: str = "",
               volume_claim: str = "", volume_mount_path: str = "/checkpoints", env_secret: str = "",
               file_secret: str = "", accepts_no_isolation: bool = False) -> Job:
    if not access.can_submit(user, team.pk):
        raise PermissionDenied("You may not submit jobs for this team.")
    if kind not in Job.Kind.values:
        raise ValidationError({"kind": f"Unknown kind {kind!r}."})
    chosen = _priority_class(user, team, priority_class)
    pinned = sorted(set(gpu_models))  # the models the job may run on; none: any
    if mig_profile:
        gpu_memory_gb, pinned = _profile_need(mig_profile, pinned)
        gpus = 0
    errors = _resources_errors(gpus=gpus, gpu_memory_gb=gpu_memory_gb, gpu_models=pinned, gang=gang,
                               cpu_cores=cpu_cores, memory_gb=memory_gb,
                               checkpoint_interval_s=checkpoint_interval_s, checkpoint_save_s=checkpoint_save_s,
                               expected_runtime_s=expected_runtime_s)
    errors |= _workload_errors(image=image, command=command)
    volume_mount_path = volume_mount_path or "/checkpoints"
    errors |= attachment_errors(volume_claim=volume_claim, volume_mount_path=volume_mount_path,
                                env_secret=env_secret, file_secret=file_secret)
    if gpus == 0 and not errors and chosen.name != PRODUCTION:  # production takes a whole GPU instead
        refusal = share_refusal(gpu_memory_gb=gpu_memory_gb, gpu_models=pinned,
                                accepts_no_isolation=accepts_no_isolation)
        if refusal:
            errors["gpu_memory_gb"] = refusal
    if errors:
        raise ValidationError(errors)
    # The team's row lock serialises its submits: two at once would read one Max and share a position.
    Team.objects.select_for_update().filter(pk=team.pk).exists()
    _submit_limits_check(team, timezone.now())  # under the lock, so simultaneous submits cannot pass it together
    last = Job.objects.filter(team=team, status__in=Job.WAITING_STATUSES).aggregate(m=Max("queue_order"))["m"]
    job = Job.objects.create(
        team=team, project=_project(team, project), submitted_by=user, name=name, kind=kind,
        priority_class=chosen, gpus=gpus, gpu_memory_gb=gpu_memory_gb, gpu_models="|".join(pinned),
        cpu_cores=cpu_cores, memory_gb=memory_gb, gang=gang, checkpoint_interval_s=checkpoint_interval_s,
        checkpoint_save_s=checkpoint_save_s,
        expected_runtime_s=expected_runtime_s, preemptible=chosen.preemptible, image=image, command=command,
        volume_claim=volume_claim, volume_mount_path=volume_mount_path, env_secret=env_secret,
        file_secret=file_secret,
        accepts_no_isolation=accepts_no_isolation,
        queue_order=(last or 0) + 1, pending_reason_code=WaitingReason.NEW,
        pending_reason="Submitted; waiting for the next scheduling cycle.")
    job_event_add(job=job, at=timezone.now(), kind="submitted",
                  message=f"Submitted by {user.username} as {chosen.name}.")
    freshness.teams_changed([team.pk])
    return job


@transaction.atomic
def job_cancel(*, user, job: Job) -> Job:
    """Cancel a job. A waiting one is cancelled at once. A running one keeps its GPUs until its pods
    have stopped: a stop is requested (a worker carries it out, then releases the job as cancelled),
    so no other job is placed on GPUs its pods still hold."""
    if not access.can_cancel(user, job):
        raise PermissionDenied("You may not cancel this job.")
    job = Job.objects.select_for_update().get(pk=job.pk)
    if not job.is_active:
        raise ValidationError({"status": f"The job is already {job.status}."})
    if job.status in Job.HOLDING_STATUSES and job.placements.filter(ended_at__isnull=True).exists():
        now = database_now()
        _, new = ActionRequest.objects.get_or_create(
            key=f"cancel:{job.pk}:{job.run}",
            defaults={"kind": ActionRequest.Kind.PREEMPT, "job": job, "payload": PreemptPayload(
                job_id=job.pk, for_job_id=None, reason=PreemptReason.CANCEL,
                notice_deadline=now.timestamp()).as_payload()})
        if new:
            job_event_add(job=job, at=now, kind="cancel-requested",
                          message=f"Cancelled by {user.username}; its pods are being stopped.")
            freshness.teams_changed([job.team_id])
        return job
    # The same release as a finish or a preemption: placements and ledger close together.
    job_release(job_id=job.pk, at=database_now(), reason="cancelled", message=f"Cancelled by {user.username}.")
    Job.objects.filter(pk=job.pk).update(queue_position_team=None, queue_position_overall=None,
                                         estimated_start=None, pending_reason_code="", pending_reason="")
    job.refresh_from_db()
    return job


def cancel_requested(job: Job) -> bool:
    """A stop for a cancel is on its way: the job is as good as cancelled."""
    return ActionRequest.objects.filter(job=job, key__startswith=f"cancel:{job.pk}:", state="requested").exists()


@transaction.atomic
def job_reprioritise(*, user, job: Job, priority_class: str) -> Job:
    if not access.can_manage(user, job.team_id):
        raise PermissionDenied("Only the team's leads may change priorities.")
    # Locked and read again: a cancel that committed since the caller read the job wins, and this
    # change is refused rather than written onto a cancelled job.
    job = Job.objects.select_for_update().select_related("priority_class", "team").get(pk=job.pk)
    if not job.is_active or cancel_requested(job):
        raise StateConflict({"status": f"The job is already {job.status}; its priority can no longer change."})
    chosen = _priority_class(user, job.team, priority_class)
    old = job.priority_class.name
    job.priority_class, job.preemptible = chosen, chosen.preemptible
    job.save(update_fields=["priority_class", "preemptible", "updated_at"])
    job_event_add(job=job, at=timezone.now(), kind="reprioritised",
                  message=f"{old} → {chosen.name} by {user.username}.")
    freshness.teams_changed([job.team_id])
    return job


@transaction.atomic
def team_queue_reorder(*, user, team, job_ids: list[int]) -> list[Job]:
    """Put the team's waiting jobs in the given order (every waiting job, each once).

    The team position is rewritten at once so the page shows the new order; the scheduler
    recomputes both positions in its next cycle.
    """
    if not access.can_manage(user, team.pk):
        raise PermissionDenied("Only the team's leads may reorder the queue.")
    queue = {job.pk: job for job in team_queue(team).select_for_update(of=("self",))}
    if sorted(job_ids) != sorted(queue):
        raise ValidationError({"job_ids": "Give every waiting job of the team exactly once."})
    ordered = [queue[pk] for pk in job_ids]
    for position, job in enumerate(ordered, start=1):
        job.queue_order = job.queue_position_team = position
    Job.objects.bulk_update(ordered, ["queue_order", "queue_position_team"])
    freshness.teams_changed([team.pk])
    return ordered


def team_queue_move(*, user, team, job_id: int, offset: int) -> list[Job]:
    """Move one waiting job up (offset -1) or down (+1) in the team queue."""
    if not access.can_manage(user, team.pk):
        raise PermissionDenied("Only the team's leads may reorder the queue.")
    ids = list(team_queue(team).values_list("pk", flat=True))
    if job_id not in ids:
        raise ValidationError({"job_ids": "The job is not waiting in this team's queue."})
    i = ids.index(job_id)
    j = max(0, min(len(ids) - 1, i + offset))
    ids[i], ids[j] = ids[j], ids[i]
    return team_queue_reorder(user=user, team=team, job_ids=ids)
