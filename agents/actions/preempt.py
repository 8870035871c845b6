"""Preemption and spot reclaim: checkpoint -> stop -> release."""

from __future__ import annotations

from datetime import UTC, datetime

from django.conf import settings

from agents.actions.checkpoint import (
    CONFIRM_MARGIN_S,
    ask_checkpoint,
    checkpoint_save_s,
    pods_alive,
    when_asked,
)
from agents.actions.pods import job_pods, observed_pods, stop_pods
from agents.actions.state import CONFIRMED, HOLDING, finish, load_job, set_phase
from agents.backends.base import Backend, JobStatus
from agents.runtime import failpoint
from checkpoints.services import checkpoint_confirmed, request_id
from scheduling.engine.reasons import PreemptReason
from scheduling.models import ActionRequest, Job
from scheduling.payloads import PreemptPayload
from scheduling.services import job_event_add, job_release

RELEASE_REASONS = {PreemptReason.PREEMPT: "preempted", PreemptReason.RECLAIM: "reclaimed",
                   PreemptReason.CONSOLIDATE: "moved", PreemptReason.SPOT_RECLAIM: "spot-reclaimed",
                   PreemptReason.CANCEL: "cancelled"}


def preempt_step(action: ActionRequest, backend: Backend, now: datetime) -> None:
    job = load_job(action)
    if job.status not in HOLDING:  # it finished, or a lost node released it first
        finish(action, CONFIRMED, f"The job was already {job.status}.")
        return
    phase = action.payload.get("phase", "start")
    {"start": _preempt_start, "checkpointing": _preempt_wait, "stopping": _preempt_stop,
     "releasing": _preempt_release}[phase](action, backend, job, now)


def _deadline(action: ActionRequest, job: Job, now: datetime) -> float:
    """Spot reclaim: the provider's deadline; otherwise the grace period from the first step, and
    never less than the job needs to save a checkpoint."""
    notice = PreemptPayload.from_payload(action.payload).notice_deadline
    if notice is not None:
        return notice
    return now.timestamp() + max(settings.TESSERA_PREEMPT_GRACE_S, checkpoint_save_s(job) + CONFIRM_MARGIN_S)


def _reason(action: ActionRequest) -> PreemptReason:
    return PreemptPayload.from_payload(action.payload).reason


def _preempt_start(action, backend, job, now) -> None:
    deadline = _deadline(action, job, now)
    room = deadline - now.timestamp()
    if job.checkpoint_interval_s and room >= checkpoint_save_s(job):
        ask_checkpoint(backend, job, job_pods(job), request_id(action), _reason(action))
        set_phase(action, "checkpointing", deadline=deadline, asked_at=now.timestamp())
        job_event_add(job=job, at=now, kind="checkpoint-requested", message="Asked to checkpoint before stopping.")
    elif _reason(action) == PreemptReason.CANCEL:  # its team wants it stopped, not saved
        set_phase(action, "stopping", deadline=deadline)
    else:
        why = "no checkpoint support" if not job.checkpoint_interval_s else f"only {max(room, 0):.0f} s of notice"
        if job.native and not job.checkpoint_interval_s:
            why = "its pods mount no checkpoint channel"
        set_phase(action, "stopping", deadline=deadline)
        job_event_add(job=job, at=now, kind="checkpoint-skipped",
                      message=f"Stopping without a checkpoint ({why}); work since the last checkpoint is lost.")


def _preempt_wait(action, backend, job, now) -> None:
    alive = pods_alive(backend, job)
    if checkpoint_confirmed(job_id=job.pk, checkpoint_id=request_id(action), asked_at=when_asked(action)) is not None:
        pass  # the confirmation already moved the job's saved progress
    elif alive and now.timestamp() < action.payload["deadline"]:
        return
    else:
        job_event_add(job=job, at=now, kind="checkpoint-missed",
                      message="No checkpoint within the grace period; work since the last one is lost.")
    set_phase(action, "stopping")


def _stop_grace(action: ActionRequest, job: Job, now: datetime) -> int:
    """What is left before the deadline; a checkpointing job gets at least its save time, since
    SIGTERM means "save now and exit" (a spot node is gone at its deadline, whatever we give)."""
    room = max(0, int(action.payload["deadline"] - now.timestamp()))
    if not job.checkpoint_interval_s or _reason(action) == PreemptReason.SPOT_RECLAIM:
        return room
    return max(room, checkpoint_save_s(job) + CONFIRM_MARGIN_S)


def _preempt_stop(action, backend, job, now) -> None:
    grace = _stop_grace(action, job, now)
    stop_pods(backend, job, job_pods(job), _reason(action), grace_s=grace)
    failpoint("preempt.after-stop")
    set_phase(action, "releasing", stopped_at=now.timestamp(), grace=grace)


def _preempt_release(action, backend, job, now) -> None:
    alive = [o for o in observed_pods(backend, job).values() if o.status in (JobStatus.RUNNING, JobStatus.PENDING)]
    # A pod that outlives its grace by a minute is the cluster's to kill; the job is released anyway.
    if alive and now.timestamp() < action.payload["stopped_at"] + action.payload.get("grace", 0) + 60:
        return
    job.refresh_from_db(fields=["progress_s"])
    reason = RELEASE_REASONS[_reason(action)]
    message = "Its pods stopped; cancelled." if reason == "cancelled" else \
        f"Stopped and requeued; resumes from {job.progress_s:.0f} s of saved work."
    if _reason(action) == PreemptReason.SPOT_RECLAIM:  # nothing runs once the provider took the node
        now = min(now, datetime.fromtimestamp(action.payload["deadline"], tz=UTC))
    job_release(job_id=job.pk, at=now, reason=reason, progress_s=job.progress_s, message=message)
    finish(action, CONFIRMED)
