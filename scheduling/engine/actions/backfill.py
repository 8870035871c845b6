"""backfill: start waiting jobs on reserved GPUs when they cannot delay the holder, i.e. they
are expected to end before the reservation starts (EASY backfilling). Capacity nobody reserved
was already open to every job in allocate."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .common import PLACED, ordered, request_shape, try_place

if TYPE_CHECKING:
    from ..reservations import Reservation
    from ..session import Session


def backfill(session: Session) -> None:
    book = session.book
    if not (session.features.reserve and book):
        return
    attempts = session.features.backfill_attempts
    failed: set = set()
    waiting = [j for j in session.waiting() if j.id not in session.reasons
               and j.id not in book.by_holder and j.id not in session.nominated]
    # The reservations a job may pass depend on which are masked and on its expected end; the
    # masks change only when the level does (nothing here adds or drops a reservation, and a
    # lifted one is masked again), so they are worked out once per end while the level holds.
    passing: dict[float, tuple[list[Reservation], tuple[str, ...]]] = {}
    level = book.level_at
    for job in ordered(session, waiting):
        if attempts <= 0:
            return
        book.level(job.priority)
        if book.level_at != level:
            level = book.level_at
            passing.clear()
        ends = session.now + job.expected_runtime_s
        found = passing.get(ends)
        if found is None:
            passable = [r for r in book.active() if r.at >= ends]
            found = passing[ends] = (passable, tuple(r.holder for r in passable))
        passable, holders = found
        if not passable or (request_shape(session, job), holders) in failed:
            continue
        key = (request_shape(session, job), holders)
        attempts -= 1
        with book.lifted(passable):
            placed = try_place(session, job, allow_borrow=True) == PLACED
        if not placed:
            failed.add(key)
