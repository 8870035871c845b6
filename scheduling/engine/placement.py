"""Finding a place for a job in the session's free-capacity indexes.

`place_job` puts every member of a job into a statement (the caller commits or discards it).
Whole-GPU members pick a node from the `whole` index; sub-GPU members an idle MIG instance, a
new instance in free memory slices, or a share. Multi-GPU gangs take the group with the lowest
ring all-reduce cost: one node when it fits, else whole nodes under one leaf, spine only when
needed.
"""

from __future__ import annotations

from collections import defaultdict

from .memory import share_milli, smallest_profile
from .mig import canonical_model, geometry_for, masks_allowing, start_choices
from .plugins.tiers import tier_order
from .statement import Statement
from .topology import GroupShape, choose_gpus, group_cost
from .types import Allocation, Job

TOPOLOGY_CANDIDATES = 8
SCOPES = ("leaf", "spine", "core")


def model_memory(session) -> dict[str, float]:
    """Smallest GPU memory per canonical model present in the cluster."""
    if "model_memory" not in session.cache:
        memory: dict[str, float] = {}
        for node in session.nodes.values():
            for gpu in node.gpus:
                memory[node.model] = min(memory.get(node.model, gpu.memory_gb), gpu.memory_gb)
        session.cache["model_memory"] = memory
    return session.cache["model_memory"]


def as_whole(session, job: Job) -> bool:
    """A sub-GPU job takes a whole GPU when the policy has neither MIG nor sharing."""
    return not job.fractional or not (session.features.mig or session.features.sharing)


def allowed_models(session, job: Job) -> tuple[str, ...]:
    key = ("models", job.gpu_models, job.gpu_memory_gb, job.fractional)
    if key not in session.cache:
        memory = model_memory(session)
        wanted = {canonical_model(m) for m in job.gpu_models}
        models = [m for m in sorted(memory) if not wanted or m in wanted]
        if session.features.memory_aware:
            models = [m for m in models if job.gpu_memory_gb <= memory[m]]
        session.cache[key] = tuple(models)
    return session.cache[key]


def search_order(session, job: Job, models):
    """(tier, model) pairs, best tier first when the tiers plugin is on."""
    return [(tier, model) for tier in tier_order(job, session.features.tiers) for model in models]


# --- whole GPUs ------------------------------------------------------------------------------

def whole_candidates(session, job: Job, models, count: int):
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


def _whole_allocations(node, count: int) -> list[Allocation]:
    picked = choose_gpus(node.node.interconnect, node.free_whole(), count)
    memory = {g.index: g.memory_gb for g in node.gpus}
    return [Allocation(gpu_index=i, milli=1000, memory_gb=memory[i]) for i in picked]


def _single_node(session, job: Job, models, count: int, members: int):
    """Best node for `members` members of `count` GPUs each, all on one node."""
    total = count * members
    best = None
    tried = 0
    for node in whole_candidates(session, job, models, total):
        if not node.fits_host(job, members):
            continue
        if not session.features.topology or total == 1:
            return node
        cost = _node_cost(node, total)
        if best is None or cost < best[0]:
            best = (cost, node)
        tried += 1
        if tried >= TOPOLOGY_CANDIDATES:
            break
    return best[1] if best else None


def _node_cost(node, count: int) -> float:
    gpus = choose_gpus(node.node.interconnect, node.free_whole(), count)
    shape = GroupShape(((node.node.interconnect, node.model, gpus, 0.0),))
    return group_cost(shape)


def _allocate_on(stmt: Statement, job: Job, node, first_member: int, members: int) -> None:
    count = job.gpus or 1
    allocations = _whole_allocations(node, count * members)
    for m in range(members):
        stmt.allocate(job, first_member + m, node, allocations[m * count:(m + 1) * count])


# --- gangs across nodes ----------------------------------------------------------------------

