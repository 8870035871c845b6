"""Reading the Kubernetes API's objects into our own: node inventory from GPU Feature Discovery
labels, pod phases into job observations. Pure functions over client models, no API calls."""

from __future__ import annotations

import re
from dataclasses import replace
from decimal import Decimal
from typing import Any

from kubernetes.utils import parse_quantity

from agents.backends import k8s_manifests as m
from agents.backends.base import (
    GpuShare,
    JobObservation,
    JobStatus,
    MigResource,
    MigStrategy,
    NodeInventory,
    Refused,
)

GFD_PRODUCT = "nvidia.com/gpu.product"
GFD_COUNT = "nvidia.com/gpu.count"
GFD_MEMORY = "nvidia.com/gpu.memory"
GFD_MIG_STRATEGY = "nvidia.com/mig.strategy"
GFD_MIG_CAPABLE = "nvidia.com/mig.capable"
GFD_SHARING = "nvidia.com/gpu.sharing-strategy"  # none | mps | time-slicing (device plugin >= v0.15)
GFD_REPLICAS = "nvidia.com/gpu.replicas"
SHARED_RESOURCE = "nvidia.com/gpu.shared"  # the replicas' name with the plugin's renameByDefault
SHARED_PRODUCT_SUFFIX = "-SHARED"  # added to the product label when shared and not renamed
SHARING_MODES = ("none", "mps", "time-slicing")
# A pod's word that its share may be time-sliced, with no memory isolation (issue 14 conventions).
ANNOTATION_ACCEPTS_NO_ISOLATION = "tessera.io/accepts-no-isolation"
# Mixed strategy: one `nvidia.com/mig-<profile>.count` label per profile ('+' spelled '.').
_MIG_COUNT_LABEL = re.compile(r"^nvidia\.com/mig-(\d+g\.\d+gb)((?:\.[a-z]+)*)\.count$")
# The device plugin's mixed-strategy resources: `nvidia.com/mig-1g.10gb`, `nvidia.com/mig-1g.10gb.me`.
_MIG_RESOURCE = re.compile(r"^nvidia\.com/mig-(\d+g\.\d+gb)((?:\.[a-z]+)*)$")
MIB = 1024 * 1024


def node_inventory(node: Any, *, leaf_switch_label: str, tier_label: str) -> NodeInventory:
    labels = node.metadata.labels or {}
    allocatable = (node.status.allocatable if node.status else None) or {}
    strategy = _mig_strategy(labels.get(GFD_MIG_STRATEGY))
    product, count = labels.get(GFD_PRODUCT), _int(labels.get(GFD_COUNT)) or 0
    memory = _int(labels.get(GFD_MEMORY))
    sharing, replicas, problem = gpu_sharing(labels)
    if product and product.endswith(SHARED_PRODUCT_SUFFIX):
        product = product.removesuffix(SHARED_PRODUCT_SUFFIX)
    # A sharing plugin offers replicas (as nvidia.com/gpu, or renamed): whole GPUs are replicas / replicas.
    offered = allocatable.get(m.GPU_RESOURCE, "0"), allocatable.get(SHARED_RESOURCE, "0")
    allocatable_gpus = sum(int(parse_quantity(q)) for q in offered) // replicas
    if count == 0 and strategy is not MigStrategy.SINGLE:
        count = allocatable_gpus  # no GFD count label: what the device plugin offers is all we know
    mig = mig_resources(labels)
    if strategy is MigStrategy.SINGLE and product and "-MIG-" in product:
        # Single strategy: product is "<model>-MIG-<profile>" and count/memory describe the
        # MIG devices, which are all the node offers; no whole GPU is left to ask for.
        product, profile = product.split("-MIG-", 1)
        mig, count, memory = (MigResource(profile, count, memory),), 0, None
    return NodeInventory(
        name=node.metadata.name,
        gpu_model=product,
        gpu_count=count,
        gpu_memory_mib=memory,
        mig_strategy=strategy,
        mig_resources=mig,
        leaf_switch=labels.get(leaf_switch_label),
        tier=labels.get(tier_label),
        ready=_is_ready(node),
        schedulable=not (node.spec and node.spec.unschedulable),
        cpu_millicores=int(parse_quantity(allocatable.get("cpu", "0")) * 1000),
        memory_mib=int(parse_quantity(allocatable.get("memory", "0")) / MIB),
        taints=tuple(
            f"{t.key}={t.value or ''}:{t.effect}" for t in ((node.spec and node.spec.taints) or [])
        ),
        # A node whose device plugin has not registered offers no GPU yet: 0, not "unknown".
        allocatable_gpus=allocatable_gpus,
        mig_capable=labels.get(GFD_MIG_CAPABLE) == "true",
        gpu_sharing=sharing, gpu_replicas=replicas, sharing_problem=problem,
    )


