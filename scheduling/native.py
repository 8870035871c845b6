"""Native jobs: pods someone else created for Tessera become jobs of the team their namespace
belongs to (docs/reference/native-submission.md). The intake (agents/native.py) reads the pods; this writes
the rows, with the same checks and limits as a submit from the portal, in the portal's words.

A ValidationError here is a refusal the pod's owner can act on: the intake turns it into an Event
on the pod, keyed by the field that was wrong (REFUSAL_REASONS), and leaves the pod Pending.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Count, Max

from portal import freshness
from portal.models import Project, Team, TeamNamespace
from scheduling.engine.reasons import WaitingReason
from scheduling.engine.types import PRODUCTION
from scheduling.models import ActionRequest, Gpu, Job, NativePod, PriorityClass
from scheduling.selectors import share_refusal

# Imported, not copied: one definition of what a portal submit checks.
from scheduling.services import _profile_need, _resources_errors, _submit_limits_check, job_event_add

# The Event reason a refusal gets, by the field it is about (the kube-scheduler's CamelCase).
REFUSAL_REASONS = {
    "priority_class": "PriorityClassNotAllowed",
    "project": "ProjectNotFound",
    "team": "TeamQueueFull",
    "namespace": "NamespaceNotMapped",
    "group": "InvalidPodGroup",  # a gang's pod that cannot join it (scheduling/native_gangs.py)
    "checkpoint_interval_s": "InvalidCheckpointInterval",
}
REFUSAL_DEFAULT = "InvalidGpuRequest"
# Owners whose pods serve rather than finish: their jobs are inference jobs, the others batch.
OWNER_KINDS_INFERENCE = {"ReplicaSet", "Deployment", "StatefulSet", "LeaderWorkerSet"}


@dataclass(frozen=True)
class NativeNeed:
    """What a native pod asks for, in the portal's terms (agents/native.py builds it)."""

    uid: str
    namespace: str
    pod_name: str
    name: str  # what the portal shows: "Job train-llm"
    image: str
    gpus: int
    gpu_memory_gb: float
    mig_profile: str | None
    cpu_cores: float
    memory_gb: float
    priority_class: str | None
    priority: int | None
    project: str | None
    owner: tuple[str, str, str, str] = ("", "", "", "")  # api version, kind, name, uid
    group: str = ""
    accepts_no_isolation: bool = False  # the tessera.io/accepts-no-isolation annotation
    checkpoint_interval_s: int | None = None  # set when the pod mounts its checkpoint channel


def namespace_team(namespace: str) -> Team | None:
    """The team whose jobs a namespace's native pods are: a mapping row, else the team of that name."""
    mapped = TeamNamespace.objects.select_related("team").filter(namespace=namespace).first()
    return mapped.team if mapped is not None else Team.objects.filter(name=namespace).first()


def not_mapped_message(namespace: str) -> str:
    return (
        f"Namespace {namespace} is not mapped to a Tessera team, so Tessera leaves this pod Pending. A "
        f"platform engineer maps it in the admin: Portal › Team namespaces (/admin/portal/teamnamespace/)."
    )


def native_priority_class(team: Team, name: str | None, value: int | None) -> PriorityClass:
    """A class of Tessera's by its name, if the team may use it; a cluster class of the cluster's own
    (or none) by its value: the highest of the team's classes not above it, else the team's lowest
    (a pod that names no class has priority 0, the lowest, to Kubernetes too)."""
    allowed = list(PriorityClass.objects.filter(teams=team).order_by("-value"))
    if not allowed:
        raise ValidationError(
            {
                "priority_class": f"Team {team} may use no priority class yet; a portal admin "
                "allows some on the team's admin page."
            }
        )
    if name:
        chosen = next((c for c in allowed if c.name == name), None)
        if chosen is not None:
            return chosen
        if PriorityClass.objects.filter(name=name).exists():
            raise ValidationError(
                {
                    "priority_class": f"Team {team} may not use priority class {name}; it may use "
                    f"{', '.join(c.name for c in allowed)}."
                }
            )
    below = [c for c in allowed if value is not None and c.value <= value]
    return below[0] if below else allowed[-1]


