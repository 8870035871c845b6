"""Which GPUs a blocked whole-GPU job reserves: the ones expected to free earliest.

A GPU frees when every job on it ends (its expected end; a job being preempted ends now). A
job on one node reserves the node whose first `n` GPUs free earliest; a gang over several nodes
sweeps the expected ends under one leaf switch at a time (the placement it would get anyway)
and reserves on the leaf that can hold it first, across leaves only when no leaf ever can.
"""

from __future__ import annotations

import heapq
import math
from collections import defaultdict
from typing import TYPE_CHECKING

from ..placement import allowed_models, as_whole, host_capacity, whole_candidates
from ..reservations import Reservation
from ..tiers import tier_order
from .common import min_units, ordered, refused, within_guarantee
from .gang_victims import gang_nodes

if TYPE_CHECKING:
    from ..session import Session
    from ..state import GpuKey, GpuState, NodeState
    from ..types import Job

FreeTimes = list[tuple[float, int, "GpuState"]]  # (expected free time, GPU index, GPU), earliest first


INF = math.inf


def reserve_heads(session: Session) -> None:
    """Before anything is placed: the first whole-GPU job of each team and class that cannot
    fit now reserves, so jobs served before it this cycle cannot take what it waits for."""
    seen: set = set()
    book, limit = session.book, session.features.max_reservations
    for job in ordered(session, session.waiting()):
        if len(book.items) >= limit and (session.deserved is not None or not session.features.quota):
            # Nobody else may reserve (reserve_for), and the fair shares are worked out (a head's
            # admission would do it here, before anything is placed): the rest only reads.
            return
        key = (job.team, job.priority)
        if key in seen or not as_whole(session, job):
            continue
        seen.add(key)
        if not admitted(session, job):
            continue
        if not _fits_now(session, job):
            reserve_for(session, job)


def _fits_now(session: Session, job: Job) -> bool:
    """Read-only test (a probe placement would reorder the indexes): enough free GPUs and
    host room on one node, or over the nodes together for a gang over several nodes."""
    models = allowed_models(session, job)
    count = job.gpus or 1
    if gang_nodes(session, job) > 1:
        room = 0
        for node in whole_candidates(session, job, models, count):
            room += host_capacity(node, job, count)
            if room >= job.gang_size:
                return True
        return False
    return any(node.fits_host(job, job.gang_size)
               for node in whole_candidates(session, job, models, count * job.gang_size))


def reserve_for(session: Session, job: Job) -> None:
    """Reserve for `job` unless its team and class already hold one or the book is full."""
    book = session.book
    limit = session.features.max_reservations
    if (job.id in book.by_holder or len(book.items) >= limit or not as_whole(session, job)
            or any(r.team == job.team and r.priority == job.priority for r in book.items)
            or not admitted(session, job)):
        return
    found = earliest_gpus(session, job)
    if found is not None:
        at, gpus = found
        book.add(Reservation(job.id, job.team, job.priority, max(at, session.now), gpus))


def admitted(session: Session, job: Job) -> bool:
    """Quota would let it in now: never reserve for a burst the fair share refuses."""
    if not session.features.quota:
        return True
    units = min_units(session, job)
    return within_guarantee(session, job, units) or refused(session, job, units) is None


def _end(session: Session, job_id: str) -> float:
    """A running job's expected end (now for one being preempted), worked out once per cycle;
    INF for a GPU user the session knows no member of."""
    end = session.job_ends.get(job_id)
    if end is None:
        members = session.members.get(job_id)
        if not members:
            return INF
        job = members[0].job
        if job_id in session.preempting:
            end = session.now
        elif job is None:
            end = INF
        else:
            end = max(session.now, members[0].started_at + job.expected_runtime_s)
        session.job_ends[job_id] = end
    return end