def gpu_sharing(labels: dict[str, str]) -> tuple[str, int, str]:
    """(mode, replicas per GPU, problem) from the sharing labels. No label, or GFD's empty value, is a
    plain plugin; labels that do not read as a mode with 2+ replicas give ("none", 1, why)."""
    strategy = labels.get(GFD_SHARING) or "none"
    if strategy == "none":
        return "none", 1, ""
    if strategy not in SHARING_MODES:
        return "none", 1, f"{GFD_SHARING}={strategy!r} is none of {', '.join(SHARING_MODES)}"
    replicas = _int(labels.get(GFD_REPLICAS))
    if replicas is None or replicas < 2:
        return "none", 1, (f"{GFD_SHARING}={strategy} but {GFD_REPLICAS}={labels.get(GFD_REPLICAS)!r} "
                           "is not a count of 2 or more")
    return strategy, replicas, ""


def node_share(node: Any, share: GpuShare) -> GpuShare:
    """`share` as this node's device plugin offers replicas: under nvidia.com/gpu.shared where it
    advertises that (renameByDefault), else nvidia.com/gpu, and pinned by MPS or not. A node that
    does not share refuses it: there `nvidia.com/gpu: 1` would be a whole exclusive GPU."""
    mode, _replicas, problem = gpu_sharing(node.metadata.labels or {})
    if mode == "none":
        raise Refused(f"node {node.metadata.name}: this node offers no GPU sharing "
                      f"({problem or GFD_SHARING + '=none'}); a share there would hold a whole GPU")
    offered = (node.status and node.status.allocatable) or {}
    return replace(share, resource=SHARED_RESOURCE if SHARED_RESOURCE in offered else m.GPU_RESOURCE,
                   mps=mode == "mps")


def accepts_no_isolation(annotations: dict[str, str] | None) -> bool:
    """Only "true" says yes: any other value leaves the pod's share memory-isolated (MPS only)."""
    return (annotations or {}).get(ANNOTATION_ACCEPTS_NO_ISOLATION, "").strip().lower() == "true"


