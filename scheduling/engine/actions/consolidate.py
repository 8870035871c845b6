"""consolidate: make room for a blocked whole-GPU job by moving running jobs into free GPUs
elsewhere, instead of waiting for work to end on the right nodes by chance.

Free GPUs scattered a few per node cannot hold a job that needs a whole node or several, and
when every job still waiting is that big they stay idle. A waiting whole-GPU job that found
no place, and would otherwise wait more than `consolidate_after_s` (until its reservation, or
without one for ever), looks for running jobs on the nodes it needs that fit again elsewhere
right now. Their move is planned only if, in one statement, with them out the waiting job fits
and then every one of them fits again, under the same reservations it would face. A move is a
restart from the last checkpoint (Preempt, reason "consolidate"), so only jobs that checkpoint,
may be preempted, are not production, are of the waiting job's class or below, sit on one node
and ran at least `min_runtime_s` since they last started are moved. Their GPUs then free first,
so the waiting job's reservation lands on them and the movers on the gaps they fitted in.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any

from ..placement import as_whole, place_job
from ..reasons import PreemptReason
from ..statement import Statement
from .common import min_units, ordered, refused, request_shape, within_guarantee
from .evict import (
    NODE_TRIES,
    lost_work,
    nominate,
    stoppable_runners,
    undecided_waiting,
    victims_by_node,
    victims_on,
)
from .gang_victims import gang_nodes, gang_victims, per_node_gpus

if TYPE_CHECKING:
    from ..session import RequestShape, Session
    from ..state import Member
    from ..types import Job


RESTART_S = 120.0  # what a move costs a job beyond its lost work: save, stop, restore


def consolidate(session: Session) -> None:
    attempts = session.features.consolidate_attempts
    settled = session.now - session.features.min_runtime_s
    movable = [m for m in stoppable_runners(session) if _movable(session, m, settled)]
    failed: set[RequestShape] = set()
    for job in ordered(session, undecided_waiting(session)):
        if attempts <= 0 or not movable:
            return
        key = request_shape(session, job)
        if key in failed or not as_whole(session, job) or not _admitted(session, job) \
                or _starts_soon(session, job):
            continue
        pool = [m for m in movable if m.known_job.priority <= job.priority]
        if not pool:
            continue
        attempts -= 1
        movers = _moves_for(session, job, pool)
        if movers is None:
            failed.add(key)
            continue
        nominate(session, job, movers, PreemptReason.CONSOLIDATE)
        movable = [m for m in movable if m.job_id not in session.preempting]


def _movable(session: Session, member: Member, settled: float) -> bool:
    job = member.known_job
    nodes = {m.node for m in session.members[member.job_id]}
    return (job.preemptible and not job.production and job.checkpoints and len(nodes) == 1
            and member.job_id not in session.preempting and member.started_at <= settled)


def _admitted(session: Session, job: Job) -> bool:
    """Its team may hold it: within the guarantee, or under the hard burst limit (idle GPUs
    are lent beyond the fair share, as allocate's last pass does)."""
    if not session.features.quota:
        return True
    units = min_units(session, job)
    return within_guarantee(session, job, units) or \
        refused(session, job, units, fair=False) is None


def _starts_soon(session: Session, job: Job) -> bool:
    own = session.book.by_holder.get(job.id)
    at = own.at if own is not None else math.inf
    return at - session.now <= session.features.consolidate_after_s


def _moves_for(session: Session, job: Job, pool: list[Member]) -> list[str] | None:
    """Jobs whose move makes room for `job` and that all fit again elsewhere once it has its
    place, the cheapest to move first (GPU-seconds of work lost since their checkpoint plus a
    restart); else None. A gang over several nodes takes the k nodes cheapest to empty."""
    cost = _move_costs(session, pool)
    with _levelled(session, job):
        by_node = victims_by_node(session, job, pool)
        if gang_nodes(session, job) > 1:
            options: list[list[str] | None] = [gang_victims(session, job, by_node, cost, _total)]
        else:
            options = list(_one_node_options(session, job, by_node, cost))
    for movers in options:
        if movers and _all_refit(session, job, movers):
            return movers
    return None


def _move_costs(session: Session, pool: list[Member]) -> dict[str, float]:
    costs = {}
    for first in pool:
        units = sum(m.units for m in session.members[first.job_id])
        costs[first.job_id] = lost_work(session, first) + units * RESTART_S
    return costs


def _total(cost: Mapping[str, Any], chosen: list[str]) -> tuple[float, int]:
    return (sum(cost[v] for v in chosen), len(chosen))


def _one_node_options(session: Session, job: Job, by_node: dict[str, set[str]],
                      cost: dict[str, float]) -> list[list[str] | None]:
    """Mover sets on the NODE_TRIES nodes that look cheapest (fewest GPUs still to free, then
    the cheapest movers there), cheapest set first."""
    need = per_node_gpus(session, job)

    def looks(name: str) -> tuple[int, float, str]:
        short = need - len(session.nodes[name].free_whole())
        return (short, sum(cost[v] for v in by_node[name]), name)

    options = []
    for node in sorted(by_node, key=looks)[:NODE_TRIES]:
        victims = by_node[node]
        movers = victims_on(session, job, sorted(victims, key=lambda v: (cost[v], v)))
        if movers:
            options.append((_total(cost, movers), node, movers))
    options.sort(key=lambda o: o[:2])
    return [o[2] for o in options]


def _all_refit(session: Session, job: Job, movers: list[str]) -> bool:
    stmt = Statement(session)
    try:
        evicted = {mover: stmt.evict(mover)[0].known_job for mover in movers}
        with _levelled(session, job):
            if not place_job(session, job, stmt):
                return False
        for mover in sorted(movers, key=lambda v: (-_units(evicted[v]), v)):
            with _levelled(session, evicted[mover], holder=job):
                if not place_job(session, evicted[mover], stmt):
                    return False
        return True
    finally:
        stmt.discard()


def _units(job: Job) -> float:
    return (job.gpus or job.gpu_milli / 1000) * job.gang_size


def _levelled(session: Session, job: Job, holder: Job | None = None) -> AbstractContextManager[None]:
    """The reservations as allocate would show them to `job`. Once the waiting job is placed
    its reservation is gone, so the movers placed after it pass `holder` to use it too."""
    return session.book.seen_by(job, holder) if session.features.reserve else nullcontext()
