"""What every action step shares: the action's states, its phase, the job it acts on."""

from __future__ import annotations

from scheduling.models import ActionRequest, Job

REQUESTED, CONFIRMED, FAILED = "requested", "confirmed", "failed"
HOLDING = Job.HOLDING_STATUSES


def finish(action: ActionRequest, state: str, error: str = "") -> None:
    action.state = state
    action.last_error = error[:500]


def set_phase(action: ActionRequest, phase: str, **fields) -> None:
    action.payload = {**action.payload, "phase": phase, **fields}


def load_job(action: ActionRequest) -> Job:
    return Job.objects.select_related("team", "project", "priority_class").get(pk=action.job_id)
