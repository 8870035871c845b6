"""A statement: tentative operations on the session that can be rolled back.

Each operation stores how to reverse itself. `discard()` undoes them in reverse order;
`commit()` turns the allocations into Bind actions. A gang is placed inside one statement, so a
half-placed gang is discarded whole and holds nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import partial
from typing import TYPE_CHECKING

from .plan import Allocation, Bind
from .state import Member, NodeState
from .types import Job

if TYPE_CHECKING:
    from .session import Session


class Statement:
    def __init__(self, session: Session):
        self.session = session
        self.allocated: list[Member] = []
        self.evicted: list[Member] = []
        self._undo: list[Callable[[], None]] = []

    def allocate(self, job: Job, member: int, node: NodeState, allocations: Iterable[Allocation]) -> Member:
        placed = Member(job.id, job.team, job, node.name, allocations, False,
                        self.session.now, member, new=True)
        self.session.occupy(placed)
        self.allocated.append(placed)
        self._undo.append(lambda: self.session.release(placed, undo=True))
        return placed

    def evict(self, job_id: str) -> list[Member]:
        """Release every member of a job (a gang is stopped whole)."""
        members = list(self.session.members.get(job_id, ()))
        for member in members:
            self.session.release(member)
            self.evicted.append(member)
            self._undo.append(partial(self.session.occupy, member))
        return members

    @property
    def units(self) -> float:
        return sum(m.units for m in self.allocated)

    def discard(self) -> None:
        while self._undo:
            self._undo.pop()()
        self.allocated.clear()
        self.evicted.clear()

    def commit(self, borrowed: bool = False) -> list[Bind]:
        """Make the allocations real: they become Bind actions of the plan."""
        if self.evicted:
            raise RuntimeError("evictions are never committed; plan a Preempt instead")
        binds = []
        for member in self.allocated:
            member.borrowed = borrowed
            binds.append(Bind(job_id=member.job_id, team=member.team, member=member.member,
                              node=member.node, allocations=member.allocations,
                              borrowed=borrowed))
            self.session.placed.add(member.job_id)
        self.session.binds.extend(binds)
        self._undo.clear()
        self.allocated = []
        return binds
