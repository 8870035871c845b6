"""The catalogue of codes for why a job waits, and why a running job is asked to stop.

These strings cross every boundary (engine -> Job.pending_reason_code -> pages, the API's OpenAPI
schema, ActionRequest payloads -> workers), so each is defined once, here, with its meaning.
"""

from __future__ import annotations

from enum import StrEnum


class _Coded(StrEnum):
    """A code and a one-line meaning: `Member = "code", "meaning"`."""

    meaning: str

    # `meaning` has a default only so that a lookup by code, `WaitingReason("no-slice")`, type-checks.
    def __new__(cls, code: str, meaning: str = "") -> _Coded:
        member = str.__new__(cls, code)
        member._value_ = code
        member.meaning = meaning
        return member

    @classmethod
    def choices(cls) -> list[tuple[str, str]]:
        """(code, meaning) pairs, for model fields and API serializers."""
        return [(member.value, member.meaning) for member in cls]


class WaitingReason(_Coded):
    NEW = "new", "Submitted; no scheduling cycle has looked at it yet."
    BURST_LIMIT = "burst-limit", "Starting it would take its team beyond the team's burst limit."
    FAIR_SHARE = "fair-share", "Its team already holds its fair share of the idle GPUs lent out this cycle."
    QUOTA_NO_IDLE = "quota-no-idle", "Its team uses its whole guarantee and no GPU is idle to borrow."
    PARTIAL = "partial", "Only some of its members found a place (the policy has no gang scheduling)."
    WAITING_FOR_PREEMPTION = "waiting-for-preemption", "Jobs were asked to stop to make room for it."
    WAITING_FOR_CONSOLIDATION = "waiting-for-consolidation", "Jobs are moving elsewhere to make room for it."
    RESERVED = "reserved", "It holds a reservation on GPUs expected to free up; it starts then."
    NO_SUCH_GPU = "no-such-gpu", "It asks for GPU models the cluster does not have."
    GPU_MEMORY = "gpu-memory", "It needs more memory per GPU than any GPU it may use has."
    NO_GANG_GROUP = "no-gang-group", "No group of nodes under one switch has room for all its members."
    GANG_INCOMPLETE = "gang-incomplete", "Fewer of its pods exist than its pod group's minMember; none starts before."
    PODS_GONE = "pods-gone", "Its pods were stopped (preempted, evicted, node lost); it waits for new ones."
    HOST_RESOURCES = "host-resources", "Nodes with enough free GPUs lack the CPU cores or RAM it needs."
    TIER = "tier", "Only spot nodes have room; production inference and gangs without checkpoints avoid spot."
    NO_FREE_GPUS = "no-free-gpus", "Not enough free whole GPUs on any node it may use."
    REPARTITION_PENDING = "repartition-pending", "A GPU is being repartitioned to make a slice for it."
    NO_SLICE = "no-slice", "No MIG slice or GPU share that holds its memory need is free."
    NO_SHARING = "no-sharing", "No node it may use offers GPU sharing it can use (MPS, or time-slicing if allowed)."


class PreemptReason(_Coded):
    PREEMPT = "preempt", "Stopped for a job of a higher priority class."
    RECLAIM = "reclaim", "Stopped so another team gets back the guarantee it had lent out."
    CONSOLIDATE = "consolidate", "Moved: it restarts from its checkpoint elsewhere to make room for a bigger job."
    SPOT_RECLAIM = "spot-reclaim", "Its spot node is being taken back by the provider."
    CANCEL = "cancel", "Cancelled by its team: its pods stop, then its GPUs are free."


class IdleCause(_Coded):
    """Why a GPU (or the free part of one) stands idle after a cycle (scheduling/engine/idle.py)."""

    NOTHING_WAITING = "nothing-waiting", "No waiting job may use its GPU model and tier."
    NOTHING_FITS = "nothing-fits", ("Jobs that may use it wait, but each needs more free GPUs on "
                                    "one node, or more free nodes, than there are.")
    RESERVED = "reserved", "Held for a blocked job's reservation; nothing short enough to backfill."
    PREEMPTION_PENDING = "preemption-pending", "Held for a job whose victims are still stopping."
    QUOTA = "quota", "The job that would use it is at its team's quota or burst limit."
    TIER = "tier", "Only jobs kept off its tier would fit (production, or gangs without checkpoints, on spot)."
    GPU_MODEL = "gpu-model", "Only jobs that name other GPU models would fit."
    MIG_LAYOUT = "mig-layout", ("Its MIG layout (or whole mode) has no slice of the shape a job needs, "
                                "or MIG GPUs on its node leave too few whole GPUs for one.")
    TOPOLOGY = "topology", "Enough nodes are free for a gang, but not under one switch."
    NO_SHARING = "no-sharing", "The job that would use it needs a share its node's device plugin does not offer."
    HOST_RESOURCES = "host-resources", "The job that would use it lacks CPU cores or RAM on its node."
    PARTIAL = "partial", "Held by a job only some of whose members found a place (no gang scheduling)."
    SETTLING = "settling-repartition", "A repartition of it is not confirmed yet."
    MIG_RECONFIGURING = "mig-reconfiguring", "Its node is being reconfigured by mig-manager (pods stopped)."
    NODE_DRAINING = "node-draining", "Its node is draining (a spot reclaim notice): no new work."
    NODE_DOWN = "node-down", "Its node is not ready, or the GPU is unhealthy or has a faulty layout."