def _candidates(session: Session, job: Job, taken: set[GpuKey]) -> dict[str, FreeTimes]:
    """Per node of the job's models and tiers whose host could take one member: (expected free
    time, index, GPU) for its whole-GPU-capable GPUs not reserved, earliest first. Kept per node
    until the node changes (`version`): each blocked job that reserves asks for every node of
    its models, so this loop is the reservation's cost (inlined: 4,000 nodes per head)."""
    models = set(allowed_models(session, job))
    tiers = tier_order(job, session.features.tiers)
    taken_nodes = {name for name, _ in taken}
    cache = session.free_times
    cpu, memory = job.cpu_cores, job.memory_gb
    times: dict[str, FreeTimes] = {}
    for name, node in session.nodes.items():
        if node.model not in models or node.tier not in tiers:
            continue
        host = node.node  # _host_members(node, job, 1) > 0, inlined
        if (cpu > 0 and host.cpu_cores // cpu < 1) or (memory > 0 and host.memory_gb // memory < 1):
            continue
        cached = cache.get(name)
        if cached is None or cached[0] != node.version:
            cached = cache[name] = (node.version, _node_free_times(session, node))
        if name in taken_nodes:
            times[name] = [entry for entry in cached[1] if entry[2].key not in taken]
        else:
            times[name] = cached[1]
    return times


def _node_free_times(session: Session, node: NodeState) -> FreeTimes:
    out: FreeTimes = []
    if not node.ready or not node.offers_whole:  # a sharing node's GPUs never go whole (sharing.py)
        return out
    ends = session.job_ends
    for gpu in node.gpus:
        if gpu.mig_enabled or not gpu.healthy or gpu.settling:
            continue
        if gpu.whole_job:
            at = ends.get(gpu.whole_job)
            if at is None:
                at = _end(session, gpu.whole_job)
        elif gpu.shares:
            at = max(_end(session, job_id) for job_id, _ in gpu.shares)
        else:
            at = session.now
        if at < INF:
            out.append((at, gpu.index, gpu))
    out.sort()  # by time, then index: a node's indexes differ, so the GPUs are never compared
    return out


def earliest_gpus(session: Session, job: Job) -> tuple[float, list[GpuState]] | None:
    tiers = tier_order(job, session.features.tiers)
    times = _candidates(session, job, session.book.taken)
    if gang_nodes(session, job) > 1:
        return _gang(session, job, times, tiers)
    total, members = (job.gpus or 1) * job.gang_size, job.gang_size
    best: tuple[tuple[float, int, str], FreeTimes] | None = None
    for name, free in times.items():
        if len(free) < total:
            continue
        at = free[total - 1][0]
        if best is not None and at > best[0][0]:
            continue  # the key below compares this time first: no better, whatever the rest
        node = session.nodes[name]
        # one member: _candidates checked the host already
        if members > 1 and _host_members(node, job, members) < members:
            continue
        key = (at, tiers.index(node.tier), name)
        if best is None or key < best[0]:
            best = (key, free)
    return (best[0][0], [g for _, _, g in best[1][:total]]) if best else None


def _host_members(node: NodeState, job: Job, want: int) -> int:
    """Members the node's host (CPU, RAM when empty) could ever take, at most `want`."""
    by_cpu = node.node.cpu_cores // job.cpu_cores if job.cpu_cores > 0 else want
    by_mem = node.node.memory_gb // job.memory_gb if job.memory_gb > 0 else want
    return int(min(want, by_cpu, by_mem))


def _gang(session: Session, job: Job, times: dict[str, FreeTimes],
          tiers: tuple[str, ...]) -> tuple[float, list[GpuState]] | None:
    for scope in ("leaf", "any"):
        groups: defaultdict[tuple[str, ...], list[str]] = defaultdict(list)
        for name in times:
            node = session.nodes[name]
            where = (node.model, node.node.spine, node.node.leaf) if scope == "leaf" else (node.model,)
            groups[where].append(name)
        best = None
        for names in (groups[where] for where in sorted(groups)):
            at = _sweep(session, job, names, times)
            if at is not None and (best is None or at < best[0]):
                best = (at, names)
        if best:
            return best[0], _gang_gpus(session, job, best[1], times, best[0], tiers)
    return None


def _sweep(session: Session, job: Job, names: list[str], times: dict[str, FreeTimes]) -> float | None:
    """The earliest time at which these nodes together can host every member: the members-th
    earliest of the times at which a node could take one more member (its j-th once j × the
    member's GPUs are free on it, up to what its host takes). One time per member a node could
    host, not one per GPU: a blocked gang sweeps every leaf of its models (4,000 nodes, bench)."""
    count, members = job.gpus or 1, job.gang_size
    starts = []
    for name in names:
        free = times[name]
        most = min(len(free) // count, _host_members(session.nodes[name], job, members))
        starts += [free[j * count - 1][0] for j in range(1, most + 1)]
    return heapq.nsmallest(members, starts)[-1] if len(starts) >= members else None


def _gang_gpus(session: Session, job: Job, names: list[str], times: dict[str, FreeTimes], at: float,
               tiers: tuple[str, ...]) -> list[GpuState]:
    count, left = job.gpus or 1, job.gang_size
    options = []
    for name in names:
        free = [g for t, _, g in times[name] if t <= at]
        take = min(len(free) // count, _host_members(session.nodes[name], job, left))
        if take:
            options.append((tiers.index(session.nodes[name].tier), -take, name, free))
    gpus = []
    for _, neg, _, free in sorted(options, key=lambda o: o[:3]):
        take = min(-neg, left)
        gpus.extend(free[:take * count])
        left -= take
        if not left:
            break
    return gpus
