"""The signed-in user's own API tokens: make one (shown once), list them, revoke one."""

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import Http404
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from portal import tokens
from ui.forms import ApiTokenForm


@never_cache  # the page that shows a new token must not be kept by any cache
@login_required
def api_tokens(request):
    form = ApiTokenForm(request.POST or None, max_days=settings.TESSERA_API_TOKEN_MAX_DAYS)
    made = None
    if request.method == "POST" and form.is_valid():
        try:
            made = tokens.token_issue(request.user, form.cleaned_data["name"], form.cleaned_data["days"])
        except ValidationError as error:
            for field, problems in error.message_dict.items():
                form.add_error(field, problems)
        else:
            form = ApiTokenForm(max_days=settings.TESSERA_API_TOKEN_MAX_DAYS)
    return render(request, "ui/api_tokens.html", {
        "form": form, "tokens": tokens.tokens_of(request.user),
        "made": made[0] if made else None, "secret": made[1] if made else None}, status=201 if made else 200)


@require_POST
@login_required
def api_token_revoke(request, pk):
    if not tokens.token_revoke(request.user, pk):
        raise Http404("You have no such live token.")
    messages.success(request, "Token revoked: it no longer works.")
    return redirect("ui:api_tokens")
