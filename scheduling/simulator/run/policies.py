"""Policies the run experiment compares, and what the simulated backend must know of each.

`timeslice` is not an engine policy of its own: it is the NVIDIA device plugin's time-slicing
on plain Kubernetes. Each GPU is advertised as REPLICAS interchangeable slots and a sub-GPU job
takes one slot, whatever its memory. The engine's memory-bounded `sharing` plugin models it
when the backend presents a sub-GPU job as asking for 1/REPLICAS of a GPU and almost no memory;
the backend then checks the real memory and fails a job that does not fit with out-of-memory.
"""

from __future__ import annotations

from dataclasses import dataclass

from scheduling.engine.features import Features
from scheduling.engine.policies import POLICIES, Policy, get_policy

REPLICAS = 4          # time-slicing replicas per GPU (the device plugin's usual setting)
TIMESLICE = "timeslice"

# Throughput of a sub-GPU job by how it shares its GPU (docs/reference/performance-figures.md §5): a MIG instance
# is isolated; a memory-bounded share (MPS-like) loses ~7.5%; time-slicing ~25% (MIG 1.33x).
SHARE_EFFICIENCY = {"mig": 1.0, "share": 0.925, "timeslice": 0.75}

if TIMESLICE not in POLICIES:
    # Plain Kubernetes with time-slicing: no gangs, MIG, quotas or topology; packs shared GPUs.
    POLICIES.register(TIMESLICE, Policy(name=TIMESLICE, features=Features(sharing=True, packing="binpack"),
                                        actions=("allocate",)))


# Policies whose serving counts against its team's namespace ResourceQuota together with that
# team's training (the straw man of issue 12, kept as a floor). Every other policy without the
# engine's quotas gives serving a namespace and quota of its own, as real clusters do.
SERVING_IN_TEAM_QUOTA = frozenset({"k8s-naive"})


@dataclass(frozen=True)
class Mode:
    name: str
    gang: bool        # False: a job's members are separate pods, placed one by one
    mig: bool         # GPUs may start in MIG mode
    quota: bool       # the engine enforces quotas; else the backend caps teams at burst_limit
    timeslice: bool   # memory-ignorant slots; the backend checks memory (OOM)
    whole: bool       # integer GPUs: a sub-GPU pod takes (and counts as) a whole GPU
    serving_apart: bool  # production serving is outside its team's namespace quota


def mode_for(name: str) -> Mode:
    features, _ = get_policy(name).build()
    return Mode(name=name, gang=features.gang, mig=features.mig, quota=features.quota,
                timeslice=name == TIMESLICE, whole=not (features.mig or features.sharing),
                serving_apart=name not in SERVING_IN_TEAM_QUOTA)


def known_policies() -> tuple[str, ...]:
    return POLICIES.names()
