"""Nomination: what a preemptor's victims free is held for it until it binds (baselines only).

Models kube-scheduler's `status.nominatedNodeName`. When DefaultPreemption evicts victims for a
pod it nominates the pod to that node; until the pod binds, every pod of equal or lower priority
is filtered as if the nominated pod already ran there (the framework's addGENominatedPods adds
nominated pods whose priority is >= the pod being scheduled), so a lower class cannot take the
room while the preemptor waits for its victims' graceful termination. A higher class may: it
then clears the lower nominations on that node (DefaultPreemption's
getLowerPriorityNominatedPods). The nomination goes when the pod binds or is deleted, and a
later preemption attempt replaces it (or clears it when it finds no room). Kueue holds a
pending preemptor's quota the same way: the scheduler adds its usage to the cohort's cycle
usage "even if the workload will not be admitted ... due to preemption pending", so workloads
after it in the cycle (priority, then creation) cannot use it. Volcano's allocate pipelines a
job's tasks onto resources still being released (FutureIdle; nominatedNodeName first, PR #4588)
in priority order. Sources: docs/reference/baselines.md.

Here a nomination is the set of whole GPUs the preemptor would take once its victims stop (a
probe placement when it preempts), for a gang over all its nodes. The plan returns the ones in
force; the backend keeps them and hands them back in the next snapshot, as the API server keeps
the field. At the start of a cycle each becomes a reservation in the session's book
(reservations.py masks it for the holder's class and below, never for a higher class). A
reclaim (a team under its guarantee taking back what others borrowed, whatever their class)
holds against its victims' class too: Kueue orders workloads within nominal quota before
borrowing ones, so a borrower cannot be re-admitted into what the reclaimer waits for. It is
dropped when the job is no longer pending (bound or gone), when one of its GPUs is held by work
that is not stopping (a higher class took it: the job no longer fits there), and replaced when
the job nominates again. Left out: sub-GPU requests (a MIG slice or share) are not nominated.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .placement import place_job
from .reservations import Reservation
from .statement import Statement
from .types import GpuRef, Nomination

if TYPE_CHECKING:
    from .session import Session
    from .state import GpuState
    from .types import Job


def load(session: Session) -> None:
    """The snapshot's nominations that still hold, as reservations in the book."""
    if not session.features.nominate:
        return
    waiting = {job.id: job for job in session.waiting()}
    for nomination in session.snapshot.nominations:
        job = waiting.get(nomination.job_id)
        gpus = _held(session, nomination.gpus)
        if job is not None and gpus:
            _hold(session, job, gpus, nomination.priority)


def _held(session: Session, refs: tuple[GpuRef, ...]) -> list[GpuState]:
    """The nominated GPUs, or [] when one is gone, unhealthy, in MIG mode, already held by
    another nomination, or runs work that is not stopping (the job no longer fits there)."""
    gpus = []
    for name, index in refs:
        node = session.nodes.get(name)
        if node is None or not node.ready:
            return []
        try:
            gpu = session.gpu(name, index)
        except KeyError:
            return []
        users = [gpu.whole_job] if gpu.whole_job else [job_id for job_id, _ in gpu.shares]
        if (not gpu.healthy or gpu.mig_enabled or gpu.key in session.book.taken
                or any(u not in session.preempting for u in users)):
            return []
        gpus.append(gpu)
    return gpus


def _hold(session: Session, job: Job, gpus: list[GpuState], priority: int) -> None:
    book = session.book
    book.add(Reservation(job.id, job.team, priority, session.now, gpus))
    book.level_at = None  # the new mask must be re-levelled for the next placement
    session.nominations[job.id] = Nomination(job_id=job.id, priority=priority,
                                             gpus=tuple((gpu.node.name, gpu.index) for gpu in gpus))


def nominate(session: Session, job: Job, victims: list[str], priority: int) -> None:
    """Nominate to `job` the whole GPUs it would take once `victims` stop, held against jobs of
    `priority` and below; a nomination held below that on any of them is cleared, the job's own
    earlier one replaced."""
    if not session.features.nominate:
        return
    book = session.book
    own = book.by_holder.get(job.id)
    if own is not None:
        book.drop(own)
        session.nominations.pop(job.id, None)
    gpus = _probe(session, job, victims)
    keys = {gpu.key for gpu in gpus}
    for res in [r for r in book.items if r.priority < priority and keys & {g.key for g in r.gpus}]:
        book.drop(res)
        session.nominations.pop(res.holder, None)
    if gpus:
        _hold(session, job, gpus, priority)


def _probe(session: Session, job: Job, victims: list[str]) -> list[GpuState]:
    """Whole GPUs `job` is placed on with `victims` stopped, as its placement sees the book."""
    stmt = Statement(session)
    try:
        with session.book.seen_by(job):
            for victim in victims:
                stmt.evict(victim)
            if not place_job(session, job, stmt):
                return []
            return [session.gpu(m.node, a.gpu_index) for m in stmt.allocated
                    for a in m.allocations if a.kind == "whole"]
    finally:
        stmt.discard()


def in_force(session: Session) -> tuple[Nomination, ...]:
    """Nominations for the next snapshot: those of jobs still waiting."""
    return tuple(n for job_id, n in sorted(session.nominations.items())
                 if job_id not in session.placed and job_id not in session.members)
