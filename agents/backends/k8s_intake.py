"""Native pods on Kubernetes: finding them, telling them why they wait, labelling them as a job's,
and stopping their owner (part of KubernetesBackend; docs/reference/native-submission.md).

The intake lists only pods still to take in: our schedulerName, not bound, Pending, not created by
Tessera (managed-by) and not yet labelled with a job id. The label is the last step of taking one
in, so a worker that dies before it leaves the pod in the list, and the next poll finds its job by
the pod's uid instead of writing another.
"""

from __future__ import annotations

from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from agents.backends import k8s_manifests as m
from agents.backends.base import Outcome
from agents.backends.k8s_native import (
    OWNER_KINDS,
    NativePod,
    OwnerKind,
    RefusedPod,
    is_native,
    owner_kind,
    read_native,
)

JSON_PATCH = "application/json-patch+json"
MAX_OWNER_CHAIN = 6  # an LWS worker pod: StatefulSet, leader pod, leader StatefulSet, LeaderWorkerSet


class NativeIntake:
    """The native half of KubernetesBackend; it brings `core`, `config`, `events`."""

    core: Any
    config: Any
    events: Any

    def native_pods(self) -> list[NativePod | RefusedPod]:
        """Every native pod still to take in, read (or refused, with why)."""
        pods = self.core.list_pod_for_all_namespaces(
            field_selector=f"spec.schedulerName={self.config.scheduler_name},spec.nodeName=,status.phase=Pending",
            label_selector=f"{m.LABEL_MANAGED_BY}!={m.MANAGED_BY},!{m.LABEL_JOB}",
            _request_timeout=self.config.request_timeout_s,
        )
        return [read_native(pod) for pod in pods.items if is_native(pod, self.config.scheduler_name)]

    def native_refuse(self, refused: RefusedPod) -> None:
        """Say on the pod why Tessera leaves it Pending; a repeat raises the Event's count."""
        pod = client.V1Pod(
            metadata=client.V1ObjectMeta(name=refused.name, namespace=refused.namespace, uid=refused.uid)
        )
        self.events.record(pod, refused.reason, refused.message, warning=True)

    def native_label(self, pod: NativePod, job_id: str, team: str) -> Outcome:
        """Label the pod as job `job_id`'s: from now on the observations (and the pod watch) see it.
        GONE when the pod was deleted (or replaced under its name) since it was listed."""
        patch = m.native_label_patch(pod.uid, pod.labels, job_id, team)
        try:
            self.core.patch_namespaced_pod(
                pod.name, pod.namespace, patch, _content_type=JSON_PATCH, _request_timeout=self.config.request_timeout_s
            )
        except ApiException as exc:
            if exc.status in (404, 422):  # 422: the uid test failed, a new pod holds the name
                return Outcome.GONE
            raise
        return Outcome.DONE

    def native_delete_owner(self, namespace: str, api_version: str, kind: str, name: str, uid: str) -> Outcome | None:
        """Delete what makes the native pods of this owner (k8s_native.OWNER_KINDS), with its pods: the
        owner itself, or the kind of the table that controls it (the JobSet of a child Job), found by
        reading the chain of controllers up. Only the objects the chain names (uid preconditions),
        never a new one under a name. None: nothing there that a cancel deletes."""
        chain, deleted = (api_version, kind, name, uid), None
        for _ in range(MAX_OWNER_CHAIN):
            found = owner_kind(chain[0], chain[1])
            if found is None:
                break
            if found.deleted:
                deleted = chain
            parent = self._controller_of(namespace, found, *chain) if found.controlled else None
            if parent is None:
                break
            chain = parent
        if deleted is None:
            return None
        api_version, kind, name, uid = deleted
        group, plural = OWNER_KINDS[kind].group, OWNER_KINDS[kind].plural
        # Both in the body: the API server reads a body's options and ignores the query's, and
        # a Job deleted without a policy orphans its pods (the REST default for Jobs), which
        # then run on with no owner.
        options = client.V1DeleteOptions(propagation_policy="Background", preconditions=client.V1Preconditions(uid=uid))
        try:
            client.CustomObjectsApi(self.core.api_client).delete_namespaced_custom_object(
                group,
                api_version.rpartition("/")[2],
                namespace,
                plural,
                name,
                body=options,
                _request_timeout=self.config.request_timeout_s,
            )
        except ApiException as exc:
            if exc.status in (404, 409):  # 409: the precondition failed, the owner was replaced
                return Outcome.GONE
            raise
        return Outcome.DONE

    def _controller_of(
        self, namespace: str, found: OwnerKind, api_version: str, kind: str, name: str, uid: str
    ) -> tuple[str, str, str, str] | None:
        """The controlling owner (api version, kind, name, uid) of this object, when it is of a kind
        of the table; None when it has none, or is gone or replaced."""
        try:
            if not found.group:  # a core object (a leader pod): not served under /apis
                pod = self.core.read_namespaced_pod(name, namespace, _request_timeout=self.config.request_timeout_s)
                obj = self.core.api_client.sanitize_for_serialization(pod)
            else:
                obj = client.CustomObjectsApi(self.core.api_client).get_namespaced_custom_object(
                    found.group,
                    api_version.rpartition("/")[2],
                    namespace,
                    found.plural,
                    name,
                    _request_timeout=self.config.request_timeout_s,
                )
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        meta = obj.get("metadata") or {}
        if meta.get("uid") != uid:
            return None
        for ref in meta.get("ownerReferences") or []:
            if ref.get("controller") and owner_kind(ref.get("apiVersion", ""), ref.get("kind", "")) is not None:
                return ref["apiVersion"], ref["kind"], ref["name"], ref["uid"]
        return None
