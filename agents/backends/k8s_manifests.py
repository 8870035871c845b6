"""Pure builders for everything the Kubernetes backend sends: plain dicts, no client calls.

Kept apart from the backend so that tests can check each one against the official schemas.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Collection, Mapping, Sequence

from agents.backends.base import Attachments, BindRequest, GpuShare, MigSlot, Rendezvous
from scheduling.kube_names import DNS_LABEL, DNS_SUBDOMAIN, LABEL_VALUE

LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGED_BY = "tessera"
MANAGED_SELECTOR = f"{LABEL_MANAGED_BY}={MANAGED_BY}"
LABEL_JOB = "tessera.io/job-id"
# Every pod of a Tessera job: its own (managed-by) and the native pods its intake labelled.
JOB_SELECTOR = LABEL_JOB
LABEL_TEAM = "tessera.io/team"
LABEL_PROJECT = "tessera.io/project"
LABEL_KIND = "tessera.io/job-kind"
# The workload sees its annotations in a file (downward API) and checkpoints when this changes.
ANNOTATION_CHECKPOINT = "tessera.io/checkpoint-request"
ANNOTATION_CHECKPOINT_REASON = "tessera.io/checkpoint-reason"
ANNOTATION_PREEMPTED = "tessera.io/preempted"
PODINFO_DIR = "/etc/tessera/podinfo"
# The checkpoint channel's other half (CONTRACTS.md): the pod's token for the confirmation endpoint.
TOKEN_DIR = "/var/run/secrets/tessera/checkpoint-token"
TOKEN_KEY = "token"
GPU_RESOURCE = "nvidia.com/gpu"
MPS_MEMORY_LIMIT_ENV = "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"
TESSERA_CONFIG_PREFIX = "tessera-"  # the mig-parted configs Tessera writes (agents/mig.py names them)
MIG_CONFIGS_RECENT = 16
GPU_TOLERATION = {"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}
# The patches below go as merge patches, not the client's default pick (a JSON patch, which wants a
# list of operations).
MERGE_PATCH = "application/merge-patch+json"

# A DNS-1035 label (a Service's name): it may not start with a digit.
_DNS_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


def check_name(value: str, pattern: re.Pattern, limit: int, what: str) -> str:
    # The schemas say only "string"; the API server would refuse these later, less clearly.
    if len(value) > limit or not pattern.match(value):
        raise ValueError(f"{what} {value!r} is not a valid Kubernetes name or label value")
    return value


def mig_resource_name(profile: str) -> str:
    """`1g.10gb+me` -> `nvidia.com/mig-1g.10gb.me`, as the device plugin names it."""
    return f"nvidia.com/mig-{profile.replace('+', '.')}"


def job_labels(req: BindRequest) -> dict[str, str]:
    ours = {
        LABEL_MANAGED_BY: MANAGED_BY,
        LABEL_JOB: req.job_id,
        LABEL_TEAM: req.namespace,
        LABEL_PROJECT: req.project,
        LABEL_KIND: req.job_kind,
    }
    labels = {**dict(req.labels), **ours}  # ours win: the watch and selectors rely on them
    for value in labels.values():
        check_name(value, LABEL_VALUE, 63, "label value")
    return labels


def _gpu_request(req: BindRequest, mig_as_gpu: bool) -> tuple[str, str]:
    if req.share is not None:
        return share_request(req.share)
    if req.mig_profile is None:
        return GPU_RESOURCE, str(req.gpu_count)
    # With the device plugin's "single" strategy, MIG devices are offered as nvidia.com/gpu.
    return (GPU_RESOURCE if mig_as_gpu else mig_resource_name(req.mig_profile)), "1"


def share_request(share: GpuShare) -> tuple[str, str]:
    """One replica of a sharing device plugin, whatever the memory: asking for more than one never
    meant more of the GPU (and fails where the plugin has failRequestsGreaterThanOne)."""
    return share.resource, "1"


def share_env(share: GpuShare | None) -> list[dict]:
    """Under MPS the pod is pinned to its own memory need (device 0 is its one visible GPU), below the
    replica's limit the engine checked: it cannot take more than was counted for it. Time-slicing
    has no such limit to set (docs/reference/gpu-sharing.md §3)."""
    if share is None or not share.mps:
        return []
    return [{"name": MPS_MEMORY_LIMIT_ENV, "value": f"0={share.memory_mib}M"}]


def token_secret_name(pod_name: str) -> str:
    return check_name(f"{pod_name}-checkpoint-token", DNS_SUBDOMAIN, 253, "secret name")


def pod_manifest(req: BindRequest, scheduler_name: str, mig_as_gpu: bool = False) -> dict:
    """The job's pod, left for our scheduler (schedulerName) to bind."""
    check_name(req.namespace, DNS_LABEL, 63, "namespace")
    check_name(req.pod_name, DNS_SUBDOMAIN, 253, "pod name")
    if not req.image.strip():  # no default: a made-up image would only fail later, as ImagePullBackOff
        raise ValueError("The job names no container image to run.")
    resource, quantity = _gpu_request(req, mig_as_gpu)
    spec: dict = {
        "schedulerName": scheduler_name,
        "restartPolicy": "Never",  # the scheduler requeues; kubelet restarts would hide failures
        "tolerations": [GPU_TOLERATION],
        "containers": [_container(req, resource, quantity)],
        "volumes": _volumes(req),
    }
    if req.priority_class:
        spec["priorityClassName"] = req.priority_class
    if req.grace_seconds is not None:
        spec["terminationGracePeriodSeconds"] = req.grace_seconds
    labels = job_labels(req)
    if gang_service(req):
        spec.update(rendezvous_dns(req.rendezvous))
        labels[LABEL_RENDEZVOUS] = req.rendezvous.service
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": req.pod_name, "namespace": req.namespace, "labels": labels},
        "spec": spec,
    }


