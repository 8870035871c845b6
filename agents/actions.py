"""ActionRequests carried out through a backend, as resumable state machines.

Each action keeps its phase in `payload["phase"]`. One step locks the row, makes idempotent
backend calls and writes the next phase in the same transaction, so a worker killed anywhere
leaves the row at the last committed phase and the next run (a retry, `resume_actions`) repeats
at most one idempotent step. A finished action (confirmed / failed) is never touched again.
"""

from __future__ import annotations

import logging
import shlex
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import connection, transaction

from agents import observe
from agents.backends.base import (
    ENV_GPU_INDEXES,
    ENV_RESUME,
    ENV_RUNTIME,
    Backend,
    BackendError,
    BindRequest,
    CheckpointRequest,
    Conflict,
    GpuShare,
    JobStatus,
    Outcome,
    PreemptRequest,
    Refused,
    Rendezvous,
    TransientBackendError,
)
from agents.mig import repartition_finish, repartition_start
from agents.native import native_bind_refused, native_channel, native_stop
from agents.rendezvous import job_attachments, job_rendezvous
from agents.runtime import failpoint
from checkpoints.services import (
    ConfirmationConflict,
    Saved,
    channel_token_issue,
    checkpoint_confirm,
    checkpoint_confirmed,
    request_id,
    token_issue,
)
from scheduling.clock import database_now
from scheduling.engine.reasons import PreemptReason
from scheduling.models import ActionRequest, Job, JobEvent
from scheduling.payloads import BindPayload, PreemptPayload
from scheduling.services import job_event_add, job_release, placements_bound

if TYPE_CHECKING:  # the simulated backend calls confirm_simulated; production never imports it
    from agents.backends.simulated import SavedCheckpoint

log = logging.getLogger(__name__)
REQUESTED, CONFIRMED, FAILED = "requested", "confirmed", "failed"
HOLDING = Job.HOLDING_STATUSES
RELEASE_REASONS = {PreemptReason.PREEMPT: "preempted", PreemptReason.RECLAIM: "reclaimed",
                   PreemptReason.CONSOLIDATE: "moved", PreemptReason.SPOT_RECLAIM: "spot-reclaimed",
                   PreemptReason.CANCEL: "cancelled"}
MAX_STEPS = 8
MAX_BIND_TRIES = 3  # binds of one job the cluster may refuse before the job fails
CONFIRM_MARGIN_S = 15  # after the save: the confirmation's round trip and a clean exit


def action_advance(*, action_id: int, backend: Backend, now: datetime | None = None) -> str:
    """Run steps until the action waits or finishes; returns its state ('requested' = call again)."""
    state = REQUESTED
    for _ in range(MAX_STEPS):
        state, phase, moved = _step(action_id, backend, now or database_now())
        if state != REQUESTED or not moved:
            break
        failpoint(f"action.{phase}")  # between two committed steps
    if moved and state != REQUESTED:  # finished by this call: logged once
        observe.action_finished(action_id)
    return state


@transaction.atomic
def _step(action_id: int, backend: Backend, now: datetime) -> tuple[str, str, bool]:
    action = ActionRequest.objects.select_for_update().filter(pk=action_id).first()
    if action is None:
        return FAILED, "", False
    if action.state != REQUESTED:
        return action.state, "", False
    before = (action.state, action.payload.get("phase"))
    action.attempts = min(action.attempts + 1, 32767)
    STEPS[action.kind](action, backend, now)
    action.save(update_fields=["state", "payload", "attempts", "last_error", "updated_at"])
    after = (action.state, action.payload.get("phase"))
    return action.state, f"{action.kind}.{after[1]}", after != before


def _finish(action: ActionRequest, state: str, error: str = "") -> None:
    action.state = state
    action.last_error = error[:500]


def _phase(action: ActionRequest, phase: str, **fields) -> None:
    action.payload = {**action.payload, "phase": phase, **fields}


# -- which pods a job has ----------------------------------------------------------------------

