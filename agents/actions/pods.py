"""Which pods a job has (its current run's binds), and stopping them."""

from __future__ import annotations

from agents.backends.base import Backend, PreemptRequest
from agents.native import native_stop
from scheduling.models import ActionRequest, Job
from scheduling.payloads import BindPayload


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
