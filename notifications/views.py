"""The preference page (every signed-in user) and a team's webhooks page (its leads and staff)."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from notifications.forms import PreferenceForm, TeamWebhookForm
from notifications.models import Delivery, TeamWebhook
from notifications.services import preference_of
from portal import access
from portal.models import Team

RECENT = 20


@login_required
def preferences(request):
    form = PreferenceForm(request.POST or None, instance=preference_of(request.user))
    if request.method == "POST":
        if form.is_valid():
            form.save()
            messages.success(request, "Notification preferences saved.")
            return redirect("notifications:preferences")
    led = [name for team_id, name in sorted(access.team_names(request.user).items(), key=lambda item: item[1])
           if access.can_manage(request.user, team_id)]
    deliveries = Delivery.objects.filter(user=request.user).select_related("notice")[:RECENT]
    return render(request, "notifications/preferences.html", {"form": form, "deliveries": deliveries, "led": led},
                  status=400 if form.errors else 200)


def _managed_team(request, name: str) -> Team:
    team = get_object_or_404(Team, name=name)
    if not access.can_manage(request.user, team.pk):
        raise PermissionDenied("Only the team's leads manage its webhooks.")
    return team


@login_required
def team_webhooks(request, team):
    team = _managed_team(request, team)
    form = TeamWebhookForm(request.POST or None, team=team)
    if request.method == "POST" and form.is_valid():
        hook = form.save(commit=False)
        hook.team, hook.created_by = team, request.user
        hook.save()
        messages.success(request, f"Webhook {hook.name} added: it gets the team's next events.")
        return redirect("notifications:team_webhooks", team=team.name)
    deliveries = (Delivery.objects.filter(webhook__team=team).select_related("notice", "webhook")[:RECENT])
    return render(request, "notifications/team_webhooks.html", {
        "team": team, "form": form, "hooks": TeamWebhook.objects.filter(team=team), "deliveries": deliveries},
        status=400 if form.errors else 200)


@require_POST
@login_required
def team_webhook_delete(request, team, pk):
    team = _managed_team(request, team)
    hook = get_object_or_404(TeamWebhook, pk=pk, team=team)  # another team's webhook is not found here
    hook.delete()
    messages.success(request, f"Webhook {hook.name} removed.")
    return redirect("notifications:team_webhooks", team=team.name)
