"""Capacity tiers: which tiers a job may use, best first.

Reserved capacity is paid for whether used or not, so it comes first for everything but
checkpointing training; on-demand is the burst; spot is cheap but can be taken back.
"""

from __future__ import annotations

from .types import TIERS, Job

RESERVED_FIRST = ("reserved", "on-demand", "spot")
NEVER_SPOT = ("reserved", "on-demand")  # production inference; gangs that do not checkpoint
SPOT_FIRST = ("spot", "reserved", "on-demand")  # a reclaim costs it at most one checkpoint interval


def tier_order(job: Job, tiers_on: bool) -> tuple[str, ...]:
    """Production inference never goes to spot (reserved first, then on-demand), nor does a gang
    that does not checkpoint: a reclaim of any one of its nodes stops every member, and all of
    them lose everything since start. Training that checkpoints prefers spot, since a reclaim
    costs it at most one interval; everything else takes reserved, then on-demand, and spot only
    as the last resort (a single pod that does not checkpoint risks only its own work there)."""
    if not tiers_on:
        return TIERS
    if job.production or (job.gang_size > 1 and not job.checkpoints):
        return NEVER_SPOT
    if job.checkpoints and job.preemptible and job.kind in ("training", "batch"):
        return SPOT_FIRST
    return RESERVED_FIRST


def why_not_spot(job: Job) -> str:
    """The rule that keeps `job` off spot, in the words of a wait reason."""
    if job.production:
        return "production inference never runs on spot"
    return "a gang that does not checkpoint never runs on spot (one reclaimed node would stop every member)"
