"""Rows -> the engine's frozen Snapshot, in a fixed number of queries whatever the cluster size.

Times become UNIX seconds (the engine's clock); jobs larger than a node become gangs of
equal members, one per node. The engine's types have no defaults, so every field is said here:
GPU health and layout age come from the GPU rows, node prices from the rate card (billing
registers its reader in scheduling/prices.py).
"""

from __future__ import annotations

import math
from collections import defaultdict
from datetime import datetime

from django.conf import settings
from django.db.models import Max, Prefetch
from django.utils import timezone

from portal.models import Team
from scheduling import engine
from scheduling.engine.reasons import WaitingReason
from scheduling.models import ActionRequest, Gpu, Job, MigInstance, NetworkSwitch, Node, Placement
from scheduling.payloads import PreemptPayload, RepartitionPayload
from scheduling.prices import PriceList, prices_at
from scheduling.usage_history import usage_history_at

DEFAULT_RUNTIME_S = 3600.0
# The user of a MIG instance a pod Tessera did not place holds: busy to the engine (never given to a
# job, never repartitioned away), yet no job of ours (ids are row numbers) to preempt or bill.
OUTSIDE = "outside-tessera"


def epoch(moment: datetime | None) -> float | None:
    return moment.timestamp() if moment else None


def build_snapshot(now: datetime | None = None) -> engine.Snapshot:
    now = now or timezone.now()
    open_placements = list(
        Placement.objects.filter(ended_at__isnull=True, job__status__in=Job.HOLDING_STATUSES)
        .select_related("job__team", "job__project", "job__priority_class", "gpu__node", "mig_instance"))
    nodes = _nodes(open_placements, prices_at(now))
    max_node_gpus = max((len(node.gpus) for node in nodes), default=8) or 8
    # A gang whose pods are not all there yet is no candidate: placing some of it would bind a part;
    # nor is a native job whose pods a preemption stopped, until their controller makes them again.
    pending_rows = (Job.objects.filter(status__in=Job.WAITING_STATUSES)
                    .exclude(pending_reason_code__in=(WaitingReason.GANG_INCOMPLETE, WaitingReason.PODS_GONE))
                    .select_related("team", "project", "priority_class").order_by("id"))
    pending = tuple(to_engine_job(job, max_node_gpus) for job in pending_rows)
    running = _running(open_placements, max_node_gpus)
    return engine.Snapshot(
        now=now.timestamp(), nodes=nodes, pending=pending, running=running, queues=_queues(),
        in_flight=_in_flight(), spine_oversubscription=_spine_oversubscription(),
        nominations=(),  # the live policies do not nominate (Features.nominate: baselines only)
        usage_history=usage_history_at(now), clock_speed=settings.TESSERA_CLOCK_SPEED)


def member_shape(total_gpus: int, max_node_gpus: int) -> tuple[int, int]:
    """(GPUs per member, members) for a job of total_gpus: one member when it fits a node,
    else the largest per-node share that divides the job evenly."""
    if total_gpus <= max_node_gpus:
        return total_gpus, 1
    per_member = max(d for d in range(1, max_node_gpus + 1) if total_gpus % d == 0)
    return per_member, math.ceil(total_gpus / per_member)


def job_shape(job: Job, max_node_gpus: int) -> tuple[int, int]:
    """(GPUs per member, members): a gang from the cluster has one member per pod, as its pod
    group says (job.members); a job from the portal is shaped by member_shape."""
    if job.members:
        return job.gpus // job.members, job.members
    return member_shape(job.gpus, max_node_gpus)


def to_engine_job(job: Job, max_node_gpus: int, started_at: datetime | None = None) -> engine.Job:
    """`started_at`: when the member's current run started (None: the job waits)."""
    per_member, members = job_shape(job, max_node_gpus)
    return engine.Job(
        id=str(job.pk), team=job.team.name, project=job.project.name, kind=job.kind,
        priority_class=job.priority_class.name, priority=job.priority_class.value,
        gpus=per_member, gpu_memory_gb=job.gpu_memory_gb, cpu_cores=job.cpu_cores / members,
        memory_gb=job.memory_gb / members, gang_size=members, gpu_models=job.allowed_gpu_models,
        checkpoint_interval_s=job.checkpoint_interval_s, last_checkpoint_at=epoch(job.last_checkpoint_at),
        preemptible=job.preemptible, queue_order=job.queue_order, submitted_at=job.submitted_at.timestamp(),
        expected_runtime_s=runtime_left_s(job, started_at), accepts_no_isolation=job.accepts_no_isolation,
        mig_profile=job.mig_profile, gpu_milli=0)  # the portal asks for memory; a share follows from it