def attempt_binds(job: Job) -> list[ActionRequest]:
    """The bind actions of the job's current run (keys end in its run id, scheduling.models.run_id)."""
    if job.started_at is None:
        return []
    attempt = job.run
    return list(ActionRequest.objects.filter(job=job, kind=ActionRequest.Kind.BIND, key__startswith=f"bind:{job.pk}:",
                                             key__endswith=f":{attempt}").order_by("id"))


def job_pods(job: Job) -> list[str]:
    return [BindPayload.from_payload(action.payload).pod_name for action in attempt_binds(job)]


def observed_pods(backend: Backend, job: Job) -> dict:
    """pod name -> observation, for the pods of the job's current run that the cluster still has."""
    pods = set(job_pods(job))
    return {o.pod_name: o for o in backend.job_observations(str(job.pk)) if o.pod_name in pods}


def stop_pods(backend: Backend, job: Job, pods, reason: str, grace_s: int = 0) -> None:
    if job.native:  # someone else's pods: some stops leave them, a cancel may delete their owner
        native_stop(backend, job, pods, reason, grace_s)
        return
    for pod in pods:
        pod_stop(backend, str(job.pk), job.team.name, pod, reason, grace_s)


def pod_stop(backend: Backend, job_id: str, namespace: str, pod: str, reason: str, grace_s: int = 0) -> None:
    backend.preempt(PreemptRequest(job_id=job_id, pod_name=pod, namespace=namespace, grace_seconds=grace_s,
                                   reason=reason))


def _load_job(action: ActionRequest) -> Job:
    return Job.objects.select_related("team", "project", "priority_class").get(pk=action.job_id)


# -- bind ---------------------------------------------------------------------------------------

def checkpoint_save_s(job: Job) -> int:
    """How long the job needs to write a checkpoint: its own figure, else the cluster's."""
    return job.checkpoint_save_s or settings.TESSERA_CHECKPOINT_SAVE_S


def bind_request(action: ActionRequest, job: Job, members: int, checkpoint_token: str = "",
                 rendezvous: Rendezvous | None = None, checkpoint_channel: str = "") -> BindRequest:
    payload = BindPayload.from_payload(action.payload)
    allocations = payload.allocations
    mig = next((a.mig_profile for a in allocations if a.mig_profile), None)
    whole = [str(a.gpu_index) for a in allocations if not a.mig_profile and a.milli >= 1000]
    shared = not mig and any(a.milli < 1000 for a in allocations)
    runtime = job.expected_runtime_s or job.max_runtime_s or 3600
    # SIGTERM means "save now and exit": a checkpointing job gets its save time (and a little to
    # confirm) before the kubelet kills it, whoever deletes the pod; others the cluster's default.
    grace = checkpoint_save_s(job) + CONFIRM_MARGIN_S if job.checkpoint_interval_s else None
    return BindRequest(
        job_id=str(job.pk), pod_name=payload.pod_name, namespace=job.pod_namespace, project=job.project.name,
        job_kind=job.kind, image=job.image,
        command=tuple(shlex.split(job.command)), node_name=payload.node,
        gpu_count=0 if mig else max(1, len(allocations)), mig_profile=mig,
        cpu_millicores=max(1, int(job.cpu_cores * 1000 / members)),
        memory_mib=max(1, int(job.memory_gb * 1024 / members)), priority_class=job.priority_class.name,
        env=((ENV_RUNTIME, str(runtime)), (ENV_RESUME, str(job.progress_s)), (ENV_GPU_INDEXES, ",".join(whole))),
        grace_seconds=grace, checkpoint_token=checkpoint_token, checkpoint_url=settings.TESSERA_CHECKPOINT_URL,
        checkpoint_channel=checkpoint_channel,
        rendezvous=rendezvous, attachments=job_attachments(job),
        share=GpuShare(memory_mib=max(1, int(job.gpu_memory_gb * 1024))) if shared else None,
        native=job.native)


