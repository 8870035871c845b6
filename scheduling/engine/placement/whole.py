"""Whole GPUs: a node for single-node jobs, and the cheapest group of nodes for a gang that
does not fit on one (one leaf when it can, one spine only if no leaf can hold it, core last)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ..state import NodeState
from ..statement import Statement
from ..tiers import tier_order
from ..topology import GroupShape, choose_gpus, group_cost
from ..types import Allocation, Job
from . import scored
from .common import Models, search_order

if TYPE_CHECKING:
    from ..session import Session

NodeGroup = list[tuple[NodeState, int]]  # nodes and how many members each takes
TOPOLOGY_CANDIDATES = 8
SCOPES = ("leaf", "spine", "core")


def whole_candidates(session: Session, job: Job, models: Models, count: int) -> Iterator[NodeState]:
    """Nodes with at least `count` free whole GPUs, in policy order: tier first (with tiers),
    then fullest first (binpack) or emptiest first (spread)."""
    top = session.max_gpus_per_node
    levels = range(count, top + 1)
    if session.features.packing != "binpack":
        levels = range(top, count - 1, -1)
    pairs = [(model, tier) for tier, model in search_order(session, job, models)]
    if session.features.tiers:
        for pair in pairs:
            buckets = session.whole.get(pair)
            if buckets:
                for level in levels:
                    yield from buckets.get(level, {}).values()
        return
    for level in levels:
        for pair in pairs:
            buckets = session.whole.get(pair)
            if buckets:
                yield from buckets.get(level, {}).values()


def _whole_allocations(node: NodeState, count: int) -> list[Allocation]:
    picked = choose_gpus(node.node.interconnect, node.free_whole(), count)
    memory = {g.index: g.memory_gb for g in node.gpus}
    return [Allocation(gpu_index=i, milli=1000, memory_gb=memory[i], mig_profile=None, mig_start=None)
            for i in picked]


def _single_node(session: Session, job: Job, models: Models, count: int, members: int) -> NodeState | None:
    """Best node for `members` members of `count` GPUs each, all on one node: the lowest
    all-reduce cost (topology), then the policy's placement score, then index order."""
    total = count * members
    topology = session.features.topology and total > 1
    bound = scored.binding(session)
    if bound is None and not topology:
        return next((n for n in whole_candidates(session, job, models, total) if n.fits_host(job, members)), None)
    score = scored.scorer(session, bound, scored.request_for(session, job, members)) if bound else None
    limit = max(TOPOLOGY_CANDIDATES if topology else 0, scored.candidate_limit(session) if bound else 0)
    best: tuple[float, Any, NodeState] | None = None
    tried = 0
    for node in whole_candidates(session, job, models, total):
        if not node.fits_host(job, members):
            continue
        cost = _node_cost(node, total) if topology else 0.0
        points = score(node) if score else 0
        if best is None or cost < best[0] or (
                cost == best[0] and scored.better(session, points, node, best[1], best[2])):
            best = (cost, points, node)
        tried += 1
        if tried >= limit:
            break
    return best[2] if best else None


_NODE_COSTS: dict = {}


def _node_cost(node: NodeState, count: int) -> float:
    """Cached by what it depends on: the same free GPU sets come back on node after node."""
    key = (node.node.interconnect, node.model, tuple(node.free_whole()), count)
    cost = _NODE_COSTS.get(key)
    if cost is None:
        gpus = choose_gpus(key[0], list(key[2]), count)
        cost = _NODE_COSTS[key] = group_cost(GroupShape(((key[0], key[1], gpus, 0.0),)))
    return cost


def _allocate_on(stmt: Statement, job: Job, node: NodeState, first_member: int, members: int) -> None:
    count = job.gpus or 1
    allocations = _whole_allocations(node, count * members)
    for m in range(members):
        stmt.allocate(job, first_member + m, node, allocations[m * count:(m + 1) * count])


# --- gangs across nodes ----------------------------------------------------------------------

def host_capacity(node: NodeState, job: Job, count: int) -> int:
    by_gpu = len(node.free_whole()) // count
    by_cpu = int(node.free_cpu // job.cpu_cores) if job.cpu_cores > 0 else by_gpu
    by_mem = int(node.free_mem // job.memory_gb) if job.memory_gb > 0 else by_gpu
    return min(by_gpu, by_cpu, by_mem)


def _scope_key(node: NodeState, scope: str) -> tuple[str, ...]:
    if scope == "leaf":
        return (node.model, node.node.spine, node.node.leaf)
    if scope == "spine":
        return (node.model, node.node.spine)
    return (node.model,)


def multi_node_group(session: Session, job: Job, models: Models) -> NodeGroup | None:
    """Nodes (with members per node) for a gang that does not fit on one node: the cheapest
    group under one leaf; under one spine only if no leaf can hold it; across spines last."""
    count, members = job.gpus or 1, job.gang_size
    tiers = tier_order(job, session.features.tiers)
    entries = []
    for node in whole_candidates(session, job, models, count):
        capacity = host_capacity(node, job, count)
        if capacity:
            entries.append((node, capacity))
    for scope in SCOPES:
        best = None
        groups = defaultdict(list)
        for node, capacity in entries:
            groups[_scope_key(node, scope)].append((node, capacity))
        for key in sorted(groups):
            chosen = _fewest_nodes(groups[key], members, tiers)
            if chosen is None:
                continue
            rank = (_group_cost(session, chosen, count), _tier_rank(chosen, tiers), len(chosen))
            if best is None or rank < best[0]:
                best = (rank, chosen)
        if best:
            return best[1]
    return None


def _fewest_nodes(entries: NodeGroup, members: int, tiers: tuple[str, ...]) -> NodeGroup | None:
    if sum(c for _, c in entries) < members:
        return None
    ordered = sorted(entries, key=lambda e: (tiers.index(e[0].tier), -e[1], e[0].name))
    chosen, left = [], members
    for node, capacity in ordered:
        take = min(capacity, left)
        chosen.append((node, take))
        left -= take
        if not left:
            return chosen
    return None


def _tier_rank(chosen: NodeGroup, tiers: tuple[str, ...]) -> int:
    return max(tiers.index(node.tier) for node, _ in chosen)


def _group_cost(session: Session, chosen: NodeGroup, count: int) -> float:
    nodes = tuple((n.node.interconnect, n.model, tuple(range(count * take)),
                   n.node.nics * n.node.nic_gb_s) for n, take in chosen)
    shape = GroupShape(nodes, leaves=len({(n.node.spine, n.node.leaf) for n, _ in chosen}),
                       spines=len({n.node.spine for n, _ in chosen}))
    return group_cost(shape, session.snapshot.spine_oversubscription)
