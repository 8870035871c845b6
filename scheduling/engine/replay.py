"""Confirm a plan against its snapshot, as a perfect backend would: the next snapshot.

Used by the benchmark, the property tests and offline replays: binds become running members,
preempted jobs go back to the pending queue (requeued, not lost), repartitions take effect.
"""

from __future__ import annotations

from dataclasses import replace

from .plan import Plan, Repartition
from .types import Gpu, MigInstance, Node, Running, Snapshot


def apply_plan(snapshot: Snapshot, plan: Plan, now: float | None = None) -> Snapshot:
    now = snapshot.now if now is None else now
    jobs = {j.id: j for j in snapshot.pending}
    victims = {p.job_id for p in plan.preemptions}
    running = [r for r in snapshot.running if r.job.id not in victims]
    requeued = {r.job.id: r.job for r in snapshot.running if r.job.id in victims}
    for bind in plan.binds:
        running.append(Running(job=jobs[bind.job_id], node=bind.node,
                               allocations=bind.allocations, started_at=now,
                               borrowed=bind.borrowed, member=bind.member))
    placed = {b.job_id for b in plan.binds}
    pending = [j for j in snapshot.pending if j.id not in placed] + list(requeued.values())
    nodes = _apply_layouts(snapshot.nodes, plan, running, now)
    return replace(snapshot, now=now, nodes=nodes, pending=tuple(pending),
                   running=tuple(running), in_flight=())


def _apply_layouts(nodes: tuple[Node, ...], plan: Plan, running: list[Running], now: float) -> tuple[Node, ...]:
    """New MIG layouts: repartitions, plus instances created by binds; job ids mirrored."""
    layouts = {(r.node, r.gpu_index): r for r in plan.repartitions}
    users: dict[tuple[str, int], dict[int, tuple[str, str]]] = {}  # (node, GPU) -> start -> (profile, job)
    for run in running:
        for alloc in run.allocations:
            if alloc.mig_profile is not None and alloc.mig_start is not None:
                per_gpu = users.setdefault((run.node, alloc.gpu_index), {})
                per_gpu[alloc.mig_start] = (alloc.mig_profile, run.job.id)
    out = []
    for node in nodes:
        gpus = []
        for gpu in node.gpus:
            gpus.append(_gpu_after(gpu, layouts.get((node.name, gpu.index)),
                                   users.get((node.name, gpu.index), {}), now))
        out.append(replace(node, gpus=tuple(gpus)))
    return tuple(out)


def _gpu_after(gpu: Gpu, change: Repartition | None, users: dict[int, tuple[str, str]], now: float) -> Gpu:
    """`users`: {start: (profile, job id)} of the MIG instances in use on this GPU."""
    if change is None and not users and not gpu.mig_instances:
        return gpu
    if change is not None:
        instances = {s: p for p, s in change.layout}
        gpu = replace(gpu, mig_enabled=change.mig_enabled, layout_changed_at=now)
    else:
        instances = {i.start: i.profile for i in gpu.mig_instances}
    for start, (profile, _job) in users.items():
        instances.setdefault(start, profile)
    mig = tuple(MigInstance(p, s, users.get(s, (None, None))[1])
                for s, p in sorted(instances.items()))
    return replace(gpu, mig_instances=mig if gpu.mig_enabled else ())
