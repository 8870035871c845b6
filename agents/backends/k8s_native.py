"""Native submission: a pod someone else created with `spec.schedulerName: tessera`, read into
what Tessera needs to queue it as a job (docs/reference/native-submission.md). Pure functions over client
models, no API calls and no Django: the intake (agents/native.py) turns a NativePod into rows.

A pod that cannot be read is refused with a NativeRefusal whose reason and sentence go on the pod
as a Kubernetes Event; the pod stays Pending. A refusal never raises anything else, so one bad pod
never stops the poll that reads the others.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from kubernetes.utils import parse_quantity

from agents.backends import k8s_manifests as m
from agents.backends.k8s_channel import channel_interval_s, channel_name, mounted_channels
from agents.backends.k8s_gangs import GangError, annotation_min_member, pod_group_name, scheduling_group_name
from agents.backends.k8s_reading import SHARED_RESOURCE, accepts_no_isolation, pod_device_amounts

# What a native pod may say (docs/reference/native-submission.md).
ANNOTATION_GPU_MEMORY = "tessera.io/gpu-memory-gb"
ANNOTATION_PROJECT = "tessera.io/project"
_MIG_RESOURCE = re.compile(r"^nvidia\.com/mig-(\d+g\.\d+gb)((?:\.[a-z]+)*)$")


@dataclass(frozen=True)
class OwnerKind:
    """A kind of object that makes native pods, as a cancel treats it (native_delete_owner)."""

    group: str  # its API group ("batch" for batch/v1 Jobs)
    plural: str
    deleted: bool  # a cancel deletes it, with its pods: its controller would make deleted pods again
    controlled: bool  # it may be made by another kind here, which a cancel then deletes in its place


# The one table of the owners a cancel looks at (docs/reference/native-submission.md, "Cancel").
# Deleting the owner stops all its pods (Kubernetes 1.20 has no Job suspend: that is beta from 1.22;
# a JobSet's or PyTorchJob's suspend works through its child Jobs' or pods' controller, so deleting
# is what works on every server). A batch/v1 Job that a JobSet controls is stopped by deleting the
# JobSet, which would make a deleted child Job again. A LeaderWorkerSet (kubernetes-sigs/lws) makes
# a leader StatefulSet, whose leader pods each make their group's worker StatefulSet: its pods are
# stopped by deleting the LeaderWorkerSet, found up that chain. A StatefulSet of no such owner is
# not deleted (its pods are, one by one).
OWNER_KINDS = {
    "Job": OwnerKind("batch", "jobs", deleted=True, controlled=True),
    "JobSet": OwnerKind("jobset.x-k8s.io", "jobsets", deleted=True, controlled=False),
    "PyTorchJob": OwnerKind("kubeflow.org", "pytorchjobs", deleted=True, controlled=False),
    "LeaderWorkerSet": OwnerKind("leaderworkerset.x-k8s.io", "leaderworkersets", deleted=True, controlled=False),
    "StatefulSet": OwnerKind("apps", "statefulsets", deleted=False, controlled=True),
    "Pod": OwnerKind("", "pods", deleted=False, controlled=True),  # an LWS leader owns its worker StatefulSet
}


def owner_kind(api_version: str, kind: str) -> OwnerKind | None:
    """The table's row for an owner reference's apiVersion and kind; None for a kind (or API group)
    Tessera does not stop through its owner."""
    found = OWNER_KINDS.get(kind)
    return found if found is not None and found.group == api_version.rpartition("/")[0] else None


# The label the JobSet controller (kubernetes-sigs/jobset) puts on its child Jobs and their pods.
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
# ... and the LeaderWorkerSet controller (kubernetes-sigs/lws) on its StatefulSets and their pods.
LWS_NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
# The object a team knows its pods by, where their owner is made by it: owner kind -> (label, kind).
NAMED_BY_LABEL = {"Job": (JOBSET_NAME_LABEL, "JobSet"), "StatefulSet": (LWS_NAME_LABEL, "LeaderWorkerSet")}
MAX_GPUS_PER_POD = 64  # a pod runs on one node; more is a typo, refused before any row is written


class NativeRefusal(ValueError):
    """Why Tessera will not queue this pod: `reason` is the Event's reason (CamelCase, as the
    kube-scheduler's), the message a sentence for whoever runs `kubectl describe pod`."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class Owner:
    """The pod's controlling owner (ownerReferences with controller: true), else its first one."""

    api_version: str
    kind: str
    name: str
    uid: str
    controller: bool


