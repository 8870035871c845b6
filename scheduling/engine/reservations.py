"""Reservations (EASY backfilling): capacity held for a blocked job until it is expected to
fit. A reservation names the GPUs it holds and when they should all be free (`at`, from the
running jobs' expected ends). Held GPUs take no new work from jobs of the holder's class or
below, except (backfill) a job expected to end before `at`. Higher classes ignore it, so
production inference still always wins.

The book masks and unmasks GPUs in the session: a masked GPU is not `usable`, so every
placement index skips it without the placement code knowing about reservations.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .session import Session
    from .state import GpuKey, GpuState, NodeState
    from .types import Job


@dataclass
class Reservation:
    holder: str
    team: str
    priority: int
    at: float
    gpus: list[GpuState] = field(default_factory=list)

    @property
    def nodes(self) -> list[str]:
        return sorted({gpu.node.name for gpu in self.gpus})


class Book:
    def __init__(self, session: Session):
        self.session = session
        self.items: list[Reservation] = []
        self.by_holder: dict[str, Reservation] = {}
        self.taken: set[GpuKey] = set()  # keys of GPUs some reservation holds
        self.masked: set[str] = set()  # holders whose GPUs are masked now
        self.level_at: float | None = None

    def __bool__(self) -> bool:
        return bool(self.items)

    def add(self, res: Reservation) -> None:
        self.items.append(res)
        self.by_holder[res.holder] = res
        self.taken.update(gpu.key for gpu in res.gpus)
        self._mask(res)

    def drop(self, res: Reservation) -> None:
        if res.holder in self.masked:
            self._unmask(res)
        self.items.remove(res)
        del self.by_holder[res.holder]
        self.taken.difference_update(gpu.key for gpu in res.gpus)

    def level(self, priority: float) -> None:
        """Mask exactly the reservations that bind a job of this priority (holder class or
        above it)."""
        if priority == self.level_at:
            return
        self.level_at = priority
        for res in self.items:
            if res.priority >= priority and res.holder not in self.masked:
                self._mask(res)
            elif res.priority < priority and res.holder in self.masked:
                self._unmask(res)

    def active(self) -> list[Reservation]:
        return [r for r in self.items if r.holder in self.masked]

    @contextmanager
    def seen_by(self, job: Job, holder: Job | None = None) -> Iterator[None]:
        """The reservations that bind `job` masked, as its placement must see them, except the
        one held by `holder` (default: the job itself), which it may use."""
        self.level(job.priority)
        own = self.by_holder.get((holder or job).id)
        with self.lifted([own] if own is not None else []):
            yield

    @contextmanager
    def lifted(self, reservations: Iterable[Reservation]) -> Iterator[None]:
        """Unmask these reservations for one tentative placement."""
        lifted = [r for r in reservations if r.holder in self.masked]
        for res in lifted:
            self._unmask(res)
        try:
            yield
        finally:
            for res in lifted:
                if res.holder in self.by_holder:
                    self._mask(res)

    def _mask(self, res: Reservation) -> None:
        self._set(res, res.holder)
        self.masked.add(res.holder)

    def _unmask(self, res: Reservation) -> None:
        self._set(res, None)
        self.masked.discard(res.holder)
        self.session.releases += 1  # capacity came back: earlier no-fit answers are stale

    def _set(self, res: Reservation, holder: str | None) -> None:
        nodes: dict[str, NodeState] = {}
        for gpu in res.gpus:
            gpu.reserved = holder
            self.session.reindex_gpu(gpu)
            nodes[gpu.node.name] = gpu.node
        for node in nodes.values():
            self.session.reindex_node(node)