def _project(team: Team, name: str | None) -> Project:
    if name:
        found = team.projects.filter(name=name).first()
        if found is None:
            raise ValidationError(
                {
                    "project": f"No project {name} in team {team}; the annotation tessera.io/project "
                    f"names one of {', '.join(p.name for p in team.projects.all())}."
                }
            )
        return found
    return team.projects.order_by("name").first() or Project.objects.create(team=team, name="default")


def _largest_node_gpus() -> int:
    counts = Gpu.objects.filter(node__state="ready").values("node").annotate(n=Count("pk")).values_list("n", flat=True)
    return max(counts, default=0)


@transaction.atomic
def native_job_create(*, team: Team, need: NativeNeed, at: datetime) -> Job:
    """The job of one native pod, checked as a portal submit is; ValidationError when refused."""
    chosen = native_priority_class(team, need.priority_class, need.priority)
    gpu_memory_gb, pinned = need.gpu_memory_gb, []
    if need.mig_profile:
        gpu_memory_gb, pinned = _profile_need(need.mig_profile, [])
    errors = _resources_errors(
        gpus=need.gpus,
        gpu_memory_gb=gpu_memory_gb,
        gpu_models=pinned,
        gang=True,
        cpu_cores=need.cpu_cores,
        memory_gb=need.memory_gb,
        checkpoint_interval_s=need.checkpoint_interval_s,
    )
    if need.gpus > (largest := _largest_node_gpus()):
        errors["gpus"] = f"The pod asks for {need.gpus} GPUs; no node has more than {largest}, and a pod runs on one."
    if need.gpus == 0 and not need.mig_profile and not errors and chosen.name != PRODUCTION:
        # a share runs only where a node's sharing mode holds it (as a portal submit is checked)
        refusal = share_refusal(
            gpu_memory_gb=gpu_memory_gb, gpu_models=pinned, accepts_no_isolation=need.accepts_no_isolation
        )
        if refusal:
            errors["gpu_memory_gb"] = refusal
    if errors:
        raise ValidationError(errors)
    project = _project(team, need.project)
    Team.objects.select_for_update().filter(pk=team.pk).exists()  # serialises queue positions, as a submit does
    _submit_limits_check(team, at)
    last = Job.objects.filter(team=team, status__in=Job.WAITING_STATUSES).aggregate(m=Max("queue_order"))["m"]
    owner_kind = need.owner[1]
    job = Job.objects.create(
        team=team,
        project=project,
        name=need.name,
        namespace=need.namespace,
        kind=Job.Kind.INFERENCE if owner_kind in OWNER_KINDS_INFERENCE else Job.Kind.BATCH,
        priority_class=chosen,
        preemptible=chosen.preemptible,
        gpus=need.gpus,
        gpu_memory_gb=gpu_memory_gb,
        gpu_models="|".join(pinned),
        mig_profile=need.mig_profile or "",
        accepts_no_isolation=need.accepts_no_isolation,
        checkpoint_interval_s=need.checkpoint_interval_s,
        cpu_cores=need.cpu_cores,
        memory_gb=need.memory_gb,
        image=need.image[:300],
        queue_order=(last or 0) + 1,
        pending_reason_code=WaitingReason.NEW,
        pending_reason="Taken in from the cluster; waiting for the next scheduling cycle.",
    )
    api_version, kind, name, uid = need.owner
    NativePod.objects.create(
        job=job,
        uid=need.uid,
        namespace=need.namespace,
        name=need.pod_name,
        owner_api_version=api_version,
        owner_kind=kind,
        owner_name=name,
        owner_uid=uid,
        group=need.group,
        taken_at=at,
    )
    job_event_add(
        job=job,
        at=at,
        kind="submitted",
        message=f"Pod {need.namespace}/{need.pod_name} taken in from the cluster as {chosen.name}"
        + (f" ({kind} {name})." if kind else "."),
    )
    freshness.teams_changed([team.pk])
    return job


