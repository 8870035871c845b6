"""Policies the run experiment compares, and what the simulated backend must know of each.

`timeslice` is not an engine policy of its own: it is the NVIDIA device plugin's time-slicing
on plain Kubernetes. Each GPU is advertised as REPLICAS interchangeable slots and a sub-GPU job
takes one slot, whatever its memory. The engine's memory-bounded `sharing` plugin models it
when the backend presents a sub-GPU job as asking for 1/REPLICAS of a GPU and almost no memory;
the backend then checks the real memory and fails a job that does not fit with out-of-memory.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from scheduling.engine.mig import geometry_for
from scheduling.engine.policies import POLICIES, Policy, get_policy

REPLICAS = 4          # time-slicing replicas per GPU (the device plugin's usual setting)
TIMESLICE = "timeslice"

# Throughput of a sub-GPU job by how it shares its GPU (docs/reference/performance-figures.md §5): a MIG instance
# is isolated; a memory-bounded share (MPS-like) loses ~7.5%; time-slicing ~25% (MIG 1.33x).
SHARE_EFFICIENCY = {"mig": 1.0, "share": 0.925, "timeslice": 0.75}

if TIMESLICE not in POLICIES:
    K8S = POLICIES.get("k8s-default")
    POLICIES.register(TIMESLICE, Policy(
        name=TIMESLICE, features=replace(K8S.features, sharing=True, share_packing="spread"),
        actions=K8S.actions,
        doc="""k8s-default with the NVIDIA device plugin's time-slicing for sub-GPU pods.
        Models: a node's GPUs advertised as interchangeable slots where the cluster runs the
        device plugin sharing (time-slicing, or MPS, the node's replicas; every pod accepting
        time-slicing's lack of isolation); a sub-GPU pod takes one
        slot whatever its memory (the backend fails it with out-of-memory when the GPU's memory
        is not there); the device plugin hands out the replica of the least-used GPU
        (share_packing spread), so slots are never packed beyond what the replicas allow.
        Leaves out: whole-GPU requests landing on replicas (renameByDefault keeps them apart),
        an MPS replica's pinned memory limit (the OOM check is against the GPU's memory) and
        the throughput loss beyond SHARE_EFFICIENCY when several pods are busy at once.""",
    ))


# mig-parted's all-balanced configuration, the one MIG policies without repartitioning start
# with and keep: (compute slices, memory slices) and start of each instance, by the GPU's
# compute slices (2 x 1g + 2g + 3g on seven-slice GPUs; 2 x 1g + 2g on four-slice ones).
ALL_BALANCED = {7: (((3, 4), 4), ((2, 2), 0), ((1, 1), 2), ((1, 1), 3)),
                4: (((2, 2), 0), ((1, 1), 2), ((1, 1), 3))}


def static_mig_layout(model: str) -> dict[int, list]:
    """{start: [profile, job]} of a GPU in static MIG mode, no instance in use."""
    geometry = geometry_for(model)
    if geometry is None or geometry.compute_slices not in ALL_BALANCED:
        return {}
    return {start: [geometry.by_shape(shape).name, None]
            for shape, start in ALL_BALANCED[geometry.compute_slices]}


# Policies whose serving counts against its team's namespace ResourceQuota together with that
# team's training (the straw man of issue 12, kept as a floor). Every other policy without the
# engine's quotas gives serving a namespace and quota of its own, as real clusters do.
SERVING_IN_TEAM_QUOTA = frozenset({"k8s-naive"})
# Kueue baselines whose serving Kueue does not manage (issue 18): production inference is a
# Deployment in a serving namespace of its own, without the kueue.x-k8s.io/queue-name label, which
# Kueue leaves to kube-scheduler (manageJobsWithoutQueueName defaults to false; the pod integration
# is opt-in by namespace, managedJobsNamespaceSelector; docs/reference/baselines.md). No
# ClusterQueue admits or counts it: the engine sees it under that namespace's own queue row, whose
# guarantee is the whole cluster, so it never borrows, never binds a training queue's quota, and
# preempts any lower-priority pod for room, as DefaultPreemption does (engine/actions/evict.py).
SERVING_UNQUEUED = frozenset({"kueue", "kueue-mig"})
# Volcano baselines whose serving has a Volcano Queue of its own (issue 18): production inference
# is a Deployment with schedulerName: volcano (one scheduler for the GPU nodes: kube-scheduler
# beside it on the same nodes would race it), annotated scheduling.volcano.sh/queue-name for a
# serving Queue whose deserved covers serving's peak, reclaimable: false, with the production
# PriorityClass (docs/reference/baselines.md). The engine sees the same queue row as
# SERVING_UNQUEUED (its guarantee, the whole cluster, acts as serving's peak while serving asks
# less): serving never waits for a training team's capability and never uses its share.
SERVING_OWN_QUEUE = frozenset({"volcano"})


@dataclass(frozen=True)
class Mode:
    name: str
    gang: bool        # False: a job's members are separate pods, placed one by one
    mig: bool         # GPUs may start in MIG mode
    quota: bool       # the engine enforces quotas; else the backend caps teams at burst_limit
    timeslice: bool   # memory-ignorant slots; the backend checks memory (OOM)
    whole: bool       # integer GPUs: a sub-GPU pod asks one nvidia.com/gpu (a whole GPU, or a replica
    #                   where the node's device plugin shares) and counts as one in its quota
    mig_static: bool  # MIG GPUs start with a fixed layout (STATIC_MIG) and keep it
    serving_apart: bool  # production serving is outside its team's namespace quota
    serving_unqueued: bool  # ... and outside the teams' engine quotas too (SERVING_UNQUEUED, SERVING_OWN_QUEUE)


def mode_for(name: str) -> Mode:
    features, _ = get_policy(name).build()
    return Mode(name=name, gang=features.gang, mig=features.mig, quota=features.quota,
                timeslice=name == TIMESLICE, whole=not (features.mig or features.sharing),
                mig_static=features.mig_static,
                serving_apart=name not in SERVING_IN_TEAM_QUOTA,
                serving_unqueued=name in SERVING_UNQUEUED | SERVING_OWN_QUEUE)


def known_policies() -> tuple[str, ...]:
    return POLICIES.names()
