"""Sign-in lockout (django-axes): after too many wrong passwords for a username, even the right
one is refused until the cool-off has passed. It guards every password sign-in over HTTP: the
portal's login, the admin's, and the API's token endpoint.
"""

from axes.backends import AxesStandaloneBackend
from axes.helpers import get_cool_off
from django.conf import settings
from django.contrib.auth.views import LoginView
from django.http import JsonResponse
from django.shortcuts import render

from tessera.errors import wants_json


class LockoutBackend(AxesStandaloneBackend):
    """Axes' guard, first of the authentication backends.

    A sign-in without a request (the test client's `login`, a script) is no HTTP attempt and has
    nothing to lock; Axes would refuse it outright, so it is passed on to the next backend. Nor is
    one without a password (single sign-on's callback): the provider guards its own sign-in.
    """

    def authenticate(self, request, username=None, password=None, **kwargs):
        if request is None or password is None:
            return None
        return super().authenticate(request, username=username, password=password, **kwargs)


def locked_out(request, original_response=None, credentials=None):
    """The answer to a sign-in while locked out: 429, JSON for API clients, a page for people."""
    minutes = int(get_cool_off(request).total_seconds() // 60)
    message = f"Too many failed sign-ins for this account. Try again in {minutes} minutes."
    if wants_json(request):
        response = JsonResponse({"detail": message}, status=429)
    else:
        response = render(request, "403.html", {"exception": message}, status=429)
    response["Retry-After"] = str(minutes * 60)
    return response


class PortalLoginView(LoginView):
    """The sign-in page: a username and password, and the single sign-on button when it is on."""

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        if settings.TESSERA_OIDC_ENABLED:
            context["sso_name"] = settings.TESSERA_OIDC_PROVIDER_NAME
        return context
