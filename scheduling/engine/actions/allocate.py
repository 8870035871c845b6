"""allocate: place jobs in order, quota-guaranteed work first, then burst on idle capacity,
then (work conserving) whatever is still idle to bursts the fair share held back.

Order decides who goes first, not whether anyone may run: a job that does not fit does not
hold back the jobs behind it. With the reserve plugin it reserves the GPUs that free earliest
instead (reserve.py), and later jobs of its class or below may start anywhere else.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..reasons import WaitingReason
from .common import NO_FIT, OVER_QUOTA, PLACED, ordered, try_place
from .reserve import reserve_for, reserve_heads

if TYPE_CHECKING:
    from ..session import Session
    from ..types import Job


def allocate(session: Session) -> None:
    reserving = session.features.reserve
    if reserving:
        reserve_heads(session)
    # With production_wins, production inference borrows in the first pass, in class order: the
    # room its preemptions free would otherwise go to other teams' guaranteed work first, and it
    # preempted again (serving-heavy, tuning seed 105: one replica, 2,844 preemptions, never placed).
    wins = session.features.production_wins
    deferred = []
    for job in ordered(session, session.waiting()):
        if place(session, job, allow_borrow=wins and job.production) == OVER_QUOTA:
            deferred.append(job)
    # Burst: only now, so that every team's guaranteed work went first; with fair_history the
    # team least over its share over time borrows first (fair_history.py).
    for job in ordered(session, deferred, lending=True):
        place(session, job, allow_borrow=True)
    # Fair share decides who borrows first, not whether idle GPUs may be used: GPUs that no
    # job within its share could take are lent beyond it (still borrowed, so a guarantee can
    # reclaim them). Without this, a team whose jobs do not fit leaves its share idle.
    held_back = [j for j in deferred if session.reasons.get(j.id, ("",))[0] == WaitingReason.FAIR_SHARE]
    for job in ordered(session, held_back, lending=True):
        if place(session, job, allow_borrow=True, fair=False) == NO_FIT:
            session.reasons.pop(job.id, None)  # what it lacks now is room, not its share


def place(session: Session, job: Job, allow_borrow: bool, fair: bool = True) -> str:
    """try_place under the reservations (and nominations) that bind the job; a holder may use its
    own GPUs, and drops its reservation once placed. A job that does not fit may reserve."""
    book = session.book
    if not session.features.reserve and not book:
        return try_place(session, job, allow_borrow, fair)
    own = book.by_holder.get(job.id)
    if own is None:  # book.seen_by(job) without the context manager: this runs for every waiting job
        if job.priority != book.level_at:  # (level's own first test)
            book.level(job.priority)
        outcome = try_place(session, job, allow_borrow, fair)
    else:
        with book.seen_by(job):
            outcome = try_place(session, job, allow_borrow, fair)
    if own is not None and outcome == PLACED:
        book.drop(own)
    # reserve_for's first tests: a full book (most of a long queue's passes) takes no one
    if outcome == NO_FIT and session.features.reserve and len(book.items) < session.features.max_reservations:
        reserve_for(session, job)
    return outcome
