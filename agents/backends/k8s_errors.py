"""The Kubernetes API's errors in the backend's words: what is worth a retry, what is refused for good."""

from __future__ import annotations

import functools
import json
import re
from contextlib import contextmanager

import urllib3
from kubernetes.client.exceptions import ApiException

from agents.backends.base import Refused, TransientBackendError

RETRYABLE_STATUSES = {429, 500, 502, 503, 504}
# Refusals a retry cannot mend: validation (400, 422) and admission or authorization (403).
REFUSED_STATUSES = {400, 403, 422}
RBAC_DENIAL = re.compile(r'User "[^"]*" cannot ')


def cluster_words(exc: ApiException) -> str:
    """The API server's own message (its Status body), else the HTTP reason."""
    try:
        message = json.loads(exc.body or "{}").get("message")
    except (ValueError, AttributeError):
        message = None
    return message or f"{exc.status} {exc.reason}"


@contextmanager
def api_errors():
    """A throttled, overloaded or unreachable API server (a restart refuses connections: urllib3's
    MaxRetryError) becomes a TransientBackendError, which the workers retry with backoff; a refusal
    for good becomes Refused, in the cluster's words; other API errors stay what they are."""
    try:
        yield
    except ApiException as exc:
        if exc.status in RETRYABLE_STATUSES:
            raise TransientBackendError(f"Kubernetes API answered {exc.status}: {exc.reason}") from exc
        if exc.status == 403 and RBAC_DENIAL.search(cluster_words(exc)):
            # Tessera's own rights, not the job: a restarting server denies until its RBAC cache has
            # synced (seen on the real one), and a wrong deploy/ needs the operator. Retried, logged.
            raise TransientBackendError(f"Kubernetes API denied Tessera: {cluster_words(exc)}") from exc
        if exc.status in REFUSED_STATUSES:
            raise Refused(cluster_words(exc)) from exc
        raise
    except urllib3.exceptions.HTTPError as exc:  # connection refused or reset, timed out
        raise TransientBackendError(f"Kubernetes API unreachable: {exc}") from exc


def with_api_errors(method):
    """The method, with api_errors around it."""
    @functools.wraps(method)
    def wrapper(*args, **kwargs):
        with api_errors():
            return method(*args, **kwargs)
    return wrapper