@dataclass(frozen=True)
class NativePod:
    """A native pod as Tessera queues it. Exactly one GPU need: whole GPUs (`gpus` > 0), one MIG
    device (`mig_profile`), or a memory-bounded share (`shared`, with `gpu_memory_gb`)."""

    uid: str
    namespace: str
    name: str
    image: str = ""  # its first container's, for the job page
    gpus: int = 0
    mig_profile: str | None = None
    shared: bool = False
    gpu_memory_gb: float = 0.0
    cpu_cores: float = 0.0
    memory_gb: float = 0.0
    priority_class: str | None = None  # spec.priorityClassName, as written
    priority: int | None = None  # spec.priority, as the Priority admission plugin resolved it
    project: str | None = None  # the tessera.io/project annotation
    accepts_no_isolation: bool = False
    owner: Owner | None = None
    # Gangs (engineer nativegang): the pod-group label's value, or `scheduling.k8s.io/<name>` for a
    # pod naming a Kubernetes PodGroup (k8s_gangs.py), and the fallback min-member annotation.
    group: str | None = None
    min_member: int | None = None
    labels: dict[str, str] = field(default_factory=dict, compare=False)
    # The checkpoint channel (agents/backends/k8s_channel.py): the channel Secrets the pod mounts, and
    # how often to ask (its annotation, read where it mounts one).
    channels: frozenset[str] = frozenset()
    channel_interval_s: int | None = None

    def checkpoint_interval(self, group: str | None) -> int | None:
        """How often its job is asked for a checkpoint when the pod is a job's as `group` says (its
        gang's, or '' for a pod on its own, such as a `basic` PodGroup's): where the pod mounts the
        channel of that name (channel_name, as the bind names the Secret it creates); else None."""
        name = channel_name(group, self.owner.name if self.owner else None, self.name)
        return self.channel_interval_s if name and name in self.channels else None

    @property
    def checkpoint_interval_s(self) -> int | None:
        """checkpoint_interval as a gang's member, where the pod names a group."""
        return self.checkpoint_interval(self.group)

    @property
    def display_name(self) -> str:
        """What the portal calls the job: its owner ("Job train-llm"), else the pod. A JobSet's
        pods are owned by its child Jobs, a LeaderWorkerSet's by its StatefulSets; the team knows
        the JobSet or LeaderWorkerSet, which labels them with its name (NAMED_BY_LABEL)."""
        label, kind = NAMED_BY_LABEL.get(self.owner.kind, ("", "")) if self.owner is not None else ("", "")
        if label and self.labels.get(label):
            return f"{kind} {self.labels[label]}"[:100]
        if self.owner is not None:
            return f"{self.owner.kind} {self.owner.name}"[:100]
        return f"Pod {self.name}"[:100]


@dataclass(frozen=True)
class RefusedPod:
    """A native pod Tessera will not queue, and why (an Event on it says so; it stays Pending)."""

    uid: str
    namespace: str
    name: str
    reason: str
    message: str


def is_native(pod: Any, scheduler_name: str) -> bool:
    """Someone else's pod for our scheduler; the pods Tessera creates itself carry managed-by."""
    labels = pod.metadata.labels or {}
    return (
        pod.spec is not None
        and pod.spec.scheduler_name == scheduler_name
        and labels.get(m.LABEL_MANAGED_BY) != m.MANAGED_BY
    )


def native_pod(pod: Any) -> NativePod:
    """The pod as a job's need; NativeRefusal when its requests or annotations do not say one."""
    meta = pod.metadata
    annotations = meta.annotations or {}
    try:
        devices = pod_device_amounts(pod)
    except (ValueError, ArithmeticError, TypeError) as exc:
        raise NativeRefusal("InvalidGpuRequest", f"A resource request does not parse: {exc}.") from None
    need = _gpu_need(devices, annotations)
    try:  # a gang: the pod's PodGroup (Kubernetes API) else its label, and the fallback annotation
        named = getattr(pod.spec.scheduling_group, "pod_group_name", None)
        group = scheduling_group_name(named) or pod_group_name(meta.labels)
        min_member = annotation_min_member(annotations)
    except GangError as exc:
        raise NativeRefusal("InvalidPodGroup", f"The pod's gang cannot be read: {exc}.") from None
    cpu, memory = _cpu_memory(pod)
    owner = _owner(meta.owner_references)
    channels = mounted_channels(pod)
    return NativePod(
        uid=meta.uid or "",
        namespace=meta.namespace,
        name=meta.name,
        image=next((c.image or "" for c in pod.spec.containers or []), ""),
        **need,
        cpu_cores=cpu,
        memory_gb=memory,
        priority_class=pod.spec.priority_class_name or None,
        priority=pod.spec.priority,
        project=(annotations.get(ANNOTATION_PROJECT) or "").strip() or None,
        accepts_no_isolation=accepts_no_isolation(annotations),
        owner=owner,
        group=group,
        min_member=min_member,
        labels=dict(meta.labels or {}),
        channels=channels,
        channel_interval_s=_channel_interval(annotations) if channels else None,
    )