def refusal_reason(error: ValidationError) -> tuple[str, str]:
    """(Event reason, sentence) for a refused native pod."""
    fields = getattr(error, "message_dict", {})
    key = next(iter(fields), "")
    message = " ".join(m for messages in fields.values() for m in messages) or " ".join(error.messages)
    return REFUSAL_REASONS.get(key, REFUSAL_DEFAULT), message


def member_pod_name(job: Job, member: int) -> str:
    """The native pod that is member `member` of the job (by name: stable while they wait)."""
    names = list(job.native_pods.filter(vacant=False).order_by("name").values_list("name", flat=True))
    if member >= len(names):
        raise KeyError(f"job {job.pk} has {len(names)} native pod(s), no member {member}")
    return names[member]


# -- a job stopped by Tessera gets its pods back ------------------------------------------------


def _same_source(rows, need: NativeNeed):
    """The rows of pods that come from where the pod does: its pod group, else its owner, else
    (a bare pod) its name."""
    if need.group:
        return rows.filter(group=need.group)
    if need.owner[3]:
        return rows.filter(group="", owner_uid=need.owner[3])
    return rows.filter(group="", owner_uid="", name=need.pod_name)


def native_stopping(need: NativeNeed) -> bool:
    """Whether the pod comes from where a job Tessera is stopping does (its controller made it as
    the old one began to terminate): it waits, untaken, until that job is released, then rejoins it."""
    rows = NativePod.objects.filter(
        namespace=need.namespace,
        vacant=False,
        job__status__in=Job.HOLDING_STATUSES,
        job__actions__kind=ActionRequest.Kind.PREEMPT,
        job__actions__state=ActionRequest.State.REQUESTED,
    )
    return _same_source(rows, need).exists()


def native_holding(need: NativeNeed) -> list[int]:
    """The running jobs whose pods come from where the pod does (native_stopping's sources)."""
    rows = NativePod.objects.filter(namespace=need.namespace, vacant=False, job__status__in=Job.HOLDING_STATUSES)
    return sorted(set(_same_source(rows, need).values_list("job_id", flat=True)))


@transaction.atomic
def native_rejoin(*, need: NativeNeed, at: datetime) -> Job | None:
    """The pod takes a vacant place of a job Tessera stopped (scheduling/services.py, _native_vacate)
    when it comes from the same group, owner or name and asks for the same GPUs: the same job, at
    its saved progress, billed from its next bind. None: no such place, the pod is a new job's."""
    vacant = NativePod.objects.select_for_update().filter(
        vacant=True, namespace=need.namespace, job__status=Job.Status.PREEMPTED
    )
    slot = _same_source(vacant, need).select_related("job").order_by("job_id", "name").first()
    if slot is None:
        return None
    job = slot.job
    per_pod = job.gpus // (job.members or 1)
    if (need.gpus, need.mig_profile or "") != (per_pod, job.mig_profile) or (
        not need.gpus and need.gpu_memory_gb != job.gpu_memory_gb
    ):
        return None  # another need under the same name: a new job, as any other pod
    slot.uid, slot.name, slot.taken_at, slot.vacant = need.uid, need.pod_name, at, False
    slot.save(update_fields=["uid", "name", "taken_at", "vacant"])
    left = job.native_pods.filter(vacant=True).count()
    if not left:
        job.pending_reason_code = WaitingReason.NEW
        job.pending_reason = "Its pods were made again; waiting for the next scheduling cycle."
        job.save(update_fields=["pending_reason_code", "pending_reason", "updated_at"])
    job_event_add(
        job=job,
        at=at,
        kind="pods-made-again",
        message=f"Pod {need.namespace}/{need.pod_name} takes the place of a stopped pod; the job resumes "
        f"from {job.progress_s:.0f} s of saved work" + (f" once {left} more are made again." if left else "."),
    )
    freshness.teams_changed([job.team_id])
    return job
