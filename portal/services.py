"""Writes from the portal and the API: submit, cancel, reprioritise and reorder jobs.

Each service checks the caller's role itself (views may forget; services may not), raises
PermissionDenied or a ValidationError keyed by field, and records the change on the job's timeline.
"""

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from portal import access, freshness, selectors, sizing
from portal.models import Project
from scheduling.models import Job, JobEvent, PriorityClass
from scheduling.services import job_release

MAX_CPU_CORES = 512
MIN_CHECKPOINT_INTERVAL_S = 60


def _resources_errors(*, gpus, gpu_memory_gb, gpu_model, gang, cpu_cores, memory_gb,
                      checkpoint_interval_s) -> dict[str, str]:
    errors = {}
    models = selectors.cluster_gpu_models()
    if gpus < 0:
        errors["gpus"] = "GPUs cannot be negative."
    if gpu_memory_gb < 0:
        errors["gpu_memory_gb"] = "Memory cannot be negative."
    if gpus == 0 and gpu_memory_gb <= 0 and "gpus" not in errors:
        errors["gpus"] = "Ask for whole GPUs or give a memory need."
    if gpu_model and gpu_model not in models:
        errors["gpu_model"] = f"No {gpu_model} GPUs in the cluster; known: {', '.join(models) or 'none'}."
    candidates = {gpu_model: models[gpu_model]} if gpu_model in models else models
    largest = max((m["memory_gb"] for m in candidates.values()), default=0)
    if gpu_memory_gb > largest:
        errors["gpu_memory_gb"] = f"{gpu_memory_gb:g} GiB is more than any GPU here has ({largest:g} GiB)."
    total = sum(m["count"] for m in candidates.values())
    if gpus > total:
        what = "A gang" if gang else "A job"
        errors["gpus"] = f"{what} of {gpus} GPUs is larger than the cluster ({total} GPUs)."
    if not 0 < cpu_cores <= MAX_CPU_CORES:
        errors["cpu_cores"] = f"CPU cores must be above 0 and at most {MAX_CPU_CORES}."
    if memory_gb < 0:
        errors["memory_gb"] = "Memory cannot be negative."
    if checkpoint_interval_s is not None and checkpoint_interval_s < MIN_CHECKPOINT_INTERVAL_S:
        errors["checkpoint_interval_s"] = f"Checkpoint at most every {MIN_CHECKPOINT_INTERVAL_S} s."
    return errors


def _priority_class(user, team, name: str) -> PriorityClass:
    chosen = selectors.priority_classes_for(user, team).filter(name=name).first()
    if chosen is None:
        raise ValidationError({"priority_class": f"Priority class {name!r} is not one you may use in {team}."})
    return chosen


def _profile_need(mig_profile: str, gpu_model: str) -> tuple[float, str]:
    """Memory need and model list implied by a MIG profile name."""
    models = selectors.cluster_gpu_models()
    found = sizing.profile_memory_gb(mig_profile, [gpu_model] if gpu_model else models)
    if not found:
        raise ValidationError({"mig_profile": f"Unknown MIG profile {mig_profile!r} for the cluster's GPUs."})
    return min(found.values()), "|".join(sorted(found))


def _project(team, name: str | None) -> Project:
    if not name:
        return team.projects.order_by("name").first() or Project.objects.create(team=team, name="default")
    project = team.projects.filter(name=name).first()
    if project is None:
        raise ValidationError({"project": f"No project {name!r} in {team}."})
    return project


@transaction.atomic
def job_submit(*, user, team, name: str, kind: str, priority_class: str, gpus: int = 0,
               gpu_memory_gb: float = 0.0, mig_profile: str = "", gpu_model: str = "",
               project: str | None = None, cpu_cores: float = 1.0, memory_gb: float = 8.0,
               gang: bool = True, checkpoint_interval_s: int | None = None,
               expected_runtime_s: int | None = None, image: str = "", command: str = "") -> Job:
    if not access.can_submit(user, team.pk):
        raise PermissionDenied("You may not submit jobs for this team.")
    if kind not in Job.Kind.values:
        raise ValidationError({"kind": f"Unknown kind {kind!r}."})
    chosen = _priority_class(user, team, priority_class)
    gpu_models = gpu_model
    if mig_profile:
        gpu_memory_gb, gpu_models = _profile_need(mig_profile, gpu_model)
        gpus = 0
    errors = _resources_errors(gpus=gpus, gpu_memory_gb=gpu_memory_gb, gpu_model=gpu_model, gang=gang,
                               cpu_cores=cpu_cores, memory_gb=memory_gb,
                               checkpoint_interval_s=checkpoint_interval_s)
    if errors:
        raise ValidationError(errors)
    last = Job.objects.filter(team=team, status__in=selectors.QUEUED_STATUSES).aggregate(m=Max("queue_order"))["m"]
    job = Job.objects.create(
        team=team, project=_project(team, project), submitted_by=user, name=name, kind=kind,
        priority_class=chosen, gpus=gpus, gpu_memory_gb=gpu_memory_gb, gpu_models=gpu_models,
        cpu_cores=cpu_cores, memory_gb=memory_gb, gang=gang, checkpoint_interval_s=checkpoint_interval_s,
        expected_runtime_s=expected_runtime_s, preemptible=chosen.preemptible, image=image, command=command,
        queue_order=(last or 0) + 1, pending_reason_code="new",
        pending_reason="Submitted; waiting for the next scheduling cycle.")
    _event(job, "submitted", f"Submitted by {user.username} as {chosen.name}.")
    freshness.teams_changed([team.pk])
    return job


@transaction.atomic
def job_cancel(*, user, job: Job) -> Job:
    """Cancel a job; its open placements end now so they stop counting towards quota and cost."""
    if not access.can_cancel(user, job):
        raise PermissionDenied("You may not cancel this job.")
    job = Job.objects.select_for_update().get(pk=job.pk)
    if not job.is_active:
        raise ValidationError({"status": f"The job is already {job.status}."})
    # The same release as a finish or a preemption: placements and ledger close together.
    job_release(job_id=job.pk, at=timezone.now(), reason="cancelled", message=f"Cancelled by {user.username}.")
    Job.objects.filter(pk=job.pk).update(queue_position_team=None, queue_position_overall=None,
                                         estimated_start=None, pending_reason_code="", pending_reason="")
    job.refresh_from_db()
    return job


@transaction.atomic
def job_reprioritise(*, user, job: Job, priority_class: str) -> Job:
    if not access.can_manage(user, job.team_id):
        raise PermissionDenied("Only the team's leads may change priorities.")
    if not job.is_active:
        raise ValidationError({"status": f"The job is already {job.status}."})
    chosen = _priority_class(user, job.team, priority_class)
    old = job.priority_class.name
    job.priority_class, job.preemptible = chosen, chosen.preemptible
    job.save(update_fields=["priority_class", "preemptible", "updated_at"])
    _event(job, "reprioritised", f"{old} → {chosen.name} by {user.username}.")
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
    queue = {job.pk: job for job in selectors.team_queue(team).select_for_update(of=("self",))}
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
    ids = list(selectors.team_queue(team).values_list("pk", flat=True))
    if job_id not in ids:
        raise ValidationError({"job_ids": "The job is not waiting in this team's queue."})
    i = ids.index(job_id)
    j = max(0, min(len(ids) - 1, i + offset))
    ids[i], ids[j] = ids[j], ids[i]
    return team_queue_reorder(user=user, team=team, job_ids=ids)


def _event(job, kind: str, message: str) -> None:
    JobEvent.objects.create(job=job, at=timezone.now(), kind=kind, message=message[:500])
