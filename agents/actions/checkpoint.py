"""Checkpoints: asking a job's pods to save, and waiting for the confirmation.

Tessera asks through the backend (a pod annotation); the workload answers through the checkpoint
endpoint (checkpoints/), which records the answer in the database: the steps below read it there.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import connection

from agents.actions.pods import job_pods, observed_pods
from agents.actions.state import CONFIRMED, FAILED, HOLDING, REQUESTED, finish, load_job, set_phase
from agents.backends.base import Backend, CheckpointRequest, JobStatus
from checkpoints.services import ConfirmationConflict, Saved, checkpoint_confirm, checkpoint_confirmed, request_id
from scheduling.models import ActionRequest, Job

if TYPE_CHECKING:  # the simulated backend calls confirm_simulated; production never imports it
    from agents.backends.simulated import SavedCheckpoint

log = logging.getLogger(__name__)
CONFIRM_MARGIN_S = 15  # after the save: the confirmation's round trip and a clean exit


def checkpoint_save_s(job: Job) -> int:
    """How long the job needs to write a checkpoint: its own figure, else the cluster's."""
    return job.checkpoint_save_s or settings.TESSERA_CHECKPOINT_SAVE_S


def ask_checkpoint(backend: Backend, job: Job, pods, checkpoint_id: str, reason: str) -> None:
    for pod in pods:
        backend.request_checkpoint(CheckpointRequest(job_id=str(job.pk), pod_name=pod, namespace=job.pod_namespace,
                                                     checkpoint_id=checkpoint_id, reason=reason))
    Job.objects.filter(pk=job.pk, status=Job.Status.RUNNING).update(status=Job.Status.CHECKPOINTING)


def pods_alive(backend: Backend, job: Job) -> bool:
    """Whether a pod of the job's run is still there to answer (this also lets the simulated
    cluster's workloads report what they saved)."""
    alive = (JobStatus.RUNNING, JobStatus.PENDING, JobStatus.UNKNOWN)
    return any(o.status in alive for o in observed_pods(backend, job).values())


def checkpoint_step(action: ActionRequest, backend: Backend, now: datetime) -> None:
    job = load_job(action)
    checkpoint_id = request_id(action)
    if job.status not in HOLDING:
        finish(action, FAILED, "The job stopped before the checkpoint.")
    elif action.payload.get("phase") is None:
        ask_checkpoint(backend, job, job_pods(job), checkpoint_id, "interval")
        set_phase(action, "asked", asked_at=now.timestamp())
    else:
        alive = pods_alive(backend, job)
        if checkpoint_confirmed(job_id=job.pk, checkpoint_id=checkpoint_id, asked_at=when_asked(action)) is not None:
            finish(action, CONFIRMED)
        elif not alive:
            finish(action, FAILED, "The job's pods are gone; no checkpoint can come.")
        elif now.timestamp() > action.payload["asked_at"] + max(settings.TESSERA_PREEMPT_GRACE_S,
                                                                checkpoint_save_s(job)):
            finish(action, FAILED, "The checkpoint was not confirmed in time.")
        else:
            return
        if not _preempting(job):
            Job.objects.filter(pk=job.pk, status=Job.Status.CHECKPOINTING).update(status=Job.Status.RUNNING)


def when_asked(action: ActionRequest) -> datetime:
    return datetime.fromtimestamp(action.payload.get("asked_at", action.created_at.timestamp()), tz=UTC)


def _preempting(job: Job) -> bool:
    return ActionRequest.objects.filter(job=job, kind=ActionRequest.Kind.PREEMPT, state=REQUESTED).exists()


def confirm_simulated(saved: SavedCheckpoint) -> bool:
    """How the simulated cluster's workloads confirm: through the endpoint's own service.

    True once the record is durable (or refused for good); inside a transaction that may yet roll
    back it is not, so the simulated workload sends it again later, as a real one retries."""
    try:
        checkpoint_confirm(job_id=int(saved.job_id), pod_name=saved.pod_name, saved=Saved(
            checkpoint_id=saved.checkpoint_id, step=saved.step, progress_s=saved.progress_s,
            saved_at=datetime.fromtimestamp(saved.saved_at, tz=UTC)))
    except (ValidationError, ConfirmationConflict, Job.DoesNotExist) as refused:
        log.info("simulated checkpoint of job %s refused: %s", saved.job_id, refused)
        return True
    return not connection.in_atomic_block
