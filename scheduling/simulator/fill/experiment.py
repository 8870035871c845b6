"""Running the fill experiment for many (policy, seed) pairs, in at most two processes."""

from __future__ import annotations

import multiprocessing
import random
import time
from collections.abc import Callable
from dataclasses import dataclass

from . import REGISTRY
from .frag import FragModel
from .loop import arrival_sequence, run_fill
from .metrics import allocation_rate, frag_ratio
from .registry import Policy
from .traces import NodeSpec, TraceTask

MAX_PROCESSES = 2  # the build machines are shared


@dataclass
class RunResult:
    policy: str
    seed: int
    allocation_rate: dict[int, float]
    frag_ratio: dict[int, float]
    failed: int
    seconds: float


def bind_policy(policy: Policy, trace: list[TraceTask],
                nodes: list[NodeSpec] | None = None) -> Policy:
    """Policies that learn from the workload (tessera-fill) get the original task list and, given
    the node list, the cluster's GPU milli per model."""
    bind = getattr(policy, "for_workload", None)
    if not bind:
        return policy
    capacity: dict[str, int] = {}
    for n in nodes or []:
        capacity[n.model] = capacity.get(n.model, 0) + 1000 * n.num_gpu
    return bind([t.task for t in trace], capacity or None)


def run_one(nodes: list[NodeSpec], trace: list[TraceTask], policy_name: str,
            seed: int) -> RunResult:
    started = time.perf_counter()
    policy = bind_policy(REGISTRY.get(policy_name), trace, nodes)
    fm = FragModel.from_tasks(t.task for t in trace)  # the paper's measure, for the metrics
    rng = random.Random(seed)  # one stream for the shuffle, copies, node order and ties
    capacity = 1000 * sum(n.num_gpu for n in nodes)
    result = run_fill(nodes, arrival_sequence(trace, capacity, rng), policy, fm, rng)
    return RunResult(policy_name, seed, allocation_rate(result), frag_ratio(result),
                     result.failed, time.perf_counter() - started)


_WORKER_INPUT: tuple[list[NodeSpec], list[TraceTask]] | None = None


def _init_worker(nodes: list[NodeSpec], trace: list[TraceTask]) -> None:
    global _WORKER_INPUT
    _WORKER_INPUT = (nodes, trace)


def _run_job(job: tuple[str, int]) -> RunResult:
    assert _WORKER_INPUT is not None
    return run_one(*_WORKER_INPUT, *job)


def run_all(nodes: list[NodeSpec], trace: list[TraceTask], policies: list[str],
            seeds: list[int], processes: int = MAX_PROCESSES,
            on_done: Callable[[RunResult], None] | None = None) -> list[RunResult]:
    """Every (policy, seed) run; on_done is called as each finishes (for a progress bar)."""
    for name in policies:
        REGISTRY.get(name)  # fail before any work on an unknown name
    jobs = [(p, s) for p in policies for s in seeds]
    processes = max(1, min(processes, MAX_PROCESSES, len(jobs)))
    results = []
    if processes == 1:
        for job in jobs:
            results.append(run_one(nodes, trace, *job))
            if on_done:
                on_done(results[-1])
        return results
    with multiprocessing.Pool(processes, _init_worker, (nodes, trace)) as pool:
        for res in pool.imap_unordered(_run_job, jobs):
            results.append(res)
            if on_done:
                on_done(res)
    return results
