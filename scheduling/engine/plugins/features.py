"""What a policy turns on. Plugins set these fields when a policy is built; the placement
code and the actions read them. Frozen once built, so a cycle cannot change its own rules."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Features:
    gang: bool = False           # all members or none
    quota: bool = False          # guarantees, burst limits, borrowed marking
    fairshare: bool = False      # idle capacity lent by weight; teams served by weighted usage
    team_order: bool = False     # a team lead's order decides who in a team goes first
    reserve: bool = False        # blocked jobs reserve the GPUs that free earliest (backfill)
    topology: bool = False       # lowest all-reduce cost group for multi-GPU jobs
    tiers: bool = False          # reserved / on-demand / spot routing
    mig: bool = False            # sub-GPU jobs go to MIG instances
    sharing: bool = False        # sub-GPU jobs may share a non-MIG GPU (milli shares)
    share_mig_capable: bool = False  # ...also on MIG-capable GPUs in whole mode
    memory_aware: bool = False   # a job only goes where its memory need fits
    packing: str = "spread"      # "binpack" (fullest first) or "spread" (least allocated)
    options: dict = field(default_factory=dict)
    frozen: bool = False

    def __setattr__(self, name, value):
        if getattr(self, "frozen", False):
            raise AttributeError("features are frozen once the policy is built")
        super().__setattr__(name, value)

    def option(self, name: str, default):
        return self.options.get(name, default)
