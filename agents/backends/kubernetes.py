"""The Kubernetes backend, with the official `kubernetes` client (docs/design.md §8).

Nodes come from GPU Feature Discovery labels; a job is pods with our schedulerName in the team's
namespace, bound with the binding subresource; preemption annotates, then deletes with a grace
period; MIG layouts change through mig-manager's `nvidia.com/mig.config` node label.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from agents.backends import k8s_manifests as m
from agents.backends.base import (
    BindRequest,
    CheckpointRequest,
    Conflict,
    JobObservation,
    MigStrategy,
    NodeInventory,
    Outcome,
    PreemptRequest,
    Refused,
    RendezvousService,
    RepartitionRequest,
    RepartitionState,
    TransientBackendError,
)
from agents.backends.k8s_channel import channel_secret_manifest
from agents.backends.k8s_events import PodEvents
from agents.backends.k8s_intake import NativeIntake
from agents.backends.k8s_mig import MigLabels
from agents.backends.k8s_native import secret_owner
from agents.backends.k8s_pod_cache import PodCache
from agents.backends.k8s_podgroups import PodGroups
from agents.backends.k8s_reading import (
    GFD_MIG_STRATEGY,
    devices_held_by_others,
    mig_held,
    node_inventory,
    node_share,
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


# Never a job's namespace, whatever a team is called: the cluster's own and Tessera's.
SYSTEM_NAMESPACES = frozenset({"kube-system", "kube-public", "kube-node-lease", "default", "tessera-system",
                               "gpu-operator", "nvidia-gpu-operator"})


# Seconds a page waits for a pod's log before saying the cluster did not answer.
LOG_TIMEOUT_S = 5.0
RETRYABLE_STATUSES = {429, 500, 502, 503, 504}
# Refusals a retry cannot mend: validation (400, 422) and admission or authorization (403).
REFUSED_STATUSES = {400, 403, 422}
RBAC_DENIAL = re.compile(r'User "[^"]*" cannot ')


def cluster_words(exc: ApiException) -> str:
    """The API server's own message (its Status body), else the HTTP reason."""
    try:
        message = json.loads(exc.body or "{}").get("message")
    except (ValueError, AttributeError):
        message = None
    return message or f"{exc.status} {exc.reason}"


@contextmanager
def api_errors():
    """A throttled, overloaded or unreachable API server (a restart refuses connections: urllib3's
    MaxRetryError) becomes a TransientBackendError, which the workers retry with backoff; a refusal
    for good becomes Refused, in the cluster's words; other API errors stay what they are."""
    try:
        yield
    except ApiException as exc:
        if exc.status in RETRYABLE_STATUSES:
            raise TransientBackendError(f"Kubernetes API answered {exc.status}: {exc.reason}") from exc
        if exc.status == 403 and RBAC_DENIAL.search(cluster_words(exc)):
            # Tessera's own rights, not the job: a restarting server denies until its RBAC cache has
            # synced (seen on the real one), and a wrong deploy/ needs the operator. Retried, logged.
            raise TransientBackendError(f"Kubernetes API denied Tessera: {cluster_words(exc)}") from exc
        if exc.status in REFUSED_STATUSES:
            raise Refused(cluster_words(exc)) from exc
        raise
    except urllib3.exceptions.HTTPError as exc:  # connection refused or reset, timed out
        raise TransientBackendError(f"Kubernetes API unreachable: {exc}") from exc


def _api_errors(method):
    @functools.wraps(method)
    def wrapper(*args, **kwargs):
        with api_errors():
            return method(*args, **kwargs)
    return wrapper


