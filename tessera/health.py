"""/healthz (liveness) and /readyz (readiness), each telling the truth about its own question.

/healthz: this process answers requests; it checks nothing else, so an orchestrator never restarts
a healthy portal because a dependency is away. /readyz: the database (without it nothing can be
served: 503), Redis (the cache and the workers' broker) and the age of the last scheduling cycle.
Without Redis or a recent cycle the portal still serves pages, so it stays in rotation (200) but
says "degraded" and which check failed.
"""

import time

import redis
from django.conf import settings
from django.core.cache import cache
from django.db import DatabaseError, connection
from django.http import JsonResponse

from agents.metrics import CYCLE_LAST_RUN, KEY

PROBE_TIMEOUT_S = 1.0


def healthz(request):
    return JsonResponse({"status": "ok"})


def readyz(request):
    checks = {"database": _database(), "redis": _redis(), "cycle": _cycle()}
    if checks["database"]["ok"] is False:
        status, code = "unavailable", 503
    elif any(check["ok"] is False for check in checks.values()):
        status, code = "degraded", 200
    else:
        status, code = "ok", 200
    return JsonResponse({"status": status, "checks": checks}, status=code)


def _database() -> dict:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return {"ok": True}
    except DatabaseError as error:
        return {"ok": False, "error": str(error).strip()[:200]}


def _redis() -> dict:
    if not settings.REDIS_URL.startswith(("redis://", "rediss://")):
        return {"ok": None, "detail": "not used (embedded mode)"}
    try:
        redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=PROBE_TIMEOUT_S,
                             socket_timeout=PROBE_TIMEOUT_S).ping()
        return {"ok": True}
    except redis.RedisError as error:
        return {"ok": False, "error": str(error)[:200]}


def cycle_age_limit_s() -> float:
    """Several missed cycles, never under a minute (one slow cycle is not an outage)."""
    return max(60.0, 6.0 * settings.TESSERA_CYCLE_INTERVAL_S)


def _cycle() -> dict:
    last = cache.get(KEY.format(CYCLE_LAST_RUN))  # written by every cycle (agents/metrics.py)
    if last is None:
        return {"ok": False, "error": "no scheduling cycle recorded (workers down, or Redis unavailable)"}
    age = time.time() - float(last)
    return {"ok": age <= cycle_age_limit_s(), "age_s": round(age, 1), "limit_s": cycle_age_limit_s()}
