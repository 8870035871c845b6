"""Tessera's scheduling engine: plain Python, no Django (nor Celery, Redis, kubernetes, pynvml).

Data flow of one cycle (one way, no queries mid-cycle, no agent calls):

    Snapshot (frozen: nodes + GPUs + MIG layouts, pending jobs, running members, queues,
              in-flight actions, now)
      -> Session       mutable per-cycle copy with free-capacity indexes (session.py)
      -> actions       in policy order, least disruptive first (actions/):
                       allocate (guaranteed, then burst; a blocked job reserves the GPUs
                       that free earliest) -> backfill (short jobs on reserved GPUs) ->
                       reclaim -> preempt -> repartition; each tentative change goes through a Statement that a
                       gang commits whole or discards
      -> explain       reason, sentence, ETA and queue positions for every job left waiting
      -> Plan          Bind / Preempt / Repartition actions + pending info + timings

The adapter applies the plan; the actions come back as `Snapshot.in_flight` until confirmed.

    plan = schedule(snapshot, "tessera")          # or "k8s-default", "binpack", a Policy
"""

from __future__ import annotations

import gc
import time
from collections.abc import Iterator
from contextlib import contextmanager

from . import idle as idle_module
from . import nominations
from .explain import explain
from .memory import memory_need_gb, share_milli, smallest_profile
from .mig import MigGeometry, MigProfile, canonical_model, geometry_for, layout_errors
from .plan import Bind, PendingInfo, Plan, Preempt, Repartition
from .policies import POLICIES, Policy, get_policy
from .session import Session
from .types import (
    PRIORITY_CLASSES,
    TIERS,
    Allocation,
    Gpu,
    Job,
    MigInstance,
    Node,
    Queue,
    Running,
    Snapshot,
    UsageHistory,
)

__all__ = [
    "PRIORITY_CLASSES", "TIERS", "POLICIES", "Allocation", "Bind", "Gpu", "Job", "MigGeometry",
    "MigInstance", "MigProfile", "Node", "PendingInfo", "Plan", "Policy", "Preempt", "Queue",
    "Repartition", "Running", "Snapshot", "canonical_model", "geometry_for", "layout_errors",
    "UsageHistory", "memory_need_gb", "schedule", "share_milli", "smallest_profile",
]


def schedule(snapshot: Snapshot, config: str | Policy = "tessera", idle_causes: bool = False) -> Plan:
    """Run one cycle. Deterministic: the same snapshot and policy give the same plan.
    `idle_causes`: also say why each GPU with free capacity stays idle (idle.py; the simulator's
    idle attribution)."""
    with _collector_paused():
        return _cycle(snapshot, config, idle_causes)


@contextmanager
def _collector_paused() -> Iterator[None]:
    """The cycle allocates tens of thousands of objects that all live until it ends, so the
    collector's passes over them (and over the snapshot) free nothing: at 4,000 nodes a steady
    cycle took 1.8-2.0 s CPU with it running, 1.43-1.45 s paused, the collection after the cycle
    included (bench/engine_cycle.py's state, three cycles in a row). The caller's setting is
    restored, and what the cycle leaves is collected after it."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


def _cycle(snapshot: Snapshot, config: str | Policy, idle_causes: bool) -> Plan:
    policy = get_policy(config)
    features, actions = policy.build()
    timings: dict[str, float] = {}
    started = time.perf_counter()
    session = Session(snapshot, features)
    nominations.load(session)
    timings["open"] = time.perf_counter() - started
    for name, action in actions:
        began = time.perf_counter()
        action(session)
        timings[name] = time.perf_counter() - began
    began = time.perf_counter()
    session.book.level(float("-inf"))  # explain sees reserved GPUs as held
    pending = explain(session)
    timings["explain"] = time.perf_counter() - began
    idle = idle_module.idle_causes(session, pending) if idle_causes else {}
    plan = Plan(policy=policy.name, binds=tuple(session.binds),
                preemptions=tuple(session.preemptions),
                repartitions=tuple(session.repartitions), pending=pending, timings=timings,
                faulty_gpus=session.faulty_gpus(), nominations=nominations.in_force(session),
                idle=dict(idle))
    session.close()
    timings["total"] = time.perf_counter() - started
    return plan