class KubernetesBackend(MigLabels, RendezvousServices, NativeIntake):
    def __init__(self, config: KubernetesConfig | None = None) -> None:
        self.config = config or KubernetesConfig()
        self.core = client.CoreV1Api(self.config.api_client)
        self.events = PodEvents(self.core, self.config.request_timeout_s)
        self.pods = PodCache(self.core, m.JOB_SELECTOR, self.config.request_timeout_s)
        self.podgroups = PodGroups(self.config.api_client, self.config.request_timeout_s)

    # Native pods (agents/backends/k8s_intake.py), with the API's errors in our words.
    native_pods = _api_errors(NativeIntake.native_pods)
    native_label = _api_errors(NativeIntake.native_label)
    native_delete_owner = _api_errors(NativeIntake.native_delete_owner)

    @_api_errors
    def pod_groups(self, namespace: str) -> dict[str, dict]:
        """The namespace's scheduler-plugins PodGroups by name (agents/backends/k8s_podgroups.py)."""
        return self.podgroups.in_namespace(namespace)

    @_api_errors
    def scheduling_pod_groups(self, namespace: str) -> dict[str, dict]:
        """The namespace's Kubernetes (scheduling.k8s.io) PodGroups by name; {} where not served."""
        return self.podgroups.scheduling_in_namespace(namespace)

    # -- inventory -------------------------------------------------------------------------

    @_api_errors
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

    @_api_errors
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

    @_api_errors
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

    @_api_errors
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

    @_api_errors
    def rendezvous_services(self) -> list[RendezvousService]:
        return self._rendezvous_services()  # agents/backends/k8s_rendezvous.py

    @_api_errors
    def remove_rendezvous_service(self, namespace: str, name: str) -> Outcome:
        return self._remove_rendezvous_service(namespace, name)

    def record_waiting(self, job_id: str, namespace: str, reason_code: str, message: str, count: int) -> bool:
        if not self.namespace_allowed(namespace):
            return False
        return self.events.record_waiting(job_id, namespace, reason_code, message, count)

    # -- MIG -------------------------------------------------------------------------------

    @_api_errors
    def repartition(self, req: RepartitionRequest) -> Outcome:
        return self._repartition(req)  # agents/backends/k8s_mig.py

    @_api_errors
    def repartition_state(self, node_name: str) -> RepartitionState:
        return self._repartition_state(node_name)

    # -- observations ----------------------------------------------------------------------

    @_api_errors
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

    @_api_errors
    def job_observations(self, job_id: str) -> list[JobObservation]:
        # The API server filters by the job's label: one job's pods cross the wire, not the
        # cluster's (a full list took 0.67 s at 2,000 pods in every action step).
        pods = self.core.list_pod_for_all_namespaces(
            label_selector=f"{m.LABEL_JOB}={job_id}",
            _request_timeout=self.config.request_timeout_s)
        return [obs for obs in map(pod_observation, pods.items) if obs is not None]

    # -- helpers ---------------------------------------------------------------------------

    @_api_errors
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

    def _read_pod(self, namespace: str, name: str) -> Any:
        try:
            return self.core.read_namespaced_pod(
                name, namespace, _request_timeout=self.config.request_timeout_s
            )
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def _create_pod(self, req: BindRequest) -> Any:
        self._require_namespace(req.namespace)
        req = self._share_on_node(req)
        manifest = m.pod_manifest(req, self.config.scheduler_name, self._mig_as_gpu(req))
        try:
            return self.core.create_namespaced_pod(
                req.namespace, manifest, _request_timeout=self.config.request_timeout_s
            )
        except ApiException as exc:
            if exc.status != 409:
                raise
        # Someone (a retried task) created it between our read and our create: use theirs.
        return self.core.read_namespaced_pod(req.pod_name, req.namespace)

    def _create_token_secret(self, req: BindRequest, pod_uid: str) -> None:
        self._create_secret(req.namespace, m.token_secret_manifest(req, pod_uid))

    def _create_secret(self, namespace: str, manifest: dict) -> None:
        """Create a token Secret; one already there holds the same token (a retried bind derives
        the same one), so the backend needs no right to read or change Secrets."""
        try:
            self.core.create_namespaced_secret(namespace, manifest, _request_timeout=self.config.request_timeout_s)
        except ApiException as exc:
            if exc.status != 409:
                raise

    def namespace_allowed(self, namespace: str) -> bool:
        """Whether job pods may run in the namespace (config.namespaces, never the cluster's own)."""
        try:
            self._allowed_namespace(namespace)
        except Refused:
            return False
        return True

    def _allowed_namespace(self, namespace: str) -> None:
        allowed = self.config.namespaces
        system = SYSTEM_NAMESPACES | {self.config.mig_parted_namespace}  # wherever the GPU Operator runs
        if namespace in system or (allowed is not None and namespace not in allowed):
            raise Refused(f"namespace {namespace!r} is not one Tessera may place pods in")

    def _require_namespace(self, namespace: str) -> None:
        self._allowed_namespace(namespace)
        try:
            self.core.read_namespace(namespace, _request_timeout=self.config.request_timeout_s)
        except ApiException as exc:
            if exc.status == 404:
                raise Refused(f"team namespace {namespace!r} does not exist") from exc
            raise

    def _share_on_node(self, req: BindRequest) -> BindRequest:
        """A share asks for a replica as its node's device plugin offers them now (k8s_reading.node_share)."""
        if req.share is None:
            return req
        node = self.core.read_node(req.node_name, _request_timeout=self.config.request_timeout_s)
        return dataclasses.replace(req, share=node_share(node, req.share))

    def _mig_as_gpu(self, req: BindRequest) -> bool:
        if req.mig_profile is None:
            return False
        strategy = self._node_labels(req.node_name).get(GFD_MIG_STRATEGY)
        return strategy == MigStrategy.SINGLE.value

    def _post_binding(self, req: BindRequest) -> Outcome:
        body = m.binding_manifest(req.pod_name, req.namespace, req.node_name)
        try:
            # _preload_content=False: the server answers a Status, which the client would try to
            # read as a V1Binding and fail on (kubernetes-client/python #547, #825).
            response = self.core.create_namespaced_pod_binding(
                req.pod_name, req.namespace, body, _preload_content=False,
                _request_timeout=self.config.request_timeout_s,
            )
        except ApiException as exc:
            if exc.status != 409:
                raise
            pod = self._read_pod(req.namespace, req.pod_name)  # a retry raced us: who won?
            if pod is not None and pod.spec.node_name == req.node_name:
                return Outcome.ALREADY_DONE
            raise Conflict(f"binding {req.namespace}/{req.pod_name} refused: {exc.reason}") from exc
        response.read()  # drain first: an unread body would poison the pooled connection
        response.release_conn()
        return Outcome.DONE

    def _annotate(self, namespace: str, name: str, annotations: dict[str, str]) -> None:
        self.core.patch_namespaced_pod(
            name, namespace, m.annotation_patch(annotations), _content_type=m.MERGE_PATCH,
            _request_timeout=self.config.request_timeout_s,
        )

    def _node_labels(self, node_name: str) -> dict[str, str]:
        node = self.core.read_node(node_name, _request_timeout=self.config.request_timeout_s)
        return node.metadata.labels or {}


def _check_job(pod: Any, job_id: str) -> None:
    found = (pod.metadata.labels or {}).get(m.LABEL_JOB)
    if found != job_id:
        raise Conflict(f"pod {pod.metadata.name} belongs to job {found!r}, not {job_id!r}")
