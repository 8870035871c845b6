"""Explanations for every job left waiting: a reason code, a sentence a team lead understands
(with the counterfactual where there is one), an estimated start and queue positions.

The estimate is a dry run of the queue on the GPU models the job may use (QueuePlan): running
jobs end as expected, the jobs ahead of it start in order and hold their units for their own
expected runtimes, and the job starts once enough units are free.
"""

from __future__ import annotations

import bisect
from typing import TYPE_CHECKING

from .actions.common import min_units, overall_key, request_shape, sorted_jobs, team_key
from .memory import smallest_profile
from .mig import canonical_model, geometry_for
from .placement import Models, allowed_models, as_whole, model_memory
from .plan import PendingInfo, pending_info
from .reasons import WaitingReason
from .sharing import no_sharing_reason
from .supply import release_curve
from .tiers import tier_order, why_not_spot
from .types import Job
from .wording import gpu_count, gpus, wait

if TYPE_CHECKING:
    from .reservations import Reservation
    from .session import Session

Reason = tuple[WaitingReason, str]  # a code and the sentence a team lead reads


# The dry run's bounds (see QueuePlan): jobs planned per model set, beyond which a job is told
# "cannot tell" (an estimate that far down the queue is noise, and each costs O(steps)); steps
# of running jobs' releases.
PLANNED_JOBS = 128
PROFILE_STEPS = 128


