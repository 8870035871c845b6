"""allocate: place jobs in order, quota-guaranteed work first, then burst on idle capacity.

Order decides who goes first, not whether anyone may run: a job that does not fit does not
hold back the jobs behind it. With the reserve plugin it reserves the GPUs that free earliest
instead (reserve.py), and later jobs of its class or below may start anywhere else.
"""

from __future__ import annotations

from .common import NO_FIT, OVER_QUOTA, PLACED, ordered, try_place
from .reserve import reserve_for, reserve_heads


def allocate(session) -> None:
    reserving = session.features.reserve
    if reserving:
        reserve_heads(session)
    deferred = []
    for job in ordered(session, session.waiting()):
        if place(session, job, allow_borrow=False) == OVER_QUOTA:
            deferred.append(job)
    # Burst: only now, so that every team's guaranteed work went first.
    for job in ordered(session, deferred):
        place(session, job, allow_borrow=True)


def place(session, job, allow_borrow: bool) -> str:
    """try_place under the reservations that bind the job; a holder may use its own GPUs, and
    drops its reservation once placed. A job that does not fit may reserve."""
    if not session.features.reserve:
        return try_place(session, job, allow_borrow)
    book = session.book
    book.level(job.priority)
    own = book.by_holder.get(job.id)
    if own is None:
        outcome = try_place(session, job, allow_borrow)
    else:
        with book.lifted([own]):
            outcome = try_place(session, job, allow_borrow)
        if outcome == PLACED:
            book.drop(own)
    if outcome == NO_FIT:
        reserve_for(session, job)
    return outcome
