"""Portal pages: thin views over selectors (reads) and services (writes)."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.cache import cache
from django.core.exceptions import PermissionDenied, ValidationError
from django.shortcuts import redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from agents import logs
from portal import access, freshness
from portal.models import Membership, Project, Team
from scheduling import services, sizing
from scheduling.selectors import cluster_gpu_models, priority_classes_for, team_queue
from ui import cluster_view, live, selectors
from ui.fair_share import team_fair_share
from ui.forms import JobSubmitForm, PriorityForm, SizingForm

# The charts have hourly buckets, so a minute-old copy loses nothing and saves two heavy queries.
CHART_CACHE_S = 60


@login_required
def home(request):
    """Signing in lands on the user's team dashboard (the first team by name, as the bar's selector
    starts); people in no team (finance, staff) get the list of teams they may look at."""
    first = Membership.objects.filter(user=request.user).order_by("team__name").values_list("team__name", flat=True)
    if first:
        return redirect("ui:dashboard", team=first[0])
    return teams(request)


@login_required
def teams(request):
    memberships = Membership.objects.filter(user=request.user).select_related("team").order_by("team__name")
    others = selectors.teams_visible_to(request.user).exclude(memberships__user=request.user) \
        if access.sees_all_usage(request.user) else Team.objects.none()
    return render(request, "home.html", {"memberships": memberships, "other_teams": others})


@login_required
def dashboard(request, team):
    team = selectors.team_get(request.user, team)
    role = access.role_in(request.user, team.pk)
    version = freshness.team_version(team.pk)
    usage = cache.get_or_set(f"portal:usage:{team.pk}:{version}", lambda: selectors.team_usage(team),
                             freshness.TEAM_CACHE_S)
    context = {
        "team": team, "usage": usage, "sees_jobs": role in access.SEES_JOBS, "role": role,
        "manages": role in access.MANAGES, "charts": {"usage": usage, **_team_series(team)},
        # The job tables are a cached fragment keyed by the team's version; these querysets are lazy,
        # so they only run when the fragment is rebuilt.
        "version": version, "cache_s": freshness.TEAM_CACHE_S,
        "running": selectors.team_running(team, live.DASHBOARD_ROWS),
        "queue": team_queue(team, live.DASHBOARD_ROWS),
        # Use changes slowly: a minute-old sentence is as true, and the ledger query runs once a minute.
        "fair_share": cache.get_or_set(f"portal:fairshare:{team.pk}", lambda: team_fair_share(team), CHART_CACHE_S),
    }
    return render(request, "ui/dashboard.html", context)


def _team_series(team) -> dict:
    return cache.get_or_set(f"portal:series:{team.pk}", lambda: {
        "allocation": selectors.team_allocation_series(team),
        "utilisation": selectors.team_utilisation_series(team)}, CHART_CACHE_S)


def _submit_context(request):
    teams = access.submit_teams(request.user, selectors.teams_visible_to(request.user))
    if not teams:
        raise PermissionDenied("You are not a lead or member of any team.")
    wanted = request.POST.get("team") or request.GET.get("team")
    team = next((t for t in teams if t.name == wanted), teams[0])
    models = cluster_gpu_models()
    return teams, team, {
        "teams": teams, "gpu_models": list(models),
        "priority_classes": list(priority_classes_for(request.user, team)),
        "projects": list(Project.objects.filter(team=team).values_list("name", flat=True)),
    }


@login_required
def job_new(request):
    teams, team, choices = _submit_context(request)
    form = JobSubmitForm(request.POST or None, initial={"team": team.name}, **choices)
    status = 200
    if request.method == "POST":
        status = 400
        if form.is_valid():
            data = dict(form.cleaned_data, team=team, project=form.cleaned_data["project"] or None)
            try:
                job = services.job_submit(user=request.user, **data)
            except ValidationError as error:
                form.add_error(None, error)
            except services.TooManySubmits as limit:
                form.add_error(None, str(limit))
                status = 429
            else:
                messages.success(request, f"Submitted job #{job.pk} {job.name}.")
                return redirect("ui:job_detail", pk=job.pk)
    return render(request, "ui/job_new.html",
                  {"form": form, "team": team, "sizing_form": SizingForm(initial={"params_billion": 7})},
                  status=status)


@login_required
def job_detail(request, pk):
    job = selectors.job_get(request.user, pk)
    context = live.job_live_context(request, job)
    return render(request, "ui/job_detail.html", {
        **context, "gpu_series": selectors.job_gpu_series(context["placements"]), "log_lines": logs.TAIL_LINES})


@login_required
def job_logs(request, pk):
    """The job's pod logs, as a fragment the job page loads (the cluster is asked only then)."""
    job = selectors.job_get(request.user, pk)
    return render(request, "ui/_job_logs.html", {"job": job, "pods": logs.job_logs(job)})


@login_required
@require_POST
def job_cancel(request, pk):
    job = selectors.job_get(request.user, pk)
    try:
        job = services.job_cancel(user=request.user, job=job)
    except ValidationError as error:
        messages.error(request, "; ".join(error.messages))
    else:
        messages.success(request, f"Cancelled job #{job.pk}." if job.status == "cancelled" else
                         f"Cancelling job #{job.pk}: its GPUs are free once its pods have stopped.")
    return redirect(_safe_next(request) or f"/jobs/{job.pk}/")


def _safe_next(request) -> str | None:
    target = request.POST.get("next")
    if target and url_has_allowed_host_and_scheme(target, {request.get_host()}, request.is_secure()):
        return target
    return None


@login_required
def priorities(request, team):
    team = selectors.team_get(request.user, team)
    if not access.can_manage(request.user, team.pk):
        raise PermissionDenied("Only the team's leads reorder the queue.")
    return render(request, "ui/priorities.html", {
        "team": team, "queue": list(team_queue(team)),
        "priority_classes": list(priority_classes_for(request.user, team))})


@login_required
@require_POST
def queue_move(request, team):
    team = selectors.team_get(request.user, team)
    try:
        services.team_queue_move(user=request.user, team=team, job_id=int(request.POST.get("job", 0)),
                                 offset=-1 if request.POST.get("direction") == "up" else 1)
    except (ValidationError, ValueError) as error:
        messages.error(request, "; ".join(getattr(error, "messages", [str(error)])))
    return redirect("ui:priorities", team=team.name)


@login_required
@require_POST
def job_priority(request, pk):
    job = selectors.job_get(request.user, pk)
    form = PriorityForm(request.POST)
    try:
        if not form.is_valid():
            raise ValidationError(form.errors["priority_class"])
        services.job_reprioritise(user=request.user, job=job, priority_class=form.cleaned_data["priority_class"])
    except ValidationError as error:
        messages.error(request, "; ".join(error.messages))
    else:
        messages.success(request, f"Job #{job.pk} is now {job.priority_class.name}.")
    return redirect("ui:priorities", team=job.team.name)


@login_required
def cluster(request):
    if not access.sees_cluster(request.user):
        raise PermissionDenied("The cluster is shown to members of a team.")
    nodes = list(selectors.cluster_nodes())
    return render(request, "ui/cluster.html", {
        "rows": cluster_view.heat_rows(request.user, nodes), "free": selectors.free_by_model(nodes),
        "slots": range(8)})


def sizing_fits(need_gb: float) -> list[dict]:
    models = {m: v["memory_gb"] for m, v in cluster_gpu_models().items()}
    return [fit.__dict__ for fit in sizing.fits(need_gb, models)]
