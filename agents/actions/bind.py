"""Binding a job's pod: the request the backend gets, and what a refusal does to the job."""

from __future__ import annotations

import logging
import shlex
from datetime import UTC, datetime

from django.conf import settings

from agents.actions.checkpoint import CONFIRM_MARGIN_S, checkpoint_save_s
from agents.actions.pods import attempt_binds, job_pods, stop_pods
from agents.actions.state import CONFIRMED, FAILED, HOLDING, finish, load_job
from agents.backends.base import (
    ENV_GPU_INDEXES,
    ENV_RESUME,
    ENV_RUNTIME,
    Backend,
    BackendError,
    BindRequest,
    Conflict,
    GpuShare,
    Outcome,
    Refused,
    Rendezvous,
    TransientBackendError,
)
from agents.native import native_bind_refused, native_channel
from agents.rendezvous import job_attachments, job_rendezvous
from checkpoints.services import channel_token_issue, token_issue
from scheduling.clock import database_now
from scheduling.models import ActionRequest, Job, JobEvent
from scheduling.payloads import BindPayload
from scheduling.services import job_release, placements_bound

log = logging.getLogger(__name__)
MAX_BIND_TRIES = 3  # binds of one job the cluster may refuse before the job fails


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


def bind_step(action: ActionRequest, backend: Backend, now: datetime) -> None:
    job = load_job(action)
    payload = BindPayload.from_payload(action.payload)
    held = job.placements.filter(pk__in=payload.placements, ended_at__isnull=True).exists()
    if job.status not in HOLDING or not held:
        stop_pods(backend, job, [payload.pod_name], "released")
        finish(action, FAILED, "The job was released before its pod was bound.")
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
    finish(action, CONFIRMED)


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
    finish(action, FAILED, error)
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
