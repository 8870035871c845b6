"""Writes to cluster and job state that both the scheduler and the workers make.

Every function is idempotent: calling it again for a job or placement already in the asked
state changes nothing, so a retried or duplicated task is harmless.
"""

from __future__ import annotations

from datetime import datetime

from django.db import transaction

from billing.services import usage_interval_close, usage_interval_open
from portal import freshness
from scheduling.models import Job, JobEvent, Placement

RELEASE_STATUSES = {
    "preempted": Job.Status.PREEMPTED,
    "reclaimed": Job.Status.PREEMPTED,
    "moved": Job.Status.PREEMPTED,  # consolidation: restarted from its checkpoint elsewhere
    "node-lost": Job.Status.PREEMPTED,
    "spot-reclaimed": Job.Status.PREEMPTED,
    "bind-failed": Job.Status.PENDING,
    "completed": Job.Status.COMPLETED,
    "failed": Job.Status.FAILED,
    "cancelled": Job.Status.CANCELLED,
}


def job_event_add(*, job: Job, at: datetime, kind: str, message: str = "") -> JobEvent:
    return JobEvent.objects.create(job=job, at=at, kind=kind, message=message[:500])


def placement_start(*, placement: Placement) -> None:
    """A placement row just written: its ledger interval opens at its start."""
    usage_interval_open(placement=placement, at=placement.started_at)


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
        usage_interval_close(placement=placement, at=ended, reason=reason)
    status = job.status if job.status in Job.FINISHED_STATUSES else target
    job.status = status
    if progress_s is not None:
        job.progress_s = progress_s
    if status in Job.FINISHED_STATUSES:
        job.finished_at = max(ended, job.submitted_at)
    job.borrowed = False
    job.save(update_fields=["status", "progress_s", "finished_at", "borrowed", "updated_at"])
    job_event_add(job=job, at=ended, kind=reason, message=message)
    freshness.teams_changed([job.team_id])
    return True
