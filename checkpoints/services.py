"""The checkpoint channel's writes and reads (CONTRACTS.md, "Checkpoint channel").

- Tokens: each pod of a run gets one when it is bound (`token_issue`), delivered by the backend as
  a Secret; the workload shows it to the endpoint, which finds its job with `token_holder`.
  Tokens die with the run (`tokens_revoke`, called when the run's placements end).
- Confirmations: `checkpoint_confirm` records what a workload saved (from the API, or from the
  simulated cluster's workloads) and moves the job's saved progress forward; the workers read
  the answer to their request with `checkpoint_confirmed`.
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.crypto import salted_hmac

from checkpoints.models import CheckpointConfirmation, CheckpointToken
from scheduling.models import ActionRequest, Job
from scheduling.services import job_event_add

PERIODIC = CheckpointConfirmation.PERIODIC
# What the workers ask with: "interval-<action id>" (checkpoint_due) or "preempt-<action id>".
REQUEST_KINDS = {"interval": ActionRequest.Kind.CHECKPOINT, "preempt": ActionRequest.Kind.PREEMPT}
_REQUEST_ID = re.compile(r"^(interval|preempt)-(\d{1,18})$")
CLOCK_SKEW = timedelta(minutes=5)  # a workload's clock may run this far ahead of ours
MAX_PROGRESS_S = 10 * 365 * 86400.0


class TokenRefused(Exception):
    """The token is unknown, or its run has ended."""


class ConfirmationConflict(Exception):
    """The request was already confirmed with other values."""


def request_id(action: ActionRequest) -> str:
    """The id a checkpoint request carries to the workload (and the workload confirms with)."""
    prefix = "interval" if action.kind == ActionRequest.Kind.CHECKPOINT else "preempt"
    return f"{prefix}-{action.pk}"


# -- tokens ------------------------------------------------------------------------------------------

def pod_token(pod_key: str) -> str:
    """The token of one pod: an HMAC of the pod's bind key under SECRET_KEY.

    Derived, not drawn, so that a retried bind (a worker killed after creating the Secret) puts
    the very same token in the very same Secret; nobody can derive it without SECRET_KEY, and the
    database keeps only its digest.
    """
    return salted_hmac("tessera.checkpoints.pod-token", pod_key, algorithm="sha256").hexdigest()


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def token_issue(*, job: Job, pod_name: str, pod_key: str, at: datetime) -> str:
    """The pod's token, its digest recorded (again, for a retried bind: same token, same row)."""
    token = pod_token(pod_key)
    CheckpointToken.objects.update_or_create(job=job, pod_name=pod_name,
                                             defaults={"digest": _digest(token), "issued_at": at, "revoked_at": None})
    return token


def channel_token_issue(*, job: Job, namespace: str, channel: str, at: datetime) -> str:
    """The token of a native job's channel (CONTRACTS.md, "Native pods"): one per Secret its pods
    mount, derived from the namespace and the Secret's name, since the Secret outlives a run and
    every pod made from the same template mounts it. Its row follows the job that binds it last, and
    is live again for each run of it (a job stopped and rejoined by its pods keeps its channel)."""
    token = salted_hmac("tessera.checkpoints.native-channel", f"{namespace}/{channel}", algorithm="sha256").hexdigest()
    CheckpointToken.objects.update_or_create(digest=_digest(token), defaults={
        "job": job, "pod_name": channel, "issued_at": at, "revoked_at": None})
    return token


def tokens_revoke(*, job_id: int, at: datetime) -> int:
    return CheckpointToken.objects.filter(job_id=job_id, revoked_at__isnull=True).update(revoked_at=at)


def token_holder(token: str) -> CheckpointToken:
    """The live token with this value, with its job; TokenRefused says why not."""
    found = CheckpointToken.objects.select_related("job").filter(digest=_digest(token)).first()
    if found is None:
        raise TokenRefused("Unknown checkpoint token.")
    if found.revoked_at is not None or found.job.status not in Job.HOLDING_STATUSES:
        raise TokenRefused(f"This checkpoint token was revoked: the run of job {found.job_id} has ended.")
    return found


# -- confirmations -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Saved:
    """What the workload says it saved."""

    checkpoint_id: str
    step: int
    progress_s: float
    saved_at: datetime
    path: str = ""