def _volumes(req: BindRequest) -> list[dict]:
    # The kubelet refreshes this file when Tessera annotates the pod: the workload reads its
    # checkpoint requests there, with no API rights.
    volumes = [{"name": "tessera-podinfo", "downwardAPI": {"items": [
        {"path": "annotations", "fieldRef": {"fieldPath": "metadata.annotations"}}]}}]
    if req.checkpoint_token:
        volumes.append({"name": "tessera-checkpoint-token", "secret": {
            "secretName": token_secret_name(req.pod_name), "defaultMode": 0o444,
            "items": [{"key": TOKEN_KEY, "path": TOKEN_KEY}]}})
    return volumes + workload_volumes(req)


def _mounts(req: BindRequest) -> list[dict]:
    mounts = [{"name": "tessera-podinfo", "mountPath": PODINFO_DIR, "readOnly": True}]
    if req.checkpoint_token:
        mounts.append({"name": "tessera-checkpoint-token", "mountPath": TOKEN_DIR, "readOnly": True})
    return mounts + workload_mounts(req.attachments)


def _channel_env(req: BindRequest) -> list[dict]:
    env = [{"name": "TESSERA_JOB_ID", "value": req.job_id},
           {"name": "TESSERA_PODINFO_DIR", "value": PODINFO_DIR}]
    if req.checkpoint_token:
        env += [{"name": "TESSERA_CHECKPOINT_URL", "value": req.checkpoint_url},
                {"name": "TESSERA_CHECKPOINT_TOKEN_FILE", "value": f"{TOKEN_DIR}/{TOKEN_KEY}"}]
    return env


def token_secret_manifest(req: BindRequest, pod_uid: str) -> dict:
    """The pod's checkpoint token. Owned by the pod, so the garbage collector removes it with it."""
    return {
        "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {
            "name": token_secret_name(req.pod_name), "namespace": req.namespace,
            "labels": {LABEL_MANAGED_BY: MANAGED_BY, LABEL_JOB: req.job_id},
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": req.pod_name, "uid": pod_uid}],
        },
        "stringData": {TOKEN_KEY: req.checkpoint_token},
    }


def _container(req: BindRequest, resource: str, quantity: str) -> dict:
    env = _channel_env(req) + [{"name": name, "value": value} for name, value in req.env] + share_env(req.share)
    if gang_service(req):
        env += rendezvous_env(req.rendezvous)
    memory = f"{req.memory_mib}Mi"
    container = {
        "name": "job",
        "image": req.image,
        "command": list(req.command),
        "env": env,
        "resources": {
            "requests": {"cpu": f"{req.cpu_millicores}m", "memory": memory, resource: quantity},
            # Extended resources need limit == request; a memory limit keeps neighbours safe.
            "limits": {"memory": memory, resource: quantity},
        },
        "volumeMounts": _mounts(req),
    }
    if req.attachments.env_secret:
        container["envFrom"] = [{"secretRef": {"name": req.attachments.env_secret}}]
    return container


