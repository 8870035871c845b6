"""API authentication by named, expiring tokens (portal/tokens.py): `Authorization: Token <token>`.

A token is refused once expired or revoked. Users make, list and revoke theirs on the portal's
"API tokens" page (ui/account.py), or get one from POST /api/v1/token/ (ui/api/tokens.py). This
module is named in DRF's settings, so it must not import rest_framework.views (a circular import).
"""

from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication, get_authorization_header

from portal import tokens


class ApiTokenAuthentication(BaseAuthentication):
    """`Authorization: Token <token>`; request.auth is the token's row."""

    keyword = b"token"

    def authenticate(self, request):
        words = get_authorization_header(request).split()
        if not words or words[0].lower() != self.keyword:
            return None
        if len(words) != 2:
            raise exceptions.AuthenticationFailed("Send the token as 'Authorization: Token <token>'.")
        try:
            secret = words[1].decode("ascii")
        except UnicodeDecodeError:
            raise exceptions.AuthenticationFailed("The token must be ASCII.") from None
        token = tokens.token_holder(secret)
        if token is None or not token.user.is_active:
            raise exceptions.AuthenticationFailed("Unknown, expired or revoked token.")
        return token.user, token
