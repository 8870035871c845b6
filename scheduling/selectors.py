"""Reads that the job writes (scheduling/services.py) and the portal share: a team's queue, the
priority classes a user may pick, the cluster's GPU models."""

from django.db.models import Count, Max

from portal import access
from scheduling.models import Gpu, Job, PriorityClass


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
