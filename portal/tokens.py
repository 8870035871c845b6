"""Named, expiring, revocable API tokens (portal.models.ApiToken).

A token is shown once, when it is made; only its SHA-256 digest is stored, so a database dump
holds no usable credential. The API refuses it once expired or revoked (ui/api/auth.py).
"""

import hashlib
import secrets
from datetime import timedelta

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from portal.models import ApiToken

PREFIX = "tsr_"  # says what a leaked string is, for people and secret scanners
LAST_USED_RESOLUTION = timedelta(minutes=1)  # at most one write per token a minute


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def token_issue(user, name: str, days: int) -> tuple[ApiToken, str]:
    """A new token for `user` valid `days` days: the row and the secret (never stored)."""
    name = name.strip()
    if not name:
        raise ValidationError({"name": "Give the token a name (where it is used, e.g. 'laptop' or 'ci')."})
    most = settings.TESSERA_API_TOKEN_MAX_DAYS
    if not 1 <= days <= most:
        raise ValidationError({"days": f"A token lasts between 1 and {most} days."})
    secret = PREFIX + secrets.token_urlsafe(32)
    now = timezone.now()
    try:
        with transaction.atomic():
            token = ApiToken.objects.create(user=user, name=name, prefix=secret[:len(PREFIX) + 4],
                                            digest=_digest(secret), created_at=now,
                                            expires_at=now + timedelta(days=days))
    except IntegrityError:
        raise ValidationError({"name": f"You already have a live token named {name!r}."}) from None
    return token, secret


def token_holder(secret: str) -> ApiToken | None:
    """The live token with this secret (its user loaded), or None: unknown, revoked or expired."""
    now = timezone.now()
    token = ApiToken.objects.select_related("user").filter(
        digest=_digest(secret), revoked_at__isnull=True, expires_at__gt=now).first()
    if token is not None and (token.last_used_at is None or now - token.last_used_at > LAST_USED_RESOLUTION):
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
    return token


def token_revoke(user, token_id: int) -> bool:
    """Revoke one of `user`'s own tokens; False when they have no such live token."""
    return ApiToken.objects.filter(pk=token_id, user=user, revoked_at__isnull=True).update(
        revoked_at=timezone.now()) == 1


def tokens_of(user):
    """The user's tokens that still work, newest first."""
    return ApiToken.objects.filter(user=user, revoked_at__isnull=True, expires_at__gt=timezone.now())