class QueuePlan:
    """A dry run of the queue on one set of GPU models, for start estimates.

    Running jobs end when they expect to; each waiting job, in queue order, is booked at the
    earliest time its units stay free for its whole expected runtime, and holds them for it
    (conservative backfill: a small job may go before a big one ahead if it does not delay it).
    So an estimate counts the jobs ahead and when they in turn finish, not only what runs now.
    `times[i]`, `free[i]`: units free from times[i] until times[i + 1] (the last one forever).
    """

    def __init__(self, session: Session, models: Models) -> None:
        free, self.total, ends, cumulative = release_curve(session, models)
        self.now = session.now
        self.booked = 0
        # At most PROFILE_STEPS steps of releases: each group counts from its last end (later, never
        # earlier, than the truth), so a thousand-node cluster costs what a small one does.
        group = max(1, -(-len(ends) // PROFILE_STEPS))
        steps = list(range(group - 1, len(ends), group))
        if ends and (not steps or steps[-1] != len(ends) - 1):
            steps.append(len(ends) - 1)
        self.times = [self.now] + [max(ends[k], self.now) for k in steps]
        self.free = [free] + [free + cumulative[k] for k in steps]

    def start(self, need: float, runtime_s: float, not_before: float | None = None) -> float | None:
        """When a job needing `need` units would start (not before `not_before`), booking them;
        None when it cannot tell."""
        if self.total < need - 1e-9 or self.booked >= PLANNED_JOBS:
            return None
        at = max(self.now, not_before if not_before is not None else self.now)
        i = max(0, bisect.bisect_right(self.times, at) - 1)
        while (blocked := self._blocked(i, at, need, runtime_s)) is not None:
            i = blocked + 1
            if i == len(self.times):
                return None
            at = self.times[i]
        if at <= self.now:
            # Enough units now, yet it waits (their shape, say): the next release may do.
            later = [t for t in self.times if t > self.now]
            if not later:
                return None
            at = later[0]
        self._book(at, at + runtime_s, need)
        self.booked += 1
        return at

    def _blocked(self, i: int, start: float, need: float, runtime_s: float) -> int | None:
        """The first step from i, before start + runtime, without `need` units free; None if none."""
        j = i
        while j < len(self.times) and self.times[j] < start + runtime_s:
            if self.free[j] < need - 1e-9:
                return j
            j += 1
        return None

    def _book(self, start: float, end: float, need: float) -> None:
        for moment in (start, end):
            k = bisect.bisect_left(self.times, moment)
            if k == len(self.times) or self.times[k] != moment:
                self.times.insert(k, moment)
                self.free.insert(k, self.free[k - 1])
        for k in range(bisect.bisect_left(self.times, start), bisect.bisect_left(self.times, end)):
            self.free[k] -= need


def _team_frees_room(session: Session, job: Job, team_ends: dict[str, list[tuple[float, float]]]) -> float | None:
    """When the team's own running jobs, ending as expected, leave room under its burst limit.
    `team_ends`: (expected end, units) of each team's running members, sorted, filled on first use."""
    limit = session.queue(job.team).burst_limit_gpus
    if limit is None:
        return session.now
    excess = session.usage.get(job.team, 0.0) + min_units(session, job) - limit
    if excess <= 1e-9:
        return session.now
    ends = team_ends.get(job.team)
    if ends is None:
        ends = team_ends[job.team] = sorted(
            (m.started_at + m.job.expected_runtime_s, m.units) for m in
            (m for members in session.members.values() for m in members)
            if m.team == job.team and m.job is not None)
    for end, units in ends:
        excess -= units
        if excess <= 1e-9:
            return max(end, session.now)
    return None


def _largest_free_group(session: Session, job: Job, models: Models) -> tuple[int, int]:
    """(largest free whole-GPU group on one node, same on tiers the job may not use)."""
    allowed = tier_order(job, session.features.tiers)
    best = other = 0
    for (model, tier), buckets in session.whole.items():
        if model in models:
            level = max((k for k, v in buckets.items() if v), default=0)
            if tier in allowed:
                best = max(best, level)
            else:
                other = max(other, level)
    return best, other


def _node_word(session: Session, models: Models) -> str:
    """Per model set, cached: every waiting whole-GPU job asks, and the nodes are fixed for the cycle."""
    word = session.node_words.get(models)
    if word is None:
        kinds = {n.node.interconnect for n in session.nodes.values() if n.model in models}
        word = session.node_words[models] = "one NVSwitch node" if kinds == {"nvswitch"} else "one node"
    return word


def _no_model(session: Session, job: Job) -> Reason:
    memory = model_memory(session)
    wanted = {canonical_model(m) for m in job.gpu_models}
    present = [m for m in memory if not wanted or m in wanted]
    if not present:
        return (WaitingReason.NO_SUCH_GPU, f"asks for {', '.join(job.gpu_models)}; the cluster has none")
    largest = max(memory[m] for m in present)
    return (WaitingReason.GPU_MEMORY, f"needs {job.gpu_memory_gb:g} GB per GPU; the largest allowed GPU "
            f"has {largest:g} GB")


def _whole_reason(session: Session, job: Job, models: Models) -> Reason:
    count, members = job.gpus or 1, job.gang_size
    total = count * members
    best, other = _largest_free_group(session, job, models)
    names = "/".join(models)
    if members > 1 and total > session.max_gpus_per_node and session.features.gang:
        allowed = tier_order(job, session.features.tiers)
        # A gang group is of one GPU model (placement/whole.py): fully free nodes per model, on
        # tiers it may use and on the others; one free node of each of two models is no group.
        free: dict[str, dict[bool, int]] = {}
        for (m, tier), buckets in session.whole.items():
            if m in models:
                per_model = free.setdefault(m, {True: 0, False: 0})
                per_model[tier in allowed] += len(buckets.get(session.max_gpus_per_node, {}))
        counts = [(f[True], f[False]) for f in free.values()] or [(0, 0)]
        for usable, banned in counts:
            if usable < members <= usable + banned:
                return (WaitingReason.TIER, f"{why_not_spot(job)}; {banned} of the {usable + banned} fully "
                        "free nodes are spot")
        of_one = " of one model" if len(models) > 1 else ""
        return (WaitingReason.NO_GANG_GROUP, f"needs {members} × {gpu_count(count, names)} on nodes{of_one} "
                f"under one leaf switch; {max(u for u, _ in counts)} fully free nodes{of_one} now")
    if best >= total:
        return (WaitingReason.HOST_RESOURCES, f"needs {job.cpu_cores:g} CPU cores and {job.memory_gb:g} GB "
                f"RAM beside its GPUs; no node with {gpu_count(total, free=True)} has that much left")
    if other >= total:  # `other` counts only tiers the job may not use
        return (WaitingReason.TIER, f"{why_not_spot(job)}; only spot nodes have "
                f"{gpu_count(total, names, free=True)}")
    return (WaitingReason.NO_FREE_GPUS, f"needs {gpu_count(total, names)} on {_node_word(session, models)}; "
            f"the largest free group is {best}")


def _slice_reason(session: Session, job: Job, models: Models) -> Reason:
    refused = no_sharing_reason(session, job, models)
    if refused is not None:
        return refused
    slices = []
    for model in models:
        geometry = geometry_for(model)
        profile = geometry and session.features.mig and smallest_profile(geometry, job.gpu_memory_gb,
                                                                            job.mig_profile)
        slices.append(f"{profile.name} on {model}" if profile else f"a share of a {model}")
    planned = {r.node for r in session.repartitions if r.mig_enabled}
    planned |= session.settling_mig_nodes
    nodes = {n.name for n in session.nodes.values() if n.model in models}
    what = f"needs {job.gpu_memory_gb:g} GB of GPU memory ({'; '.join(slices[:3])})"
    if planned & nodes:
        return (WaitingReason.REPARTITION_PENDING, f"{what}; a GPU is being repartitioned for it and it "
                "starts once the new layout is confirmed")
    return (WaitingReason.NO_SLICE, f"{what}; no such slice or share is free")


def _in(session: Session, at: float) -> str:
    return wait(at - session.now, session.snapshot.clock_speed)


def _reservation_text(session: Session, job: Job, held: Reservation) -> str:
    nodes = held.nodes
    where = ", ".join(nodes[:4]) + (f" and {len(nodes) - 4} more" if len(nodes) > 4 else "")
    count = len(held.gpus)
    return (f"holds a reservation on {where} ({gpu_count(count)}), free "
            f"{_in(session, held.at)} when their running jobs are expected to end; meanwhile only jobs "
            "that finish before then may use them")


def _held_note(session: Session, job: Job, models: Models) -> str:
    """Free GPUs the job could use that reservations of its class or above hold, if any."""
    holders = {}
    for res in session.book.items:
        if res.priority >= job.priority and res.holder != job.id:
            free = sum(1 for g in res.gpus if g.node.model in models and g.whole_job is None
                       and not g.shares)
            if free:
                holders[res.holder] = (free, res.at)
    if not holders:
        return ""
    parts = [f"{n} held for {h}, which starts {_in(session, at)}" for h, (n, at) in sorted(holders.items())]
    return f"; free GPUs reserved for other jobs: {'; '.join(parts[:3])} (it would still be running)"


CONSOLIDATION_TEXT = ("jobs are moving to free GPUs elsewhere to make room; it starts once their GPUs "
                      "are released")


def diagnose(session: Session, job: Job, by_shape: dict[tuple[object, ...], Reason] | None = None) -> Reason:
    """Why the job waits. `by_shape`: reasons already worked out for jobs of the same request
    (sharing's isolation consent included), class and team, which wait for the same reason once
    the session no longer changes (explain)."""
    if job.id in session.reasons:
        return session.reasons[job.id]
    if job.id in session.consolidating:
        return (WaitingReason.WAITING_FOR_CONSOLIDATION, CONSOLIDATION_TEXT)
    if job.id in session.nominated:
        return (WaitingReason.WAITING_FOR_PREEMPTION, "jobs were asked to stop to make room; it starts "
                "once their GPUs are released")
    held = session.book.by_holder.get(job.id)
    if held is not None:
        return (WaitingReason.RESERVED, _reservation_text(session, job, held))
    if by_shape is None:
        return _capacity_reason(session, job)
    key = (request_shape(session, job), job.accepts_no_isolation, job.priority, job.team)
    reason = by_shape.get(key)
    if reason is None:
        reason = by_shape[key] = _capacity_reason(session, job)
    return reason


def _capacity_reason(session: Session, job: Job) -> Reason:
    """What the job lacks: a GPU model, free GPUs or slices of its shape, its team's quota."""
    models = allowed_models(session, job)
    if not models:
        return _no_model(session, job)
    code, text = (_whole_reason if as_whole(session, job) else _slice_reason)(session, job,
                                                                              models)
    if session.book and as_whole(session, job):
        text += _held_note(session, job, models)
    if session.features.quota:
        q = session.queue(job.team)
        used = session.usage.get(job.team, 0.0)
        idle = release_curve(session, models)[0]
        # Only when there truly is nothing idle to borrow; otherwise the shape reason stands.
        if q.guaranteed_gpus > 0 and used >= q.guaranteed_gpus - 1e-9 and idle <= 1e-9:
            text = (f"team quota {gpus(used)}/{gpus(q.guaranteed_gpus)} GPUs in use and no idle GPU "
                    f"to borrow: {text}")
            code = WaitingReason.QUOTA_NO_IDLE
    return code, text


def explain(session: Session) -> dict[str, PendingInfo]:
    """PendingInfo for every job still waiting, keyed by job id."""
    waiting = session.waiting()  # the same filter, kept since the last action asked
    overall = sorted_jobs(waiting, overall_key)
    team_rank: dict[str, int] = {}
    ahead: dict[str, int] = {}  # jobs of each team counted so far
    for job in sorted_jobs(waiting, team_key):
        team_rank[job.id] = ahead[job.team] = ahead.get(job.team, 0) + 1
    plans: dict[Models, QueuePlan] = {}
    by_shape: dict[tuple[object, ...], Reason] = {}
    team_ends: dict[str, list[tuple[float, float]]] = {}
    infos = {}
    # Once per waiting job (15,952 in the 4,000-node steady cycle): what diagnose asks first, and
    # its answer for the jobs an earlier one of their kind answered, are looked up here.
    decided, by_holder, shapes = session.reasons, session.book.by_holder, session.shapes
    asked = session.consolidating.union(session.nominated)
    now = session.now
    models_of: dict[int, Models] = {}  # allowed_models per request shape (it reads only shape fields)
    for position, job in enumerate(overall, start=1):
        job_id = job.id
        shape = shapes.get(job_id)
        known = models_of.get(shape) if shape is not None else None
        key = known if known is not None else allowed_models(session, job)
        if known is None and shape is not None:
            models_of[shape] = key
        reason = None
        if shape is not None and job_id not in decided and job_id not in asked and job_id not in by_holder:
            reason = by_shape.get((shape, job.accepts_no_isolation, job.priority, job.team))
        code, text = reason if reason is not None else diagnose(session, job, by_shape)
        held = by_holder.get(job_id)
        plan = plans.get(key) or plans.setdefault(key, QueuePlan(session, key))
        # A job at its team's burst limit starts when its team frees room, and books units from then.
        not_before = _team_frees_room(session, job, team_ends) if code == WaitingReason.BURST_LIMIT \
            else now
        # A plan that booked PLANNED_JOBS tells no more (start says None): not asked, as its
        # argument costs a lookup per job and most of a long queue is past that point.
        eta = plan.start(min_units(session, job), job.expected_runtime_s, not_before) \
            if key and not_before is not None and plan.booked < PLANNED_JOBS else None
        if held is not None:
            eta = held.at
        infos[job_id] = pending_info(job_id, code, text, eta, team_rank[job_id], position)
    return infos

