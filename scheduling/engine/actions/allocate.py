"""allocate: place jobs in order, quota-guaranteed work first, then burst on idle capacity."""

from __future__ import annotations

from .common import NO_FIT, OVER_QUOTA, ordered, try_place


def allocate(session) -> None:
    blocked: dict[tuple[str, int], str] = {}
    deferred = []
    for job in ordered(session, session.waiting()):
        if _held_back(session, job, blocked):
            continue
        outcome = try_place(session, job, allow_borrow=False)
        if outcome == OVER_QUOTA:
            deferred.append(job)
        elif outcome == NO_FIT:
            blocked[(job.team, job.priority)] = job.id
    # Burst: only now, so that every team's guaranteed work went first.
    for job in ordered(session, deferred):
        if _held_back(session, job, blocked):
            continue
        if try_place(session, job, allow_borrow=True) == NO_FIT:
            blocked[(job.team, job.priority)] = job.id


def _held_back(session, job, blocked) -> bool:
    """With team order on, a job that did not fit holds back the later jobs of its team in the
    same class, so the team lead's order is kept (backfill may still start them)."""
    if not session.features.team_order:
        return False
    blocker = blocked.get((job.team, job.priority))
    if blocker is None:
        return False
    session.blocked_behind[job.id] = blocker
    return True
