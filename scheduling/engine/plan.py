"""What a cycle decides: the plan and its actions.

The same Bind / Preempt / Repartition types come back in the next snapshot as `in_flight`
until the backend confirms them, so like the snapshot's types they have no defaults.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .reasons import PreemptReason, WaitingReason


@dataclass(frozen=True, kw_only=True, slots=True)  # slots: as the snapshot's types (types.py)
class Allocation:
    """What one job member holds on one GPU: a whole GPU (milli=1000, no MIG), a MIG instance
    (mig_profile + mig_start), or a share (milli < 1000 with memory_gb on a non-MIG GPU)."""

    gpu_index: int
    milli: int
    memory_gb: float
    mig_profile: str | None
    mig_start: int | None

    def __post_init__(self) -> None:
        if (self.mig_profile is None) != (self.mig_start is None):
            raise ValueError(f"a MIG allocation names both its profile and its start slot: {self}")

    @property
    def kind(self) -> str:
        if self.mig_profile is not None:
            return "mig"
        return "whole" if self.milli >= 1000 else "share"


@dataclass(frozen=True, kw_only=True)
class Bind:
    """Start member `member` of job `job_id` on `node` with these allocations. A MIG
    allocation whose instance does not exist yet asks the binder to create it at that start
    slot (it touches only free memory slices). `borrowed`: the job runs beyond its team's
    guarantee and is the first to be reclaimed."""

    job_id: str
    team: str
    member: int
    node: str
    allocations: tuple[Allocation, ...]
    borrowed: bool


@dataclass(frozen=True, kw_only=True)
class Preempt:
    """Stop `job_id` (all its members) so that `for_job_id` can start in a later cycle.
    `reason` is reclaim (guarantee owed to another team), preempt (higher class) or consolidate
    (a move); a spot reclaim the workers started comes back in flight with no `for_job_id`."""

    job_id: str
    for_job_id: str | None
    reason: PreemptReason


@dataclass(frozen=True, kw_only=True)
class Repartition:
    """Set GPU `gpu_index` of `node` to MIG mode `mig_enabled` with this layout of
    (profile name, start slot) instances. Only planned when every instance it removes is idle."""

    node: str
    gpu_index: int
    mig_enabled: bool
    layout: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class PendingInfo:
    """Why a job still waits: a reason code, a sentence for a team lead, an estimated start
    (None = cannot tell), and its queue positions (1-based)."""

    job_id: str
    reason: WaitingReason
    message: str
    eta: float | None
    team_position: int
    overall_position: int


_new = object.__new__


def pending_info(job_id: str, reason: WaitingReason, message: str, eta: float | None, team_position: int,
                 overall_position: int) -> PendingInfo:
    """PendingInfo(...), the same object, made without the frozen dataclass's __init__ (a guarded
    setattr per field: 2.2 against 1.2 us, and explain makes one per waiting job)."""
    info = _new(PendingInfo)
    info.__dict__.update(job_id=job_id, reason=reason, message=message, eta=eta, team_position=team_position,
                         overall_position=overall_position)
    return info


@dataclass(frozen=True)
class Plan:
    policy: str
    binds: tuple[Bind, ...] = ()
    preemptions: tuple[Preempt, ...] = ()
    repartitions: tuple[Repartition, ...] = ()
    pending: dict[str, PendingInfo] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    # "node/index" -> why its MIG layout is invalid: those GPUs took no work this cycle.
    faulty_gpus: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # Nominations in force after this cycle (types.Nomination): the backend hands them back in
    # the next snapshot. Empty unless the policy nominates (Features.nominate).
    nominations: tuple = ()
    # (node, GPU index) -> why its free capacity stands idle (idle.py); only when asked for.
    idle: dict[tuple[str, int], str] = field(default_factory=dict)

    @property
    def actions(self) -> tuple:
        return self.binds + self.preemptions + self.repartitions
