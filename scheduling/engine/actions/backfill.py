"""backfill: start waiting jobs on reserved GPUs when they cannot delay the holder, i.e. they
are expected to end before the reservation starts (EASY backfilling). Capacity nobody reserved
was already open to every job in allocate."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .common import PLACED, ordered, request_shape, try_place

if TYPE_CHECKING:
    from ..session import Session


def backfill(session: Session) -> None:
    book = session.book
    if not (session.features.reserve and book):
        return
    attempts = session.features.backfill_attempts
    failed: set = set()
    waiting = [j for j in session.waiting() if j.id not in session.reasons
               and j.id not in book.by_holder and j.id not in session.nominated]
    for job in ordered(session, waiting):
        if attempts <= 0:
            return
        book.level(job.priority)
        ends = session.now + job.expected_runtime_s
        passable = [r for r in book.active() if r.at >= ends]
        key = (request_shape(session, job), tuple(r.holder for r in passable))
        if not passable or key in failed:
            continue
        attempts -= 1
        with book.lifted(passable):
            placed = try_place(session, job, allow_borrow=True) == PLACED
        if not placed:
            failed.add(key)
