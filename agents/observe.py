"""What the workers tell operators: one structured log line per scheduling cycle and per action
outcome, and the event metrics /metrics exports (agents/metrics.py).

Each line's fields are the record's `extra`: in production (LOG_FORMAT=json) they are the keys of
one JSON object a line, in the demo the message alone reads as a sentence.
"""

from __future__ import annotations

import logging
from collections import Counter

from django.utils import timezone

from agents import metrics
from scheduling.cycle import CycleReport
from scheduling.engine.reasons import PreemptReason
from scheduling.models import ActionRequest

cycle_log = logging.getLogger("tessera.cycle")
action_log = logging.getLogger("tessera.action")


def cycle_fields(report: CycleReport) -> dict:
    plan = report.plan
    return {
        "event": "cycle", "policy": plan.policy,
        "duration_s": round(report.snapshot_s + report.decide_s + report.apply_s, 4),
        "snapshot_s": round(report.snapshot_s, 4), "decide_s": round(report.decide_s, 4),
        "apply_s": round(report.apply_s, 4),
        "binds": len(report.applied.bound_jobs),
        "preemptions": sum(1 for p in plan.preemptions if p.reason != PreemptReason.RECLAIM),
        "reclaims": sum(1 for p in plan.preemptions if p.reason == PreemptReason.RECLAIM),
        "repartitions": len(plan.repartitions),
        "pending": len(plan.pending),
        "pending_by_reason": dict(sorted(Counter(info.reason for info in plan.pending.values()).items())),
        "faulty_gpus": {gpu: list(errors) for gpu, errors in sorted(plan.faulty_gpus.items())},
    }


def cycle_finished(report: CycleReport) -> None:
    fields = cycle_fields(report)
    reasons = ", ".join(f"{reason} {count}" for reason, count in fields["pending_by_reason"].items())
    cycle_log.info("cycle %s: %d bound, %d preempted, %d reclaimed, %d repartitioned, %d waiting%s in %.0f ms",
                   fields["policy"], fields["binds"], fields["preemptions"], fields["reclaims"],
                   fields["repartitions"], fields["pending"], f" ({reasons})" if reasons else "",
                   fields["duration_s"] * 1000, extra=fields)
    for gpu, errors in fields["faulty_gpus"].items():
        cycle_log.warning("GPU %s takes no work until its MIG layout is fixed in the admin: %s", gpu,
                          "; ".join(errors), extra={"event": "faulty_gpu", "gpu": gpu, "errors": errors})
    metrics.cycle_recorded(fields)


def action_finished(action_id: int) -> None:
    """An action reached confirmed or failed in this call (each outcome is logged once)."""
    action = ActionRequest.objects.select_related("node").filter(pk=action_id).first()
    if action is None:
        return
    fields = {"event": "action", "action_id": action.pk, "kind": action.kind, "outcome": action.state,
              "job_id": action.job_id, "node": action.node.name if action.node else action.payload.get("node"),
              "attempts": action.attempts, "error": action.last_error,
              "duration_s": round((timezone.now() - action.created_at).total_seconds(), 3)}
    level = logging.WARNING if action.state == ActionRequest.State.FAILED else logging.INFO
    action_log.log(level, "%s of job %s %s after %.1f s%s", action.kind, action.job_id, action.state,
                   fields["duration_s"], f": {action.last_error}" if action.last_error else "", extra=fields)
