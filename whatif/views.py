"""What-if pages for platform engineers (staff): ask, watch the progress, read the comparison."""

import json
from functools import wraps

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse

from whatif import report
from whatif.forms import WhatIfForm
from whatif.models import WhatIfRun
from whatif.services import Busy, whatif_request

RECENT = 20


def staff_required(view):
    """Signed out: to the sign-in page. Signed in but not staff: 403, as the admin's pages."""
    @login_required
    @wraps(view)
    def checked(request, *args, **kwargs):
        if not request.user.is_staff:
            raise PermissionDenied("What-if simulations are for platform engineers (staff).")
        return view(request, *args, **kwargs)
    return checked


@staff_required
def whatif_new(request):
    form = WhatIfForm(request.POST or None)
    status = 200
    if request.method == "POST":
        status = 400
        if form.is_valid():
            try:
                run = whatif_request(user=request.user, baseline_policy=settings.TESSERA_POLICY, **form.cleaned_data)
            except Busy as busy:
                form.add_error(None, str(busy))
                status = 409
            else:
                return redirect("whatif:run", pk=run.pk)
    runs = WhatIfRun.objects.select_related("created_by").defer("cluster_json", "jobs_csv", "result")[:RECENT]
    return render(request, "whatif/new.html", {"form": form, "runs": runs, "live_policy": settings.TESSERA_POLICY},
                  status=status)


@staff_required
def whatif_run(request, pk):
    run = get_object_or_404(WhatIfRun, pk=pk)
    context = {"run": run, "progress_url": reverse("whatif:progress", args=[run.pk])}
    if run.state == WhatIfRun.State.DONE and run.result:
        context.update(report.comparison(run.result), charts=report.charts(run.result))
    return render(request, "whatif/run.html", context)


@staff_required
def whatif_progress(request, pk):
    run = get_object_or_404(WhatIfRun.objects.defer("cluster_json", "jobs_csv", "result"), pk=pk)
    return JsonResponse({"state": run.state, "percent": run.percent, "stale": run.stale, "error": run.error})


@staff_required
def whatif_input(request, pk, name):
    """The files the run simulated, for `simulate run` (cluster.json as is or changed, jobs.csv)."""
    run = get_object_or_404(WhatIfRun, pk=pk)
    if name == "jobs.csv" and run.jobs_csv:
        body, kind = run.jobs_csv, "text/csv"
    elif name == "cluster.json" and run.cluster_json:
        body, kind = json.dumps(run.cluster_json, indent=2), "application/json"
    elif name == "changed-cluster.json" and run.result:
        body, kind = json.dumps(run.result["changed_cluster"], indent=2), "application/json"
    else:
        return HttpResponse(f"What-if #{run.pk} has no {name} (yet).", status=404, content_type="text/plain")
    response = HttpResponse(body, content_type=kind)
    response["Content-Disposition"] = f'attachment; filename="whatif-{run.pk}-{name}"'
    return response
