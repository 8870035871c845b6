"""The kinds of fault and how each is injected: at a random point while tasks are in flight, with
random lengths, all drawn from the campaign's seeded generator."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from bench.faults.cluster import NODES
from bench.faults.processes import TASKS

if TYPE_CHECKING:
    from bench.faults.driver import Campaign


def _in_flight(c: Campaign) -> list:
    results = c.burst()
    time.sleep(c.rng.uniform(0.0, 0.4))  # somewhere inside those tasks
    return results


def worker_kill(c: Campaign) -> None:
    _in_flight(c)
    c.rng.choice(c.workers).signal(signal.SIGKILL)


def worker_pause(c: Campaign) -> None:
    _in_flight(c)
    worker = c.rng.choice(c.workers)
    worker.signal(signal.SIGSTOP)
    time.sleep(c.rng.uniform(0.3, 3.0))
    worker.signal(signal.SIGCONT)


def db_connection_loss(c: Campaign) -> None:
    from django.db import connection

    _in_flight(c)
    with connection.cursor() as cursor:  # this database's other sessions only: the workers'
        cursor.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                       "WHERE datname = current_database() AND pid <> pg_backend_pid()")


def redis_down(c: Campaign) -> None:
    _in_flight(c)
    c.redis.stop()
    time.sleep(c.rng.uniform(0.3, 2.5))
    c.redis.start()


def duplicate_delivery(c: Campaign) -> None:
    from scheduling.models import ActionRequest

    recent = list(ActionRequest.objects.order_by("-id").values_list("id", flat=True)[:4])
    results = []
    for name in TASKS:
        results += [c.send(name), c.send(name)]
    for action_id in recent:  # requested ones twice at once; finished ones redelivered late
        results += [c.send("agents.execute_action", (action_id,)) for _ in range(2)]
    c.wait(results)


def reordered_delivery(c: Campaign) -> None:
    from scheduling.models import ActionRequest

    recent = list(ActionRequest.objects.order_by("-id").values_list("id", flat=True)[:6])
    sends = [("agents.execute_action", (action_id,)) for action_id in recent] + [(name, ()) for name in TASKS]
    c.rng.shuffle(sends)
    c.wait([c.send(name, args) for name, args in sends])


def clock_skew(c: Campaign) -> None:
    skewed = [w for w in c.workers if w.skew_s] or c.workers
    worker = c.rng.choice(skewed)
    c.wait(c.burst(queue=worker.queue))


def _report_fault(c: Campaign, kind: str) -> None:
    name = c.rng.choice(NODES)[0]
    c.sim.report_fault(name, kind, c.rng.uniform(0.5, 3.5))
    c.wait(c.burst())


def malformed_report(c: Campaign) -> None:
    _report_fault(c, c.rng.choice(("malformed", "nan")))


def missing_report(c: Campaign) -> None:
    _report_fault(c, "missing")


def spot_reclaim(c: Campaign) -> None:
    name = c.rng.choice([n for n, tier, _ in NODES if tier == "spot"])
    c.sim.reclaim_node(name, c.rng.uniform(0.5, 3.0))
    c.wait(c.burst())


def node_loss(c: Campaign) -> None:
    name = c.rng.choice(NODES)[0]
    c.sim.lose_node(name)
    end = time.monotonic() + c.rng.uniform(0.3, 3.5)
    while time.monotonic() < end:
        c.wait(c.burst())
    c.sim.revive_node(name)


def backend_api_error(c: Campaign) -> None:
    c.sim.api_errors(c.rng.uniform(0.3, 2.0))
    c.wait(c.burst())


INJECT: dict[str, Callable[[Campaign], None]] = {
    "worker-kill": worker_kill, "worker-pause": worker_pause, "db-connection-loss": db_connection_loss,
    "redis-down": redis_down, "duplicate-delivery": duplicate_delivery, "reordered-delivery": reordered_delivery,
    "clock-skew": clock_skew, "malformed-report": malformed_report, "missing-report": missing_report,
    "spot-reclaim": spot_reclaim, "node-loss": node_loss, "backend-api-error": backend_api_error}
FAULTS = tuple(INJECT)
# Faults that may leave a worker hung (its broker or database connection dead): healing waits for
# each worker to answer, and replaces one that does not.
PROCESS_FAULTS = {"worker-kill", "worker-pause", "db-connection-loss", "redis-down"}
