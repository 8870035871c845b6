"""Celery tasks: each takes ids, calls a service in agents/services.py or agents/actions/, and
queues follow-up work on the queue it came from. All of them are idempotent, so a retried,
duplicated or redelivered task changes nothing twice; transient failures (the database or the
cluster API briefly away) retry with exponential backoff."""

from __future__ import annotations

import logging

from celery import shared_task
from django.conf import settings
from django.db import InterfaceError, OperationalError

from agents import actions, runtime, services
from agents.actions.state import REQUESTED
from agents.backends.base import TransientBackendError
from agents.native import native_intake
from agents.waiting_events import waiting_events_record

log = logging.getLogger(__name__)
TRANSIENT = (OperationalError, InterfaceError, OSError, TimeoutError, TransientBackendError)
RETRYING = {"autoretry_for": TRANSIENT, "retry_backoff": True, "retry_backoff_max": 60, "retry_jitter": True,
            "max_retries": 8, "acks_late": True}


def _queue(task) -> str | None:
    """The queue this task arrived on (None when run eagerly): follow-ups stay beside it."""
    return (task.request.delivery_info or {}).get("routing_key")


def _dispatcher(task):
    queue = _queue(task)

    def dispatch(action_ids: list[int]) -> None:
        for action_id in action_ids:
            execute_action.apply_async((action_id,), queue=queue)
    return dispatch


@shared_task(bind=True, name="agents.poll_agents", **RETRYING)
def poll_agents(self) -> dict:
    # A real cluster's node list is the truth; the simulated one's rows come from the demo loader.
    kubernetes = settings.TESSERA_BACKEND == "kubernetes"
    backend = runtime.backend()
    result = services.agents_poll(backend=backend, telemetry=runtime.telemetry(), dispatch=_dispatcher(self),
                                  sync_inventory=kubernetes)
    if kubernetes:  # pods others created for Tessera become jobs (agents/native.py)
        result["native"] = native_intake(backend=backend)
    return result


@shared_task(bind=True, name="agents.run_cycle", **RETRYING)
def run_cycle(self) -> dict:
    result = services.cycle_run(dispatch=_dispatcher(self))
    if result["ran"] and settings.TESSERA_BACKEND == "kubernetes":
        _waiting_events()
    return {key: value for key, value in result.items() if key != "summary"}


def _waiting_events() -> None:
    """After the cycle's transaction: why jobs wait, as Events. Never fails the cycle (a retry of
    the task would run the cycle again for a courtesy)."""
    try:
        waiting_events_record(runtime.backend())
    except Exception:  # noqa: BLE001
        log.warning("Waiting events not recorded", exc_info=True)


@shared_task(bind=True, name="agents.execute_action", **RETRYING)
def execute_action(self, action_id: int) -> str:
    state = actions.action_advance(action_id=action_id, backend=runtime.backend())
    if state == REQUESTED:  # waiting on the cluster (a checkpoint, a pod going away)
        execute_action.apply_async((action_id,), countdown=settings.TESSERA_ACTION_POLL_S, queue=_queue(self))
    return state


@shared_task(bind=True, name="agents.checkpoint_due", **RETRYING)
def checkpoint_due(self) -> list[int]:
    return services.checkpoints_due(dispatch=_dispatcher(self))


@shared_task(name="agents.reconcile", **RETRYING)
def reconcile() -> dict:
    return services.reconcile(backend=runtime.backend())


@shared_task(name="agents.resume_actions", **RETRYING)
def resume_actions() -> dict:
    """Take up every unfinished action, wherever a dead worker left it."""
    backend = runtime.backend()
    states = {action_id: actions.action_advance(action_id=action_id, backend=backend)
              for action_id in services.requested_actions()}
    return {"advanced": len(states), "still_waiting": sorted(a for a, s in states.items() if s == REQUESTED)}


@shared_task(name="agents.ping")
def ping(value: str) -> str:
    """A round trip through the broker; the smoke tests use it to prove a worker is alive."""
    return f"pong:{value}"