# -- what a multi-pod job needs to start torchrun, and what its team attaches ---------------------

LABEL_RENDEZVOUS = "tessera.io/rendezvous"  # the run's headless Service selects its pods by it
SHM_DIR = "/dev/shm"
SECRET_FILES_DIR = "/etc/secrets"  # a team's Secret as files: /etc/secrets/<name>/<key>


def gang_service(req: BindRequest) -> bool:
    """Several pods meet by name. A pod of its own gets no Service and no rendezvous settings:
    `torchrun --standalone` needs none, and a WORLD_SIZE above 1 would tell a plain script's
    libraries (DeepSpeed, accelerate) to wait for ranks that never come."""
    return req.rendezvous is not None and req.rendezvous.members > 1


def master_addr(rdzv: Rendezvous) -> str:
    # The short name resolves through the pod's DNS search path (its namespace first), whatever
    # the cluster's domain is called.
    return f"{rdzv.host(0)}.{rdzv.service}"


def rendezvous_env(rdzv: Rendezvous) -> list[dict]:
    """torchrun's environment. It also reads its flags from PET_<FLAG>, so a plain
    `torchrun train.py` starts every member with no flags of its own (torchrun then sets each
    worker's RANK and WORLD_SIZE); a script started once per pod without torchrun reads these
    (RANK is this pod's first process)."""
    values = {
        "MASTER_ADDR": master_addr(rdzv), "MASTER_PORT": str(rdzv.port),
        "WORLD_SIZE": str(rdzv.world_size), "RANK": str(rdzv.first_rank),
        "NODE_RANK": str(rdzv.member), "NNODES": str(rdzv.members), "LOCAL_WORLD_SIZE": str(rdzv.nproc),
        "PET_MASTER_ADDR": master_addr(rdzv), "PET_MASTER_PORT": str(rdzv.port),
        "PET_NNODES": str(rdzv.members), "PET_NODE_RANK": str(rdzv.member), "PET_NPROC_PER_NODE": str(rdzv.nproc),
    }
    return [{"name": name, "value": value} for name, value in values.items()]


def rendezvous_dns(rdzv: Rendezvous) -> dict:
    """The pod's hostname and subdomain: with the headless Service of the same name, the cluster's
    DNS answers <hostname>.<service> with the pod's address."""
    check_name(rdzv.service, _DNS_1035, 63, "service name")
    return {"hostname": check_name(rdzv.host(rdzv.member), DNS_LABEL, 63, "hostname"), "subdomain": rdzv.service}


def rendezvous_service_manifest(req: BindRequest) -> dict:
    """The run's headless Service. Addresses are published before the pods are ready: torchrun
    looks its peers up while starting, long before any readiness a probe would report."""
    rdzv = req.rendezvous
    assert rdzv is not None
    return {
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": check_name(rdzv.service, _DNS_1035, 63, "service name"), "namespace": req.namespace,
                     "labels": {LABEL_MANAGED_BY: MANAGED_BY, LABEL_JOB: req.job_id, LABEL_RENDEZVOUS: rdzv.service}},
        "spec": {"clusterIP": "None", "selector": {LABEL_RENDEZVOUS: rdzv.service}, "publishNotReadyAddresses": True,
                 "ports": [{"name": "rendezvous", "port": rdzv.port, "protocol": "TCP"}]},
    }


