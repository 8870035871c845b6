"""What a policy turns on, and the limits its actions work within: one frozen dataclass.

There are no plugins. A policy is a name, these feature flags and limits, and the actions it runs
(policies.py). Every option is a named, typed field, so a misspelt one (`layot_min_age_s=...`) is
a TypeError when the module that writes it is imported, a wrong type (`gang="yes"`) or an unknown
packing a ValueError, and a cycle can never change its own rules (frozen).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Literal, get_args

Packing = Literal["binpack", "spread"]
# How preemption ranks victims after borrowed-first (actions/evict.py): "class" lowest class, then
# least work lost (what kube-scheduler, Kueue and Volcano do); "lost-work" least GPU-seconds lost
# since the last checkpoint, then lowest class, then shortest runtime (issue 18).
VictimOrder = Literal["class", "lost-work"]
# Which node a whole-GPU job or a share goes to among those that fit (placement/scored.py): "order"
# the first in index order (packing, tiers), else the named scorer of engine/fragment, the index
# order breaking its ties: "tessera" (FGD's fragmentation drop plus CPU-stranding, model-pressure
# and hole-pricing terms), or one of the FGD paper's: "fgd", "bestfit", "dotprod", "gpupacking",
# "gpuclustering".
PlacementScorer = Literal["order", "tessera", "fgd", "bestfit", "dotprod", "gpupacking", "gpuclustering"]
# Which of the nodes a placement scorer scores equal wins: "index" the first in index order (packing,
# tiers), "name" the first by node name, a fixed order unrelated to load, as kube-scheduler's
# seeded node order in the FGD artifact (`simulate fill` names its nodes by that permutation).
ScoreTies = Literal["index", "name"]
CHOICES = {"Packing": Packing, "VictimOrder": VictimOrder, "PlacementScorer": PlacementScorer,
           "ScoreTies": ScoreTies}


@dataclass(frozen=True, kw_only=True)
class Features:
    # --- what is on ------------------------------------------------------------------------------
    gang: bool = False           # all members or none
    quota: bool = False          # guarantees, burst limits, borrowed marking
    fairshare: bool = False      # idle capacity lent by weight; teams served by weighted usage
    fair_history: bool = False   # lending and reclaim ordered by decayed use over share (fair_history.py)
    team_order: bool = False     # within a team, the lead's order goes before submission time
    reserve: bool = False        # blocked jobs reserve the GPUs that free earliest (backfill)
    topology: bool = False       # lowest all-reduce cost group for multi-GPU jobs
    tiers: bool = False          # reserved / on-demand / spot routing
    mig: bool = False            # sub-GPU jobs go to MIG instances
    sharing: bool = False        # sub-GPU jobs may take a replica where a node's device plugin shares
    #                              (MPS, time-slicing: engine/sharing.py, the same rules for every policy)
    replica_or_whole: bool = False  # without MIG or sharing, a sub-GPU job asks one nvidia.com/gpu: a
    #                                 replica where a node's device plugin shares (renameByDefault:
    #                                 false advertises replicas under that name), else a whole GPU
    replica_counts_one: bool = False  # the engine's quota counts a replica as one GPU, as a quota on
    #                                   nvidia.com/gpu requests does (Kueue's ClusterQueue), not its share
    memory_aware: bool = False   # a job only goes where its memory need fits
    production_shares: bool = True  # production inference with no free slice shares a whole-mode
    #                                 GPU rather than taking a whole one (needs gang and sharing)
    slice_or_whole: bool = False  # a sub-GPU job not production that finds no slice while every GPU
    #                               in MIG mode of its models is full takes what production inference
    #                               takes (a share, else a whole GPU), on a node already running work,
    #                               rather than wait for a GPU to be carved (placement/__init__.py)
    packing: Packing = "spread"  # "binpack" (fullest first) or "spread" (least allocated)
    placement_scorer: PlacementScorer = "order"  # see PlacementScorer above
    score_ties: ScoreTies = "index"  # see ScoreTies above
    share_packing: Packing = "binpack"  # which sharable GPU a share goes to: the fullest, or the
    #                                     emptiest (the device plugin spreading time-slice replicas)
    priority_preemption: bool = False  # preempt may stop any lower-class pod, whatever its team or
    #                                    quota (kube-scheduler's DefaultPreemption)
    production_wins: bool = False  # production inference may stop any lower-class job, even
    #                                within another team's guarantee while its own is spent (evict.py)
    mig_static: bool = False     # only the MIG instances that exist are used: none is created
    share_production_only: bool = False  # only production inference shares GPUs (HAMi/MPS for serving)
    victim_order: VictimOrder = "class"  # see VictimOrder above
    nominate: bool = False       # the whole GPUs a preemptor will take are held for it against its
    #                              class and below until it binds (kube-scheduler's nominatedNodeName;
    #                              nominations.py). Baselines only: tessera's `reserve` does its own.

    # --- limits: how much work an action may do per cycle, and its thresholds ---------------------
    preempt_attempts: int = 24           # waiting jobs reclaim/preempt look for victims for
    min_runtime_s: float = 900.0         # a job (re)started this recently is stopped only for production
    patient_stop_s: float = 0.0          # a job not production that has waited less than this since it was
    #                                      submitted stops no victims losing more than `patient_max_lost_s`
    patient_max_lost_s: float = 57_600.0  # ... GPU-seconds of unsaved work together; it waits (evict.py)
    backfill_attempts: int = 64          # jobs backfill tries on reserved GPUs
    max_reservations: int = 8            # blocked jobs holding reservations at once
    layout_min_age_s: float = 600.0      # repartition hysteresis: a layout younger than this stays
    repartition_max_lost_s: float = 0.0  # a node's layout changes only if stopping its GPU pods (as
    #                                      mig-manager does, node-wide) loses at most this many GPU-seconds
    max_repartitions_per_cycle: int = 32  # repartitions of GPUs that still run work
    repartition_attempts: int = 64       # jobs no repartition helped before repartition gives up
    consolidate_attempts: int = 8        # blocked jobs consolidate looks for movers for
    consolidate_after_s: float = 1800.0  # consolidate only for a job that would wait longer than this
    scored_candidates: int = 64          # nodes a placement scorer scores per placement, in index
    #                                      order (placement/scored.py); 0: every node that fits

    def __post_init__(self) -> None:
        for spec in fields(self):
            value = getattr(self, spec.name)
            if spec.type in CHOICES:
                allowed = get_args(CHOICES[str(spec.type)])
                if value not in allowed:
                    raise ValueError(f"Features.{spec.name} is {value!r}; expected one of {allowed}")
                continue
            expected = {"bool": (bool,), "int": (int,), "float": (int, float)}[str(spec.type)]
            # bool is an int in Python; a number where a flag belongs (or the reverse) is a mistake.
            if not isinstance(value, expected) or (isinstance(value, bool) and spec.type != "bool"):
                raise ValueError(f"Features.{spec.name} is {value!r}; expected {spec.type}")
            if isinstance(value, int | float) and not isinstance(value, bool) and value < 0:
                raise ValueError(f"Features.{spec.name} is {value!r}; expected a number >= 0")
