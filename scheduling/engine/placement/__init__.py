"""Finding a place for a job in the session's free-capacity indexes.

`place_job` puts every member of a job into a statement (the caller commits or discards it).
Whole-GPU members pick a node from the `whole` index (whole.py); sub-GPU members an idle MIG
instance, a new instance in free memory slices, or a share (slices.py). Multi-GPU gangs take
the group with the lowest ring all-reduce cost: one node when it fits, else whole nodes under
one leaf, spine only when needed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..sharing import replica_key
from ..state import NodeState
from ..statement import Statement
from ..types import Job
from . import scored
from .common import Models, SlotFinder, allowed_models, as_whole, model_memory, search_order
from .slices import find_share, find_slice, replica_possible
from .whole import _allocate_on, _single_node, host_capacity, multi_node_group, whole_candidates

if TYPE_CHECKING:
    from ..session import Session


__all__ = ["allowed_models", "as_whole", "find_slice", "host_capacity", "model_memory",
           "multi_node_group", "place_job", "search_order", "whole_candidates"]


def place_job(session: Session, job: Job, stmt: Statement) -> bool:
    """Put every member of `job` into `stmt`; False (with `stmt` still to discard) if some
    member found no place. Without the gang plugin members that fit are kept anyway."""
    if job.host_only:
        return _place_host_only(session, job, stmt)
    models = allowed_models(session, job)
    if not models:
        return False
    if job.mig_profile:  # that instance or none: no share, no whole GPU in its place
        return session.features.mig and _place_slices(session, job, models, stmt)
    keep_empty = False  # a whole GPU only on a node already running work
    if not as_whole(session, job):
        if _place_slices(session, job, models, stmt):
            return True
        keep_empty = not job.production
        if not (session.features.gang and (job.production or _no_slice_soon(session, job, models))):
            return False
        # Production inference always gets resources: rather than wait for a repartition it
        # shares a whole-mode GPU (memory-bounded, as MPS would), else takes whole GPUs
        # (bigger than its need, never smaller).
        stmt.discard()
        if session.features.production_shares:
            if _place_with(session, job, models, stmt, find_share):
                return True
            stmt.discard()
    elif session.features.replica_or_whole and job.fractional and _place_replica(session, job, models, stmt):
        return True  # one nvidia.com/gpu: a replica where a node's device plugin shares, else a whole GPU
    count = job.gpus or 1
    if session.features.gang and session.features.topology and job.gang_size > 1:
        return _place_gang_topology(session, job, models, stmt)
    placed_all = True
    for member in range(job.gang_size):
        node = _single_node(session, job, models, count, 1)
        if keep_empty and node is not None and all(gpu.idle for gpu in node.gpus):
            node = None  # a notebook breaking an empty node would keep whole-node jobs off it
        if node is None:
            placed_all = False
            if session.features.gang:
                return False
            continue
        _allocate_on(stmt, job, node, member, 1)
    return placed_all


def _no_slice_soon(session: Session, job: Job, models: Models) -> bool:
    """A sub-GPU job not production may take a share or a whole GPU (slice_or_whole) when every
    usable GPU in MIG mode of its models is full of busy slices: a slice for it would have to be
    carved from a whole GPU, and mig-manager reshapes only a node whose stop loses no work, in
    practice mostly an empty node, which whole-node training then loses (tuning split, issue 18:
    net utilisation 0.627 -> 0.640, docs/experiments/issue-18-log.md). Where a MIG GPU has room
    it waits for its slice as before. A full (model, tier) stays full within the cycle until
    capacity is given back (session.releases) at the same reservation level: placing only fills
    MIG GPUs."""
    if not session.features.slice_or_whole:
        return False
    for tier, model in search_order(session, job, models):
        key = ("mig-full", model, tier, session.book.level_at)
        if session.no_slot.get(key) == session.releases:
            continue
        for bucket in session.mig.get((model, tier), {}).values():
            for gpu in bucket.values():
                if gpu.usable and gpu.busy_compute < gpu.mig_geometry.compute_slices:
                    return False
        session.no_slot[key] = session.releases
    return True


def _place_host_only(session: Session, job: Job, stmt: Statement) -> bool:
    """CPU and memory only, all members on one ready node: the best-scoring one with a placement
    scorer, else the first by name."""
    bound = scored.binding(session)
    score = scored.scorer(session, bound, scored.request_for(session, job, job.gang_size)) if bound else None
    best: tuple[Any, NodeState] | None = None
    tried, limit = 0, scored.candidate_limit(session)
    for node in session.nodes.values():
        if not node.ready or not node.fits_host(job, job.gang_size):
            continue
        points = score(node) if score else 0
        if best is None or scored.better(session, points, node, best[0], best[1]):
            best = (points, node)
        tried += 1
        if bound is None or tried >= limit:
            break
    if best is None:
        return False
    for member in range(job.gang_size):
        stmt.allocate(job, member, best[1], ())
    return True


def _place_replica(session: Session, job: Job, models: Models, stmt: Statement) -> bool:
    """A replica_or_whole policy's sub-GPU job on device-plugin replicas (features.py). Whether some
    replica could hold it at all is fixed for the cycle and asked once per kind of request:
    preemption probes the job on every candidate node."""
    key = ("any", models, *replica_key(job))
    possible = session.replica_fits.get(key)
    if possible is None:
        possible = session.replica_fits[key] = replica_possible(session, job, models)
    if not possible:
        return False
    if _place_with(session, job, models, stmt, find_share):
        return True
    stmt.discard()
    return False


def _place_slices(session: Session, job: Job, models: Models, stmt: Statement) -> bool:
    return _place_with(session, job, models, stmt, find_slice)


def _place_with(session: Session, job: Job, models: Models, stmt: Statement, finder: SlotFinder) -> bool:
    placed_all = True
    for member in range(job.gang_size):
        hit = finder(session, job, models)
        if hit is None:
            placed_all = False
            if session.features.gang:
                return False
            continue
        stmt.allocate(job, member, hit[0], (hit[1],))
    return placed_all


def _place_gang_topology(session: Session, job: Job, models: Models, stmt: Statement) -> bool:
    count = job.gpus or 1
    if count * job.gang_size <= session.max_gpus_per_node:
        node = _single_node(session, job, models, count, job.gang_size)
        if node is not None:
            _allocate_on(stmt, job, node, 0, job.gang_size)
            return True
    group = multi_node_group(session, job, models)
    if group is None:
        return False
    member = 0
    for node, members in group:
        _allocate_on(stmt, job, node, member, members)
        member += members
    return True
