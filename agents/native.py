"""Native submission (docs/reference/native-submission.md): the intake that makes jobs of the pods others
create for Tessera, and how Tessera stops such pods. The poll runs the intake (agents/tasks.py).

A pod made again for a job Tessera stopped (its Job controller's replacement, its gang's, a bare pod
created again under its name) rejoins that job (scheduling/native.py, native_rejoin) instead of
making one. Taking a pod in is idempotent by its uid: the job and its NativePod row are written in one
transaction, then the pod is labelled with the job's id, which takes it out of the intake's list.
A worker that dies between the two leaves the pod in the list; the next poll finds the row by uid
and only labels. A pod refused (its namespace unmapped, a request Tessera cannot read, a gang that
already has its members) gets an Event saying why and stays Pending; the next poll looks again, so
a fix (a mapping, a project) takes effect without touching the pod.

A refusal is said once per pod and reason: what each pod was last told lives in the cache (Redis,
shared by every worker that polls), and a poll that finds the same refusal says nothing. The pod's
one Event keeps count 1 while the pod waits for the same reason; a new reason or sentence is a new
Event. After TOLD_TTL_S, the API server's default Event lifetime (--event-ttl, 1 h), it is said
again, so `kubectl describe pod` still shows why; where the old Event still exists, that repeat
raises its count, as Kubernetes folds repeats of one Event.
"""

from __future__ import annotations

import hashlib
import logging
from datetime import datetime, timedelta

from django.core.cache import cache
from django.core.exceptions import ValidationError
from django.db import IntegrityError

from agents.backends.base import Backend, JobStatus, Outcome, PreemptRequest, TransientBackendError
from agents.backends.k8s_channel import channel_name
from agents.backends.k8s_gangs import GangError
from agents.backends.k8s_native import NativePod as FoundPod
from agents.backends.k8s_native import RefusedPod, owner_kind
from agents.native_gangs import PodGroupCounts, gang_take_in, gangs_resize
from scheduling.clock import database_now
from scheduling.engine.reasons import PreemptReason
from scheduling.models import Job, NativePod
from scheduling.native import (
    NativeNeed,
    namespace_team,
    native_holding,
    native_job_create,
    native_rejoin,
    native_stopping,
    not_mapped_message,
    refusal_reason,
)
from scheduling.native_gangs import gang_member_gone
from scheduling.services import TooManySubmits, job_release

log = logging.getLogger(__name__)
# A refused bind leaves someone else's pod as it came, Pending: Tessera did not create it.
LEAVE_PENDING = {"bind-failed", "bind-refused"}
CANCEL_REASONS = {PreemptReason.CANCEL.value, "cancelled"}
BIND_REFUSED_REASON = "FailedScheduling"  # what the kube-scheduler says when a binding is rejected
TOLD_TTL_S = 3600  # kube-apiserver's default --event-ttl: a pod waiting longer is told again


def native_intake(*, backend: Backend, now: datetime | None = None) -> dict:
    """Take in every native pod the cluster lists; {"taken": [job ids], "refused": {reason: count}}."""
    now = now or database_now()
    taken: list[int] = []
    refused: dict[str, int] = {}
    counts = PodGroupCounts(backend)
    for found in backend.native_pods():  # the kubernetes backend's
        try:
            job_id, reason = _take_in(backend, found, now, counts)
        except TransientBackendError:
            raise  # the API server is away: the poll retries, and this step with it
        except Exception:  # noqa: BLE001 - one pod Tessera cannot read must not stop the others
            log.exception("native pod %s/%s not taken in", found.namespace, found.name)
            continue
        if job_id is not None:
            taken.append(job_id)
        if reason:
            refused[reason] = refused.get(reason, 0) + 1
    gangs_resize(counts)  # a PodGroup made or changed since the gang's pods were taken in
    return {"taken": taken, "refused": refused}