def _bind_step(action: ActionRequest, backend: Backend, now: datetime) -> None:
    job = _load_job(action)
    payload = BindPayload.from_payload(action.payload)
    held = job.placements.filter(pk__in=payload.placements, ended_at__isnull=True).exists()
    if job.status not in HOLDING or not held:
        stop_pods(backend, job, [payload.pod_name], "released")
        _finish(action, FAILED, "The job was released before its pod was bound.")
        return
    # A native pod's spec is its owner's: its channel is the Secret its owner mounts, if it does.
    channel = native_channel(job, payload.pod_name) if job.native else ""
    if channel:
        token = channel_token_issue(job=job, namespace=job.pod_namespace, channel=channel, at=now)
    else:
        token = "" if job.native else token_issue(job=job, pod_name=payload.pod_name, pod_key=action.key, at=now)
    binds = attempt_binds(job)  # every member's: the cycle wrote them in one transaction
    # A native pod's peers are its owner's to wire up: Tessera adds no Service for them.
    rendezvous = None if job.native else job_rendezvous(job, binds, payload.member)
    try:
        outcome = backend.bind(bind_request(action, job, len(binds), checkpoint_token=token, rendezvous=rendezvous,
                                            checkpoint_channel=channel))
    except TransientBackendError:
        raise  # the API server is away (restarting, throttled): the task retries; nothing changed here
    except (Refused, ValueError) as error:  # refused for good (admission, a command that does not parse)
        _bind_refused(action, backend, job, str(error), final=True)
        return
    except BackendError as error:  # this placement is refused (a conflict); another one may work
        _bind_refused(action, backend, job, str(error), final=False)
        return
    placements_bound(placement_ids=payload.placements, at=pod_started_at(backend, job, payload.pod_name, outcome, now))
    _finish(action, CONFIRMED)


def pod_started_at(backend: Backend, job: Job, pod: str, outcome: Outcome, now: datetime) -> datetime:
    """When the bound pod started, to bill from: never before. `now` was read before the call, and
    the call may have waited (a throttled API, a stalled worker), so the clock is read again after
    it. A pod an earlier try bound, dying before it recorded so, started when the cluster says (the
    fault campaign found a job billed from its placement, seconds before its pod), else from now."""
    after = max(now, database_now())
    if outcome == Outcome.DONE:
        return after
    seen = next((o for o in backend.job_observations(str(job.pk)) if o.pod_name == pod), None)
    if seen is None or seen.started_at is None:
        return after
    return min(after, datetime.fromtimestamp(seen.started_at, tz=UTC))


def _bind_refused(action: ActionRequest, backend: Backend, job: Job, error: str, *, final: bool) -> None:
    _finish(action, FAILED, error)
    bind_refusal_release(backend, job, error, final=final)
    refused = JobEvent.objects.filter(job=job, kind="bind-refused").order_by("-pk").first()
    if job.native and refused is not None:  # failed for good, its unbound pods left Pending: say why on them
        native_bind_refused(backend, job, refused.message)


def bind_refusal_release(backend: Backend, job: Job, error: str, *, final: bool) -> bool:
    """The cluster (API server or kubelet) refused a pod of the job's run: stop its pods and release
    it with nothing billed (nothing ran): its intervals close where they opened. A refusal a retry
    cannot mend fails the job at once, in the cluster's words; any other requeues it until
    MAX_BIND_TRIES were refused, so a job the cluster keeps refusing never loops (nor preempts
    others for a place it cannot take)."""
    try:
        stop_pods(backend, job, job_pods(job), "bind-failed")
    except (Conflict, Refused) as not_ours:  # the name is another job's pod: nothing of ours to stop
        log.info("job %s: no pod of its own to stop after the refusal: %s", job.pk, not_ours)
    tries = JobEvent.objects.filter(job=job, kind="bind-failed").count() + 1
    if final:
        reason, message = "bind-refused", f"The cluster refused the job's pod: {error}"
    elif tries >= MAX_BIND_TRIES:
        reason, message = "bind-refused", f"The cluster refused {tries} binds; the job failed. Last: {error}"
    else:
        reason, message = "bind-failed", f"The cluster refused the bind ({tries} of {MAX_BIND_TRIES}): {error}"
    return job_release(job_id=job.pk, at=job.started_at, reason=reason, message=message)