def _channel_interval(annotations: dict[str, str]) -> int:
    try:
        return channel_interval_s(annotations)
    except ValueError as exc:
        raise NativeRefusal("InvalidCheckpointInterval", f"{exc}.") from None


def read_native(pod: Any) -> NativePod | RefusedPod:
    """native_pod, with a refusal as a value: what the intake lists."""
    try:
        return native_pod(pod)
    except NativeRefusal as refusal:
        meta = pod.metadata
        return RefusedPod(meta.uid or "", meta.namespace, meta.name, refusal.reason, str(refusal))


def _gpu_need(devices: dict[str, Decimal], annotations: dict[str, str]) -> dict[str, Any]:
    if not devices:
        raise NativeRefusal(
            "NoGpuRequest",
            "The pod asks for no GPU: request nvidia.com/gpu, one nvidia.com/mig-<profile>, or nvidia.com/gpu.shared.",
        )
    if len(devices) > 1:
        raise NativeRefusal(
            "InvalidGpuRequest",
            f"The pod asks for {', '.join(sorted(devices))}; ask for one "
            "kind of GPU: whole GPUs, one MIG device or one share.",
        )
    ((resource, amount),) = devices.items()
    if amount != int(amount) or amount < 0:
        raise NativeRefusal("InvalidGpuRequest", f"{resource}: {amount} is not a whole number of devices.")
    count = int(amount)
    if resource == m.GPU_RESOURCE:
        if count > MAX_GPUS_PER_POD:
            raise NativeRefusal("InvalidGpuRequest", f"{count} GPUs in one pod: a pod runs on one node.")
        return {"gpus": count}
    if resource == SHARED_RESOURCE:
        if count != 1:
            raise NativeRefusal("InvalidGpuRequest", f"{SHARED_RESOURCE}: {count}; a pod holds one share.")
        return {"shared": True, "gpu_memory_gb": _memory_need(annotations.get(ANNOTATION_GPU_MEMORY))}
    match = _MIG_RESOURCE.match(resource)
    if match is None:
        raise NativeRefusal(
            "InvalidGpuRequest",
            f"{resource} is not a GPU resource Tessera knows: use "
            "nvidia.com/gpu, nvidia.com/mig-<profile> or nvidia.com/gpu.shared.",
        )
    if count != 1:
        raise NativeRefusal("InvalidGpuRequest", f"{resource}: {count}; a pod holds one MIG device.")
    return {"mig_profile": match.group(1) + match.group(2).replace(".", "+")}


def _memory_need(value: str | None) -> float:
    if value is None:
        raise NativeRefusal(
            "InvalidGpuRequest",
            f'A shared GPU needs the annotation {ANNOTATION_GPU_MEMORY}: "<GB>", the GPU memory the pod uses.',
        )
    try:
        memory = float(value)
    except ValueError:
        memory = -1.0
    if not 0 < memory <= 1024:  # also refuses nan and inf
        raise NativeRefusal(
            "InvalidGpuRequest", f"{ANNOTATION_GPU_MEMORY}: {value!r} is not a memory size in GB above 0."
        )
    return memory


def _cpu_memory(pod: Any) -> tuple[float, float]:
    """CPU cores and memory (GB) the containers request; an unreadable quantity the API server
    would have refused counts as none."""
    cpu = memory = 0.0
    for container in pod.spec.containers or []:
        requests = (container.resources and (container.resources.requests or container.resources.limits)) or {}
        try:
            cpu += float(parse_quantity(requests.get("cpu", "0")))
            memory += float(parse_quantity(requests.get("memory", "0"))) / 1024**3
        except (ValueError, ArithmeticError, TypeError):
            continue
    return cpu, memory


def _owner(references: Any) -> Owner | None:
    refs = list(references or [])
    chosen = next((r for r in refs if r.controller), refs[0] if refs else None)
    if chosen is None:
        return None
    return Owner(
        api_version=chosen.api_version,
        kind=chosen.kind,
        name=chosen.name,
        uid=chosen.uid,
        controller=bool(chosen.controller),
    )


def secret_owner(pod: Any) -> dict:
    """The owner reference of the pod's checkpoint-channel Secret (k8s_channel.py): the pod's
    controlling owner (a Job), so the garbage collector removes the Secret with it, else the pod."""
    owner, meta = _owner(pod.metadata.owner_references), pod.metadata
    if owner is not None and owner.controller:
        return {"apiVersion": owner.api_version, "kind": owner.kind, "name": owner.name, "uid": owner.uid}
    return {"apiVersion": "v1", "kind": "Pod", "name": meta.name, "uid": meta.uid}