def runtime_left_s(job: Job, started_at: datetime | None) -> float:
    """What the job still had to run when its current run started (now, for a waiting job), as
    the simulator tells the engine: its expected runtime less the work its last checkpoint
    saved, except what that checkpoint saved during this run. Reservations and ETAs count a
    running job's end from its start, so a resumed job would otherwise look as long as new."""
    left = float(job.expected_runtime_s or job.max_runtime_s or DEFAULT_RUNTIME_S) - job.progress_s
    if started_at is not None and job.last_checkpoint_at is not None:
        left += max(0.0, (job.last_checkpoint_at - started_at).total_seconds())
    return max(1.0, left)


def _nodes(open_placements, prices: PriceList) -> tuple[engine.Node, ...]:
    job_by_instance = {p.mig_instance_id: str(p.job_id) for p in open_placements if p.mig_instance_id}
    gpus = Prefetch("gpus", queryset=Gpu.objects.order_by("index").prefetch_related(
        Prefetch("mig_instances", queryset=MigInstance.objects.order_by("start_slot"))))
    rows = (Node.objects.exclude(state=Node.State.LOST).select_related("tier", "leaf_switch__parent")
            .prefetch_related(gpus).order_by("name"))
    busy = {p.gpu_id for p in open_placements}
    return tuple(_to_engine_node(node, job_by_instance, prices.get((node.gpu_model, node.tier.name)), busy)
                 for node in rows)


def held_elsewhere(node: Node, busy: set[int]) -> set[int]:
    """GPU rows the engine must see as taken although no placement of ours names them: the
    cluster offers fewer whole GPUs (allocatable) than the rows count, or other pods hold some.
    The device plugin picks the devices, so which rows does not matter: the highest free ones."""
    if node.allocatable_gpus is None:
        return set()
    whole = [gpu for gpu in node.gpus.all() if not gpu.mig_enabled]
    free = sorted((gpu for gpu in whole if gpu.pk not in busy and gpu.healthy), key=lambda g: -g.index)
    open_to_us = max(0, node.allocatable_gpus - node.gpus_used_outside - sum(g.pk in busy for g in whole))
    return {gpu.pk for gpu in free[:max(0, len(free) - open_to_us)]}


def mig_held_elsewhere(node: Node, job_by_instance: dict) -> set[int]:
    """MIG instance rows the engine must see as in use although no placement of ours names them:
    pods Tessera did not place hold that many devices of their profile (node.mig_used_outside).
    The device plugin picks the devices: which idle ones does not matter, the last ones."""
    held: set[int] = set()
    for profile, count in (node.mig_used_outside or {}).items():
        idle = [mi for gpu in node.gpus.all() if gpu.mig_enabled for mi in gpu.mig_instances.all()
                if mi.profile == profile and mi.pk not in job_by_instance]
        held.update(mi.pk for mi in idle[::-1][:max(0, count)])
    return held


