"""What a job's pods need beyond their GPUs: torchrun's rendezvous over several pods (a headless
Service per run), and the volume and Secrets the team attached. The backend builds them
(agents/backends/k8s_manifests.py); this says what they are from the rows, and ends the Services
of runs that are over."""

from __future__ import annotations

import logging

from agents.backends.base import Attachments, Backend, Rendezvous
from scheduling.models import ActionRequest, Job
from scheduling.payloads import BindPayload

log = logging.getLogger(__name__)


def rendezvous_service(job: Job) -> str:
    """The headless Service of the job's current run (a DNS-1035 label: it starts with a letter)."""
    return f"tessera-{job.pk}-{job.run}"


def job_rendezvous(job: Job, binds: list[ActionRequest], member: int) -> Rendezvous:
    """torchrun's settings for `member` of the run (`binds`: every member's bind): one process per
    whole GPU its pod holds (one for a slice or a share), global ranks counted in member order."""
    nproc = {}
    for bind in binds:
        payload = BindPayload.from_payload(bind.payload)
        nproc[payload.member] = max(1, sum(1 for a in payload.allocations if not a.mig_profile and a.milli >= 1000))
    nproc.setdefault(member, 1)  # never without itself, whatever was read
    return Rendezvous(
        service=rendezvous_service(job),
        members=len(nproc),
        member=member,
        nproc=nproc[member],
        world_size=sum(nproc.values()),
        first_rank=sum(n for m, n in nproc.items() if m < member),
    )


def job_attachments(job: Job) -> Attachments:
    return Attachments(
        volume_claim=job.volume_claim,
        volume_mount_path=job.volume_mount_path,
        env_secret=job.env_secret,
        file_secret=job.file_secret,
    )


def services_end(backend: Backend, holding: list[Job]) -> int:
    """Delete the Services of runs that are over: completed (their pods stay, for their logs),
    failed, preempted, cancelled, or replaced by a later run. `holding`: the jobs that held GPUs
    when the reconcile began; a Service made since (a run bound meanwhile) is checked again here."""
    current = {(job.team.name, rendezvous_service(job)) for job in holding if job.started_at is not None}
    removed = 0
    for service in backend.rendezvous_services():
        if (service.namespace, service.name) in current or _current_now(service.job_id, service.name):
            continue
        backend.remove_rendezvous_service(service.namespace, service.name)
        log.info("job %s: its run is over; removed Service %s/%s", service.job_id, service.namespace, service.name)
        removed += 1
    return removed


def _current_now(job_id: str, name: str) -> bool:
    job = Job.objects.filter(pk=int(job_id), status__in=Job.HOLDING_STATUSES).first() if job_id.isdigit() else None
    return job is not None and job.started_at is not None and rendezvous_service(job) == name
