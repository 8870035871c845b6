"""The API calls on one pod (part of KubernetesBackend): read, create, bind and annotate it, and
create the Secrets it mounts."""

from __future__ import annotations

import dataclasses
from typing import Any

from kubernetes.client.exceptions import ApiException

from agents.backends import k8s_manifests as m
from agents.backends.base import BindRequest, Conflict, MigStrategy, Outcome
from agents.backends.k8s_namespaces import TeamNamespaces
from agents.backends.k8s_reading import GFD_MIG_STRATEGY, node_share


class PodCalls(TeamNamespaces):
    """It brings `core`, `config` and `_node_labels`; a pod is created only in a team's namespace."""

    def _node_labels(self, node_name: str) -> dict[str, str]:
        raise NotImplementedError

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
