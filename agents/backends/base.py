"""The backend interface: how decisions reach a cluster and how the cluster's truth comes back.

Plain Python, no Django: the Celery tasks turn rows into these requests, call a backend, and turn
observations back into rows. Every method is idempotent, so a retried or repeated task is safe:
asking again for something already done answers `Outcome.ALREADY_DONE`, never an error.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

# Names every backend and the workers share (the contract, not any one backend's detail).
# A spot reclaim notice arrives as this taint; its value is the UNIX time the node goes away.
RECLAIM_TAINT = "tessera.io/reclaim-at"
# What a bind tells the workload through its environment.
ENV_RUNTIME = "TESSERA_RUNTIME_S"
ENV_RESUME = "TESSERA_RESUME_S"
ENV_GPU_INDEXES = "TESSERA_GPU_INDEXES"


class BackendError(RuntimeError):
    """The cluster refused a request in a way a retry will not mend."""


class TransientBackendError(BackendError):
    """The cluster was briefly unable to answer (throttled, overloaded, restarting): retry later."""


class Refused(BackendError):
    """The cluster refused the request for good: admission (PriorityClass, ResourceQuota,
    LimitRange), validation or authorization. Asking again changes nothing; the message is the
    cluster's own words, for the job's owner to read."""


class Conflict(BackendError):
    """The cluster holds something else under this name (another job's pod, another node)."""


class Outcome(enum.StrEnum):
    DONE = "done"  # this call changed the cluster
    ALREADY_DONE = "already_done"  # nothing to change: an earlier call (or the cluster) did it
    GONE = "gone"  # the pod no longer exists (for a preemption: the release is confirmed)


class JobStatus(enum.StrEnum):
    """A pod phase in our words; DELETED once the pod is gone from the cluster."""

    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    UNKNOWN = "Unknown"  # the node stopped reporting; the pod may still run
    DELETED = "deleted"


class MigStrategy(enum.StrEnum):
    NONE = "none"
    SINGLE = "single"
    MIXED = "mixed"


@dataclass(frozen=True)
class MigResource:
    """A MIG profile a node offers, with how many devices of it exist."""

    profile: str  # "1g.10gb", "1g.10gb+me"
    count: int
    memory_mib: int | None = None


@dataclass(frozen=True)
class NodeInventory:
    name: str
    gpu_model: str | None
    gpu_count: int
    gpu_memory_mib: int | None
    mig_strategy: MigStrategy
    mig_resources: tuple[MigResource, ...] = ()
    leaf_switch: str | None = None
    tier: str | None = None
    ready: bool = False
    schedulable: bool = True
    cpu_millicores: int = 0
    memory_mib: int = 0
    taints: tuple[str, ...] = ()  # "key=value:Effect"; spot reclaim notices arrive as taints
    # Whole GPUs the device plugin offers (status.allocatable): below gpu_count when a GPU failed
    # or is in MIG mode. None: the backend does not say (then gpu_count is all there is).
    allocatable_gpus: int | None = None
    # Whole GPUs that pods Tessera did not place (other schedulers, DaemonSets) hold on the node.
    gpus_used_outside: int = 0
    # MIG devices (mixed strategy) those pods hold, by profile: (("1g.10gb", 2),).
    mig_used_outside: tuple[tuple[str, int], ...] = ()
    mig_capable: bool = False
    # How the device plugin shares GPUs (GFD's nvidia.com/gpu.sharing-strategy, .replicas): "none",
    # "mps" or "time-slicing", and replicas per GPU (1: not shared). `sharing_problem` says why labels
    # that could not be read leave the node refused rather than guessed at ("" when they read well).
    gpu_sharing: str = "none"
    gpu_replicas: int = 1
    sharing_problem: str = ""


@dataclass(frozen=True)
class GpuShare:
    """A pod's memory-bounded share of one GPU: one replica of the node's sharing device plugin
    (docs/reference/gpu-sharing.md). `memory_mib` is the job's need; the backend fills in how the
    node offers replicas: under `resource` (nvidia.com/gpu, or nvidia.com/gpu.shared when renamed),
    and whether MPS pins each client's memory (`mps`)."""

    memory_mib: int
    resource: str = "nvidia.com/gpu"
    mps: bool = False


@dataclass(frozen=True)
class Rendezvous:
    """Where the pods of one run of a job meet (torchrun's static rendezvous): member 0's pod,
    found by name through a headless Service when there are several members."""

    service: str  # the run's headless Service; its pods are <host>.<service> in the namespace
    members: int  # pods (nodes, in torchrun's words)
    member: int  # this pod's NODE_RANK
    nproc: int  # processes on this pod: one per GPU it holds (one for a MIG slice or a share)
    world_size: int  # processes over all members
    first_rank: int  # the global RANK of this pod's first process
    port: int = 29500  # torchrun's default MASTER_PORT

    def host(self, member: int) -> str:
        return f"member-{member}"


@dataclass(frozen=True)
class Attachments:
    """What a team attaches to its job's pods by name, from the team's own namespace: a
    PersistentVolumeClaim (checkpoints), a Secret as environment, a Secret as files."""

    volume_claim: str = ""
    volume_mount_path: str = "/checkpoints"
    env_secret: str = ""
    file_secret: str = ""


@dataclass(frozen=True)
class RendezvousService:
    """A multi-pod run's headless Service, as the cluster lists it."""

    job_id: str
    namespace: str
    name: str


@dataclass(frozen=True)
class BindRequest:
    """Run one pod of a job on a chosen node, with whole GPUs or one MIG device."""

    job_id: str
    pod_name: str
    namespace: str  # the team
    project: str
    job_kind: str  # "training", "inference", "notebook", ...
    image: str
    command: tuple[str, ...]
    node_name: str
    gpu_count: int = 0
    mig_profile: str | None = None
    cpu_millicores: int = 1000
    memory_mib: int = 4096
    priority_class: str | None = None
    labels: tuple[tuple[str, str], ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    grace_seconds: int | None = None  # terminationGracePeriodSeconds; None: the cluster's default
    # The checkpoint channel (CONTRACTS.md): the pod's token, delivered as a Secret, and where to
    # confirm with it. No token: the pod gets no channel.
    checkpoint_token: str = field(default="", repr=False)
    checkpoint_url: str = ""
    # A native pod's channel is the Secret its owner mounts (agents/backends/k8s_channel.py): its name.
    checkpoint_channel: str = ""
    # torchrun's settings; None: a pod of its own, as a job submitted before they existed.
    rendezvous: Rendezvous | None = None
    attachments: Attachments = Attachments()
    share: GpuShare | None = None  # a memory-bounded share (gpu_count 1): one replica, not a whole GPU
    # A native pod (someone else's, docs/reference/native-submission.md): bound as it is, never created; the
    # fields above that describe a pod to create are not used.
    native: bool = False

    def __post_init__(self) -> None:
        if (self.gpu_count > 0) == (self.mig_profile is not None):
            raise ValueError("a bind asks for whole GPUs (gpu_count > 0) or one MIG profile")


@dataclass(frozen=True)
class CheckpointRequest:
    job_id: str
    pod_name: str
    namespace: str
    checkpoint_id: str  # names this request: asking twice with one id asks once
    reason: str = "interval"


@dataclass(frozen=True)
class PreemptRequest:
    job_id: str
    pod_name: str
    namespace: str
    grace_seconds: int
    reason: str


@dataclass(frozen=True)
class MigSlot:
    profile: str
    start: int  # first memory slice, as NVML placements count


@dataclass(frozen=True)
class RepartitionRequest:
    """Give one GPU of a node a new MIG layout. The node's GPU pods must be drained first."""

    node_name: str
    gpu_index: int
    layout: tuple[MigSlot, ...]
    config_name: str  # the mig-parted config that holds this layout for the whole node
    # Every GPU's target layout on the node (mig-parted configs are node-wide): this GPU's new
    # one and the others as they are. Empty: the backend needs no node-wide picture.
    node_layout: tuple[tuple[int, tuple[MigSlot, ...]], ...] = ()
    # Apply config_name again although the node already names it: mig-manager failed it, perhaps
    # against a stale copy of its ConfigMap (agents/mig.py decides when).
    retry: bool = False


class RepartitionPhase(enum.StrEnum):
    PENDING = "pending"
    REBOOTING = "rebooting"
    SUCCESS = "success"
    FAILED = "failed"
    UNKNOWN = "unknown"  # no state yet, or a state we do not know


@dataclass(frozen=True)
class RepartitionState:
    node_name: str
    config_name: str | None
    phase: RepartitionPhase

    @property
    def finished(self) -> bool:
        return self.phase in (RepartitionPhase.SUCCESS, RepartitionPhase.FAILED)


@dataclass(frozen=True)
class JobObservation:
    """What the cluster says about one pod of a job."""

    job_id: str
    pod_name: str
    namespace: str
    status: JobStatus
    node_name: str | None = None
    reason: str | None = None
    exit_code: int | None = None
    terminating: bool = False
    message: str | None = None  # the cluster's words for the reason
    annotations: dict[str, str] = field(default_factory=dict, compare=False)
    finished_at: float | None = None  # UNIX time its containers ended, where the cluster says
    started_at: float | None = None  # UNIX time the node took the pod (its GPUs held from then)
    native: bool = False  # someone else's pod that Tessera took in (docs/reference/native-submission.md)


@runtime_checkable
class Backend(Protocol):
    """What a cluster must do for the scheduler. Implementations: Kubernetes, simulated."""

    def inventory(self) -> list[NodeInventory]:
        """The GPU nodes as the cluster sees them now."""

    def bind(self, req: BindRequest) -> Outcome:
        """Create the job's pod if missing and bind it to req.node_name."""

    def request_checkpoint(self, req: CheckpointRequest) -> Outcome:
        """Ask a running pod to write a checkpoint (it confirms through the job's own channel)."""

    def preempt(self, req: PreemptRequest) -> Outcome:
        """Ask for a checkpoint, then stop the pod with req.grace_seconds to finish it."""

    def rendezvous_services(self) -> list[RendezvousService]:
        """The headless Services made for multi-pod runs (none where the backend makes none)."""

    def remove_rendezvous_service(self, namespace: str, name: str) -> Outcome:
        """Delete one whose run has ended (GONE: it was not there)."""

    def repartition(self, req: RepartitionRequest) -> Outcome:
        """Start moving a node to req.config_name; poll repartition_state() for the result."""

    def repartition_state(self, node_name: str) -> RepartitionState:
        """Where the node's last repartition stands."""

    def record_waiting(self, job_id: str, namespace: str, reason_code: str, message: str, count: int) -> bool:
        """Tell the cluster why a job waits, the `count`th time for this reason; False when it
        cannot (or has nowhere to say it). Never raises: a courtesy, as Events are."""

    def poll_observations(self) -> list[JobObservation]:
        """Every pod of ours now: the full picture, to reconcile against."""

    def job_observations(self, job_id: str) -> list[JobObservation]:
        """The pods of one job now: what an action step needs, without listing every pod."""

    def pod_log(self, namespace: str, pod_name: str, tail_lines: int, limit_bytes: int) -> str | None:
        """The pod's last `tail_lines` lines of output (at most `limit_bytes`); None when the pod is
        gone (its logs go with it). A pod not started yet is a Refused in the cluster's words."""


def wait_for_repartition(
    backend: Backend,
    node_name: str,
    config_name: str,
    timeout_s: float,
    poll_s: float = 2.0,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> RepartitionState:
    """Poll until the node reports success or failure for config_name, or timeout_s passes.

    Returns the last state either way; the caller tells a finished one by `state.finished`.
    """
    deadline = clock() + timeout_s
    while True:
        state = backend.repartition_state(node_name)
        if state.config_name == config_name and state.finished:
            return state
        if clock() >= deadline:
            return state
        sleep(poll_s)