# -- checkpoints ----------------------------------------------------------------------------------
# Tessera asks through the backend (a pod annotation); the workload answers through the checkpoint
# endpoint (checkpoints/), which records the answer in the database: the steps below read it there.

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


def _checkpoint_step(action: ActionRequest, backend: Backend, now: datetime) -> None:
    job = _load_job(action)
    checkpoint_id = request_id(action)
    if job.status not in HOLDING:
        _finish(action, FAILED, "The job stopped before the checkpoint.")
    elif action.payload.get("phase") is None:
        ask_checkpoint(backend, job, job_pods(job), checkpoint_id, "interval")
        _phase(action, "asked", asked_at=now.timestamp())
    else:
        alive = pods_alive(backend, job)
        if checkpoint_confirmed(job_id=job.pk, checkpoint_id=checkpoint_id, asked_at=_asked_at(action)) is not None:
            _finish(action, CONFIRMED)
        elif not alive:
            _finish(action, FAILED, "The job's pods are gone; no checkpoint can come.")
        elif now.timestamp() > action.payload["asked_at"] + max(settings.TESSERA_PREEMPT_GRACE_S,
                                                                checkpoint_save_s(job)):
            _finish(action, FAILED, "The checkpoint was not confirmed in time.")
        else:
            return
        if not _preempting(job):
            Job.objects.filter(pk=job.pk, status=Job.Status.CHECKPOINTING).update(status=Job.Status.RUNNING)


def _asked_at(action: ActionRequest) -> datetime:
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


# -- preemption and spot reclaim: checkpoint -> stop -> release -----------------------------------

def _preempt_step(action: ActionRequest, backend: Backend, now: datetime) -> None:
    job = _load_job(action)
    if job.status not in HOLDING:  # it finished, or a lost node released it first
        _finish(action, CONFIRMED, f"The job was already {job.status}.")
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
        _phase(action, "checkpointing", deadline=deadline, asked_at=now.timestamp())
        job_event_add(job=job, at=now, kind="checkpoint-requested", message="Asked to checkpoint before stopping.")
    elif _reason(action) == PreemptReason.CANCEL:  # its team wants it stopped, not saved
        _phase(action, "stopping", deadline=deadline)
    else:
        why = "no checkpoint support" if not job.checkpoint_interval_s else f"only {max(room, 0):.0f} s of notice"
        if job.native and not job.checkpoint_interval_s:
            why = "its pods mount no checkpoint channel"
        _phase(action, "stopping", deadline=deadline)
        job_event_add(job=job, at=now, kind="checkpoint-skipped",
                      message=f"Stopping without a checkpoint ({why}); work since the last checkpoint is lost.")


def _preempt_wait(action, backend, job, now) -> None:
    alive = pods_alive(backend, job)
    if checkpoint_confirmed(job_id=job.pk, checkpoint_id=request_id(action), asked_at=_asked_at(action)) is not None:
        pass  # the confirmation already moved the job's saved progress
    elif alive and now.timestamp() < action.payload["deadline"]:
        return
    else:
        job_event_add(job=job, at=now, kind="checkpoint-missed",
                      message="No checkpoint within the grace period; work since the last one is lost.")
    _phase(action, "stopping")


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
    _phase(action, "releasing", stopped_at=now.timestamp(), grace=grace)


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
    _finish(action, CONFIRMED)


# -- MIG repartition ------------------------------------------------------------------------------

def _repartition_step(action: ActionRequest, backend: Backend, now: datetime) -> None:
    if action.payload.get("phase") is None:
        if repartition_start(action, backend):
            _phase(action, "applying", asked_at=now.timestamp())
        return
    outcome = repartition_finish(action, backend, now.timestamp())
    if outcome is None and now.timestamp() > action.payload["asked_at"] + 900:
        outcome = "The node did not report the new MIG layout within 15 minutes."
    if outcome == "":
        _finish(action, CONFIRMED)
    elif outcome is not None:
        _finish(action, FAILED, outcome)


STEPS = {"bind": _bind_step, "checkpoint": _checkpoint_step, "preempt": _preempt_step,
         "repartition": _repartition_step}

