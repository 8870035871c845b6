"""The frozen snapshot the engine reads: one per scheduling cycle.

Every type here is a frozen dataclass built from plain values, so a Django adapter can build it
straight from rows (one object per row, tuples for the child rows). Each has slots: the engine
reads these fields for every job, member and GPU of every cycle, and a slot is read from the
object itself where an attribute without slots is read through a separate values array (the
4,000-node steady cycle 12% less CPU, bench/engine_cycle.py; README "Engine cycle at scale").
No field has a default: the live adapter (scheduling/snapshot.py), the simulator and the test
builders (tests/engine/builders.py) each say every value, so a field the engine relies on can
never be left out by omission.

Units: times are seconds (any epoch, e.g. UNIX time; `Snapshot.now` uses the same clock),
memory is GiB, shares are milli-GPU (1000 = one whole GPU), bandwidth GB/s.

Who uses a GPU is told once, by `Snapshot.running` (one `Running` per job member with its
`Allocation`s) plus the in-flight binds. `Gpu.mig_instances` is the physical MIG layout: an
instance exists whether or not a job uses it, and its `job_id` mirrors the running allocation.
"""

from __future__ import annotations

from dataclasses import dataclass

from .plan import Allocation, Bind, Preempt, Repartition

TIERS = ("reserved", "on-demand", "spot")
INTERCONNECTS = ("nvswitch", "nvlink-pairs", "pcie")
JOB_KINDS = ("inference", "training", "interactive", "batch")
NODE_READY = "ready"
# How a node's device plugin shares its GPUs: GPU Feature Discovery's `nvidia.com/gpu.sharing-strategy`
# label (docs/reference/gpu-sharing.md). The plugin applies one mode to every GPU of a node.
SHARING_NONE, SHARING_MPS, SHARING_TIME_SLICING = "none", "mps", "time-slicing"
SHARING_MODES = (SHARING_NONE, SHARING_MPS, SHARING_TIME_SLICING)

# The one table of the four priority classes and their values, highest first. A new installation
# seeds its PriorityClass rows from it (scheduling/defaults.py); the live snapshot passes the
# value in the row (an admin may change it), the simulator and tests use these.
PRIORITY_CLASSES = {"production": 1000, "interactive": 500, "training": 200, "best-effort": 50}
PRODUCTION = "production"


@dataclass(frozen=True, slots=True)
class MigInstance:
    """One existing MIG GPU instance: its profile name as the driver reports it, the first
    memory slice it occupies (NVML placement start), and the job using it (None = idle)."""

    profile: str
    start: int
    job_id: str | None


@dataclass(frozen=True, kw_only=True, slots=True)
class Gpu:
    """One physical GPU. `layout_changed_at` is when its MIG mode/layout last changed
    (for repartition hysteresis); None means never. A GPU that is not `mig_capable` is
    never repartitioned, whatever its model; one that is not `healthy` takes no work."""

    index: int
    uuid: str
    model: str
    memory_gb: float
    mig_enabled: bool
    mig_instances: tuple[MigInstance, ...]
    layout_changed_at: float | None
    healthy: bool
    mig_capable: bool  # False: a MIG model whose card or driver cannot be partitioned


@dataclass(frozen=True, kw_only=True, slots=True)
class Node:
    """A GPU node. `leaf` and `spine` name its switches; `tier` is reserved/on-demand/spot;
    `interconnect` is nvswitch / nvlink-pairs / pcie; `nics` × `nic_gb_s` is its network
    bandwidth (NDR 400 Gb/s ≈ 48 GB/s per NIC). Only nodes in state "ready" take new work.
    `price_per_gpu_hour` is the rate for its model and tier (None: no rate in force).
    `sharing` is one of SHARING_MODES and `share_replicas` the replicas per GPU its device plugin
    offers (`nvidia.com/gpu.replicas`; 1 when it does not share): a sharing node offers only
    replicas, no whole GPU, and each MPS replica is pinned to 1/replicas of the GPU's memory."""

    name: str
    tier: str
    leaf: str
    spine: str
    gpu_model: str
    interconnect: str
    cpu_cores: float
    memory_gb: float
    gpus: tuple[Gpu, ...]
    state: str
    nics: int
    nic_gb_s: float
    price_per_gpu_hour: float | None
    sharing: str
    share_replicas: int

    def __post_init__(self) -> None:
        if self.sharing not in SHARING_MODES:
            raise ValueError(f"Node.sharing is {self.sharing!r}; expected one of {SHARING_MODES}")
        if self.share_replicas < 1:
            raise ValueError(f"Node.share_replicas is {self.share_replicas!r}; expected 1 or more")


