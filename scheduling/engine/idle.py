"""Why each idle GPU is idle: a cause per GPU with free capacity after a cycle.

The rule, per GPU (or the free part of a MIG or shared one):
1. What the GPU itself is in: a node not ready (draining, reconfiguring, down), an unhealthy
   GPU, an unconfirmed repartition, a reservation or a preemptor's nomination holding it.
2. Otherwise the wait reason of the highest-priority waiting job that could use it: the GPU's
   model and tier are allowed to the job, and one member fits in what is free there (a whole-GPU
   member in the node's idle GPUs, a sub-GPU member in the GPU's free share). Its reason says
   why it did not take the GPU (quota, topology, MIG layout ...).
3. Otherwise, what the waiting jobs lack, best first: a job that would fit but for its GPU-model
   constraint, or but for its tier rule; a sub-GPU job that would fit but for the GPU's device
   plugin (a sharing node whose replicas do not take it, or a GPU that can neither be carved
   into MIG slices nor shared: no-sharing); a job of the right model and tier too big for the
   hole (nothing fits); else nothing waits that may use it.
Attributing each GPU once keeps the causes summing to the idle capacity (simulate run's
`idle_by_cause`). Computed only when asked (`schedule(..., idle_causes=True)`): the live cycle
does not pay for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from .placement import allowed_models, as_whole
from .reasons import IdleCause, WaitingReason
from .sharing import replica_holds
from .tiers import tier_order

if TYPE_CHECKING:
    from .plan import PendingInfo
    from .session import Session
    from .state import GpuKey, GpuState, NodeState
    from .types import Job

FROM_REASON = {
    WaitingReason.BURST_LIMIT: IdleCause.QUOTA,
    WaitingReason.FAIR_SHARE: IdleCause.QUOTA,
    WaitingReason.QUOTA_NO_IDLE: IdleCause.QUOTA,
    WaitingReason.PARTIAL: IdleCause.PARTIAL,
    WaitingReason.WAITING_FOR_PREEMPTION: IdleCause.PREEMPTION_PENDING,
    WaitingReason.WAITING_FOR_CONSOLIDATION: IdleCause.PREEMPTION_PENDING,
    WaitingReason.RESERVED: IdleCause.RESERVED,
    WaitingReason.HOST_RESOURCES: IdleCause.HOST_RESOURCES,
    WaitingReason.TIER: IdleCause.TIER,
    WaitingReason.REPARTITION_PENDING: IdleCause.SETTLING,
    WaitingReason.NO_SLICE: IdleCause.MIG_LAYOUT,
    WaitingReason.NO_SHARING: IdleCause.NO_SHARING,
}


class Hole(NamedTuple):
    """What decides which waiting jobs fit on a GPU with free capacity."""

    idle: bool  # no job holds any of it, and it is usable
    mig: bool  # in MIG mode
    idle_gpus: int  # idle usable GPUs on its node
    whole_mode: int  # of those, in whole mode
    mig_busy: int  # GPUs on its node in MIG mode running some slice (no whole job can use them)
    share: float  # its free share
    plugin: tuple[object, ...]  # what decides whether a sub-GPU job may use it (_sub_gpu_takes)


NODE_STATE = {"draining": IdleCause.NODE_DRAINING, "reconfiguring": IdleCause.MIG_RECONFIGURING}


def idle_causes(session: Session, pending: dict[str, PendingInfo]) -> dict[GpuKey, IdleCause]:
    """A cause for every GPU with free capacity, by the rule in the module docstring."""
    jobs = {j.id: j for j in session.snapshot.pending}
    waiting = [
        (jobs[i], pending[i].reason) for i in sorted(pending, key=lambda i: pending[i].overall_position) if i in jobs
    ]
    out: dict[GpuKey, IdleCause] = {}
    seen: dict[tuple[object, ...], IdleCause] = {}
    for node in session.nodes.values():
        empty = [g for g in node.gpus if g.idle and g.healthy and not g.settling and g.reserved is None]
        for gpu in node.gpus:
            if gpu.free_units <= 1e-9:
                continue
            cause = _held(session, node, gpu)
            if cause is None:
                hole = Hole(
                    gpu in empty,
                    gpu.mig_enabled,
                    len(empty),
                    sum(not g.mig_enabled for g in empty),
                    sum(g.mig_enabled and not g.idle for g in node.gpus),
                    round(gpu.free_units, 4),
                    _plugin(node, gpu),
                )
                key = (node.model, node.tier, hole)
                if key not in seen:
                    seen[key] = _by_jobs(session, node, gpu, hole, waiting)
                cause = seen[key]
            out[gpu.key] = cause
    return out


def _held(session: Session, node: NodeState, gpu: GpuState) -> IdleCause | None:
    if not node.ready:
        return NODE_STATE.get(node.node.state, IdleCause.NODE_DOWN)
    if not gpu.healthy:
        return IdleCause.NODE_DOWN
    if gpu.settling:
        return IdleCause.SETTLING
    if gpu.reserved is not None:
        nominated = gpu.reserved in session.nominations
        return IdleCause.PREEMPTION_PENDING if nominated else IdleCause.RESERVED
    return None


def _plugin(node: NodeState, gpu: GpuState) -> tuple[object, ...]:
    """The facts _sub_gpu_takes reads: a GPU in MIG mode takes slices; a whole-mode one on a
    sharing node takes the shares its replicas hold; else only a MIG-capable one, once carved."""
    if gpu.mig_enabled:
        return ("mig",)
    if node.offers_shares:
        return ("share", node.node.sharing, node.node.share_replicas, gpu.memory_gb)
    return ("whole", gpu.geometry is not None)


def _by_jobs(session: Session, node: NodeState, gpu: GpuState, hole: Hole,
             waiting: list[tuple[Job, WaitingReason]]) -> IdleCause:
    """Steps 2 and 3 of the rule for a hole on this node's model and tier (`gpu`: one GPU of
    the hole, for what its device plugin takes)."""
    fallback = IdleCause.NOTHING_WAITING
    rank = {
        IdleCause.NOTHING_WAITING: 0,
        IdleCause.NOTHING_FITS: 1,
        IdleCause.MIG_LAYOUT: 2,
        IdleCause.NO_SHARING: 3,
        IdleCause.TIER: 4,
        IdleCause.GPU_MODEL: 5,
    }
    for job, reason in waiting:
        fits, whole_mode_only = _fits(session, job, hole)
        model_ok = node.model in allowed_models(session, job)
        tier_ok = node.tier in tier_order(job, session.features.tiers)
        plugin_ok = as_whole(session, job) or _sub_gpu_takes(session, node, gpu, job)
        if model_ok and tier_ok and fits and plugin_ok:
            return _from_reason(session, job, reason, whole_mode_only)
        if fits and model_ok and tier_ok:
            candidate = IdleCause.NO_SHARING
        elif fits and tier_ok and job.gpu_models:
            candidate = IdleCause.GPU_MODEL
        elif fits and model_ok:
            candidate = IdleCause.TIER
        elif model_ok and tier_ok:
            candidate = IdleCause.MIG_LAYOUT if _fits_without_mig(session, job, hole) else IdleCause.NOTHING_FITS
        else:
            continue
        fallback = max(fallback, candidate, key=rank.__getitem__)
    return fallback


def _fits(session: Session, job: Job, hole: Hole) -> tuple[bool, bool]:
    """(one member fits the hole, only if a GPU in MIG mode went back to whole mode)."""
    if as_whole(session, job):
        per = job.gpus or 1
        return hole.idle and hole.idle_gpus >= per, hole.mig or hole.whole_mode < per
    from .actions.common import min_units

    return hole.share >= min_units(session, job) / job.gang_size - 1e-9, False


def _sub_gpu_takes(session: Session, node: NodeState, gpu: GpuState, job: Job) -> bool:
    """A member of this sub-GPU job could run in the hole as the node's device plugin stands: a
    slice of a GPU in MIG mode, a share where the node's replicas hold it, or a slice carved from
    a MIG-capable whole GPU. A GPU on a sharing node is never carved (whole_free), so a slice job
    that its replicas do not take (an MPS replica smaller than its memory need, time-slicing it
    does not accept) waits for no MIG layout there."""
    kind = _plugin(node, gpu)
    if kind[0] == "mig":
        return session.features.mig
    if kind[0] == "share":
        features = session.features
        return (features.sharing and not job.mig_profile and replica_holds(gpu, job)
                and (job.production or not features.share_production_only))
    return session.features.mig and bool(kind[1])


def _fits_without_mig(session: Session, job: Job, hole: Hole) -> bool:
    """A whole-GPU member would fit were the node's busy MIG GPUs in whole mode and idle: the
    slices there break up the node."""
    per = job.gpus or 1
    return as_whole(session, job) and (hole.idle or hole.mig) and hole.idle_gpus + hole.mig_busy >= per


def _from_reason(session: Session, job: Job, code: WaitingReason, whole_mode_only: bool) -> IdleCause:
    if code == WaitingReason.NO_GANG_GROUP and whole_mode_only:
        return IdleCause.MIG_LAYOUT
    if code == WaitingReason.NO_GANG_GROUP:
        return IdleCause.TOPOLOGY if _free_nodes(session, job) >= job.gang_size else IdleCause.NOTHING_FITS
    # A job waiting for its reservation did not take this GPU, which no reservation holds
    # (those are step 1): the job does not fit here, as for one waiting for free GPUs.
    if code in (WaitingReason.NO_FREE_GPUS, WaitingReason.NEW, WaitingReason.RESERVED):
        return IdleCause.MIG_LAYOUT if whole_mode_only else IdleCause.NOTHING_FITS
    return FROM_REASON.get(code, IdleCause.NOTHING_FITS)


def _free_nodes(session: Session, job: Job) -> int:
    """Nodes the job may use with room for one of its members now, of the one GPU model that has
    the most: a gang group is of one model (placement/whole.py), so free nodes of two models
    (one leaf's H100 and A100 nodes) are no group whatever the switches, and their idle GPUs are
    nothing-fits, not topology."""
    per, tiers = job.gpus or 1, tier_order(job, session.features.tiers)
    by_model: dict[str, int] = {}
    for (model, tier), levels in session.whole.items():
        if model in allowed_models(session, job) and tier in tiers:
            free = sum(len(nodes) for level, nodes in levels.items() if level >= per)
            by_model[model] = by_model.get(model, 0) + free
    return max(by_model.values(), default=0)
