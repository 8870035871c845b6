"""Reads that the job writes (scheduling/services.py) and the portal share: a team's queue, the
priority classes a user may pick, the cluster's GPU models."""

from collections.abc import Sequence

from django.conf import settings
from django.db.models import Count, Max

from portal import access
from scheduling.engine.memory import smallest_profile
from scheduling.engine.mig import geometry_for
from scheduling.engine.policies import get_policy
from scheduling.models import Gpu, Job, Node, PriorityClass


def team_queue(team, limit: int | None = None):
    """The team's waiting jobs in the order its lead set (then oldest first)."""
    jobs = (Job.objects.filter(team=team, status__in=Job.WAITING_STATUSES)
            .select_related("priority_class", "submitted_by", "project", "team")
            .order_by("queue_order", "submitted_at", "pk"))
    return jobs[:limit] if limit else jobs


def priority_classes_for(user, team):
    """Classes the user may pick in a team: leads (and staff) all the team allows, members the
    ones that are not lead-only, anyone else none."""
    role = access.role_in(user, team.pk)
    classes = PriorityClass.objects.filter(teams=team)
    if role in access.MANAGES:
        return classes
    if role == access.MEMBER:
        return classes.filter(lead_only=False)
    return classes.none()


def cluster_gpu_models() -> dict[str, dict]:
    """{model: {"count", "memory_gb"}} of the GPUs on ready nodes."""
    rows = (Gpu.objects.filter(node__state="ready").values("model")
            .annotate(count=Count("pk"), memory_gb=Max("memory_gb")).order_by("model"))
    return {r["model"]: {"count": r["count"], "memory_gb": r["memory_gb"]} for r in rows}


def share_refusal(*, gpu_memory_gb: float, gpu_models: Sequence[str], accepts_no_isolation: bool) -> str:
    """Why a memory-bounded share of `gpu_memory_gb` could run on no ready node, in the words the
    submitter reads; "" when one could take it (engine/sharing.py's rules: a MIG slice that holds
    it, an MPS replica as large, or time-slicing for a job that accepts no isolation)."""
    if not get_policy(settings.TESSERA_POLICY).features.sharing:
        return ""  # the policy gives a sub-GPU job a whole GPU (placement.as_whole): nothing to refuse
    nodes = Node.objects.filter(state=Node.State.READY, schedulable=True).prefetch_related("gpus")
    for node in nodes:
        for gpu in node.gpus.all():
            if (gpu_models and gpu.model not in gpu_models) or not gpu.healthy:
                continue
            geometry = geometry_for(gpu.model) if gpu.mig_capable else None
            if node.gpu_sharing == Node.GpuSharing.NONE and geometry and smallest_profile(geometry, gpu_memory_gb):
                return ""
            if node.gpu_sharing == Node.GpuSharing.MPS and gpu_memory_gb <= gpu.memory_gb / node.gpu_replicas:
                return ""
            if node.gpu_sharing == Node.GpuSharing.TIME_SLICING and accepts_no_isolation:
                return ""
    return (f"No node can run a {gpu_memory_gb:g} GiB share: no MIG slice holds it and no node offers GPU sharing "
            "it can use (an MPS replica that large, or time-slicing if it accepts no isolation). Ask for a whole "
            "GPU instead, or ask the platform team to enable sharing on a node.")
