"""The FGD paper's fill experiment: one pass over an inflated, shuffled trace, no departures.

Each task is placed by the live engine's placement (engine.placement.place_job) with the policy's
scorer, in one session over the cluster (adapter.py turns the openb nodes and tasks into engine
Nodes and Jobs), so the figures measure the code that places jobs in production. The session's
score memo (placement.scored) keeps a run fast: nodes in the same state share a score.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from ...engine.fragment.frag import FragModel
from ...engine.fragment.shapes import MILLI, Request
from .adapter import EngineCluster
from .prior import Prior
from .traces import NodeSpec, TraceTask

TUNE = 1.3  # inflate the workload until requests reach 130% of GPU capacity


def arrival_sequence(trace: list[TraceTask], capacity_milli: int, rng: random.Random,
                     tune: float = TUNE) -> list[Request]:
    """Sort by name, shuffle, then add random copies (or drop random tasks) to reach tune."""
    originals = [t.task for t in sorted(trace, key=lambda t: t.name)]
    seq = list(originals)
    rng.shuffle(seq)
    target = tune * capacity_milli
    total = sum(t.total_milli for t in seq)
    if total > target:
        while total > target:
            total -= seq.pop(rng.randrange(len(seq))).total_milli
        return seq
    while True:
        copy = rng.choice(originals)
        # The artifact's stop test looks at the per-GPU share, not the task's total.
        if total + copy.gpu_milli > target:
            return seq
        seq.append(copy)
        total += copy.total_milli


@dataclass
class FillResult:
    capacity_milli: int
    arrived: list[int] = field(default_factory=list)  # cumulative requested milli, per task
    used: list[int] = field(default_factory=list)  # allocated milli after each task
    frag: list[float] = field(default_factory=list)  # cluster sum of F_n(M) after each task
    idle: list[int] = field(default_factory=list)  # cluster free milli after each task
    failed: int = 0


def run_fill(nodes: list[NodeSpec], seq: list[Request], prior: Prior, fm: FragModel,
             rng: random.Random) -> FillResult:
    """Try each task once, in order; a task that does not fit is dropped. The prior is told of
    each task only after it has been tried; fm is the paper's measure for the frag metric."""
    cluster = EngineCluster(nodes, prior.binding, rng)
    result = FillResult(capacity_milli=MILLI * sum(n.num_gpu for n in nodes))
    arrived = used = 0
    idle = result.capacity_milli
    frag = sum(fm.node(view) for view in cluster.views())
    for task in seq:
        arrived += task.total_milli  # counts whether or not the task fits
        placed = cluster.place(task)
        if placed is None:
            result.failed += 1
        else:
            old, new = placed
            used += task.total_milli
            idle -= task.total_milli
            frag += fm.node(new) - fm.node(old)
        result.arrived.append(arrived)
        result.used.append(used)
        result.frag.append(frag)
        result.idle.append(idle)
        if prior.observe(task):
            cluster.rebind(prior.binding)
    return result