def _errors(job: Job, saved: Saved, now: datetime) -> dict[str, str]:
    errors = {}
    if saved.checkpoint_id != PERIODIC:
        found = _REQUEST_ID.match(saved.checkpoint_id)
        asked = found and ActionRequest.objects.filter(
            pk=int(found.group(2)), job=job, kind=REQUEST_KINDS[found.group(1)]).exists()
        if not asked:
            errors["checkpoint_id"] = (f"Job {job.pk} was never asked for checkpoint {saved.checkpoint_id!r}; "
                                       f"confirm a request's id or {PERIODIC!r}.")
    if saved.step < 0:
        errors["step"] = "The step cannot be negative."
    if not (math.isfinite(saved.progress_s) and 0 <= saved.progress_s <= MAX_PROGRESS_S):
        errors["progress_s"] = "Progress must be a number of seconds from 0 to ten years."
    if timezone.is_naive(saved.saved_at):
        errors["saved_at"] = "Give saved_at with its time zone (RFC 3339, e.g. 2025-01-31T12:00:00Z)."
    elif saved.saved_at > now + CLOCK_SKEW:
        errors["saved_at"] = f"saved_at {saved.saved_at.isoformat()} is in the future (server time {now.isoformat()})."
    return errors


def _same(record: CheckpointConfirmation, saved: Saved) -> bool:
    return (record.checkpoint_id, record.step, record.progress_s, record.saved_at, record.path) == (
        saved.checkpoint_id, saved.step, saved.progress_s, saved.saved_at, saved.path)


@transaction.atomic
def checkpoint_confirm(*, job_id: int, pod_name: str, saved: Saved,
                       now: datetime | None = None) -> tuple[CheckpointConfirmation, bool]:
    """Record a saved checkpoint of the job; (record, True) the first time, (record, False) for an
    identical repeat. ValidationError for bad values, ConfirmationConflict for a request already
    confirmed otherwise. The job's saved progress moves to it unless a newer one is already kept."""
    now = now or timezone.now()
    job = Job.objects.get(pk=job_id)
    if job.status not in Job.HOLDING_STATUSES:
        raise ConfirmationConflict(f"Job {job.pk} is {job.status}: its run has ended, so it takes no checkpoints.")
    errors = _errors(job, saved, now)
    if errors:
        raise ValidationError(errors)
    key = f"{PERIODIC}@{saved.step}" if saved.checkpoint_id == PERIODIC else saved.checkpoint_id
    try:
        with transaction.atomic():
            record, created = CheckpointConfirmation.objects.get_or_create(
                job=job, key=key, defaults={"checkpoint_id": saved.checkpoint_id, "pod_name": pod_name,
                                            "step": saved.step, "progress_s": saved.progress_s,
                                            "saved_at": saved.saved_at, "path": saved.path, "recorded_at": now})
    except IntegrityError:  # a concurrent identical POST won the insert
        record, created = CheckpointConfirmation.objects.get(job=job, key=key), False
    if not created:
        if _same(record, saved):
            return record, False
        raise ConfirmationConflict(
            f"Checkpoint {saved.checkpoint_id!r} of job {job.pk} was already confirmed at step {record.step} "
            f"({record.progress_s:g} s, saved {record.saved_at.isoformat()}).")
    _progress_keep(job, record)
    return record, True


def _progress_keep(job: Job, record: CheckpointConfirmation) -> None:
    """A conditional UPDATE: an older checkpoint than the one kept changes nothing."""
    newer = Job.objects.filter(pk=job.pk).exclude(last_checkpoint_at__gte=record.saved_at)
    if newer.update(progress_s=record.progress_s, last_checkpoint_at=record.saved_at,
                    updated_at=timezone.now()) != 1:
        return
    why = "on its own" if record.checkpoint_id == PERIODIC else f"asked as {record.checkpoint_id}"
    job_event_add(job=job, at=record.saved_at, kind="checkpointed",
                  message=f"Checkpoint saved ({why}) at step {record.step}, {record.progress_s:.0f} s of work.")


def checkpoint_confirmed(*, job_id: int, checkpoint_id: str, asked_at: datetime) -> CheckpointConfirmation | None:
    """The answer to a request: its own confirmation, or one the workload saved on its own since."""
    answers = CheckpointConfirmation.objects.filter(job_id=job_id)
    own = answers.filter(key=checkpoint_id).first()
    return own or answers.filter(checkpoint_id=PERIODIC, saved_at__gte=asked_at).order_by("-saved_at").first()