def replicas_held(devices: dict[str, int], replicas: int) -> int:
    """Whole GPUs that others' shared requests hold on a sharing node, rounded up: their replicas
    may sit on any GPU (the device plugin picks), so each started GPU counts."""
    return -(-(devices.get(m.GPU_RESOURCE, 0) + devices.get(SHARED_RESOURCE, 0)) // replicas)


def devices_held_by_others(pods: Any) -> dict[str, dict[str, int]]:
    """The GPU devices each node's live pods that are not Tessera's hold, by resource name
    (`nvidia.com/gpu`, `nvidia.com/mig-1g.10gb`): other schedulers, DaemonSets. The kubelet counts
    them against allocatable, so Tessera must too. A pod holds its devices from binding until it is
    gone (terminating pods still hold them)."""
    held: dict[str, dict[str, int]] = {}
    for pod in pods:
        node = pod.spec.node_name if pod.spec else None
        if not node or m.LABEL_JOB in (pod.metadata.labels or {}):
            continue
        if pod.status and pod.status.phase in ("Succeeded", "Failed"):
            continue
        for resource, count in pod_device_requests(pod).items():
            on_node = held.setdefault(node, {})
            on_node[resource] = on_node.get(resource, 0) + count
    return held


def mig_held(devices: dict[str, int]) -> tuple[tuple[str, int], ...]:
    """Mixed-strategy MIG devices among them, by profile: `nvidia.com/mig-1g.10gb.me` -> `1g.10gb+me`."""
    found = []
    for resource, count in devices.items():
        match = _MIG_RESOURCE.match(resource)
        if match and count:
            found.append((match.group(1) + match.group(2).replace(".", "+"), count))
    return tuple(sorted(found))


def pod_device_requests(pod: Any) -> dict[str, int]:
    """A pod's effective nvidia.com/* requests in whole devices (pod_device_amounts)."""
    return {name: int(amount) for name, amount in pod_device_amounts(pod).items() if int(amount)}


def pod_device_amounts(pod: Any) -> dict[str, Decimal]:
    """A pod's effective nvidia.com/* requests, as the kubelet counts them: per resource, the larger
    of its containers' sum and its biggest init container (requests default to limits). A quantity
    that does not parse raises ValueError."""
    def requests(container: Any) -> dict[str, Decimal]:
        resources = container.resources
        wanted = {**((resources and resources.limits) or {}), **((resources and resources.requests) or {})}
        return {name: parse_quantity(quantity) for name, quantity in wanted.items()
                if name.startswith("nvidia.com/")}
    spec = pod.spec
    main: dict[str, Decimal] = {}
    for container in spec.containers or []:
        for name, count in requests(container).items():
            main[name] = main.get(name, Decimal(0)) + count
    for container in spec.init_containers or []:
        for name, count in requests(container).items():
            main[name] = max(main.get(name, Decimal(0)), count)
    return {name: count for name, count in main.items() if count}


def mig_resources(labels: dict[str, str]) -> tuple[MigResource, ...]:
    """Mixed-strategy MIG counts: `nvidia.com/mig-1g.10gb.me.count` -> profile `1g.10gb+me`."""
    found = []
    for key, value in labels.items():
        match = _MIG_COUNT_LABEL.match(key)
        if not match:
            continue
        profile = match.group(1) + match.group(2).replace(".", "+")
        memory = _int(labels.get(key[: -len(".count")] + ".memory"))
        found.append(MigResource(profile, _int(value) or 0, memory))
    return tuple(sorted(found, key=lambda r: r.profile))


def _mig_strategy(value: str | None) -> MigStrategy:
    try:
        return MigStrategy(value or "none")
    except ValueError:
        return MigStrategy.NONE


def _int(value: str | None) -> int | None:
    return int(value) if value and value.isdigit() else None


def _is_ready(node: Any) -> bool:
    conditions = (node.status and node.status.conditions) or []
    return any(c.type == "Ready" and c.status == "True" for c in conditions)


_PHASES = {status.value: status for status in JobStatus if status is not JobStatus.DELETED}


def pod_observation(pod: Any, deleted: bool = False) -> JobObservation | None:
    """The job's view of a pod; None for a pod that is not one of our jobs."""
    labels = pod.metadata.labels or {}
    if m.LABEL_JOB not in labels:
        return None
    phase = (pod.status and pod.status.phase) or "Pending"
    reason, exit_code, message = _termination(pod)
    return JobObservation(
        job_id=labels[m.LABEL_JOB],
        pod_name=pod.metadata.name,
        namespace=pod.metadata.namespace,
        status=JobStatus.DELETED if deleted else _PHASES.get(phase, JobStatus.UNKNOWN),
        node_name=pod.spec.node_name if pod.spec else None,
        reason=reason,
        exit_code=exit_code,
        terminating=pod.metadata.deletion_timestamp is not None,
        message=message,
        annotations=dict(pod.metadata.annotations or {}),
        finished_at=_finished_at(pod),
        started_at=_timestamp(pod.status.start_time if pod.status else None),
        native=labels.get(m.LABEL_MANAGED_BY) != m.MANAGED_BY,
    )


def _finished_at(pod: Any) -> float | None:
    """When the pod's last container ended, once all have: a completed job is billed until then,
    not until the poll that noticed."""
    containers = (pod.status and pod.status.container_statuses) or []
    ends = [c.state.terminated.finished_at if c.state and c.state.terminated else None for c in containers]
    if not ends or None in ends:
        return None
    return _timestamp(max(ends))


def _timestamp(moment: Any) -> float | None:
    """The client's datetime (aware, UTC) as UNIX time."""
    return moment.timestamp() if moment is not None else None


def _termination(pod: Any) -> tuple[str | None, int | None, str | None]:
    """Why a pod is where it is, in the cluster's words: a container's end or wait, else the pod's
    own reason (a kubelet's admission refusal, an eviction). A failed pod's own reason wins: an
    evicted pod's containers end killed ("Error", 137), which says nothing of why."""
    status = pod.status
    for container in (status and status.container_statuses) or []:
        state = container.state
        if state and state.terminated and status.phase == "Failed" and status.reason:
            return status.reason, state.terminated.exit_code, status.message
        if state and state.terminated:
            return state.terminated.reason, state.terminated.exit_code, state.terminated.message
        if state and state.waiting and state.waiting.reason:
            return state.waiting.reason, None, state.waiting.message
    return (status.reason if status else None), None, (status.message if status else None)
