"""GET /metrics: the Prometheus exposition of agents/metrics.py.

It names teams and nodes, so it is not public: Prometheus presents `Authorization: Bearer <token>`
with the token in TESSERA_METRICS_TOKEN (compared in constant time), and signed-in staff may read
it in a browser. Without a token configured only staff can read it, so a deployment that scrapes
sets one.
"""

import hmac

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

from agents.metrics import registry


def _bearer_ok(request: HttpRequest) -> bool:
    token = settings.TESSERA_METRICS_TOKEN
    scheme, _space, given = request.headers.get("Authorization", "").partition(" ")
    return bool(token) and scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token.encode())


@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    if not (_bearer_ok(request) or request.user.is_staff):
        response = HttpResponse("Metrics need a bearer token (TESSERA_METRICS_TOKEN) or a staff sign-in.\n",
                                status=401, content_type="text/plain")
        response["WWW-Authenticate"] = 'Bearer realm="tessera-metrics"'
        return response
    return HttpResponse(generate_latest(registry()), content_type=CONTENT_TYPE_LATEST)