def _take_in(backend, found: FoundPod | RefusedPod, now: datetime, counts: PodGroupCounts) -> tuple[int | None, str]:
    if isinstance(found, RefusedPod):
        return None, _refuse(backend, found)
    team = namespace_team(found.namespace) if backend.namespace_allowed(found.namespace) else None
    if team is None:
        return None, _refuse(backend, _refusal(found, "NamespaceNotMapped", not_mapped_message(found.namespace)))
    job = _job_of(found.uid)
    if job is None:
        try:
            gang = bool(found.group) and counts.is_gang(found.namespace, found.group)
            need = native_need(found, found.group if gang else "")  # a `basic` PodGroup: each pod a job of its own
            if native_stopping(need) or _replaces_removed(backend, need):
                return None, ""  # made while the job it comes from is being stopped: it rejoins it once released
            job = native_rejoin(need=need, at=now)  # a pod made again after Tessera stopped its job
            if job is None and need.group:  # a gang's pod joins its group's job (agents/native_gangs.py)
                job = gang_take_in(counts, team, need, found.min_member, now)
            elif job is None:  # a single pod (a `basic` PodGroup's pods are placed one by one)
                job = native_job_create(team=team, need=need, at=now)
        except GangError as error:  # its PodGroup object says no usable minMember
            return None, _refuse(backend, _refusal(found, "InvalidPodGroup", str(error)))
        except ValidationError as error:
            return None, _refuse(backend, _refusal(found, *refusal_reason(error)))
        except TooManySubmits as error:
            return None, _refuse(backend, _refusal(found, "TooManySubmits", str(error)))
        except IntegrityError:  # another worker took it in meanwhile: its row is the one
            job = _job_of(found.uid)
            if job is None:
                raise
    if backend.native_label(found, str(job.pk), job.team.name) is Outcome.GONE:
        job_release(
            job_id=job.pk,
            at=now,
            reason="pod-deleted",
            message=f"Pod {found.namespace}/{found.name} was deleted before Tessera could place it.",
        )
        return None, ""
    return job.pk, ""


def _replaces_removed(backend, need: NativeNeed) -> bool:
    """Whether the pod comes from where a running job's pods do, and the cluster has removed one of
    those (evicted, failed, being deleted, gone): its controller made this one at once, before
    reconcile requeued that job. It waits, untaken, and rejoins the job once it is requeued (or is
    a new job's, one poll later, where the job ended instead)."""
    for job_id in native_holding(need):
        seen = backend.job_observations(str(job_id))
        if not seen or any(o.terminating or o.status in (JobStatus.FAILED, JobStatus.DELETED) for o in seen):
            return True
    return False


def _job_of(uid: str) -> Job | None:
    row = NativePod.objects.select_related("job__team").filter(uid=uid).first()
    return row.job if row is not None else None


def _refusal(found: FoundPod, reason: str, message: str) -> RefusedPod:
    return RefusedPod(found.uid, found.namespace, found.name, reason, message)


def _refuse(backend, refused: RefusedPod) -> str:
    """Say on the pod why it stays Pending, unless it was told just that already (the module's
    docstring); the reason either way, for the poll's counts."""
    key = f"native-refused:{refused.uid}"
    told = hashlib.sha256(f"{refused.reason}\0{refused.message}".encode()).hexdigest()[:16]
    if cache.get(key) != told:
        backend.native_refuse(refused)
        cache.set(key, told, TOLD_TTL_S)
    return refused.reason


