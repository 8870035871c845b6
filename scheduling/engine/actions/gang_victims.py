"""Victims for a whole-GPU gang that needs several nodes.

Searching one node at a time can never make room for a gang of 16 GPUs on 8-GPU nodes, so a
gang that needs k nodes ranks every node by the cheapest victims that free one node's share of
the gang (a node that already has room costs nothing) and takes the k cheapest together. The
eligible pool is the caller's, so the rules stay the same: never a within-quota job of another
team for a burst; victims borrowed first, then in the policy's victim order (evict.py's keys).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping
from typing import TYPE_CHECKING, Any

from ..placement import allowed_models, as_whole, host_capacity, place_job, whole_candidates
from ..statement import Statement
from ..tiers import tier_order

if TYPE_CHECKING:
    from ..session import Session
    from ..state import NodeState
    from ..types import Job

# How a set of victims on a node is ranked: evict.py by victim keys, consolidate.py by move costs.
Cost = Callable[[Mapping[str, Any], list[str]], tuple[Any, ...]]


NODE_TRIES = 12
EXTRA_NODES = 2  # when the k cheapest do not do (topology, host resources), try a few more


def members_per_node(session: Session, job: Job) -> int:
    return max(1, min(job.gang_size, session.max_gpus_per_node // (job.gpus or 1)))


def gang_nodes(session: Session, job: Job) -> int:
    """How many nodes a whole-GPU gang needs at least (1 when it fits on one node)."""
    if not (session.features.gang and as_whole(session, job)) or job.gang_size <= 1:
        return 1
    if (job.gpus or 1) * job.gang_size <= session.max_gpus_per_node:
        return 1
    return math.ceil(job.gang_size / members_per_node(session, job))


def per_node_gpus(session: Session, job: Job) -> int:
    """Whole GPUs one node must be able to free: all the job's for a one-node job, one node's
    share for a gang over several nodes."""
    if gang_nodes(session, job) == 1:
        return (job.gpus or 1) * job.gang_size
    return (job.gpus or 1) * members_per_node(session, job)


def freeable_gpus(node: NodeState, victims: Collection[str]) -> int:
    """Whole GPUs the node would have free if every one of `victims` stopped."""
    count = 0
    for gpu in node.gpus:
        if not gpu.usable or gpu.mig_enabled:
            continue
        if gpu.whole_job is not None:
            count += gpu.whole_job in victims
        else:
            count += all(job_id in victims for job_id, _ in gpu.shares)
    return count


def gang_victims(session: Session, job: Job, by_node: dict[str, set[str]], keys: Mapping[str, Any],
                 cost: Cost) -> list[str] | None:
    """Victims over the k cheapest nodes after which the gang fits; else None."""
    k = gang_nodes(session, job)
    per = members_per_node(session, job)
    tiers = tier_order(job, session.features.tiers)
    options = _free_nodes(session, job, per)
    ranked = sorted((n for n in by_node if n not in options and session.nodes[n].tier in tiers),
                    key=lambda n: (min(keys[v] for v in by_node[n]), n))
    for name in ranked[:NODE_TRIES * k]:
        chosen = _prefix_on(session, job, session.nodes[name], sorted(by_node[name], key=keys.__getitem__),
                            per)
        if chosen is not None:
            options[name] = chosen
    order = sorted(options, key=lambda n: (cost(keys, options[n]), n))
    for extra in range(EXTRA_NODES + 1):
        if k + extra > len(order):
            break
        victims = sorted({v for n in order[:k + extra] for v in options[n]}, key=keys.__getitem__)
        if victims and _fits_without(session, job, victims):
            return victims
    return None


def _free_nodes(session: Session, job: Job, per: int) -> dict[str, list[str]]:
    """Nodes that already have room for one node's share of the gang: no victims needed."""
    count = job.gpus or 1
    free: dict[str, list[str]] = {}
    for node in whole_candidates(session, job, allowed_models(session, job), count * per):
        if host_capacity(node, job, count) >= per:
            free[node.name] = []
    return free


def _prefix_on(session: Session, job: Job, node: NodeState, ordered_victims: list[str], per: int) -> list[str] | None:
    """The shortest prefix of the node's victims (best first) that makes room for `per`
    members there, or None."""
    return shortest_prefix(session, ordered_victims,
                           lambda: node.ready and host_capacity(node, job, job.gpus or 1) >= per)


def shortest_prefix(session: Session, ordered_victims: list[str], has_room: Callable[[], bool]) -> list[str] | None:
    """The shortest prefix of `ordered_victims` after whose eviction `has_room()` holds, or
    None; the session is left as it was."""
    stmt = Statement(session)
    chosen = []
    try:
        for victim in ordered_victims:
            stmt.evict(victim)
            chosen.append(victim)
            if has_room():
                return chosen
        return None
    finally:
        stmt.discard()


def fits_now(session: Session, job: Job, keep: Callable[[Statement], bool] | None = None) -> bool:
    """Whether `job` would fit as the session stands (a probe placement, undone); with `keep`,
    only in a place the probe passes to it."""
    probe = Statement(session)
    try:
        return place_job(session, job, probe) and (keep is None or keep(probe))
    finally:
        probe.discard()


def _fits_without(session: Session, job: Job, victims: list[str]) -> bool:
    stmt = Statement(session)
    try:
        for victim in victims:
            stmt.evict(victim)
        return fits_now(session, job)
    finally:
        stmt.discard()
