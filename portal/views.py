from django.contrib.auth.decorators import login_required
from django.http import JsonResponse
from django.shortcuts import render

from portal.models import Membership


@login_required
def home(request):
    memberships = Membership.objects.filter(user=request.user).select_related("team")
    return render(request, "home.html", {"memberships": memberships})


def healthz(request):
    return JsonResponse({"status": "ok"})
