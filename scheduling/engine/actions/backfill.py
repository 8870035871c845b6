"""backfill: start jobs held back behind a blocked team-mate when they cannot delay it, i.e.
they are expected to finish before the blocked job could start anyway (EASY backfilling)."""

from __future__ import annotations

from ..explain import estimate_start
from .common import PLACED, ordered, try_place


def backfill(session) -> None:
    held = [j for j in session.waiting() if j.id in session.blocked_behind]
    shadows: dict[str, float | None] = {}
    for job in ordered(session, held):
        blocker = session.blocked_behind[job.id]
        if blocker not in shadows:
            shadows[blocker] = estimate_start(session, session.jobs[blocker])
        shadow = shadows[blocker]
        # No estimate means waiting will not help the blocker: holding others back is useless.
        if shadow is not None and session.now + job.expected_runtime_s > shadow:
            continue
        if try_place(session, job, allow_borrow=True) == PLACED:
            del session.blocked_behind[job.id]
