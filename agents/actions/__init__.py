"""ActionRequests carried out through a backend, as resumable state machines.

Each action keeps its phase in `payload["phase"]`. One step locks the row, makes idempotent
backend calls and writes the next phase in the same transaction, so a worker killed anywhere
leaves the row at the last committed phase and the next run (a retry, `resume_actions`) repeats
at most one idempotent step. A finished action (confirmed / failed) is never touched again.

One module per kind of action (bind, checkpoint, preempt, repartition); state.py holds what their
steps share, pods.py which pods a job has.
"""

from __future__ import annotations

from datetime import datetime

from django.db import transaction

from agents import observe
from agents.actions.bind import bind_step
from agents.actions.checkpoint import checkpoint_step
from agents.actions.preempt import preempt_step
from agents.actions.repartition import repartition_step
from agents.actions.state import FAILED, REQUESTED
from agents.backends.base import Backend
from agents.runtime import failpoint
from scheduling.clock import database_now
from scheduling.models import ActionRequest

MAX_STEPS = 8


def action_advance(*, action_id: int, backend: Backend, now: datetime | None = None) -> str:
    """Run steps until the action waits or finishes; returns its state ('requested' = call again)."""
    state = REQUESTED
    for _ in range(MAX_STEPS):
        state, phase, moved = _step(action_id, backend, now or database_now())
        if state != REQUESTED or not moved:
            break
        failpoint(f"action.{phase}")  # between two committed steps
    if moved and state != REQUESTED:  # finished by this call: logged once
        observe.action_finished(action_id)
    return state


@transaction.atomic
def _step(action_id: int, backend: Backend, now: datetime) -> tuple[str, str, bool]:
    action = ActionRequest.objects.select_for_update().filter(pk=action_id).first()
    if action is None:
        return FAILED, "", False
    if action.state != REQUESTED:
        return action.state, "", False
    before = (action.state, action.payload.get("phase"))
    action.attempts = min(action.attempts + 1, 32767)
    STEPS[action.kind](action, backend, now)
    action.save(update_fields=["state", "payload", "attempts", "last_error", "updated_at"])
    after = (action.state, action.payload.get("phase"))
    return action.state, f"{action.kind}.{after[1]}", after != before


STEPS = {"bind": bind_step, "checkpoint": checkpoint_step, "preempt": preempt_step,
         "repartition": repartition_step}
