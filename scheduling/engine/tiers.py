"""Capacity tiers: which tiers a job may use, best first."""

from __future__ import annotations

from .types import TIERS, Job

ON_DEMAND_FIRST = ("reserved", "on-demand", "spot")


def tier_order(job: Job, tiers_on: bool) -> tuple[str, ...]:
    """Production inference never goes to spot (reserved first, then on-demand); training that
    checkpoints prefers spot, since a reclaim costs it at most one interval; everything else
    takes reserved, then on-demand, and spot only as the last resort."""
    if not tiers_on:
        return TIERS
    if job.production:
        return ("reserved", "on-demand")
    if job.checkpoints and job.preemptible and job.kind in ("training", "batch"):
        return ("spot", "reserved", "on-demand")
    return ON_DEMAND_FIRST
