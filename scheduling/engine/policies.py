"""Named policies. A policy is one literal: a name, its Features (flags and limits, features.py)
and the actions it runs, least disruptive first. A misspelt feature or an unknown action is an
error when this module (or the one declaring the policy) is imported, never a silent default.

The live cycle runs the policy named by TESSERA_POLICY (tessera/settings.py, checked at start-up).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from .actions import ACTIONS, Action
from .features import Features
from .registry import Registry

ALL_ACTIONS = ("allocate", "backfill", "reclaim", "preempt", "repartition")


@dataclass(frozen=True, kw_only=True)
class Policy:
    name: str
    features: Features
    actions: tuple[str, ...] = ALL_ACTIONS
    doc: str = ""  # for a baseline: which real feature each part models, and what it leaves out

    def __post_init__(self) -> None:
        for name in self.actions:
            ACTIONS.get(name)  # KeyError naming the known actions

    def build(self) -> tuple[Features, list[tuple[str, Action]]]:
        """The features and the actions to run, in order."""
        return self.features, [(name, ACTIONS.get(name)) for name in self.actions]

    def with_features(self, **changes: Any) -> Policy:
        """The same policy with some features changed (experiments and tests)."""
        return replace(self, features=replace(self.features, **changes))


POLICIES: Registry[Policy] = Registry("policy")


def register(policy: Policy) -> Policy:
    return POLICIES.register(policy.name, policy)


TESSERA = register(Policy(
    name="tessera",
    features=Features(gang=True, quota=True, fairshare=True, fair_history=True, team_order=True,
                      reserve=True, topology=True, tiers=True, mig=True, sharing=True, memory_aware=True,
                      packing="binpack", victim_order="lost-work", production_wins=True,
                      patient_stop_s=3600.0, slice_or_whole=True,
                      # An hour, not 15 minutes: under "lost-work" a job that just restarted from its
                      # checkpoint loses least, so it was the next victim again, paying its restore
                      # and its wait in the queue each time (issue 18: training JCT tail; tuning
                      # split median JCT p95 34,354 -> 31,715 s, preemptions 15.5 -> 13.5).
                      min_runtime_s=3600.0),
))

# tessera plus consolidation (actions/consolidate.py): moves checkpointing jobs into gaps so a
# blocked whole-node job can start. Not the default: over five generated 256-GPU scenarios it
# raised utilisation by 0.010 on average (-0.009..+0.032, better on four of five) for 1.9x the
# preemptions, and a move costs more on real clusters (checkpoint I/O, image pulls) than the
# simulator's 60 s restart.
register(Policy(
    name="tessera-consolidate",
    features=TESSERA.features,
    actions=("allocate", "backfill", "reclaim", "preempt", "consolidate", "repartition"),
))

# --- baselines: documented models of real schedulers, for `simulate run` -----------------------
# Each is as strong as the real system configured well, so a lead over it means something.
# Sources for what each part models: docs/reference/baselines.md.

# Kept only as a floor: the model of plain Kubernetes before issue 12, whose figures the README
# once compared against. The simulator's backend counts serving against the same per-team
# ResourceQuota as that team's training (simulator/run/policies.py), and nothing preempts.
register(Policy(
    name="k8s-naive", features=Features(packing="spread"), actions=("allocate",),
    doc="Floor only: kube-scheduler spread on integer GPUs, pods one by one, no preemption; "
        "serving counted against its team's training ResourceQuota.",
))

register(Policy(
    name="k8s-default",
    features=Features(packing="spread", priority_preemption=True, memory_aware=True, min_runtime_s=0.0,
                      nominate=True, replica_or_whole=True, share_packing="spread"),
    actions=("allocate", "preempt"),
    doc="""Kubernetes as shipped, configured as a production GPU cluster is.
    Models: kube-scheduler's NodeResourcesFit LeastAllocated scoring (spread); the NVIDIA device
    plugin's integer nvidia.com/gpu, a sub-GPU pod asking one (replica_or_whole): on a node whose
    plugin shares (MPS or time-slicing, the GPU Operator's per-node config) with
    renameByDefault: false, the node advertises GPUs x replicas nvidia.com/gpu and a pod asking
    1 gets one replica (NVIDIA/k8s-device-plugin README, "Shared Access to GPUs": 8 GPUs with 10
    replicas advertise "80 nvidia.com/gpu resources ... instead of 8", nvidia.com/gpu.shared only
    with renameByDefault: true; failRequestsGreaterThanOne fails a shared request above 1;
    docs/reference/gpu-sharing.md and baselines.md), so it takes a replica there
    (preferred node affinity on GFD's nvidia.com/gpu.sharing-strategy label: replica first, the
    emptiest GPU, share_packing spread), else a whole GPU on a plain node; the same replica rules
    as every policy (engine/sharing.py: an MPS replica only for a need within its pinned
    1/replicas of memory, a time-sliced one only for pods that accept no isolation); a whole-GPU
    pod keeps off sharing nodes (required affinity on that label: a replica is not a GPU);
    PriorityClasses with
    DefaultPreemption (a pending pod stops lower-priority pods of any namespace on the node
    where the fewest, lowest go; it waits for their graceful termination, then binds); the
    preemptor's nominatedNodeName (nominate: what its victims free is held for it against its
    class and below until it binds; engine/nominations.py); node
    affinity on GPU Feature Discovery's memory label (memory_aware); one ResourceQuota per team
    namespace at the team's burst limit, counting every non-terminal pod, pending ones too (a
    replica counts 1 nvidia.com/gpu, as a whole GPU does), with
    serving in a namespace of its own (the simulator's backend, simulator/run/policies.py).
    Leaves out: gangs (a job's pods are placed one by one and may hold GPUs while others wait),
    MIG, topology-aware placement, PodDisruptionBudgets (none in the workload), the
    scheduler's percentageOfNodesToScore sampling (it scores every node), and nomination of
    sub-GPU requests (what a preemption frees for one, a replica or a GPU, is not held for it).""",
))

KUEUE = register(Policy(
    name="kueue",
    features=Features(gang=True, quota=True, packing="spread", memory_aware=True, min_runtime_s=0.0,
                      nominate=True, replica_or_whole=True, share_packing="spread", replica_counts_one=True),
    actions=("allocate", "reclaim", "preempt"),
    doc="""Kueue over kube-scheduler, configured for sharing GPUs between teams.
    Models: one ClusterQueue per team in one cohort, nominalQuota = the team's guarantee and
    borrowingLimit up to its burst limit (engine quota, no fair sharing: Kueue's default
    BestEffortFIFO, priority then creation time, a workload that does not fit not blocking the
    ones behind it); all-or-nothing admission of a workload's pods (gang); preemption with
    reclaimWithinCohort: Any (reclaim: a queue under its nominal quota takes back what others
    borrowed), withinClusterQueue: LowerPriority and borrowWithinCohort: LowerPriority
    (preempt: lower-priority workloads of its own queue or borrowed ones); a preemptor's quota
    held for it while its victims stop (the scheduler counts a workload pending preemption in
    the cohort's cycle usage; here its GPUs are nominated, engine/nominations.py);
    kube-scheduler LeastAllocated placement (spread); the NVIDIA device plugin's integer
    nvidia.com/gpu, as k8s-default has it (replica_or_whole):
    a sub-GPU pod asks one, which on a node whose plugin shares (MPS or time-slicing) with
    renameByDefault: false is one replica (NVIDIA/k8s-device-plugin README, "Shared Access to
    GPUs": the plugin advertises GPUs x replicas nvidia.com/gpu), taken first, the emptiest GPU
    (share_packing spread), under the same replica rules as every policy (engine/sharing.py),
    else a whole GPU on a plain node; a whole-GPU pod keeps off sharing nodes; the
    ClusterQueue counts the pod's request, so a replica is 1 nvidia.com/gpu against
    nominalQuota and borrowingLimit, as a whole GPU is (replica_counts_one: the engine's quota
    counts it 1, not its share of the GPU); serving left to kube-scheduler, as Kueue leaves
    any workload without the kueue.x-k8s.io/queue-name label (manageJobsWithoutQueueName
    defaults to false: "those jobs are not managed and ... will start immediately"; the pod
    integration is opt-in per namespace, managedJobsNamespaceSelector; Kueue Configuration API):
    production inference is a Deployment in a serving namespace of its own, in no ClusterQueue,
    so it neither waits for nor uses a team's nominalQuota or borrowingLimit, and its pods,
    with the production PriorityClass, preempt lower-priority pods of any namespace, Kueue's
    admitted workloads included (DefaultPreemption, as in k8s-default). The simulator's backend
    puts serving under that namespace's own queue row, whose guarantee is the whole cluster
    (SERVING_UNQUEUED, simulator/run/policies.py; issue 18: with serving in its team's queue,
    serving-heavy's production waited hours, p99 ~46,700 s).
    Leaves out: admission by quota alone before placement (here a workload is admitted only
    where its pods fit, as waitForPodsReady with requeueing converges to, without the
    timeouts), Topology Aware Scheduling and fair sharing (opt-in), ResourceFlavors beyond the
    GPU model constraint, Kueue's own serving integrations (Deployment, StatefulSet,
    LeaderWorkerSet: opt-in, and they would queue serving behind quota again), which victims
    serving picks (the engine's reclaim takes borrowed ones first, most-borrowing team first,
    where DefaultPreemption picks the node with the fewest, lowest), and nomination of sub-GPU
    requests, as k8s-default (what a preemption frees for one, a replica or a GPU, is not held
    for it).""",
))

register(Policy(
    name="kueue-mig",
    features=replace(KUEUE.features, mig=True, mig_static=True, sharing=True,
                     share_production_only=True, share_packing="binpack",
                     replica_or_whole=False, replica_counts_one=False),
    actions=KUEUE.actions,
    doc="""kueue plus static MIG and memory-bounded sharing for serving.
    Models: the GPUs the scenario puts in MIG mode carry mig-parted's all-balanced layout
    (2 x 1g, 1 x 2g, 1 x 3g) from the start (the simulator's backend) and keep it: no mode or
    layout change, ever (no repartition action; mig_static creates no instance); a sub-GPU job
    takes the smallest idle instance that holds its memory (the device plugin's mixed
    strategy, the user naming the profile), else a larger idle one; production serving that
    finds no instance takes a replica where the cluster runs the NVIDIA device plugin in MPS
    mode (nvidia.com/gpu.shared, each replica pinned to 1/replicas of the GPU's memory, at most
    replicas per GPU, fullest GPU first: engine/sharing.py, the same rules as every policy);
    nowhere else, as a node with the plain plugin offers no shares to any scheduler; serving
    outside every ClusterQueue, as in kueue.
    Leaves out: non-serving work on shares (notebooks and evaluations wait for an instance),
    HAMi (no generated cluster installs it), and re-partitioning by hand between runs.""",
))

register(Policy(
    name="volcano",
    features=Features(gang=True, quota=True, fairshare=True, sharing=True, memory_aware=True,
                      packing="binpack", min_runtime_s=0.0, nominate=True),
    actions=("allocate", "reclaim", "preempt"),
    doc="""Volcano with the NVIDIA device plugin's sharing modes, configured for a shared GPU cluster.
    Models: the gang plugin (a PodGroup's minMember pods all start or none); one Queue per team
    with the capacity plugin's guarantee and capability (engine quota: guarantee, burst limit)
    and the proportion plugin's deserved share (engine fairshare: weight water-filling, as
    fairshare.py computes it); the priority plugin (class, then creation time); the binpack
    plugin for GPUs; sub-GPU pods on the replicas the cluster offers, where its nodes run the
    NVIDIA device plugin in MPS mode (GPU Operator per-node config; each replica pinned to
    1/replicas of the GPU's memory, fullest GPU first; time-slicing only for pods that accept no
    isolation: engine/sharing.py, the same rules as every policy); the reclaim action (a queue
    under its deserved share takes back what others borrowed) and the preempt action
    (lower-priority jobs of the same queue, or borrowed ones); a preemptor pipelined onto what
    its victims are releasing (FutureIdle, nominatedNodeName first) ahead of lower-priority
    jobs (nominate, engine/nominations.py); serving in a Volcano Queue of its own: production
    inference is a Deployment with schedulerName: volcano (Volcano makes a PodGroup per pod) and
    the scheduling.volcano.sh/queue-name annotation of a serving Queue, reclaimable: false,
    whose deserved covers serving's peak, with the production PriorityClass, so it never waits
    behind a training team's capability or uses its share, and the reclaim action takes
    borrowed training of any team for it. Volcano, not kube-scheduler, places it: two
    schedulers binding to the same nodes race (Kubernetes, "Running multiple schedulers":
    disjoint node pools). The simulator's backend puts serving under that queue row, whose
    guarantee is the whole cluster, to the engine the same as serving's peak while serving asks
    less (SERVING_OWN_QUEUE, simulator/run/policies.py; issue 18: with serving in its team's
    Queue, serving-heavy's production wait p99 was 12,597-17,970 s).
    Leaves out: MIG (the scenario's MIG GPUs are whole GPUs here), HyperNode network-topology
    scheduling (opt-in), the enqueue action's overcommit factor, the backfill action (it is
    for BestEffort pods without requests), volcano-vgpu / HAMi, which would share any GPU
    of a node that runs it: no generated cluster installs it, so no policy gets it, and which
    victims serving may take: the engine lets production within its queue's guarantee stop
    lower-priority jobs of any queue (engine/actions/evict.py), where Volcano's preempt stays
    within a Queue and its reclaim takes only from Queues over their deserved (the scenarios'
    team guarantees cover over four fifths of the cluster, so at a serving peak a real Volcano
    could find nothing to reclaim where the model still stops training within its guarantee).""",
))

# Best fit on integer GPUs with gangs, no MIG, topology or tiers, sub-GPU pods on the MPS or
# time-slicing replicas the cluster's device plugin offers (engine/sharing.py): the BestFit
# baseline of the fragmentation experiments.
register(Policy(
    name="binpack", features=Features(gang=True, sharing=True, memory_aware=True, packing="binpack"),
    actions=("allocate",),
))


def get_policy(config: str | Policy) -> Policy:
    if isinstance(config, Policy):
        return config
    return POLICIES.get(config)
