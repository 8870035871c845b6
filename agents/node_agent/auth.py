"""Who may read a node agent's report: the workers' own ServiceAccount, as the API server says.

The workers send their ServiceAccount token, projected for the audience `tessera-node-agent`
(deploy/worker.yaml); the agent asks the API server whose token it is with a TokenReview, as
kube-rbac-proxy does, and answers only the one ServiceAccount it is told to. Why not a secret
of our own: the nodes then hold none (the agent's own token may create TokenReviews and nothing
else), a token read off a node's plain-HTTP wire expires within the hour, and, bound to the
agents' audience, the API server itself refuses it (a stolen token opens no cluster API).

Answers: 401 no token, or one the API server does not accept for this audience; 403 a valid
token of another identity; 503 the API server could not be asked (never cached: the next poll
asks again). Reviews are cached for a few seconds (REVIEW_TTL_S, the delegating authenticator's
default in Kubernetes' own components), so one poll costs the API server at most one review per node.

`StaticToken` is the dev-only mode: one fixed token from a file, for an agent and workers with no
API server (a laptop). It is refused with DEBUG off unless explicitly allowed (`dev_auth_refusal`).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

log = logging.getLogger(__name__)

SERVICEACCOUNT, DEV_STATIC_TOKEN = "serviceaccount", "dev-static-token"
MODES = (SERVICEACCOUNT, DEV_STATIC_TOKEN)
ALLOW_DEV_ENV = "TESSERA_ALLOW_DEV_AGENT_AUTH"
AUDIENCE = "tessera-node-agent"
POLLER = "tessera-system:tessera-backend"  # the workers' ServiceAccount (deploy/rbac.yaml)
REVIEW_TTL_S = 10.0
CACHE_MAX = 1024  # distinct tokens remembered: a flood of made-up tokens cannot grow the agent


@dataclass(frozen=True)
class Verdict:
    status: int  # 200: let through; 401, 403 or 503: refused, `error` says why
    error: str = ""


ALLOWED = Verdict(200)


class Authenticator(Protocol):
    def check(self, authorization: str) -> Verdict:
        """The verdict on a request's Authorization header ("" when it sent none)."""


@dataclass(frozen=True)
class Review:
    """What the API server said of a token: whose it is, if it is valid for our audience."""

    authenticated: bool
    username: str = ""
    error: str = ""


class ReviewUnavailable(Exception):
    """The API server could not be asked (down, slow, or refusing the agent's own token)."""


Reviewer = Callable[[str], Review]


def dev_auth_refusal(mode: str, *, debug: bool, allowed: bool) -> str:
    """Why `mode` may not be used here ("" when it may): the dev-only mode needs DEBUG or an
    explicit TESSERA_ALLOW_DEV_AGENT_AUTH=1. One rule for the agent and the workers."""
    if mode != DEV_STATIC_TOKEN or debug or allowed:
        return ""
    return (
        f"agent auth {DEV_STATIC_TOKEN!r} is for development without an API server; with DEBUG off use "
        f"{SERVICEACCOUNT!r}, or set {ALLOW_DEV_ENV}=1 to run it anyway"
    )


def service_account_user(namespace_name: str) -> str:
    """'ns:name' -> the username the API server gives that ServiceAccount's tokens."""
    namespace, sep, name = namespace_name.partition(":")
    if not (sep and namespace and name) or ":" in name:
        raise ValueError(f"expected a ServiceAccount as NAMESPACE:NAME, got {namespace_name!r}")
    return f"system:serviceaccount:{namespace}:{name}"


def bearer(authorization: str) -> str:
    scheme, _sep, token = authorization.partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


class StaticToken:
    """DEV ONLY: the one token in a file (see the module's docstring)."""

    def __init__(self, token: str) -> None:
        if not token:
            raise ValueError("the agent token must not be empty")
        self._expected = f"Bearer {token}".encode()

    def check(self, authorization: str) -> Verdict:
        # compare_digest: the time taken must not tell how much of the token was right.
        if hmac.compare_digest(authorization.encode(), self._expected):
            return ALLOWED
        return Verdict(401, "unauthorized")


class ServiceAccountTokens:
    """Lets through the tokens the API server says belong to `allowed` ('namespace:name')."""

    def __init__(
        self, review: Reviewer, allowed: str, ttl_s: float = REVIEW_TTL_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.review, self.username, self.ttl_s, self.clock = review, service_account_user(allowed), ttl_s, clock
        self._cache: dict[bytes, tuple[float, Verdict]] = {}  # sha256 of the token: no token kept in memory
        self._lock = threading.Lock()  # the server answers each request on its own thread

    def check(self, authorization: str) -> Verdict:
        token = bearer(authorization)
        if not token:
            return Verdict(401, "unauthorized: no bearer token")
        key, now = hashlib.sha256(token.encode()).digest(), self.clock()
        with self._lock:
            expires, verdict = self._cache.get(key, (now, ALLOWED))
        if expires > now:
            return verdict
        try:
            verdict = self._verdict(self.review(token))
        except ReviewUnavailable as error:
            log.warning("could not review a caller's token with the API server: %s", error)
            return Verdict(503, "unavailable: the agent cannot check tokens with the API server now")
        self._remember(key, now + self.ttl_s, verdict, now)
        return verdict

    def _verdict(self, review: Review) -> Verdict:
        if not review.authenticated:
            return Verdict(401, "unauthorized: the API server does not accept this token for the node agents")
        if review.username != self.username:
            log.warning("refused %s: only %s may read reports", review.username, self.username)
            return Verdict(403, f"forbidden: {review.username} may not read node reports")
        return ALLOWED

    def _remember(self, key: bytes, expires: float, verdict: Verdict, now: float) -> None:
        with self._lock:
            if len(self._cache) >= CACHE_MAX:
                self._cache = {k: v for k, v in self._cache.items() if v[0] > now}
                if len(self._cache) >= CACHE_MAX:
                    self._cache.clear()
            self._cache[key] = (expires, verdict)


def kube_reviewer(api_client, audience: str = AUDIENCE, timeout_s: float = 5.0) -> Reviewer:
    """TokenReviews (authentication.k8s.io/v1) through `api_client`, the agent's own ServiceAccount."""
    import urllib3
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    api = client.AuthenticationV1Api(api_client)

    def review(token: str) -> Review:
        body = client.V1TokenReview(spec=client.V1TokenReviewSpec(token=token, audiences=[audience]))
        try:
            status = api.create_token_review(body, _request_timeout=timeout_s).status
        except ApiException as error:
            raise ReviewUnavailable(f"TokenReview answered {error.status} {error.reason}") from error
        except (urllib3.exceptions.HTTPError, OSError) as error:
            raise ReviewUnavailable(f"TokenReview failed: {error}") from error
        # The API docs ask a client that names audiences to check the answer names ours: a server
        # that ignores audiences would otherwise pass a token meant for anything.
        if not status.authenticated or audience not in (status.audiences or []):
            return Review(authenticated=False, error=status.error or "")
        return Review(authenticated=True, username=status.user.username or "")

    return review
