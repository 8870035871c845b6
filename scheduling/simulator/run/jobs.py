"""A job in the simulated backend: its members (pods), its progress and what a stop costs it.

Progress is measured in ideal seconds (the duration on an ideal placement). Training and batch
jobs progress at their efficiency and can lose work; inference and interactive jobs are
services: they hold their GPUs for a wall-clock time and lose no work when moved.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from scheduling.engine.types import Allocation, Running

from .spec import JobSpec

WAITING, RUNNING, STOPPING, BACKOFF, DONE = "waiting", "running", "stopping", "backoff", "done"
STATEFUL_KINDS = ("training", "batch")


@dataclass
class Member:
    """One bound pod: where it is and what it holds."""

    node: str
    allocations: tuple[Allocation, ...]
    since: float
    borrowed: bool
    units: float
    waste_gb: float
    running: Running | None = None  # the engine's view, cached


def member_layout(job: JobSpec, max_per_node: int) -> tuple[int, int]:
    """(members, GPUs per member): a job asking more GPUs than a node has becomes a gang of
    equal members, each the largest divisor of its GPUs that fits on one node."""
    if job.gpus <= max_per_node:
        return 1, job.gpus
    per = max(d for d in range(1, max_per_node + 1) if job.gpus % d == 0)
    return job.gpus // per, per


@dataclass
class SimJob:
    spec: JobSpec
    members: int
    per_member_gpus: int
    state: str = WAITING
    bound: dict[int, Member] = field(default_factory=dict)
    done_s: float = 0.0             # ideal progress kept
    run_since: float | None = None  # progress starts (after a restart stall)
    rate: float = 1.0               # ideal seconds per wall second
    useful: float = 0.0             # need x efficiency, while running
    epoch: int = 0                  # bumped on every stop: stale events are ignored
    queued_at: float = 0.0
    first_start: float | None = None
    ran_before: bool = False
    doomed: bool = False            # bound where its memory does not fit: will OOM
    failures: int = 0
    template: object = None         # cached engine Job (see Backend.template)
    engine_jobs: tuple | None = None  # cached pending engine Jobs

    @property
    def stateful(self) -> bool:
        return self.spec.kind in STATEFUL_KINDS

    @property
    def total_gpus(self) -> int:
        return self.spec.gpus

    @property
    def complete(self) -> bool:
        return len(self.bound) == self.members

    def progress_at(self, now: float) -> float:
        if self.run_since is None:
            return self.done_s
        return min(self.spec.duration_s, self.done_s + max(0.0, now - self.run_since) * self.rate)

    def last_checkpoint(self, now: float) -> tuple[float, float | None]:
        """(progress saved, wall time saved) at the last periodic checkpoint before `now`."""
        interval = self.spec.checkpoint_interval_s
        if not self.stateful:
            return self.progress_at(now), now
        if self.run_since is None or not interval:
            return (self.done_s if interval else 0.0), None
        count = math.floor(max(0.0, now - self.run_since) / interval)
        wall = self.run_since + count * interval
        return min(self.spec.duration_s, self.done_s + count * interval * self.rate), wall

    def can_save_within(self, seconds: float) -> bool:
        return (self.stateful and bool(self.spec.checkpoint_interval_s)
                and self.spec.checkpoint_s <= seconds)

    def stop_progress(self, now: float, saves: bool) -> float:
        """Stop running: keep the progress (saved now, or the last checkpoint); returns the
        ideal seconds of work lost."""
        reached = self.progress_at(now)
        kept = reached if saves or not self.stateful else self.last_checkpoint(now)[0]
        self.done_s = kept
        self.run_since = None
        return reached - kept

    def remaining_wall(self) -> float:
        return (self.spec.duration_s - self.done_s) / self.rate
