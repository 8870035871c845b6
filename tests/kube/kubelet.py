"""A kubelet harness: plays GPU nodes against the real control plane (there is no kubelet here).

What it does, as the kubelet, the NVIDIA device plugin and GPU Feature Discovery would:
- registers each node with GFD's labels, the GPU Operator's `nvidia.com/gpu=present:NoSchedule`
  taint, and `status.capacity`/`allocatable` for `nvidia.com/gpu` (and MIG resources);
- renews the node's Lease in kube-node-lease and keeps its Ready condition, until `silence()`;
- admits the pods bound to its nodes: a pod asking for more of a device than is free fails with
  `OutOf<resource>` (as the kubelet's admission does); an image whose registry ends in `.invalid`
  waits in `ErrImagePull` then `ImagePullBackOff`; otherwise it runs for its TESSERA_RUNTIME_S minus
  TESSERA_RESUME_S (divided by `speed`) and succeeds, unless a test scripted another end;
- finishes graceful deletions: the container stops after min(grace, `stop_s`), the pod is then
  deleted for good (grace 0), as the kubelet does.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime

import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException

GPU = "nvidia.com/gpu"
LEASE_NAMESPACE = "kube-node-lease"


@dataclass(frozen=True)
class GpuNode:
    name: str
    product: str = "NVIDIA-H100-80GB-HBM3"
    gpus: int = 8
    memory_mib: int = 81559
    allocatable_gpus: int | None = None  # None: every GPU (a failed GPU lowers it)
    cpu: str = "64"
    memory: str = "512Gi"
    labels: dict[str, str] = field(default_factory=dict)
    # More of what the device plugin offers: MIG devices ({"nvidia.com/mig-1g.10gb": "7"}).
    devices: dict[str, str] = field(default_factory=dict)

    def all_labels(self) -> dict[str, str]:
        return {"kubernetes.io/hostname": self.name, "kubernetes.io/os": "linux",
                "nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": self.product,
                "nvidia.com/gpu.count": str(self.gpus), "nvidia.com/gpu.memory": str(self.memory_mib),
                "nvidia.com/gpu.family": "hopper", "nvidia.com/mig.capable": "true",
                "nvidia.com/mig.strategy": "mixed", **self.labels}

    def resources(self) -> dict[str, str]:
        gpus = self.gpus if self.allocatable_gpus is None else self.allocatable_gpus
        return {"cpu": self.cpu, "memory": self.memory, "pods": "110", GPU: str(gpus), **self.devices}


@dataclass(frozen=True)
class Ending:
    """How a test wants one pod to end instead of succeeding."""

    phase: str = "Failed"
    reason: str = "Error"
    exit_code: int = 1


def _now() -> datetime:
    return datetime.now(UTC)


def _requests(pod) -> dict[str, int]:
    wanted: dict[str, int] = {}
    for container in pod.spec.containers:
        for name, quantity in ((container.resources and container.resources.limits) or {}).items():
            if name.startswith("nvidia.com/"):
                wanted[name] = wanted.get(name, 0) + int(quantity)
    return wanted


def _env(pod, name: str) -> float:
    for var in pod.spec.containers[0].env or []:
        if var.name == name and var.value:
            return float(var.value)
    return 0.0


class Kubelet:
    def __init__(self, api_client: client.ApiClient, *, speed: float = 1.0, stop_s: float = 0.5,
                 period_s: float = 0.25) -> None:
        self.core = client.CoreV1Api(api_client)
        self.leases = client.CoordinationV1Api(api_client)
        self.speed, self.stop_s, self.period_s = speed, stop_s, period_s
        self.nodes: dict[str, GpuNode] = {}
        self.silent: set[str] = set()
        self.endings: dict[str, Ending] = {}  # pod name -> scripted end
        self.running_since: dict[str, float] = {}  # pod uid -> monotonic start
        self.stopping_since: dict[str, float] = {}
        self.pulling_since: dict[str, float] = {}
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._renewed = 0.0

    # -- the test's controls ---------------------------------------------------------------------

    def add_node(self, node: GpuNode) -> None:
        body = {"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": node.name, "labels": node.all_labels()},
                "spec": {"taints": [{"key": GPU, "value": "present", "effect": "NoSchedule"}]}}
        self.core.create_node(body)
        with self._lock:
            self.nodes[node.name] = node
        self._report_status(node)
        self._renew_lease(node.name)

    def remove_node(self, name: str) -> None:
        """`kubectl delete node`: the node object goes and its kubelet stops reporting."""
        with self._lock:
            self.nodes.pop(name, None)
        self.core.delete_node(name)

    def silence(self, name: str) -> None:
        """The node's kubelet dies: no more leases, status or pod changes."""
        with self._lock:
            self.silent.add(name)

    def end_pod(self, pod_name: str, ending: Ending) -> None:
        with self._lock:
            self.endings[pod_name] = ending

    def start(self) -> Kubelet:
        self._thread = threading.Thread(target=self._loop, name="kubelet-harness", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=10)

    def remove_nodes(self) -> None:
        for name in list(self.nodes):
            try:
                self.core.delete_node(name)
            except ApiException as error:
                if error.status != 404:
                    raise

    # -- the loop --------------------------------------------------------------------------------

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.step()
            except urllib3.exceptions.HTTPError:
                pass  # the API server is restarting: a kubelet tries again, and so do we
            except Exception as error:  # noqa: BLE001 - a test reads errors; the loop goes on
                self.errors.append(repr(error))
            self._stop.wait(self.period_s)

    def step(self) -> None:
        with self._lock:
            live = {name: node for name, node in self.nodes.items() if name not in self.silent}
        if time.monotonic() - self._renewed > 2.0:
            for node in live.values():
                try:
                    self._renew_lease(node.name)
                    self._report_status(node)
                except ApiException as error:
                    if error.status != 404 or node.name in self.nodes:
                        raise  # else removed by the test meanwhile: its kubelet is gone too
            self._renewed = time.monotonic()
        pods = [p for p in self.core.list_pod_for_all_namespaces().items if p.spec.node_name in live]
        for pod in pods:
            self._pod_step(pod, live[pod.spec.node_name], pods)

    # -- node ------------------------------------------------------------------------------------

    def _renew_lease(self, name: str) -> None:
        body = {"metadata": {"name": name, "namespace": LEASE_NAMESPACE},
                "spec": {"holderIdentity": name, "leaseDurationSeconds": 40, "renewTime": _now()}}
        try:
            self.leases.replace_namespaced_lease(name, LEASE_NAMESPACE, self._with_version(name, body))
        except ApiException as error:
            if error.status != 404:
                raise
            self.leases.create_namespaced_lease(LEASE_NAMESPACE, body)

    def _with_version(self, name: str, body: dict) -> dict:
        current = self.leases.read_namespaced_lease(name, LEASE_NAMESPACE)
        return {**body, "metadata": {**body["metadata"], "resourceVersion": current.metadata.resource_version}}

    def _report_status(self, node: GpuNode) -> None:
        now = _now()
        ready = {"type": "Ready", "status": "True", "reason": "KubeletReady",
                 "message": "kubelet is posting ready status", "lastHeartbeatTime": now, "lastTransitionTime": now}
        self.core.patch_node_status(node.name, {"status": {
            "capacity": {**node.resources(), GPU: str(node.gpus)}, "allocatable": node.resources(),
            "conditions": [ready],
            "nodeInfo": {"kubeletVersion": "v1.20.2", "containerRuntimeVersion": "containerd://1.7.0",
                         "architecture": "amd64", "operatingSystem": "linux", "osImage": "harness",
                         "kernelVersion": "6.1", "kubeProxyVersion": "v1.20.2", "machineID": node.name,
                         "systemUUID": node.name, "bootID": node.name}}})

    # -- pods ------------------------------------------------------------------------------------

    def _pod_step(self, pod, node: GpuNode, pods) -> None:
        uid, phase = pod.metadata.uid, pod.status.phase
        if pod.metadata.deletion_timestamp is not None:
            self._finish_deletion(pod)
        elif phase == "Pending" and uid not in self.running_since:
            self._admit(pod, node, pods)
        elif phase == "Running":
            ending = self.endings.get(pod.metadata.name)
            runtime = max(0.0, _env(pod, "TESSERA_RUNTIME_S") - _env(pod, "TESSERA_RESUME_S")) / self.speed
            if ending is not None:
                self._terminate(pod, ending.phase, ending.reason, ending.exit_code)
            elif time.monotonic() - self.running_since.get(uid, time.monotonic()) >= runtime:
                self._terminate(pod, "Succeeded", "Completed", 0)

    def _admit(self, pod, node: GpuNode, pods) -> None:
        allocatable = node.resources()
        for resource, wanted in _requests(pod).items():
            used = sum(_requests(other).get(resource, 0) for other in pods if other.metadata.uid != pod.metadata.uid
                       and other.spec.node_name == pod.spec.node_name and other.status.phase == "Running")
            capacity = int(allocatable.get(resource, "0"))
            if used + wanted > capacity:
                message = (f"Pod Node didn't have enough resource: {resource}, requested: {wanted}, "
                           f"used: {used}, capacity: {capacity}")
                self._status(pod, {"phase": "Failed", "reason": f"OutOf{resource}", "message": message})
                return
        image = pod.spec.containers[0].image or ""
        if image.split("/", 1)[0].endswith(".invalid"):
            self._pull_fails(pod, image)
            return
        self.running_since[pod.metadata.uid] = time.monotonic()
        now = _now()
        # An address, as the CNI plugin gives one: the endpoints controller publishes it for the
        # pod's Services (what the cluster's DNS then answers).
        ip = f"10.244.{len(self.running_since) // 250 % 250}.{len(self.running_since) % 250 + 1}"
        self._status(pod, {"phase": "Running", "startTime": now, "podIP": ip, "podIPs": [{"ip": ip}], "conditions": [
            {"type": "Ready", "status": "True", "lastTransitionTime": now}],
            "containerStatuses": [self._container(pod, {"running": {"startedAt": now}}, ready=True)]})

    def _pull_fails(self, pod, image: str) -> None:
        first = self.pulling_since.setdefault(pod.metadata.uid, time.monotonic())
        reason = "ErrImagePull" if time.monotonic() - first < 1.0 else "ImagePullBackOff"
        message = f'Back-off pulling image "{image}"' if reason == "ImagePullBackOff" else \
            f'failed to pull and unpack image "{image}": failed to resolve reference: no such host'
        self._status(pod, {"phase": "Pending", "containerStatuses": [
            self._container(pod, {"waiting": {"reason": reason, "message": message}})]})

    def _terminate(self, pod, phase: str, reason: str, exit_code: int) -> None:
        now = _now()
        started = self.running_since.get(pod.metadata.uid)
        terminated = {"exitCode": exit_code, "reason": reason, "finishedAt": now,
                      "startedAt": now if started is None else None}
        self._status(pod, {"phase": phase, "containerStatuses": [
            self._container(pod, {"terminated": {k: v for k, v in terminated.items() if v is not None}})]})

    def _finish_deletion(self, pod) -> None:
        uid = pod.metadata.uid
        first = self.stopping_since.setdefault(uid, time.monotonic())
        grace = pod.metadata.deletion_grace_period_seconds or 0
        if pod.status.phase not in ("Succeeded", "Failed"):
            if time.monotonic() - first < min(grace, self.stop_s):
                return
            self._terminate(pod, "Failed", "Error", 143)  # SIGTERM
        try:
            self.core.delete_namespaced_pod(pod.metadata.name, pod.metadata.namespace, grace_period_seconds=0,
                                            body=client.V1DeleteOptions(grace_period_seconds=0,
                                                                        preconditions={"uid": uid}))
        except ApiException as error:
            if error.status not in (404, 409):
                raise

    def _container(self, pod, state: dict, ready: bool = False) -> dict:
        container = pod.spec.containers[0]
        return {"name": container.name, "image": container.image or "", "imageID": "", "ready": ready,
                "restartCount": 0, "state": state}

    def _status(self, pod, status: dict) -> None:
        try:
            self.core.patch_namespaced_pod_status(pod.metadata.name, pod.metadata.namespace, {"status": status})
        except ApiException as error:
            if error.status != 404:  # deleted meanwhile
                raise
