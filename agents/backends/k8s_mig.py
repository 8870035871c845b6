"""MIG layouts on Kubernetes: mig-manager's ConfigMap and node labels (part of KubernetesBackend).

How the GPU Operator's mig-manager behaves (NVIDIA/mig-parted, cmd/nvidia-mig-manager): it watches
its node and acts when the `nvidia.com/mig.config` label's *value changes*; it first asserts that the
named config is in its config file, which is the ConfigMap *as mounted in its pod* (the kubelet
refreshes a mounted ConfigMap only within its sync period plus its cache delay), and answers
`nvidia.com/mig.config.state=failed` when it is not. A label removed wakes nothing (an empty value
is ignored); set again, the same name is applied again. That is the retry below.
"""

from __future__ import annotations

from typing import Any

import yaml
from kubernetes.client.exceptions import ApiException

from agents.backends import k8s_manifests as m
from agents.backends.base import (
    Outcome,
    RepartitionPhase,
    RepartitionRequest,
    RepartitionState,
    TransientBackendError,
)


class MigLabels:
    """The MIG half of KubernetesBackend; it brings `core`, `config` and `_node_labels`."""

    core: Any
    config: Any

    def _node_labels(self, node_name: str) -> dict[str, str]:
        raise NotImplementedError

    def _repartition(self, req: RepartitionRequest) -> Outcome:
        labels = self._node_labels(req.node_name)
        named = labels.get(self.config.mig_config_label) == req.config_name
        if named and not req.retry:
            return Outcome.ALREADY_DONE
        if req.node_layout:  # also on a retry: the entry must be there when mig-manager looks again
            self._publish_mig_config(req.config_name, dict(req.node_layout))
        if named:  # mig-manager reacts to a change of value only: take the name away first
            self._patch_labels(req.node_name, {self.config.mig_config_label: None})
        # Reset the state with the same patch: a stale "success" (or "failed") of an earlier try
        # must not read as the answer to this one before mig-manager has even seen the change.
        self._patch_labels(req.node_name, {
            self.config.mig_config_label: req.config_name,
            self.config.mig_state_label: RepartitionPhase.PENDING.value,
        })
        return Outcome.DONE

    def _repartition_state(self, node_name: str) -> RepartitionState:
        labels = self._node_labels(node_name)
        try:
            phase = RepartitionPhase(labels.get(self.config.mig_state_label, "unknown"))
        except ValueError:
            phase = RepartitionPhase.UNKNOWN
        return RepartitionState(node_name, labels.get(self.config.mig_config_label), phase)

    def _patch_labels(self, node_name: str, labels: dict[str, str | None]) -> None:
        self.core.patch_node(node_name, m.label_patch(labels), _content_type=m.MERGE_PATCH,
                             _request_timeout=self.config.request_timeout_s)

    def _publish_mig_config(self, config_name: str, layouts) -> None:
        """Add the node's layout to mig-manager's config file before the label names it, and drop
        the Tessera entries no node names any more, so the file stays bounded by the node count
        (it grew by one entry per change until the 1 MiB limit refused it). Optimistic: a write
        raced by another worker's (409) is read and merged again."""
        namespace, name, key = (self.config.mig_parted_namespace, self.config.mig_parted_configmap,
                                self.config.mig_parted_key)
        for _attempt in range(5):
            current = self._read_config_map(namespace, name)
            document = yaml.safe_load((current.data or {}).get(key, "")) if current is not None else None
            if config_name in ((document or {}).get("mig-configs") or {}):
                return
            merged = m.mig_parted_config_merge(document, config_name, layouts, keep=self._mig_configs_in_use())
            text = yaml.safe_dump(merged, sort_keys=False)  # in the order added: the newest last
            try:
                if current is None:
                    body = m.config_map_manifest(name, namespace, {key: text})
                    self.core.create_namespaced_config_map(namespace, body,
                                                           _request_timeout=self.config.request_timeout_s)
                else:  # the resourceVersion makes the patch conditional: a raced write answers 409
                    patch = {"metadata": {"resourceVersion": current.metadata.resource_version}, "data": {key: text}}
                    self.core.patch_namespaced_config_map(name, namespace, patch, _content_type=m.MERGE_PATCH,
                                                          _request_timeout=self.config.request_timeout_s)
                return
            except ApiException as exc:
                if exc.status != 409:
                    raise
        raise TransientBackendError(f"ConfigMap {namespace}/{name} kept changing under us")

    def _read_config_map(self, namespace: str, name: str) -> Any:
        try:
            return self.core.read_namespaced_config_map(name, namespace, _request_timeout=self.config.request_timeout_s)
        except ApiException as exc:
            if exc.status != 404:
                raise
            return None

    def _mig_configs_in_use(self) -> set[str]:
        """The MIG configs the GPU nodes' labels name now (applied, or being applied)."""
        nodes = self.core.list_node(label_selector=self.config.gpu_node_selector,
                                    _request_timeout=self.config.request_timeout_s)
        return {label for node in nodes.items
                if (label := (node.metadata.labels or {}).get(self.config.mig_config_label))}
