"""The 10-second refresh of the team dashboard and the job page.

Each answers the same template fragments the first paint includes (one rendering: an ETA reads
"7 hours, 54 minutes" before and after a refresh), plus the numbers the charts redraw from.
"""

from django.contrib.auth.decorators import login_required
from django.core.cache import cache
from django.http import JsonResponse
from django.shortcuts import render
from django.template.loader import render_to_string

from portal import access, freshness
from scheduling.selectors import team_queue
from ui import selectors

DASHBOARD_ROWS = 25


@login_required
def team_live(request, team):
    team = selectors.team_get(request.user, team)
    sees_jobs = access.can_see_jobs(request.user, team.pk)
    version = freshness.team_version(team.pk)
    key = f"portal:live:{team.pk}:{version}:{int(sees_jobs)}"
    data = cache.get(key)
    if data is None:
        usage = cache.get_or_set(f"portal:usage:{team.pk}:{version}", lambda: selectors.team_usage(team),
                                 freshness.TEAM_CACHE_S)
        data = {"usage": usage, "stats_html": render_to_string("ui/_quota_stats.html", {"usage": usage})}
        if sees_jobs:
            queue = list(team_queue(team, DASHBOARD_ROWS))
            running = selectors.team_running(team, DASHBOARD_ROWS)
            data.update(running_html=render_to_string("ui/_running_rows.html", {"running": running}),
                        queue_html=render_to_string("ui/_queue_rows.html", {"queue": queue}),
                        more=usage["queued"] > len(queue))
        # Short: the rows say "in 5 minutes", which a long-lived copy would keep saying.
        cache.set(key, data, min(freshness.TEAM_CACHE_S, 10))
    return JsonResponse(data)


def job_live_context(request, job) -> dict:
    """What the job page shows that changes while one looks at it (the part that refreshes)."""
    from billing.ledger import job_cost

    placements = list(selectors.job_placements(job))
    return {"job": job, "events": selectors.job_events(job), "placements": placements,
            "gpu_hours": selectors.job_gpu_hours(job, placements), "cost": job_cost(job),
            "can_cancel": access.can_cancel(request.user, job)}


@login_required
def job_live(request, pk):
    job = selectors.job_get(request.user, pk)
    return render(request, "ui/_job_live.html", job_live_context(request, job))