@dataclass(frozen=True, kw_only=True, slots=True)
class Job:
    """A job as submitted. A job has `gang_size` members (pods); each member needs `gpus` whole
    GPUs on one node, or, when `gpus` is 0, a slice of one GPU big enough for `gpu_memory_gb`
    (a MIG instance or a share). `gpu_memory_gb` is the need per GPU and also bounds which
    GPUs a whole-GPU job may use. `gpu_models` empty means any model. `queue_order` is the team
    lead's order (lower first); `priority` is the value of `priority_class`.
    `accepts_no_isolation`: its share may go to a time-sliced GPU, where nothing bounds a
    neighbour's memory (the pod annotation `tessera.io/accepts-no-isolation`).
    `mig_profile`: the one MIG profile the job may have (a native pod's `nvidia.com/mig-<profile>`,
    which the kubelet gives only from an instance of that profile); empty: any that holds its need."""

    id: str
    team: str
    project: str
    kind: str
    priority_class: str
    priority: int
    gpus: int
    gpu_memory_gb: float
    gpu_milli: int  # a share asked for beyond the memory need (0: none)
    cpu_cores: float
    memory_gb: float
    gang_size: int
    gpu_models: tuple[str, ...]
    checkpoint_interval_s: float | None
    last_checkpoint_at: float | None
    preemptible: bool
    queue_order: int
    submitted_at: float
    expected_runtime_s: float
    accepts_no_isolation: bool
    mig_profile: str

    @property
    def fractional(self) -> bool:
        return self.gpus == 0

    @property
    def production(self) -> bool:
        return self.priority_class == PRODUCTION

    @property
    def host_only(self) -> bool:
        """Asks for CPU and memory only, no GPU: the openb trace's CPU-only tasks, which
        `simulate fill` places on GPU nodes as the FGD paper does. Never a live job: the Job
        table requires GPUs or a GPU memory need (scheduling/models/jobs.py)."""
        return self.gpus == 0 and self.gpu_memory_gb <= 0 and self.gpu_milli <= 0

    @property
    def checkpoints(self) -> bool:
        return bool(self.checkpoint_interval_s)

    @property
    def total_gpus(self) -> int:
        return self.gpus * self.gang_size


@dataclass(frozen=True, kw_only=True, slots=True)
class Running:
    """One member of a job that holds resources now. `borrowed` marks capacity lent beyond the
    team's guarantee (first to be reclaimed)."""

    job: Job
    node: str
    allocations: tuple[Allocation, ...]
    started_at: float
    borrowed: bool
    member: int


@dataclass(frozen=True, kw_only=True, slots=True)
class Queue:
    """A team's queue: GPUs guaranteed (in GPU units), the most it may hold while bursting
    (None = no limit) and its weight when idle capacity is lent out."""

    team: str
    guaranteed_gpus: float
    burst_limit_gpus: float | None
    weight: float


@dataclass(frozen=True, kw_only=True, slots=True)
class UsageHistory:
    """Each team's past GPU use, decayed by a half-life (engine/fair_history.py): `team_gpu_s` is
    GPU-unit-seconds weighted 2^-(age / half_life_s), at `Snapshot.now`, counting work still
    running up to now. `since` is when the records start (the window's start if they are older),
    so a young cluster's capacity is not counted for time it did not exist."""

    half_life_s: float
    since: float
    team_gpu_s: tuple[tuple[str, float], ...]

    def __post_init__(self) -> None:
        if not self.half_life_s > 0:
            raise ValueError(f"UsageHistory.half_life_s is {self.half_life_s!r}; expected seconds > 0")


InFlight = Bind | Preempt | Repartition
GpuRef = tuple[str, int]  # (node name, GPU index)


@dataclass(frozen=True, kw_only=True, slots=True)
class Nomination:
    """Whole GPUs held for a waiting job whose victims were asked to stop, as kube-scheduler's
    `status.nominatedNodeName` holds a node for a preemptor (engine/nominations.py). Only the
    baselines that model it (`Features.nominate`) make or read them."""

    job_id: str
    gpus: tuple[GpuRef, ...]
    priority: int  # jobs of this priority or below cannot use them: the preemptor's, or for a
    #                reclaim the highest of its victims' (Kueue admits within-quota work first)


@dataclass(frozen=True, kw_only=True, slots=True)
class Snapshot:
    """Everything one cycle may look at. `in_flight` holds actions of earlier plans not yet
    confirmed; they count as done: a Bind holds its resources, a Preempt's victim is not picked
    again (its resources stay held until the release is confirmed), a Repartition's layout is
    taken as applied but the GPU takes no new work until confirmed. `nominations` are those
    the last plan left in force (Plan.nominations), kept by the backend as the API server keeps
    a pod's nominatedNodeName; empty where no policy nominates. `usage_history` orders lending and
    reclaim among teams by fair share over time (Features.fair_history). `clock_speed`: seconds of
    the cluster's work per second people wait, 1 on a real cluster; the embedded demo's simulated
    cluster runs faster, and the waits its sentences speak are divided by it (wording.wait)."""

    now: float
    nodes: tuple[Node, ...]
    pending: tuple[Job, ...]
    running: tuple[Running, ...]
    queues: tuple[Queue, ...]
    in_flight: tuple[InFlight, ...]
    spine_oversubscription: float
    nominations: tuple[Nomination, ...]
    usage_history: UsageHistory
    clock_speed: float

    def __post_init__(self) -> None:
        if not self.clock_speed > 0:
            raise ValueError(f"Snapshot.clock_speed is {self.clock_speed!r}; expected a speed > 0")
