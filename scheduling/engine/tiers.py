"""Capacity tiers: which tiers a job may use, best first.

Reserved capacity is paid for whether used or not, so it comes first for everything but
checkpointing training; on-demand is the burst; spot is cheap but can be taken back.
"""

from __future__ import annotations

from .types import TIERS, Job

RESERVED_FIRST = ("reserved", "on-demand", "spot")
NEVER_SPOT = ("reserved", "on-demand")  # production inference
SPOT_FIRST = ("spot", "reserved", "on-demand")  # a reclaim costs it at most one checkpoint interval


def tier_order(job: Job, tiers_on: bool) -> tuple[str, ...]:
    """Production inference never goes to spot (reserved first, then on-demand); training that
    checkpoints prefers spot, since a reclaim costs it at most one interval; everything else
    takes reserved, then on-demand, and spot only as the last resort."""
    if not tiers_on:
        return TIERS
    if job.production:
        return NEVER_SPOT
    if job.checkpoints and job.preemptible and job.kind in ("training", "batch"):
        return SPOT_FIRST
    return RESERVED_FIRST
