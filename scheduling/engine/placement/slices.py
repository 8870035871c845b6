"""Sub-GPU slices: an idle MIG instance, a new instance in free memory slices, or a share of
a non-MIG GPU."""

from __future__ import annotations

from collections.abc import Container, Iterator
from typing import TYPE_CHECKING

from ..fragment.shapes import MILLI
from ..memory import SHARE_STEP_MILLI, share_milli, smallest_profile
from ..mig import MigGeometry, MigProfile, geometry_for, masks_allowing, start_choices
from ..sharing import held_milli, replica_holds, replica_key
from ..state import GpuKey, GpuState, Shape
from ..types import Allocation, Job
from . import scored
from .common import Models, Slot, model_memory, search_order

if TYPE_CHECKING:
    from ..session import Session


def find_slice(session: Session, job: Job, models: Models) -> Slot | None:
    """(node, allocation) for one sub-GPU member, or None. With a placement scorer, the shares
    a tier offers on all the job's models are scored together, after that tier's MIG slots; in
    index order, the first model with room takes it."""
    features = session.features
    scoring = scored.binding(session) is not None
    order = search_order(session, job, models)
    sharing: list[str] = []  # models of this tier whose shares are still to try
    for i, (tier, model) in enumerate(order):
        hit = _mig_or_share_model(session, job, model, tier, sharing)
        if hit:
            return hit
        tier_ends = i + 1 == len(order) or order[i + 1][0] != tier
        if sharing and (tier_ends or not scoring):
            hit = _share_slot(session, job, sharing, tier)
            sharing = []
            if hit:
                return hit
    if features.mig and not job.mig_profile:  # a pinned profile takes no bigger instance
        return _larger_idle(session, job, models)
    return None


def _mig_or_share_model(session: Session, job: Job, model: str, tier: str, sharing: list[str]) -> Slot | None:
    """A MIG slot of this model, or None; adds the model to `sharing` when a share may go there."""
    features = session.features
    geometry = geometry_for(model)
    if features.mig and geometry is not None:
        hit = _mig_slot(session, job, model, tier, geometry)
        if hit:
            return hit
        # A share goes where the node's device plugin shares, MIG-capable or not: the cluster's
        # admin chose sharing for that node (sharing.py).
    if job.mig_profile:  # a pinned profile has no share to fall back on
        return None
    if features.sharing and (job.production or not features.share_production_only):
        sharing.append(model)
    return None


def find_share(session: Session, job: Job, models: Models) -> Slot | None:
    """(node, allocation) sharing any whole-mode GPU, MIG-capable ones included, or None: where
    production inference goes when no MIG slice is free, rather than onto a whole GPU, and where
    a replica_or_whole policy's sub-GPU job goes before a whole GPU."""
    if not (session.features.sharing or session.features.replica_or_whole):
        return None
    for tier, model in search_order(session, job, models):
        hit = _share_slot(session, job, [model], tier)
        if hit:
            return hit
    return None


def _larger_idle(session: Session, job: Job, models: Models) -> Slot | None:
    """No exact-size instance, slot or share anywhere: rather than wait for a repartition,
    take an idle instance bigger than the need, the smallest such by compute slices."""
    for tier, model in search_order(session, job, models):
        geometry = geometry_for(model)
        exact = smallest_profile(geometry, job.gpu_memory_gb) if geometry is not None else None
        if geometry is None or exact is None:
            continue
        bigger = sorted((p for p in geometry.plain_profiles
                         if p.memory_gb >= job.gpu_memory_gb and p.shape != exact.shape),
                        key=lambda p: (p.compute_slices, p.memory_gb))
        for profile in bigger:
            hit = _idle_instance(session, job, model, tier, profile.shape)
            if hit:
                return hit
    return None


def _idle_instance(session: Session, job: Job, model: str, tier: str, shape: Shape) -> Slot | None:
    """An idle existing instance of this shape on a node with room for the job's host needs,
    on the busiest such GPU: packing slices onto few MIG GPUs lets the others drain to idle,
    and an idle MIG GPU can be turned back into a whole GPU for training (repartition)."""
    best = None
    for gpu in session.idle.get((model, tier, shape), {}).values():
        if (best is None or gpu.busy > best.busy) and gpu.node.fits_host(job):
            best = gpu
    if best is None:
        return None
    start = min(s for s, inst in best.instances.items()
                if inst[1] is None and inst[0].shape == shape)
    return best.node, _mig_allocation(best, best.instances[start][0], start)


