"""Waiting-reason Events on Kubernetes (issue 13 point 6; README, "Workers, node agent and deployment").

A job that waits has no pod to describe, so the engine's why-it-waits sentence becomes an Event in
its team's namespace about the job itself (k8s_events.waiting_event_manifest). One event per
(job, reason code): a job told once is not told again each cycle while the reason stays, only when
its reason code changes (the sentence's own figures, such as a queue position, may change freely);
a return to an earlier reason raises that event's count. What each job was last told lives in the
cache (Redis), shared by every worker that runs a cycle. At most EVENTS_PER_CYCLE a cycle, newest
jobs first; the rest follow in later cycles.
"""

from __future__ import annotations

import logging

from django.core.cache import cache

from agents.backends.base import Backend
from scheduling.engine.reasons import WaitingReason
from scheduling.models import Job

log = logging.getLogger(__name__)
EVENTS_PER_CYCLE = 50
TOLD_TTL_S = 7 * 24 * 3600  # a job waiting longer than this may be told its reason once more


def _key(job_id: int) -> str:
    return f"waiting-told:{job_id}"


def waiting_events_record(backend: Backend, limit: int = EVENTS_PER_CYCLE) -> int:
    """Record the Events of the jobs whose waiting reason changed since they were last told;
    how many were sent to the cluster."""
    # Codes first (small rows: 10,000 waiting jobs are a steady queue); sentences for the changed only.
    codes = list(Job.objects.filter(status__in=Job.WAITING_STATUSES)
                 .exclude(pending_reason_code__in=("", WaitingReason.NEW.value)).order_by("-pk")
                 .values_list("pk", "pending_reason_code"))
    told = cache.get_many([_key(pk) for pk, _code in codes])
    before = {pk: told.get(_key(pk)) or {"code": "", "counts": {}} for pk, _code in codes}
    changed = [pk for pk, code in codes if before[pk]["code"] != code][:limit]
    rows = Job.objects.filter(pk__in=changed, status__in=Job.WAITING_STATUSES).order_by("-pk") \
        .values_list("pk", "namespace", "team__name", "pending_reason_code", "pending_reason")
    updates: dict[str, dict] = {}
    for pk, native_namespace, team, code, message in rows:
        namespace = native_namespace or team  # a native job's pods are in their own namespace
        count = before[pk]["counts"].get(code, 0) + 1
        # Told even when the cluster refused it (a namespace not allowed, no right to events): a
        # refusal would repeat every cycle, and an event is a courtesy.
        backend.record_waiting(str(pk), namespace, code, message, count)
        updates[_key(pk)] = {"code": code, "counts": {**before[pk]["counts"], code: count}}
    if updates:
        cache.set_many(updates, TOLD_TTL_S)
    return len(updates)
