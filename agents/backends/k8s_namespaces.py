"""Which namespaces job pods may go to (part of KubernetesBackend): the teams', never the cluster's own."""

from __future__ import annotations

from typing import Any

from kubernetes.client.exceptions import ApiException

from agents.backends.base import Refused

# Never a job's namespace, whatever a team is called: the cluster's own and Tessera's.
SYSTEM_NAMESPACES = frozenset({"kube-system", "kube-public", "kube-node-lease", "default", "tessera-system",
                               "gpu-operator", "nvidia-gpu-operator"})


class TeamNamespaces:
    """It brings `core` and `config`."""

    core: Any
    config: Any

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