def _mig_allocation(gpu: GpuState, profile: MigProfile, start: int) -> Allocation:
    milli = round(1000 * gpu.mig_geometry.gpu_fraction(profile))
    return Allocation(gpu_index=gpu.index, milli=milli, memory_gb=profile.memory_gb,
                      mig_profile=profile.name, mig_start=start)


def _mig_slot(session: Session, job: Job, model: str, tier: str, geometry: MigGeometry) -> Slot | None:
    profile = smallest_profile(geometry, job.gpu_memory_gb, job.mig_profile)
    if profile is None:
        return None
    # What this finds depends on the job only through these; a slot that was not there stays
    # away until capacity is given back (session.releases), as a request shape's no-fit does
    # (actions.common.try_place). Every sub-GPU job tries each (tier, model) before the one with
    # room: a third of the first cycle at 1,000 nodes went to repeating failed searches (bench).
    key = ("mig", model, tier, profile.shape, job.cpu_cores, job.memory_gb)
    if session.no_slot.get(key) == session.releases:
        return None
    hit = _slot_for(session, job, model, tier, geometry, profile)
    if hit is None:
        session.no_slot[key] = session.releases
    return hit


def _slot_for(session: Session, job: Job, model: str, tier: str, geometry: MigGeometry,
              profile: MigProfile) -> Slot | None:
    """An idle instance of the profile's shape, else (unless MIG is static) free memory slices
    on a MIG GPU to create one in; on a node whose host takes the job."""
    hit = _idle_instance(session, job, model, tier, profile.shape)
    if hit or session.features.mig_static:
        return hit
    buckets = session.mig.get((model, tier))
    if not buckets:
        return None
    for mask in _allowed_present(session, model, tier, geometry, profile):
        bucket = buckets[mask]
        if not bucket:
            continue
        for gpu in bucket.values():
            if gpu.can_create(profile) and gpu.node.fits_host(job):
                start = start_choices(geometry, mask, profile)[0]
                return gpu.node, _mig_allocation(gpu, profile, start)
    return None


_MASKS: dict = {}


def _allowed_present(session: Session, model: str, tier: str, geometry: MigGeometry,
                     profile: MigProfile) -> list[int]:
    """The masks the MIG index of (model, tier) has a bucket for (empty or not) that leave room
    for the profile, fullest first. Buckets are never removed, so the same number of them is
    the same set: kept until one is added, not filtered and sorted again per request."""
    buckets = session.mig[(model, tier)]
    key = (model, tier, profile.shape)
    cached = session.mig_masks.get(key)
    if cached is None or cached[0] != len(buckets):
        allowed = _masks(geometry, profile)
        cached = session.mig_masks[key] = (len(buckets), sorted((m for m in buckets if m in allowed),
                                                               key=allowed.__getitem__))
    return cached[1]


def _masks(geometry: MigGeometry, profile: MigProfile) -> dict[int, int]:
    key = (geometry.model, profile.shape)
    if key not in _MASKS:  # {mask: rank}, fullest first
        _MASKS[key] = {m: i for i, m in enumerate(masks_allowing(geometry, profile))}
    return _MASKS[key]


def _share_slot(session: Session, job: Job, models: list[str], tier: str) -> Slot | None:
    """A share of a GPU of these models (one tier): the first in index order, model by model,
    or with a placement scorer the one it prefers among all of them."""
    memory = model_memory(session)
    bound = scored.binding(session)
    if bound is None:
        for model in models:
            # as for a MIG slot (_mig_slot): no share stays no share until capacity comes back
            key = ("share", model, tier, *replica_key(job), job.cpu_cores, job.memory_gb)
            if session.no_slot.get(key) == session.releases:
                continue
            gpu = next(_fitting_shares(session, job, model, tier, memory[model]), None)
            if gpu is not None:
                return _share_allocation(session, job, gpu)
            session.no_slot[key] = session.releases
        return None
    # The candidate nodes, in index order, each by its first GPU with room (the first
    # candidate_limit of them): the scorer picks a node, then a GPU on it (_gpu_on). Only a
    # node's first GPU is looked for, as a scorer scoring every node would otherwise check
    # every sharable GPU of the cluster for each share it places.
    firsts: dict[str, GpuState] = {}
    limit = scored.candidate_limit(session)
    for model in models:
        for gpu in _fitting_shares(session, job, model, tier, memory[model], firsts):
            if len(firsts) >= limit:
                break
            firsts[gpu.node.name] = gpu
    if not firsts:
        return None
    first, wanted = scored.pick_share(session, bound, job, list(firsts.values()))
    return _share_allocation(session, job, _gpu_on(session, job, tier, memory, first, wanted))


