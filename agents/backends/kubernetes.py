"""The Kubernetes backend, with the official `kubernetes` client (docs/design.md §8).

Nodes come from GPU Feature Discovery labels; a job is pods with our schedulerName in the team's
namespace, bound with the binding subresource; preemption annotates, then deletes with a grace
period; MIG layouts change through mig-manager's `nvidia.com/mig.config` node label.
Its parts beside this file: the API's errors in our words (k8s_errors.py), one pod's calls
(k8s_pod_calls.py), the namespaces pods may go to (k8s_namespaces.py), MIG labels (k8s_mig.py),
gangs' Services (k8s_rendezvous.py) and other controllers' pods (k8s_intake.py).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from agents.backends import k8s_manifests as m
from agents.backends.base import (
    BindRequest,
    CheckpointRequest,
    Conflict,
    JobObservation,
    NodeInventory,
    Outcome,
    PreemptRequest,
    Refused,
    RendezvousService,
    RepartitionRequest,
    RepartitionState,
)
from agents.backends.k8s_channel import channel_secret_manifest
from agents.backends.k8s_errors import with_api_errors
from agents.backends.k8s_events import PodEvents
from agents.backends.k8s_intake import NativeIntake
from agents.backends.k8s_mig import MigLabels
from agents.backends.k8s_native import secret_owner
from agents.backends.k8s_pod_cache import PodCache
from agents.backends.k8s_pod_calls import PodCalls
from agents.backends.k8s_podgroups import PodGroups
from agents.backends.k8s_reading import (
    devices_held_by_others,
    mig_held,
    node_inventory,
    pod_observation,
    replicas_held,
)
from agents.backends.k8s_rendezvous import RendezvousServices


@dataclass(frozen=True)
class KubernetesConfig:
    """Where the cluster is and how it is labelled.

    api_client None means the client's default configuration: call
    `kubernetes.config.load_incluster_config()` (or load_kube_config) first.
    """

    api_client: client.ApiClient | None = field(default=None, compare=False)
    scheduler_name: str = "tessera"
    gpu_node_selector: str = "nvidia.com/gpu.present=true"
    leaf_switch_label: str = "tessera.io/leaf-switch"
    tier_label: str = "tessera.io/tier"
    mig_config_label: str = "nvidia.com/mig.config"
    mig_state_label: str = "nvidia.com/mig.config.state"
    # The ConfigMap that the GPU Operator's mig-manager reads (ClusterPolicy migManager.config.name).
    mig_parted_namespace: str = "gpu-operator"
    mig_parted_configmap: str = "tessera-mig-parted-config"
    mig_parted_key: str = "config.yaml"
    request_timeout_s: float = 30.0
    # The namespaces job pods may go to (the teams'); None: any but the cluster's own.
    namespaces: frozenset[str] | None = None
    # Keep our pods in a watched cache for reconcile (the workers: agents/runtime.py); off, every
    # poll lists them, as a short-lived backend (a test, a page) wants.
    watch_pods: bool = False


# Seconds a page waits for a pod's log before saying the cluster did not answer.
LOG_TIMEOUT_S = 5.0


class KubernetesBackend(MigLabels, RendezvousServices, NativeIntake, PodCalls):
    def __init__(self, config: KubernetesConfig | None = None) -> None:
        self.config = config or KubernetesConfig()
        self.core = client.CoreV1Api(self.config.api_client)
        self.events = PodEvents(self.core, self.config.request_timeout_s)
        self.pods = PodCache(self.core, m.JOB_SELECTOR, self.config.request_timeout_s)
        self.podgroups = PodGroups(self.config.api_client, self.config.request_timeout_s)

    # Native pods (agents/backends/k8s_intake.py), with the API's errors in our words.
    native_pods = with_api_errors(NativeIntake.native_pods)
    native_label = with_api_errors(NativeIntake.native_label)
    native_delete_owner = with_api_errors(NativeIntake.native_delete_owner)

    @with_api_errors
    def pod_groups(self, namespace: str) -> dict[str, dict]:
        """The namespace's scheduler-plugins PodGroups by name (agents/backends/k8s_podgroups.py)."""
        return self.podgroups.in_namespace(namespace)

    @with_api_errors
    def scheduling_pod_groups(self, namespace: str) -> dict[str, dict]:
        """The namespace's Kubernetes (scheduling.k8s.io) PodGroups by name; {} where not served."""
        return self.podgroups.scheduling_in_namespace(namespace)

    # -- inventory -------------------------------------------------------------------------

    @with_api_errors
    def inventory(self) -> list[NodeInventory]:
        nodes = self.core.list_node(
            label_selector=self.config.gpu_node_selector,
            _request_timeout=self.config.request_timeout_s,
        )
        held = self._devices_held_by_others()
        labels = {"leaf_switch_label": self.config.leaf_switch_label, "tier_label": self.config.tier_label}
        items = (node_inventory(node, **labels) for node in nodes.items)
        return [dataclasses.replace(item, gpus_used_outside=replicas_held(held.get(item.name, {}), item.gpu_replicas),
                                    mig_used_outside=mig_held(held.get(item.name, {})))
                for item in items]

    def _devices_held_by_others(self) -> dict[str, dict[str, int]]:
        """One list of the bound, unfinished pods that are not Tessera's: the server filters both
        (a label that must be absent is a selector too), so where most pods are ours, as on a
        Tessera cluster, they do not cross the wire each poll; devices_held_by_others checks again."""
        pods = self.core.list_pod_for_all_namespaces(
            field_selector="spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed",
            label_selector=f"!{m.LABEL_JOB}",
            _request_timeout=self.config.request_timeout_s,
        )
        return devices_held_by_others(pods.items)

    # -- jobs ------------------------------------------------------------------------------

    @with_api_errors
    def bind(self, req: BindRequest) -> Outcome:
        pod = self._read_pod(req.namespace, req.pod_name)
        if pod is None and req.native:  # someone else's pod: Tessera has nothing to create it from
            raise Refused(f"pod {req.namespace}/{req.pod_name} was deleted before Tessera could bind it")
        if pod is None:
            pod = self._create_pod(req)
        _check_job(pod, req.job_id)
        if req.checkpoint_token and not req.native:  # before the binding: the kubelet mounts it when it starts
            self._create_token_secret(req, pod.metadata.uid)
        if req.checkpoint_token and req.checkpoint_channel:  # a native pod's, in the volume its owner declared
            self._create_secret(req.namespace, channel_secret_manifest(
                req.checkpoint_channel, req.namespace, req.checkpoint_token, req.checkpoint_url, secret_owner(pod)))
        if m.gang_service(req):  # before the binding: torchrun looks its peers up as it starts
            self._create_rendezvous_service(req)
        bound_to = pod.spec.node_name
        if bound_to == req.node_name:
            return Outcome.ALREADY_DONE
        if bound_to:
            raise Conflict(f"pod {req.namespace}/{req.pod_name} is already on {bound_to}")
        outcome = self._post_binding(req)
        if outcome is Outcome.DONE:  # the kube-scheduler's words, which `kubectl describe` readers know
            what = f"MIG {req.mig_profile}" if req.mig_profile else f"{req.gpu_count} GPU(s)"
            if req.share is not None:
                what = f"a {req.share.memory_mib} MiB share of a GPU"
            self.events.record(pod, "Scheduled",
                               f"Successfully assigned {req.namespace}/{req.pod_name} to {req.node_name} ({what})")
        return outcome

    @with_api_errors
    def request_checkpoint(self, req: CheckpointRequest) -> Outcome:
        pod = self._read_pod(req.namespace, req.pod_name)
        if pod is None:
            return Outcome.GONE
        _check_job(pod, req.job_id)
        if (pod.metadata.annotations or {}).get(m.ANNOTATION_CHECKPOINT) == req.checkpoint_id:
            return Outcome.ALREADY_DONE
        self._annotate(req.namespace, req.pod_name, {
            m.ANNOTATION_CHECKPOINT: req.checkpoint_id,
            m.ANNOTATION_CHECKPOINT_REASON: req.reason,
        })
        self.events.record(pod, "CheckpointRequested",
                           f"Tessera asked for checkpoint {req.checkpoint_id} ({req.reason})")
        return Outcome.DONE

    @with_api_errors
    def preempt(self, req: PreemptRequest) -> Outcome:
        pod = self._read_pod(req.namespace, req.pod_name)
        if pod is None:
            return Outcome.GONE
        _check_job(pod, req.job_id)
        if pod.metadata.deletion_timestamp is not None:
            return Outcome.ALREADY_DONE  # already stopping under an earlier request
        # The annotation lands before SIGTERM, so the workload knows why it is being stopped.
        self._annotate(req.namespace, req.pod_name, {m.ANNOTATION_PREEMPTED: req.reason})
        self.events.record(pod, "Preempted", f"Preempted by Tessera ({req.reason}): stopping with "
                                             f"{req.grace_seconds} s to checkpoint")
        try:
            self.core.delete_namespaced_pod(
                req.pod_name,
                req.namespace,
                grace_period_seconds=req.grace_seconds,
                _request_timeout=self.config.request_timeout_s,
            )
        except ApiException as exc:
            if exc.status == 404:
                return Outcome.GONE
            raise
        return Outcome.DONE

    @with_api_errors
    def rendezvous_services(self) -> list[RendezvousService]:
        return self._rendezvous_services()  # agents/backends/k8s_rendezvous.py

    @with_api_errors
    def remove_rendezvous_service(self, namespace: str, name: str) -> Outcome:
        return self._remove_rendezvous_service(namespace, name)

    def record_waiting(self, job_id: str, namespace: str, reason_code: str, message: str, count: int) -> bool:
        if not self.namespace_allowed(namespace):
            return False
        return self.events.record_waiting(job_id, namespace, reason_code, message, count)

    # -- MIG -------------------------------------------------------------------------------

    @with_api_errors
    def repartition(self, req: RepartitionRequest) -> Outcome:
        return self._repartition(req)  # agents/backends/k8s_mig.py

    @with_api_errors
    def repartition_state(self, node_name: str) -> RepartitionState:
        return self._repartition_state(node_name)

    # -- observations ----------------------------------------------------------------------

    @with_api_errors
    def poll_observations(self) -> list[JobObservation]:
        if self.config.watch_pods:
            self.pods.start()  # its first list runs beside ours: the next poll reads the cache
            cached = self.pods.observations()
            if cached is not None:
                return cached
        pods = self.core.list_pod_for_all_namespaces(
            label_selector=m.JOB_SELECTOR, _request_timeout=self.config.request_timeout_s
        )
        return [obs for obs in map(pod_observation, pods.items) if obs is not None]

    @with_api_errors
    def job_observations(self, job_id: str) -> list[JobObservation]:
        # The API server filters by the job's label: one job's pods cross the wire, not the
        # cluster's (a full list took 0.67 s at 2,000 pods in every action step).
        pods = self.core.list_pod_for_all_namespaces(
            label_selector=f"{m.LABEL_JOB}={job_id}",
            _request_timeout=self.config.request_timeout_s)
        return [obs for obs in map(pod_observation, pods.items) if obs is not None]

    # -- helpers ---------------------------------------------------------------------------

    @with_api_errors
    def pod_log(self, namespace: str, pod_name: str, tail_lines: int, limit_bytes: int) -> str | None:
        self._allowed_namespace(namespace)
        try:
            return self.core.read_namespaced_pod_log(pod_name, namespace, tail_lines=tail_lines,
                                                     limit_bytes=limit_bytes, timestamps=True,
                                                     _request_timeout=LOG_TIMEOUT_S)
        except ApiException as exc:
            if exc.status != 404:
                raise
            return None

    def _node_labels(self, node_name: str) -> dict[str, str]:
        node = self.core.read_node(node_name, _request_timeout=self.config.request_timeout_s)
        return node.metadata.labels or {}


def _check_job(pod: Any, job_id: str) -> None:
    found = (pod.metadata.labels or {}).get(m.LABEL_JOB)
    if found != job_id:
        raise Conflict(f"pod {pod.metadata.name} belongs to job {found!r}, not {job_id!r}")