def native_need(found: FoundPod, group: str | None = None) -> NativeNeed:
    """The pod as a job's need, its job's group being `group` (default: the pod's; '' for a pod on
    its own); its checkpoint channel is read with that same group, as native_channel names it at bind."""
    owner, group = found.owner, (found.group or "") if group is None else group
    return NativeNeed(
        uid=found.uid,
        namespace=found.namespace,
        pod_name=found.name,
        name=found.display_name,
        image=found.image,
        gpus=found.gpus,
        gpu_memory_gb=found.gpu_memory_gb,
        mig_profile=found.mig_profile,
        cpu_cores=max(found.cpu_cores, 0.1),
        memory_gb=found.memory_gb,
        priority_class=found.priority_class,
        priority=found.priority,
        project=found.project,
        group=group,
        accepts_no_isolation=found.accepts_no_isolation,
        checkpoint_interval_s=found.checkpoint_interval(group),
        owner=(owner.api_version, owner.kind, owner.name, owner.uid) if owner else ("", "", "", ""),
    )


def native_waiting_gone(observations, *, now: datetime, seen_after: timedelta) -> list[int]:
    """End the waiting native jobs whose pod is no longer in the cluster's list (deleted before
    Tessera placed it): nothing would place them, and a bind would find no pod. A pod taken in
    less than `seen_after` ago may not have reached the list yet (the watch's lag)."""
    listed = {(o.job_id, o.namespace, o.pod_name) for o in observations}
    ended = []
    rows = NativePod.objects.filter(job__status__in=Job.WAITING_STATUSES, taken_at__lte=now - seen_after, vacant=False)
    for row in rows.select_related("job"):
        if (str(row.job_id), row.namespace, row.name) in listed or gang_member_gone(row):
            continue  # still there, or one of a gang's pods: the gang waits for another
        if job_release(
            job_id=row.job_id,
            at=now,
            reason="pod-deleted",
            message=f"Pod {row.namespace}/{row.name} was deleted before Tessera placed it.",
        ):
            ended.append(row.job_id)
    return ended


# -- the checkpoint channel and stopping native pods ---------------------------------------------


def native_channel(job: Job, pod_name: str) -> str:
    """The Secret the job's pod mounts as its checkpoint channel (agents/backends/k8s_channel.py);
    '' when the job takes no checkpoints (the intake saw no such volume in its pods)."""
    row = NativePod.objects.filter(job=job, name=pod_name, vacant=False).first()
    if not job.checkpoint_interval_s or row is None:
        return ""
    return channel_name(row.group, row.owner_name, row.name)


def native_bind_refused(backend, job: Job, why: str) -> None:
    """A bind refused for good fails the job and leaves its pods Pending; labelled as the job's, the
    intake will not take them in again. Say so on each, in the kube-scheduler's word for a refused bind."""
    message = (
        f"Tessera job {job.pk} failed: {why} Tessera leaves this pod Pending and will not queue it again; "
        "delete it (a controller that owns it makes a new pod, which queues as a new job)."
    )
    for pod in NativePod.objects.filter(job=job).order_by("name"):
        backend.native_refuse(RefusedPod(pod.uid, pod.namespace, pod.name, BIND_REFUSED_REASON, message))


def native_stop(backend: Backend, job: Job, pods, reason: str, grace_s: int = 0) -> None:
    """Stop a native job's pods. A cancel of pods whose owner is in k8s_native.OWNER_KINDS (a batch/v1
    Job, the JobSet controlling it, a PyTorchJob) deletes that owner: deleting its pods alone would
    only make the controller create new ones (Kubernetes 1.20 cannot suspend a Job). Every other stop
    deletes the pods themselves."""
    if reason in LEAVE_PENDING:
        return
    if reason in CANCEL_REASONS:
        owners = NativePod.objects.filter(job=job).order_by("pk")
        owner = next((o for o in owners if owner_kind(o.owner_api_version, o.owner_kind)), None)
        if owner is not None and backend.native_delete_owner(
            owner.namespace, owner.owner_api_version, owner.owner_kind, owner.owner_name, owner.owner_uid
        ):
            return
    for pod in pods:
        backend.preempt(
            PreemptRequest(
                job_id=str(job.pk), pod_name=pod, namespace=job.pod_namespace, grace_seconds=grace_s, reason=reason
            )
        )