def _to_engine_node(node: Node, job_by_instance: dict, price: float | None, busy: set[int]) -> engine.Node:
    leaf = node.leaf_switch
    held = held_elsewhere(node, busy)
    mig_held = mig_held_elsewhere(node, job_by_instance)
    gpus = tuple(
        engine.Gpu(index=gpu.index, uuid=gpu.uuid, model=gpu.model, memory_gb=gpu.memory_gb,
                   mig_enabled=gpu.mig_enabled, mig_capable=gpu.mig_capable,
                   healthy=gpu.healthy and gpu.pk not in held, layout_changed_at=epoch(gpu.layout_changed_at),
                   mig_instances=tuple(engine.MigInstance(
                       profile=mi.profile, start=mi.start_slot,
                       job_id=OUTSIDE if mi.pk in mig_held else job_by_instance.get(mi.pk))
                                       for mi in gpu.mig_instances.all()))
        for gpu in node.gpus.all())
    # 400 Gb/s NDR moves about 48 GB/s of all-reduce traffic per NIC (docs/reference/performance-figures.md §3).
    return engine.Node(
        name=node.name, tier=node.tier.name, leaf=leaf.name, spine=leaf.parent.name if leaf.parent else "",
        gpu_model=node.gpu_model, interconnect=node.interconnect, cpu_cores=float(node.cpu_cores),
        memory_gb=float(node.memory_gb), gpus=gpus, nics=node.nics,
        # The cluster closed it to new pods (not Ready, cordoned, tainted): what runs stays, nothing new.
        state=node.state if node.schedulable else Node.State.DRAINING.value,
        nic_gb_s=node.nic_gbps * 0.12, price_per_gpu_hour=price,
        sharing=node.gpu_sharing, share_replicas=max(1, node.gpu_replicas))


def _running(open_placements, max_node_gpus: int) -> tuple[engine.Running, ...]:
    by_node: dict[tuple[int, str], list[Placement]] = defaultdict(list)
    for placement in open_placements:
        by_node[(placement.job_id, placement.gpu.node.name)].append(placement)
    members_seen: dict[int, int] = defaultdict(int)
    running = []
    for (job_id, node_name), on_node in sorted(by_node.items()):
        job = on_node[0].job
        started_at = min(p.started_at for p in on_node)
        engine_job = to_engine_job(job, max_node_gpus, started_at)
        for placements in _members_on_node(job, engine_job, on_node):
            running.append(engine.Running(
                job=engine_job, node=node_name, member=members_seen[job_id], borrowed=job.borrowed,
                started_at=started_at.timestamp(), allocations=tuple(_allocation(p) for p in placements)))
            members_seen[job_id] += 1
    return tuple(running)


def _members_on_node(job: Job, engine_job: engine.Job, placements: list[Placement]) -> list[list[Placement]]:
    """A job's placements on one node, by member: a portal job has one member per node; a gang
    from the cluster may have several pods there, each with engine_job.gpus GPUs (or one slice)."""
    ordered = sorted(placements, key=lambda p: p.gpu.index)
    if not job.members:
        return [ordered]
    size = max(1, engine_job.gpus)
    return [ordered[start:start + size] for start in range(0, len(ordered), size)]


def _allocation(placement: Placement) -> engine.Allocation:
    instance = placement.mig_instance
    return engine.Allocation(
        gpu_index=placement.gpu.index, milli=placement.share_milli, memory_gb=placement.memory_gb,
        mig_profile=instance.profile if instance else None, mig_start=instance.start_slot if instance else None)


def _queues() -> tuple[engine.Queue, ...]:
    return tuple(engine.Queue(team=team.name, guaranteed_gpus=float(team.guaranteed_gpus),
                              burst_limit_gpus=float(team.burst_limit_gpus), weight=team.weight)
                 for team in Team.objects.order_by("name"))


def _in_flight() -> tuple:
    actions = []
    for action in ActionRequest.objects.filter(state=ActionRequest.State.REQUESTED).order_by("id"):
        if action.kind == ActionRequest.Kind.PREEMPT:
            stop = PreemptPayload.from_payload(action.payload)
            actions.append(engine.Preempt(
                job_id=str(stop.job_id), for_job_id=None if stop.for_job_id is None else str(stop.for_job_id),
                reason=stop.reason))
        elif action.kind == ActionRequest.Kind.REPARTITION:
            change = RepartitionPayload.from_payload(action.payload)
            actions.append(engine.Repartition(node=change.node, gpu_index=change.gpu_index,
                                              mig_enabled=change.mig_enabled, layout=change.layout))
    return tuple(actions)


def _spine_oversubscription() -> float:
    value = NetworkSwitch.objects.filter(kind="spine").aggregate(worst=Max("oversubscription"))["worst"]
    return float(value or 1.0)
