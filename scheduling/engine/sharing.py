"""Which GPUs a memory-bounded share may use, by the node's device-plugin sharing mode.

On Kubernetes a share is a replica the NVIDIA device plugin hands out (docs/reference/gpu-sharing.md):
- "mps": each replica is pinned to 1/replicas of the GPU's memory and compute by the MPS control
  daemon, so a share fits only if its memory need does; the pod is pinned to its own need too.
  The share holds its replica whatever its need: 1/replicas of the GPU (`held_milli`), which is
  what it counts for in the engine, the ledger bills and the simulator meters.
- "time-slicing": replicas with no memory isolation at all; only a job that says it accepts that
  (`Job.accepts_no_isolation`) goes there.
- "none": the plugin offers whole GPUs only; a share there would be a whole exclusive GPU.
The plugin applies one mode to every GPU of a node and, sharing, offers no whole GPU beside the
replicas; a GPU holds at most `replicas` shares. Every policy follows this, baselines included:
which device plugin runs on a node is the cluster's configuration, not a scheduler's, so no
policy shares a GPU the cluster does not offer as replicas and none is denied one it does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .fragment.shapes import MILLI
from .memory import smallest_profile
from .mig import geometry_for
from .reasons import WaitingReason
from .types import SHARING_MPS, SHARING_TIME_SLICING, Job

if TYPE_CHECKING:
    from .placement.common import Models
    from .session import Session
    from .state import GpuState, NodeState

NO_SHARING_TEXT = "this node offers no GPU sharing"


def mode_allows(node: NodeState, job: Job) -> bool:
    """The node's mode takes a share of this job at all (memory and replicas aside)."""
    mode = node.node.sharing
    return mode == SHARING_MPS or (mode == SHARING_TIME_SLICING and job.accepts_no_isolation)


def replica_memory_gb(node: NodeState, gpu: GpuState) -> float:
    """The memory one replica may use: MPS pins 1/replicas of the GPU; time-slicing bounds nothing."""
    if node.node.sharing == SHARING_MPS:
        return gpu.memory_gb / node.node.share_replicas
    return gpu.memory_gb


def held_milli(node: NodeState, milli: int) -> int:
    """The thousandths of a GPU a share holds on this node, `milli` being its memory-sized share.
    An MPS replica is 1/replicas of the GPU's compute (the daemon's active thread percentage) and
    memory, and the GPU takes no more clients than replicas: a share holds exactly that, rounded
    down so that `replicas` of them never count for more than the GPU. Elsewhere the share holds
    its memory fraction (time-slicing bounds nothing, so nothing larger is held)."""
    if node.node.sharing == SHARING_MPS:
        return MILLI // node.node.share_replicas
    return milli


def replica_holds(gpu: GpuState, job: Job) -> bool:
    """The node's mode takes a share of `job` on this GPU whatever it holds now: the mode, and
    under MPS the replica's pinned memory and compute. Fixed for a cycle, and the same for every
    job with the same replica_key."""
    node = gpu.node
    return (
        mode_allows(node, job)
        and job.gpu_memory_gb <= replica_memory_gb(node, gpu) + 1e-9
        and (node.node.sharing != SHARING_MPS or job.gpu_milli <= held_milli(node, job.gpu_milli))
    )


def replica_key(job: Job) -> tuple[object, ...]:
    """What replica_holds reads of a job."""
    return (job.gpu_memory_gb, job.accepts_no_isolation, job.gpu_milli)


def no_sharing_reason(session: Session, job: Job, models: Models) -> tuple[WaitingReason, str] | None:
    """Why a share of `job` can run on no node it may use, or None when some node could take it
    or a MIG slice could (then the usual "no free slice" reasons apply). Production inference
    takes whole GPUs instead (placement), so it is never told this."""
    if not session.features.sharing or job.production:
        return None
    if session.features.mig and any(_slice_exists(model, job) for model in models):
        return None
    nodes = [n for n in session.nodes.values() if n.model in models]
    if any(
        mode_allows(n, job) and any(job.gpu_memory_gb <= replica_memory_gb(n, g) + 1e-9 for g in n.gpus) for n in nodes
    ):
        return None
    sliced = [n.name for n in nodes if n.node.sharing == SHARING_TIME_SLICING]
    mps = [n.name for n in nodes if n.node.sharing == SHARING_MPS]
    text = f"needs a {job.gpu_memory_gb:g} GB share of a GPU; {NO_SHARING_TEXT}"
    if len(nodes) > 1:
        text = f"needs a {job.gpu_memory_gb:g} GB share of a GPU; no node it may use offers GPU sharing for it"
    notes = []
    if sliced:
        notes.append(
            f"{_names(sliced)} time-slice GPUs with no memory isolation, which the job does not "
            "accept (tessera.io/accepts-no-isolation)"
        )
    if mps:
        notes.append(f"the MPS replicas of {_names(mps)} are smaller than its memory need")
    return WaitingReason.NO_SHARING, text + (f" ({'; '.join(notes)})" if notes else "")


def _slice_exists(model: str, job: Job) -> bool:
    geometry = geometry_for(model)
    return geometry is not None and smallest_profile(geometry, job.gpu_memory_gb, job.mig_profile) is not None


def _names(names: list[str]) -> str:
    return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
