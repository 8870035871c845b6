"""The FGD paper's fill experiment: one pass over an inflated, shuffled trace, no departures.

Speed comes from scoring lazily. A node's score for a task depends only on the node's state and
the task's CPU/GPU shape, and a placement changes one node. So each task shape keeps its nodes
bucketed by score and, when a task of that shape arrives, rescores only the nodes placed on since
the shape was last seen. Memory never enters a score, so it is checked when picking. When the
policy's workload prior changes (prior.py), every score is recomputed on its shape's next use.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from ...engine.fragment.frag import FragModel
from ...engine.fragment.shapes import MILLI, NodeView, Request, fits, place
from .prior import Binding, Prior
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


class _ShapeIndex:
    """Scores of every node for one task shape, bucketed by score, kept up to date lazily."""

    __slots__ = ("pos", "score_of", "buckets", "memo")

    def __init__(self, n_nodes: int):
        self.pos = -1  # position in the change log; -1 = never scored
        self.score_of: list[Any] = [None] * n_nodes
        self.buckets: dict[Any, set[int]] = {}
        self.memo: dict[tuple, Any] = {}


class FillSimulator:
    def __init__(self, nodes: list[NodeSpec], binding: Binding, rng: random.Random):
        self.states = [NodeView(n.model, n.cpu, n.mem, (MILLI,) * n.num_gpu) for n in nodes]
        self.rng = rng
        self.changes: list[int] = []  # node ids, one per placement
        self.rebind(binding)
        order = list(range(len(nodes)))
        rng.shuffle(order)
        self.rank = [0] * len(nodes)
        for pos, n in enumerate(order):
            self.rank[n] = pos

    def rebind(self, binding: Binding) -> None:
        """Score with this policy and prior from now on; every cached score is dropped."""
        self.policy, self.fm = binding
        self.random_pick = getattr(self.policy, "random_pick", False)
        self.indexes: dict[tuple, _ShapeIndex] = {}

    def _rescore(self, idx: _ShapeIndex, n: int, task: Request) -> None:
        old = idx.score_of[n]
        if old is not None:
            bucket = idx.buckets[old]
            bucket.discard(n)
            if not bucket:
                del idx.buckets[old]
        node = self.states[n]
        key = (node.model, node.cpu_left, node.gpus, node.tags)
        new = idx.memo.get(key, idx)  # idx doubles as the "missing" sentinel
        if new is idx:
            new = self.policy.score(node, task, self.fm) if fits(node, task, False) else None
            idx.memo[key] = new
        idx.score_of[n] = new
        if new is not None:
            idx.buckets.setdefault(new, set()).add(n)

    def _index_for(self, task: Request) -> _ShapeIndex:
        key = (task.cpu, task.num_gpu, task.gpu_milli, task.spec)
        idx = self.indexes.get(key)
        if idx is None:
            idx = self.indexes[key] = _ShapeIndex(len(self.states))
        pending = self.changes[idx.pos:] if idx.pos >= 0 else None
        todo = range(len(self.states)) if pending is None or len(pending) >= len(
            self.states) else set(pending)
        for n in todo:
            self._rescore(idx, n, task)
        idx.pos = len(self.changes)
        return idx

    def choose(self, task: Request) -> int | None:
        """The best-scoring node with enough memory, or None if the task fits nowhere."""
        buckets = self._index_for(task).buckets
        states, mem = self.states, task.mem
        for score in sorted(buckets, reverse=True):
            cands = [n for n in buckets[score] if states[n].mem_left >= mem]
            if cands:
                if self.random_pick:
                    return self.rng.choice(cands)
                # kube-scheduler in the artifact keeps the first best node in its (seeded,
                # permuted) node order, so ties pack onto the same nodes.
                return min(cands, key=self.rank.__getitem__)
        return None

    def place(self, n: int, task: Request) -> tuple[NodeView, NodeView]:
        old = self.states[n]
        pick = self.policy.share_pick(old, task, self.fm, self.rng) if task.is_share else None
        new = self.states[n] = place(old, task, pick)
        self.changes.append(n)
        return old, new


def run_fill(nodes: list[NodeSpec], seq: list[Request], prior: Prior, fm: FragModel,
             rng: random.Random) -> FillResult:
    """Try each task once, in order; a task that does not fit is dropped. The prior is told of
    each task only after it has been tried; fm is the paper's measure for the frag metric."""
    sim = FillSimulator(nodes, prior.binding, rng)
    result = FillResult(capacity_milli=MILLI * sum(n.num_gpu for n in nodes))
    arrived = used = 0
    idle = result.capacity_milli
    frag = sum(fm.node(s) for s in sim.states)
    for task in seq:
        arrived += task.total_milli  # counts whether or not the task fits
        n = sim.choose(task)
        if n is None:
            result.failed += 1
        else:
            old, new = sim.place(n, task)
            used += task.total_milli
            idle -= task.total_milli
            frag += fm.node(new) - fm.node(old)
        result.arrived.append(arrived)
        result.used.append(used)
        result.frag.append(frag)
        result.idle.append(idle)
        if prior.observe(task):
            sim.rebind(prior.binding)
    return result
