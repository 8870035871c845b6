"""A MIG repartition: ask the node for the new layout, then wait until it reports it."""

from __future__ import annotations

from datetime import datetime

from agents.actions.state import CONFIRMED, FAILED, finish, set_phase
from agents.backends.base import Backend
from agents.mig import repartition_finish, repartition_start
from scheduling.models import ActionRequest


def repartition_step(action: ActionRequest, backend: Backend, now: datetime) -> None:
    if action.payload.get("phase") is None:
        if repartition_start(action, backend):
            set_phase(action, "applying", asked_at=now.timestamp())
        return
    outcome = repartition_finish(action, backend, now.timestamp())
    if outcome is None and now.timestamp() > action.payload["asked_at"] + 900:
        outcome = "The node did not report the new MIG layout within 15 minutes."
    if outcome == "":
        finish(action, CONFIRMED)
    elif outcome is not None:
        finish(action, FAILED, outcome)
