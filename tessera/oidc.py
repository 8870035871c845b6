"""Single sign-on with OpenID Connect (mozilla-django-oidc), on when TESSERA_OIDC_CLIENT_ID is set.

The authorization code flow with PKCE, state and nonce; the ID token's signature is checked
against the provider's published keys. A user is known by their `preferred_username` (else
`sub`); SSO creates the account on first sign-in, without a password, and sets its teams, roles,
staff and finance from the provider's group claim at every sign-in (portal/sso.py). A local
account (one with a password, like the demo's) is never taken over by a provider user of the
same name: that sign-in is refused. Local accounts keep signing in with their passwords.
"""

import logging

import requests
from django.conf import settings
from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import UNUSABLE_PASSWORD_PREFIX
from django.contrib.auth.validators import UnicodeUsernameValidator
from django.core.exceptions import SuspiciousOperation, ValidationError
from django.http import Http404
from mozilla_django_oidc.auth import OIDCAuthenticationBackend
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView

from portal.sso import grants_apply

LOG = logging.getLogger(__name__)


class SsoBackend(OIDCAuthenticationBackend):
    def authenticate(self, request, **kwargs):
        if not settings.TESSERA_OIDC_ENABLED:
            return None
        try:
            return super().authenticate(request, **kwargs)
        except requests.RequestException as error:  # the provider is down or refused the code
            LOG.warning("single sign-on: the identity provider failed: %s", error)
            return None

    def get_username(self, claims) -> str:
        return str(claims.get("preferred_username") or claims.get("sub") or "")[:150]

    def verify_claims(self, claims) -> bool:
        username = self.get_username(claims)
        try:
            UnicodeUsernameValidator()(username)
        except ValidationError:
            LOG.warning("single sign-on: unusable user name %r from the identity provider", username)
            return False
        return True

    def filter_users_by_claims(self, claims):
        # Only accounts single sign-on made (they have no usable password).
        return get_user_model().objects.filter(username=self.get_username(claims),
                                               password__startswith=UNUSABLE_PASSWORD_PREFIX)

    def create_user(self, claims):
        username = self.get_username(claims)
        if get_user_model().objects.filter(username=username).exists():
            raise SuspiciousOperation(f"single sign-on user {username!r} has the name of a local account")
        user = get_user_model().objects.create_user(username)  # no password: it cannot sign in locally
        return self.update_user(user, claims)

    def update_user(self, user, claims):
        user.email = claims.get("email", user.email) or ""
        user.first_name = str(claims.get("given_name", user.first_name) or "")[:150]
        user.last_name = str(claims.get("family_name", user.last_name) or "")[:150]
        user.save(update_fields=["email", "first_name", "last_name"])
        groups = claims.get(settings.TESSERA_OIDC_GROUPS_CLAIM) or []
        if isinstance(groups, str):
            groups = [groups]
        grants_apply(user, {str(group) for group in groups}, settings.TESSERA_OIDC_GROUP_MAP)
        return user


class SsoStart(OIDCAuthenticationRequestView):
    """/oidc/authenticate/: off (404) unless single sign-on is configured."""

    def get(self, request):
        if not settings.TESSERA_OIDC_ENABLED:
            raise Http404("Single sign-on is not configured.")
        return super().get(request)


class SsoCallback(OIDCAuthenticationCallbackView):
    """/oidc/callback/: where the provider sends the browser back with the code."""

    def get(self, request):
        if not settings.TESSERA_OIDC_ENABLED:
            raise Http404("Single sign-on is not configured.")
        return super().get(request)

    def login_failure(self):
        messages.error(self.request, "Single sign-on did not sign you in. If you have a local account, "
                                     "sign in with your password; otherwise ask an administrator.")
        return super().login_failure()