def _host_capacity(node, job: Job, count: int) -> int:
    by_gpu = len(node.free_whole()) // count
    by_cpu = int(node.free_cpu // job.cpu_cores) if job.cpu_cores > 0 else by_gpu
    by_mem = int(node.free_mem // job.memory_gb) if job.memory_gb > 0 else by_gpu
    return min(by_gpu, by_cpu, by_mem)


def _scope_key(node, scope: str):
    if scope == "leaf":
        return (node.model, node.node.spine, node.node.leaf)
    if scope == "spine":
        return (node.model, node.node.spine)
    return (node.model,)


def multi_node_group(session, job: Job, models):
    """Nodes (with members per node) for a gang that does not fit on one node: the cheapest
    group under one leaf; under one spine only if no leaf can hold it; across spines last."""
    count, members = job.gpus or 1, job.gang_size
    tiers = tier_order(job, session.features.tiers)
    entries = []
    for node in whole_candidates(session, job, models, count):
        capacity = _host_capacity(node, job, count)
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


def _fewest_nodes(entries, members: int, tiers):
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


def _tier_rank(chosen, tiers) -> int:
    return max(tiers.index(node.tier) for node, _ in chosen)


def _group_cost(session, chosen, count: int) -> float:
    nodes = tuple((n.node.interconnect, n.model, tuple(range(count * take)),
                   n.node.nics * n.node.nic_gb_s) for n, take in chosen)
    shape = GroupShape(nodes, leaves=len({(n.node.spine, n.node.leaf) for n, _ in chosen}),
                       spines=len({n.node.spine for n, _ in chosen}))
    return group_cost(shape, session.snapshot.spine_oversubscription)


# --- sub-GPU slices --------------------------------------------------------------------------

def find_slice(session, job: Job, models):
    """(node, allocation) for one sub-GPU member, or None."""
    features = session.features
    for tier, model in search_order(session, job, models):
        geometry = geometry_for(model)
        if features.mig and geometry is not None:
            hit = _mig_slot(session, job, model, tier, geometry)
            if hit:
                return hit
            if not features.share_mig_capable:
                continue
        if features.sharing:
            hit = _share_slot(session, job, model, tier)
            if hit:
                return hit
    return None


def _mig_allocation(gpu, profile, start: int) -> Allocation:
    milli = round(1000 * gpu.geometry.gpu_fraction(profile))
    return Allocation(gpu_index=gpu.index, milli=milli, memory_gb=profile.memory_gb,
                      mig_profile=profile.name, mig_start=start)


def _mig_slot(session, job: Job, model: str, tier: str, geometry):
    profile = smallest_profile(geometry, job.gpu_memory_gb)
    if profile is None:
        return None
    for gpu in session.idle.get((model, tier, profile.shape), {}).values():
        if gpu.node.fits_host(job):
            start = min(s for s, inst in gpu.instances.items()
                        if inst[1] is None and inst[0].shape == profile.shape)
            return gpu.node, _mig_allocation(gpu, gpu.instances[start][0], start)
    buckets = session.mig.get((model, tier))
    if not buckets:
        return None
    allowed = _masks(geometry, profile)
    present = sorted((m for m, b in buckets.items() if b and m in allowed),
                     key=allowed.get)
    for mask in present:
        for gpu in buckets[mask].values():
            if gpu.can_create(profile) and gpu.node.fits_host(job):
                start = start_choices(geometry, mask, profile)[0]
                return gpu.node, _mig_allocation(gpu, profile, start)
    return None


_MASKS: dict = {}


def _masks(geometry, profile):
    key = (geometry.model, profile.shape)
    if key not in _MASKS:  # {mask: rank}, fullest first
        _MASKS[key] = {m: i for i, m in enumerate(masks_allowing(geometry, profile))}
    return _MASKS[key]


def _share_slot(session, job: Job, model: str, tier: str):
    buckets = session.share.get((model, tier))
    if not buckets:
        return None
    milli = share_milli(job.gpu_memory_gb, model_memory(session)[model], job.gpu_milli)
    if milli is None:
        return None
    keys = sorted((k for k, v in buckets.items() if k >= milli and v),
                  reverse=session.features.packing != "binpack")
    for key in keys:
        for gpu in buckets[key].values():
            if gpu.memory_gb - gpu.mem_used >= job.gpu_memory_gb - 1e-9 and \
                    gpu.node.fits_host(job):
                return gpu.node, Allocation(gpu_index=gpu.index, milli=milli,
                                            memory_gb=job.gpu_memory_gb)
    return None


# --- a whole job -----------------------------------------------------------------------------

def place_job(session, job: Job, stmt: Statement) -> bool:
    """Put every member of `job` into `stmt`; False (with `stmt` still to discard) if some
    member found no place. Without the gang plugin members that fit are kept anyway."""
    models = allowed_models(session, job)
    if not models:
        return False
    if not as_whole(session, job):
        if _place_slices(session, job, models, stmt):
            return True
        if not (job.production and session.features.gang):
            return False
        # Production inference always gets resources: rather than wait for a repartition it
        # takes whole GPUs (bigger than its need, never smaller).
        stmt.discard()
    count = job.gpus or 1
    if session.features.gang and session.features.topology and job.gang_size > 1:
        return _place_gang_topology(session, job, models, stmt)
    placed_all = True
    for member in range(job.gang_size):
        node = _single_node(session, job, models, count, 1)
        if node is None:
            placed_all = False
            if session.features.gang:
                return False
            continue
        _allocate_on(stmt, job, node, member, 1)
    return placed_all


def _place_slices(session, job: Job, models, stmt: Statement) -> bool:
    placed_all = True
    for member in range(job.gang_size):
        hit = find_slice(session, job, models)
        if hit is None:
            placed_all = False
            if session.features.gang:
                return False
            continue
        stmt.allocate(job, member, hit[0], (hit[1],))
    return placed_all


def _place_gang_topology(session, job: Job, models, stmt: Statement) -> bool:
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