def shm_size_mib(memory_mib: int) -> int:
    """A memory-backed /dev/shm counts against the pod's memory limit: half of it, so the
    DataLoader's workers and NCCL have room without starving the training process."""
    return max(64, memory_mib // 2)


def workload_volumes(req: BindRequest) -> list[dict]:
    # The container runtime's default /dev/shm is 64 MiB: DataLoader workers and NCCL fail on it.
    volumes = [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": f"{shm_size_mib(req.memory_mib)}Mi"}}]
    extra = req.attachments
    if extra.volume_claim:
        volumes.append({"name": "team-volume", "persistentVolumeClaim": {
            "claimName": check_name(extra.volume_claim, DNS_SUBDOMAIN, 253, "claim name")}})
    if extra.file_secret:
        volumes.append({"name": "team-secret", "secret": {
            "secretName": check_name(extra.file_secret, DNS_SUBDOMAIN, 253, "secret name")}})
    if extra.env_secret:
        check_name(extra.env_secret, DNS_SUBDOMAIN, 253, "secret name")
    return volumes


def workload_mounts(extra: Attachments) -> list[dict]:
    mounts = [{"name": "dshm", "mountPath": SHM_DIR}]
    if extra.volume_claim:
        mounts.append({"name": "team-volume", "mountPath": extra.volume_mount_path})
    if extra.file_secret:
        mounts.append({"name": "team-secret", "mountPath": f"{SECRET_FILES_DIR}/{extra.file_secret}",
                       "readOnly": True})
    return mounts


def native_label_patch(pod_uid: str, labels: Mapping[str, str], job_id: str, team: str) -> list[dict]:
    """A JSON patch that labels a native pod as job `job_id`'s, only if it is still the pod the
    intake read (the uid test: a pod deleted and created again under its name is a new pod)."""
    merged = {**dict(labels), LABEL_JOB: check_name(job_id, LABEL_VALUE, 63, "label value"),
              LABEL_TEAM: check_name(team, LABEL_VALUE, 63, "label value")}
    return [{"op": "test", "path": "/metadata/uid", "value": pod_uid},
            {"op": "add", "path": "/metadata/labels", "value": merged}]


def binding_manifest(pod_name: str, namespace: str, node_name: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": pod_name, "namespace": namespace},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node_name},
    }


def annotation_patch(annotations: Mapping[str, str]) -> dict:
    """A merge patch that sets these annotations and leaves the others."""
    return {"metadata": {"annotations": dict(annotations)}}


def label_patch(labels: Mapping[str, str | None]) -> dict:
    """A merge patch that sets these labels (None removes one) and leaves the others."""
    return {"metadata": {"labels": dict(labels)}}


def mig_config_name(node_name: str, layouts: Mapping[int, Sequence[MigSlot]]) -> str:
    """A stable name for one node-wide layout: the same layout always gets the same name."""
    canonical = {
        str(gpu): sorted((s.profile, s.start) for s in slots) for gpu, slots in layouts.items()
    }
    digest = hashlib.sha256(json.dumps([node_name, canonical], sort_keys=True).encode())
    return f"{TESSERA_CONFIG_PREFIX}{digest.hexdigest()[:12]}"


def config_map_manifest(name: str, namespace: str, data: Mapping[str, str]) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace, "labels": {"app.kubernetes.io/part-of": "tessera"}},
            "data": dict(data)}


def mig_parted_config_merge(document: dict | None, config_name: str,
                            layouts: Mapping[int, Sequence[MigSlot]], keep: Collection[str] | None = None) -> dict:
    """`document` (a mig-parted config file, or None) with the entry for `config_name` added.

    With `keep` (the configs nodes name now), Tessera's own entries (`tessera-…`) beyond those and
    the MIG_CONFIGS_RECENT newest are dropped: the newest cover a worker that published its config
    but has not yet labelled its node. Entries are in the order they were added; entries of other
    names are the cluster admin's and stay."""
    merged = {"version": "v1", "mig-configs": {}}
    merged.update(document or {})
    configs = dict(merged.get("mig-configs") or {})
    configs.pop(config_name, None)
    configs.update(mig_parted_config(config_name, layouts)["mig-configs"])  # the newest, last
    if keep is not None:
        ours = [name for name in configs if name.startswith(TESSERA_CONFIG_PREFIX) and name not in keep]
        for name in ours[:-MIG_CONFIGS_RECENT]:
            del configs[name]
    merged["mig-configs"] = configs
    return merged


def mig_parted_config(config_name: str, layouts: Mapping[int, Sequence[MigSlot]]) -> dict:
    """The mig-parted config entry that mig-manager applies for `config_name`.

    mig-parted takes profile counts per device, not start slots: it picks placements itself, so
    the slots we chose are a plan that the node agent's report later confirms or corrects.
    """
    entries = []
    for gpu in sorted(layouts):
        counts = Counter(slot.profile for slot in layouts[gpu])
        entry = {"devices": [gpu], "mig-enabled": bool(counts)}
        if counts:
            entry["mig-devices"] = dict(sorted(counts.items()))
        entries.append(entry)
    return {"version": "v1", "mig-configs": {config_name: entries}}