def _gpu_on(session: Session, job: Job, tier: str, memory: dict[str, float], first: GpuState,
            wanted: int | None) -> GpuState:
    """On the chosen node (given by its first GPU with room), the first GPU with room, in index
    order, whose free milli is `wanted` (None: the first); when none has (the GPU the scorer
    sees may lack the memory or a replica), the fullest with room."""
    if wanted is None:
        return first
    node, model = first.node, first.node.model
    bucket = session.share[(model, tier)].get(wanted, {})
    for gpu in _fitting_shares(session, job, model, tier, memory[model], only={wanted: bucket}):
        if gpu.node is node:
            return gpu
    options = [g for g in _fitting_shares(session, job, model, tier, memory[model]) if g.node is node]
    return min(options, key=lambda g: MILLI - g.milli_used)


_UNSEEN = (-1, -1)  # _fitting_shares: a node not looked at yet


def _fitting_shares(session: Session, job: Job, model: str, tier: str, memory_gb: float,
                    skip: Container[str] = (), only: dict[int, dict[GpuKey, GpuState]] | None = None
                    ) -> Iterator[GpuState]:
    """The GPUs of (model, tier) a share of `job` fits on, in index order, but those of the
    nodes in `skip`; `only`: these buckets of the share index instead of all."""
    buckets = only if only is not None else session.share.get((model, tier))
    milli = share_milli(job.gpu_memory_gb, memory_gb, job.gpu_milli)
    if not buckets or milli is None:
        return
    if not some_replica_holds(session, job, model, tier):  # the node's device plugin must offer it
        return
    # An MPS replica may hold a little less than `milli` (1000 // 3 = 333 where 8 GB of 24 GB rounds
    # up to 340), never a whole step less: each GPU's room is checked exactly below.
    keys = sorted((k for k, v in buckets.items() if k >= milli - SHARE_STEP_MILLI and v),
                  reverse=session.features.share_packing != "binpack")
    need = job.gpu_memory_gb - 1e-9
    # A share fits a GPU where the node's host takes the job, the GPU's memory holds the need, a
    # replica is left with room for what the share holds there (held_milli) and the node's mode
    # takes it (replica_holds: MPS's pinned memory and compute). What it reads of a node is worked
    # out once per node: None when the host cannot take the job, else (held milli, replicas).
    rooms: dict[str, tuple[int, int] | None] = {}
    holds: dict[tuple[str, int, float], bool] = {}  # replica_holds by what it reads of a GPU
    for key in keys:
        for gpu in buckets[key].values():
            node = gpu.node
            name = node.name
            if name in skip:
                continue
            room = rooms.get(name, _UNSEEN)
            if room is _UNSEEN:
                room = rooms[name] = ((held_milli(node, milli), node.node.share_replicas)
                                      if node.fits_host(job) else None)
            if (room is None or gpu.memory_gb - gpu.mem_used < need or len(gpu.shares) >= room[1]
                    or room[0] > MILLI - gpu.milli_used):
                continue
            what = (node.node.sharing, room[1], gpu.memory_gb)
            ok = holds.get(what)
            if ok is None:
                ok = holds[what] = replica_holds(gpu, job)
            if ok:
                yield gpu


def _share_allocation(session: Session, job: Job, gpu: GpuState) -> Slot:
    milli = share_milli(job.gpu_memory_gb, model_memory(session)[gpu.node.model], job.gpu_milli)
    assert milli is not None  # the GPU was found fitting
    # What the share holds on the chosen GPU: an MPS node's replica, else its memory fraction.
    held = held_milli(gpu.node, milli)
    return gpu.node, Allocation(gpu_index=gpu.index, milli=held, memory_gb=job.gpu_memory_gb,
                                mig_profile=None, mig_start=None)


def some_replica_holds(session: Session, job: Job, model: str, tier: str) -> bool:
    """Some GPU of this model and tier has replicas that could hold the share, once per cycle and
    kind of share: where none can (an MPS replica smaller than the need, time-slicing the job
    does not accept), scanning every sharable GPU for each waiting job found nothing, at a
    cost that grew with the cluster."""
    key = (model, tier, *replica_key(job))
    holds = session.replica_fits.get(key)
    if holds is None:
        holds = session.replica_fits[key] = any(
            replica_holds(gpu, job) for node in session.nodes.values()
            if node.model == model and node.tier == tier and node.offers_shares for gpu in node.gpus)
    return holds


def replica_possible(session: Session, job: Job, models: Models) -> bool:
    """Some GPU of these models has replicas that could hold a share of `job` (in any tier)."""
    return any(some_replica_holds(session, job, model, tier) for tier, model in search_order(session, job, models))
