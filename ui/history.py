"""The job history page: every job of the user's teams, finished ones included, filtered and paged.

The filters are the API list's (ui.api.filtersets.JobFilter), so the page and `GET /api/v1/jobs/`
answer the same question the same way; the rows come from the same scoped selector as job detail.
"""

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import Prefetch
from django.shortcuts import render

from portal import access
from portal.models import Team
from scheduling.models import Gpu, Job, Placement
from ui import selectors
from ui.api.filtersets import JobFilter

PAGE_ROWS = 25


@login_required
def job_history(request):
    jobs = selectors.jobs_visible_to(request.user).order_by("-submitted_at", "-pk")
    filters = JobFilter(request.GET or None, queryset=jobs, request=request)
    valid = not filters.is_bound or filters.is_valid()
    shown = (filters.qs if valid else jobs.none()).prefetch_related(
        Prefetch("placements", queryset=Placement.objects.select_related("gpu")))
    page = Paginator(shown, PAGE_ROWS).get_page(request.GET.get("page"))
    rows = list(page.object_list)
    for job in rows:
        job.ran_on = sorted({p.gpu.model for p in job.placements.all()})
    kept = request.GET.copy()
    kept.pop("page", None)
    return render(request, "ui/jobs.html", {
        "filters": filters, "page": page, "rows": rows,
        "query": kept.urlencode(), "teams": _team_names(request.user), "gpu_models": _gpu_models(),
        "statuses": Job.Status.choices, "kinds": Job.Kind.choices,
    }, status=200 if valid else 400)


def _team_names(user) -> list[str]:
    """The teams whose jobs the user sees, for the team filter's choices."""
    if user.is_staff:
        return list(Team.objects.order_by("name").values_list("name", flat=True))
    names = access.team_names(user)
    return sorted(names[t] for t in access.team_roles(user) if access.can_see_jobs(user, t))


def _gpu_models() -> list[str]:
    """Every model the cluster has had (a finished job may have run on a drained node)."""
    return list(Gpu.objects.order_by("model").values_list("model", flat=True).distinct())
