"""The simulated cluster: engine Nodes built from the spec, and the two per-job figures the
metrics need: a job's *need* (useful GPU share) and its *efficiency* (ideal / actual step time).
"""

from __future__ import annotations

from dataclasses import dataclass

from scheduling.engine.memory import smallest_profile
from scheduling.engine.mig import geometry_for
from scheduling.engine.topology import GroupShape, group_bandwidth, nvswitch_bandwidth
from scheduling.engine.types import Allocation, Gpu, MigInstance, Node

from .spec import ClusterSpec, JobSpec, NodeGroup


@dataclass(frozen=True)
class NodeInfo:
    """What the simulator keeps about a node besides the engine's Node."""

    name: str
    group: NodeGroup
    price: float           # per GPU-hour at the node's tier
    on_demand_price: float  # per GPU-hour had it been on-demand


def node_infos(spec: ClusterSpec) -> dict[str, NodeInfo]:
    infos = {}
    for group in spec.groups:
        prices = spec.prices[group.gpu_model]
        for i in range(1, group.count + 1):
            name = f"{group.name_prefix}{i:02d}"
            if name in infos:
                raise ValueError(f"two node groups make a node named {name}")
            infos[name] = NodeInfo(name, group, prices[group.tier], prices["on-demand"])
    return infos


def engine_node(info: NodeInfo, layouts: dict[int, dict[int, list]] | None, state: str,
                changed_at: dict[int, float]) -> Node:
    """The frozen engine Node. `layouts`: {gpu index: {start: [profile, job_id]}} for the GPUs
    in MIG mode (None or a missing index: whole-GPU mode)."""
    group = info.group
    gpus = []
    for index in range(group.gpus_per_node):
        layout = (layouts or {}).get(index)
        instances = () if layout is None else tuple(
            MigInstance(profile, start, job) for start, (profile, job) in sorted(layout.items()))
        gpus.append(Gpu(index=index, uuid=f"{info.name}-gpu{index}", model=group.gpu_model,
                        memory_gb=group.gpu_memory_gb, mig_enabled=layout is not None,
                        mig_instances=instances, layout_changed_at=changed_at.get(index),
                        healthy=True, mig_capable=group.mig_capable))
    return Node(name=info.name, tier=group.tier, leaf=group.leaf, spine=group.spine,
                gpu_model=group.gpu_model, interconnect=group.interconnect,
                cpu_cores=group.cpu_cores, memory_gb=group.memory_gb, gpus=tuple(gpus),
                state=state, nics=group.nics, nic_gb_s=group.nic_gb_s, price_per_gpu_hour=info.price,
                sharing=group.gpu_sharing, share_replicas=group.gpu_replicas)


def allocation_units(group: NodeGroup, alloc: Allocation) -> float:
    """GPU capacity an allocation holds: whole GPU 1, MIG compute slices / 7, a share its milli."""
    if alloc.mig_profile is not None:
        geometry = geometry_for(group.gpu_model)
        return geometry.gpu_fraction(geometry.resolve(alloc.mig_profile))
    return min(alloc.milli, 1000) / 1000


def allocation_memory(group: NodeGroup, alloc: Allocation) -> float:
    if alloc.mig_profile is not None:
        return geometry_for(group.gpu_model).resolve(alloc.mig_profile).memory_gb
    return group.gpu_memory_gb * min(alloc.milli, 1000) / 1000


def need_units(job: JobSpec, group: NodeGroup) -> float:
    """The useful share a job counts for, whatever it was given: whole-GPU jobs their GPUs; a
    sub-GPU job the compute share of the smallest MIG profile holding its memory on this GPU
    model, or memory need / GPU memory where the model has no MIG."""
    if job.gpus:
        return float(job.gpus)
    geometry = geometry_for(group.gpu_model)
    if geometry is not None:
        profile = smallest_profile(geometry, job.gpu_mem_gb)
        return geometry.gpu_fraction(profile) if profile else 1.0
    return min(1.0, job.gpu_mem_gb / group.gpu_memory_gb)


def comm_efficiency(job: JobSpec, placement: list[tuple[NodeGroup, tuple[int, ...]]],
                    spine_oversubscription: float) -> float:
    """Ideal step time / actual step time. A step spends `comm_fraction` in all-reduce on one
    NVSwitch node; a slower bottleneck link stretches that share by the bandwidth ratio."""
    gpus = sum(len(idx) for _, idx in placement)
    if gpus <= 1 or job.comm_fraction <= 0:
        return 1.0
    shape = GroupShape(
        nodes=tuple((g.interconnect, g.gpu_model, idx, g.nics * g.nic_gb_s) for g, idx in placement),
        leaves=len({(g.spine, g.leaf) for g, _ in placement}),
        spines=len({g.spine for g, _ in placement}))
    ideal = nvswitch_bandwidth(placement[0][0].gpu_model)
    actual = group_bandwidth(shape, spine_oversubscription)
    stretch = max(1.0, ideal / actual)
    return 1.0 / ((1.0 - job.comm_fraction) + job.comm_fraction * stretch)
