"""A multi-pod run's headless Service (part of KubernetesBackend): its pods find member 0 by name.

The bind of whichever member comes first creates it; the workers' reconcile deletes it once the
run has ended, however it ended (agents/services.py), so a completed job's pods, which stay to
show their logs, keep no Service, and a run that was cut short leaves none behind.
"""

from __future__ import annotations

from typing import Any

from kubernetes.client.exceptions import ApiException

from agents.backends import k8s_manifests as m
from agents.backends.base import BindRequest, Outcome, RendezvousService


class RendezvousServices:
    """It brings `core` and `config`."""

    core: Any
    config: Any

    def _create_rendezvous_service(self, req: BindRequest) -> None:
        try:
            self.core.create_namespaced_service(
                req.namespace, m.rendezvous_service_manifest(req), _request_timeout=self.config.request_timeout_s
            )
        except ApiException as exc:
            if exc.status != 409:  # another member (or a retried bind) made it: one per run
                raise

    def _rendezvous_services(self) -> list[RendezvousService]:
        services = self.core.list_service_for_all_namespaces(
            label_selector=f"{m.MANAGED_SELECTOR},{m.LABEL_RENDEZVOUS}", _request_timeout=self.config.request_timeout_s
        )
        return [
            RendezvousService(
                job_id=(s.metadata.labels or {}).get(m.LABEL_JOB, ""),
                namespace=s.metadata.namespace,
                name=s.metadata.name,
            )
            for s in services.items
        ]

    def _remove_rendezvous_service(self, namespace: str, name: str) -> Outcome:
        try:
            # _preload_content=False: a v1.20 server answers a Status, which the client would try
            # to read as a V1Service and fail on (as for a binding: kubernetes.py).
            response = self.core.delete_namespaced_service(
                name, namespace, _preload_content=False, _request_timeout=self.config.request_timeout_s
            )
        except ApiException as exc:
            if exc.status == 404:
                return Outcome.GONE
            raise
        response.read()  # drain first: an unread body would poison the pooled connection
        response.release_conn()
        return Outcome.DONE
