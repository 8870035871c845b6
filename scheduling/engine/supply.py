"""Free and releasing GPU units per model, for explain's start estimates: what is free now on
each model, what is usable in all, and when what runs is expected to end (explain.py's QueuePlan
dry-runs the queue on these). Worked out once per cycle (per model set for a release curve)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from itertools import accumulate, chain
from operator import itemgetter
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .placement import Models
    from .session import Session
    from .state import GpuState

ReleaseCurve = tuple[float, float, list[float], list[float]]  # free, total, ends, units freed by then


@dataclass
class ModelSupply:
    """Units of one GPU model: free now, usable in all, and (expected end, units) of what runs."""

    free: float = 0.0
    total: float = 0.0
    ends: list[tuple[float, float]] = field(default_factory=list)


def gpu_free_units(gpu: GpuState) -> float:
    """Free units of one GPU, none when unusable (GpuState.free_units). The plain sum
    model_supply inlines."""
    return gpu.free_units if gpu.usable else 0.0


def model_supply(session: Session) -> dict[str, ModelSupply]:
    """Per model: free units, total units, and (expected end, units) of what runs, sorted."""
    if session.supply is not None:
        return session.supply
    supply: defaultdict[str, ModelSupply] = defaultdict(ModelSupply)
    for node in session.nodes.values():
        entry = supply[node.model]
        free, total = entry.free, entry.total  # added in the same order as before: same floats
        ready = node.ready
        for gpu in node.gpus:
            # gpu_free_units inlined (an unusable GPU adds 0.0, which leaves the sum as it is)
            if gpu.healthy and not gpu.settling and ready and gpu.reserved is None:  # gpu.usable
                if gpu.mig_enabled:
                    free += gpu.free_units
                elif gpu.shares:
                    free += 0.0 if gpu.whole_job else 1 - gpu.milli_used / 1000
                elif gpu.whole_job is None:
                    free += 1.0
            if gpu.healthy and ready:
                total += 1.0
        entry.free, entry.total = free, total
    now, preempting = session.now, session.preempting
    ends_on = {name: supply[node.model].ends for name, node in session.nodes.items()}  # per node
    for members in session.members.values():
        for m in members:
            job = m.job
            if job is not None:
                end = now if m.job_id in preempting else m.started_at + job.expected_runtime_s
                ends_on[m.node].append((end, m.units))
    for entry in supply.values():
        entry.ends.sort()
    session.supply = supply
    return supply


def release_curve(session: Session, models: Models) -> ReleaseCurve:
    """For these models: (free units, total units, expected ends sorted, units freed by
    each end cumulated), cached per model set so each estimate is a bisection."""
    if models not in session.release_curves:
        supply = model_supply(session)
        # Each model's list is sorted, so this sort merges runs (in C; heapq.merge, a generator,
        # cost 0.03 s per model set at 4,000 nodes); equal (end, units) pairs are interchangeable.
        ends = sorted(chain.from_iterable(supply[m].ends for m in models))
        session.release_curves[models] = (sum(supply[m].free for m in models),
                                          sum(supply[m].total for m in models),
                                          list(map(itemgetter(0), ends)),
                                          list(accumulate(map(itemgetter(1), ends))))
    return session.release_curves[models]
