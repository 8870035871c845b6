"""Running the fill experiment for many (policy, seed) pairs, in at most two processes."""

from __future__ import annotations

import multiprocessing
import random
import time
from collections.abc import Callable
from dataclasses import dataclass

from ...engine.fragment.frag import FragModel
from ...engine.fragment.shapes import MILLI, Request
from . import REGISTRY
from .loop import FillResult, arrival_sequence, run_fill
from .metrics import allocation_rate, frag_ratio
from .prior import prior_for
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


def gpu_capacity(nodes: list[NodeSpec]) -> dict[str, int]:
    """The cluster's GPU milli per model: what a policy may know of the cluster, with its CPU."""
    capacity: dict[str, int] = {}
    for n in nodes:
        capacity[n.model] = capacity.get(n.model, 0) + MILLI * n.num_gpu
    return capacity


def simulate(nodes: list[NodeSpec], trace: list[TraceTask], policy_name: str, seed: int,
             prior: str = "online") -> tuple[list[Request], FillResult]:
    """One run: the arrival sequence and what the policy made of it."""
    policy_prior, workload = prior_for(prior, REGISTRY.get(policy_name), trace,
                                       gpu_capacity(nodes), sum(n.cpu for n in nodes))
    fm = FragModel.from_tasks(t.task for t in workload)  # the paper's measure, for the metrics
    rng = random.Random(seed)  # one stream for the shuffle, copies, node order and ties
    seq = arrival_sequence(workload, MILLI * sum(n.num_gpu for n in nodes), rng)
    return seq, run_fill(nodes, seq, policy_prior, fm, rng)


def run_one(nodes: list[NodeSpec], trace: list[TraceTask], policy_name: str, seed: int,
            prior: str = "online") -> RunResult:
    started = time.perf_counter()
    result = simulate(nodes, trace, policy_name, seed, prior)[1]
    return RunResult(policy_name, seed, allocation_rate(result), frag_ratio(result),
                     result.failed, time.perf_counter() - started)


_WORKER_INPUT: tuple[list[NodeSpec], list[TraceTask]] | None = None


def _init_worker(nodes: list[NodeSpec], trace: list[TraceTask]) -> None:
    global _WORKER_INPUT
    _WORKER_INPUT = (nodes, trace)


def _run_job(job: tuple[str, int, str]) -> RunResult:
    assert _WORKER_INPUT is not None
    return run_one(*_WORKER_INPUT, *job)


def run_all(nodes: list[NodeSpec], trace: list[TraceTask], policies: list[str],
            seeds: list[int], processes: int = MAX_PROCESSES,
            on_done: Callable[[RunResult], None] | None = None,
            prior: str = "online") -> list[RunResult]:
    """Every (policy, seed) run; on_done is called as each finishes (for a progress bar)."""
    for name in policies:
        REGISTRY.get(name)  # fail before any work on an unknown name
    jobs = [(p, s, prior) for p in policies for s in seeds]
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
