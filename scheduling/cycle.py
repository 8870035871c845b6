"""One scheduling cycle over the database: snapshot -> engine -> plan -> rows -> dispatch.

The chain from the clock to here, one name per layer: the Celery task `run_cycle`
(agents/tasks.py, beat runs it) calls the workers' service `cycle_run` (agents/services.py: the
live policy, one cycle at a time across workers), which calls `decide_and_apply` below.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from django.db import transaction

from scheduling import engine
from scheduling.apply import ApplyResult, apply_plan
from scheduling.clock import database_now
from scheduling.snapshot import build_snapshot


@dataclass
class CycleReport:
    plan: engine.Plan
    applied: ApplyResult
    snapshot_s: float
    decide_s: float
    apply_s: float

    def summary(self) -> str:
        plan = self.plan
        return (f"{plan.policy}: {len(self.applied.bound_jobs)} job(s) placed, {len(plan.preemptions)} "
                f"preemption(s), {len(plan.repartitions)} repartition(s), {len(plan.pending)} waiting; "
                f"snapshot {self.snapshot_s * 1000:.0f} ms, decide {self.decide_s * 1000:.0f} ms, "
                f"apply {self.apply_s * 1000:.0f} ms")


def decide_and_apply(*, policy: str, now: datetime | None = None,
                     dispatch: Callable[[list[int]], None] | None = None) -> CycleReport:
    """Run one cycle (no lock: cycle_run takes it). `dispatch` receives the new ActionRequest ids after the commit, so a
    backend never acts on an intent that was rolled back."""
    now = now or database_now()
    began = time.perf_counter()
    snapshot = build_snapshot(now)
    built = time.perf_counter()
    plan = engine.schedule(snapshot, policy)
    decided = time.perf_counter()
    with transaction.atomic():
        applied = apply_plan(plan, now=now)
        if dispatch is not None and applied.action_ids:
            ids = list(applied.action_ids)
            transaction.on_commit(lambda: dispatch(ids))
    return CycleReport(plan=plan, applied=applied, snapshot_s=built - began, decide_s=decided - built,
                       apply_s=time.perf_counter() - decided)
