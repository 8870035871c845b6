"""What the actions share: job order, quota admission and the try-place-commit step."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Iterator
from operator import attrgetter
from typing import TYPE_CHECKING

from ..fair_history import ratio, share_weights, usage_shares
from ..fairshare import TeamDemand, deserved_shares
from ..memory import share_milli, smallest_profile
from ..mig import geometry_for
from ..placement import allowed_models, as_whole, model_memory, place_job
from ..reasons import WaitingReason
from ..statement import Statement
from ..types import Job
from ..wording import gpu_count, gpus

if TYPE_CHECKING:
    from ..explain import Reason
    from ..session import RequestShape, Session


PLACED, OVER_QUOTA, DENIED, NO_FIT = "placed", "over-quota", "denied", "no-fit"


def team_key(job: Job) -> tuple[int, int, float, str]:
    """A team lead's order: class first, then the lead's order, then submission."""
    return (-job.priority, job.queue_order, job.submitted_at, job.id)


def overall_key(job: Job) -> tuple[int, float, str]:
    return (-job.priority, job.submitted_at, job.id)


_TAILS = {"team": attrgetter("queue_order", "submitted_at", "id"), "overall": attrgetter("submitted_at", "id")}
_PRIORITY = attrgetter("priority")


def sorted_jobs(jobs: Iterable[Job], key: Callable[[Job], tuple], reverse: bool = False) -> list[Job]:
    """sorted(jobs, key=key, reverse=reverse) for team_key or overall_key, in two stable sorts
    with key getters written in C: by the key's tail, then by class (the key's head, -priority).
    Every pass over the waiting jobs sorts them all; a Python key per job was most of that."""
    out = sorted(jobs, key=_TAILS["team" if key is team_key else "overall"], reverse=reverse)
    out.sort(key=_PRIORITY, reverse=not reverse)
    return out


def ordered(session: Session, jobs: Iterable[Job], lending: bool = False) -> Iterator[Job]:
    """Jobs in scheduling order. With fair share, teams take turns by weighted usage (the
    least served team first) among heads of equal class, each team's line in its lead's order
    when the policy has `team_order` (else class-then-FIFO); without fair share plain
    class-then-FIFO. `lending` (GPUs lent beyond guarantees) with `fair_history`: among heads of
    equal class the team least over its share over time goes first (fair_ratio)."""
    if not session.features.fairshare:
        yield from sorted_jobs(jobs, overall_key)
        return
    in_team = team_key if session.features.team_order else overall_key
    queues: dict[str, list[Job]] = {}
    for job in sorted_jobs(jobs, in_team, reverse=True):
        queues.setdefault(job.team, []).append(job)  # a stack: next job at the end
    by_history = lending and session.features.fair_history
    weights = {team: max(session.queue(team).weight, 1e-9) for team in queues}
    heap = [_entry(session, team, q[-1], by_history, weights[team]) for team, q in queues.items()]
    heapq.heapify(heap)
    usage = session.usage
    while heap:
        team = heapq.heappop(heap)[-1]
        line = queues[team]
        weight = weights[team]
        # (head's class, team's use) when the team was last found still the least served: with
        # both unchanged (and the heap, which only changes as the team leaves the loop) so is
        # the answer, and the entry is not built again (most of a long line in a cycle that
        # places little: this runs once per job of every pass)
        last_class, last_use = None, -1.0
        while line:
            yield line.pop()
            if line and heap:
                # the team's ratio now counts what it was just given (entry penalty); while it
                # is still the least served it goes on without a trip through the heap (entries
                # never tie: each names its team), and alone it goes on regardless
                if by_history:
                    entry = _entry(session, team, line[-1], by_history, weight)
                else:
                    head_class, use = line[-1].priority, usage.get(team, 0.0)
                    if head_class == last_class and use == last_use:
                        continue
                    entry = (-head_class, 0.0, use / weight, team)  # _entry inlined
                    last_class, last_use = head_class, use
                if heap[0] < entry:
                    heapq.heappush(heap, entry)
                    break


def _entry(session: Session, team: str, head: Job, by_history: bool, weight: float) -> tuple[int, float, float, str]:
    over = fair_ratio(session, team) if by_history else 0.0
    return (-head.priority, over, session.usage.get(team, 0.0) / weight, team)


def fair_ratio(session: Session, team: str) -> float:
    """The team's use over its share (fair_history.py): decayed past use plus the entry penalty
    of what it holds now, which rises as this cycle gives it more."""
    if session.fair_basis is None:
        gpus = float(capacity(session))
        session.fair_basis = (usage_shares(session.snapshot.usage_history, gpus, session.now),
                              share_weights(session.queues.values()), gpus)
    used, shares, gpus = session.fair_basis
    return ratio(used.get(team, 0.0) + session.entry.get(team, 0.0) / max(gpus, 1e-9), shares.get(team, 0.0))


def capacity(session: Session) -> int:
    """Healthy GPUs on ready nodes: what can be lent this cycle (fixed for it: counted once)."""
    if session.capacity is None:
        session.capacity = len([g for n in session.nodes.values() if n.ready for g in n.gpus if g.healthy])
    return session.capacity


def min_units(session: Session, job: Job) -> float:
    """The fewest GPU units the job can count for (the exact figure is known once placed).
    Kept per job object: every pass over the waiting jobs asks for each."""
    mine = session.job_units.get(job.id)
    if mine is not None and mine[0] is job:
        return mine[1]
    units = _min_units(session, job)
    session.job_units[job.id] = (job, units)
    return units


def _min_units(session: Session, job: Job) -> float:
    if as_whole(session, job):
        return float((job.gpus or 1) * job.gang_size)
    # Every action asks for every waiting job; the answer depends only on these (and on the
    # cycle's GPU models), so it is worked out once per kind of request.
    key = (job.gpu_memory_gb, job.gpu_milli, job.gpu_models, job.mig_profile)
    best = session.slice_units.get(key)
    if best is None:
        best = session.slice_units[key] = _slice_units(session, job)
    return best * job.gang_size


def _slice_units(session: Session, job: Job) -> float:
    """The smallest slice or share one member of a sub-GPU job can take, in GPU units."""
    best = 1.0
    for model in allowed_models(session, job):
        geometry = geometry_for(model)
        if session.features.mig and geometry is not None:
            profile = smallest_profile(geometry, job.gpu_memory_gb, job.mig_profile)
            if profile is not None:
                best = min(best, geometry.gpu_fraction(profile))
        if session.features.sharing:
            milli = share_milli(job.gpu_memory_gb, model_memory(session)[model], job.gpu_milli)
            if milli is not None:
                best = min(best, milli / 1000)
    return best


def deserved(session: Session) -> dict[str, float]:
    """Fair share of each team this cycle (computed once)."""
    if session.deserved is None:
        demand: dict[str, float] = dict(session.usage)
        for job in session.waiting():
            demand[job.team] = demand.get(job.team, 0.0) + min_units(session, job)
        teams = {}
        for team in sorted(set(demand) | set(session.queues)):
            q = session.queue(team)
            teams[team] = TeamDemand(q.guaranteed_gpus, q.burst_limit_gpus, q.weight,
                                     demand.get(team, 0.0))
        session.deserved = deserved_shares(capacity(session), teams)
    return session.deserved


def within_guarantee(session: Session, job: Job, units: float) -> bool:
    return session.usage.get(job.team, 0.0) + units <= session.queue(job.team).guaranteed_gpus \
        + 1e-9


def refused(session: Session, job: Job, units: float, used: float | None = None,
            fair: bool = True) -> WaitingReason | None:
    """Which rule refuses the job borrowing `units` beyond its guarantee while its team holds
    `used` (default: what it holds now); None if it may. The actions that only ask whether ask
    this, once per waiting job: burst_refusal words the answer."""
    q = session.queue(job.team)
    if used is None:
        used = session.usage.get(job.team, 0.0)
    limit = q.burst_limit_gpus
    if limit is not None and job.production:
        used -= production_excess(session, job.team)
    if limit is not None and (units > limit + 1e-9 or used + units > limit + 1e-9):
        return WaitingReason.BURST_LIMIT
    # Worked out even when not asked for fairness: the shares are fixed at the first call of
    # the cycle, and which call that is must not depend on who asks.
    share = deserved(session).get(job.team, 0.0)
    if fair and session.features.fairshare and not job.production and used + units > share + 1e-9:
        return WaitingReason.FAIR_SHARE
    return None


def burst_refusal(session: Session, job: Job, units: float, used: float | None = None,
                  fair: bool = True) -> Reason | None:
    """Why a job may not borrow `units` beyond its guarantee (refused), in words; None if it may."""
    code = refused(session, job, units, used, fair)
    if code is None:
        return None
    q = session.queue(job.team)
    if used is None:
        used = session.usage.get(job.team, 0.0)
    if code == WaitingReason.FAIR_SHARE:
        share = deserved(session).get(job.team, 0.0)
        return (code, f"team {job.team} holds {gpu_count(used)} ({gpus(q.guaranteed_gpus)} "
                f"guaranteed); its fair share of idle GPUs this cycle is {gpus(share)}")
    limit = q.burst_limit_gpus or 0.0
    if units > limit + 1e-9:
        return (code, f"needs {gpu_count(units)}, more than team {job.team}'s burst limit of "
                f"{gpus(limit)}; it can start only once a platform admin raises the limit")
    return (code, f"team {job.team} would hold {gpu_count(used + units)}; its burst "
            f"limit is {gpus(limit)} (guaranteed {gpus(q.guaranteed_gpus)})")


def refuses_only_the_excess(session: Session, job: Job, units: float, used: float | None = None) -> bool:
    """Whether the burst limit refuses production inference only because the place found is
    bigger than its need (a sub-GPU replica on a whole GPU: its fallback when no slice or share
    is free) while its need fits under the limit. The limit bounds what a team asks for, as
    Kueue's quotas count requests; the excess, under one GPU, is the scheduler's choice for want
    of a slice. Refused, two `search` replicas waited 5,010 s with 0.75 GPU left under its
    limit and no slice anywhere (serving-heavy, tuning seed 103)."""
    if not job.production:
        return False
    least = min_units(session, job)
    return units > least + 1e-9 and refused(session, job, least, used, fair=False) is None


def production_excess(session: Session, team: str) -> float:
    """Units the team's running production replicas hold beyond their need: a sub-GPU replica
    on a whole GPU, its fallback when no slice or share was free. Production's burst limit counts
    what it asks for, as refuses_only_the_excess does for a replica being placed; counted in
    full, replicas placed so earlier left `search` no room for the next one, which waited
    8,975 s (serving-heavy, tuning seed 103, once notebooks stopped waiting for slices).
    Worked out on first use in a cycle: replicas placed later in it count in full."""
    excess = session.production_excess
    if excess is None:
        excess = session.production_excess = {}
        for members in session.members.values():
            for member in members:
                job = member.job
                if job is not None and job.production and job.fractional:
                    extra = member.units - min_units(session, job)
                    if extra > 1e-9:
                        excess[member.team] = excess.get(member.team, 0.0) + extra
    return excess.get(team, 0.0)


def request_shape(session: Session, job: Job) -> RequestShape:
    """What placement depends on: jobs with the same shape fit in the same places. Taking
    capacity never makes room, so a shape that failed fails again until something is freed.
    Kept per job for the cycle: every pass over the waiting jobs asks. A shape is the number of
    its distinct request this cycle, so that the many sets and tables keyed by it hash an int,
    not a 13-field tuple, for every waiting job of every pass."""
    shape = session.shapes.get(job.id)
    if shape is None:
        fields = (job.gpu_models, job.gpus, job.gang_size, job.gpu_memory_gb, job.gpu_milli, job.cpu_cores,
                  job.memory_gb, job.production, job.checkpoints, job.preemptible, job.kind,
                  job.accepts_no_isolation, job.mig_profile)
        shape = session.shapes[job.id] = session.shape_ids.setdefault(fields, len(session.shape_ids))
    return shape


def try_place(session: Session, job: Job, allow_borrow: bool, fair: bool = True) -> str:
    """Place a job whole and commit it, honouring quotas. Returns PLACED, OVER_QUOTA (needs
    to borrow but may not yet), DENIED (burst refused; reason recorded) or NO_FIT. `fair`
    False: only the hard burst limit bounds borrowing (lending what is left idle)."""
    quota = session.features.quota
    used_before = session.usage.get(job.team, 0.0)
    if quota:
        # within_guarantee(session, job, min_units(session, job)) with the per-job cache read
        # inline: every waiting job of every pass asks, and most are answered right below
        mine = session.job_units.get(job.id)
        units = mine[1] if mine is not None and mine[0] is job else min_units(session, job)
        if not used_before + units <= session.queue(job.team).guaranteed_gpus + 1e-9:
            if not allow_borrow:
                return OVER_QUOTA
            # Only the hard limit here: the fair-share test waits until the job is known to fit,
            # so a job that cannot fit anyway is explained by what it lacks.
            refusal = burst_refusal(session, job, units, fair=False)
            if refusal:
                session.reasons[job.id] = refusal
                return DENIED
    shape = session.shapes.get(job.id)
    if shape is None:
        shape = request_shape(session, job)
    failed = session.no_fit
    if failed.get(shape) == session.releases:
        return NO_FIT  # the same request failed and nothing was freed since
    stmt = Statement(session)
    placed_all = place_job(session, job, stmt)
    if not placed_all and (session.features.gang or not stmt.allocated):
        stmt.discard()
        failed[shape] = session.releases
        return NO_FIT
    units = stmt.units
    borrowed = quota and used_before + units > session.queue(job.team).guaranteed_gpus + 1e-9
    if borrowed and not allow_borrow:
        stmt.discard()
        return OVER_QUOTA
    if borrowed:
        refusal = burst_refusal(session, job, units, used_before, fair)
        if refusal and not refuses_only_the_excess(session, job, units, used_before):
            stmt.discard()
            session.reasons[job.id] = refusal
            return DENIED
    stmt.commit(borrowed=borrowed)
    session.reasons.pop(job.id, None)
    if not placed_all:
        session.reasons[job.id] = (WaitingReason.PARTIAL, "only some members found a place; the others "
                                   "wait (no gang scheduling in this policy)")
    return PLACED
