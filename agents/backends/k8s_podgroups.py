"""Reading the cluster's gang objects: scheduler-plugins PodGroups, and the Kubernetes PodGroups of
the Workload API where the server serves them (found by discovery, looked up again every
DISCOVERY_TTL_S, so a feature gate turned on is seen without a restart); agents/backends/k8s_gangs.py
reads what these return."""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from agents.backends.k8s_gangs import (
    PODGROUP_GROUP,
    PODGROUP_PLURAL,
    PODGROUP_VERSION,
    SCHEDULING_PODGROUPS,
    WORKLOAD_GROUP,
    workload_api_version,
)

log = logging.getLogger("tessera.kube.gangs")
DISCOVERY_TTL_S = 300.0


class PodGroups:
    def __init__(self, api_client: client.ApiClient | None, request_timeout_s: float) -> None:
        self.api_client = api_client or client.ApiClient()
        self.custom = client.CustomObjectsApi(self.api_client)
        self.request_timeout_s = request_timeout_s
        self._discovered: tuple[float, str | None] | None = None  # (when, scheduling podgroups' group/version)

    def in_namespace(self, namespace: str) -> dict[str, dict[str, Any]]:
        """The namespace's PodGroup objects by name, as plain dicts. A cluster without the CRD
        answers 404: it has none, and its gangs size themselves by annotation."""
        try:
            listed = self.custom.list_namespaced_custom_object(
                PODGROUP_GROUP, PODGROUP_VERSION, namespace, PODGROUP_PLURAL, _request_timeout=self.request_timeout_s
            )
        except ApiException as exc:
            if exc.status != 404:
                raise
            return {}
        return {item["metadata"]["name"]: item for item in listed.get("items", [])}

    def scheduling_in_namespace(self, namespace: str) -> dict[str, dict[str, Any]]:
        """The namespace's Kubernetes PodGroups (scheduling.k8s.io) by name, as plain dicts; {} where
        the server serves none (v1.20, or the GenericWorkload gate off)."""
        group_version = self.podgroup_api()
        if group_version is None:
            return {}
        version = group_version.rpartition("/")[2]
        listed = self.custom.list_namespaced_custom_object(
            WORKLOAD_GROUP, version, namespace, SCHEDULING_PODGROUPS, _request_timeout=self.request_timeout_s
        )
        return {item["metadata"]["name"]: item for item in listed.get("items", [])}

    def podgroup_api(self) -> str | None:
        """The group/version serving the Kubernetes PodGroups, by discovery, at most DISCOVERY_TTL_S old."""
        now = time.monotonic()
        if self._discovered is None or now - self._discovered[0] > DISCOVERY_TTL_S:
            self._discovered = (now, self.workload_api(SCHEDULING_PODGROUPS))
        return self._discovered[1]

    def workload_api(self, resource: str = "workloads") -> str | None:
        """The group/version that serves the Kubernetes Workload API's `resource` (workloads,
        podgroups), by discovery; None where the server has none (every release before v1.35, and
        later ones with the feature gate off).
        Discovery is open to every authenticated user: no right to grant."""
        try:
            groups = client.ApisApi(self.api_client).get_api_versions(_request_timeout=self.request_timeout_s)
        except ApiException as exc:
            log.warning("API discovery failed (%s): no Workload API assumed", exc.status)
            return None
        group = next((g for g in groups.groups if g.name == WORKLOAD_GROUP), None)
        if group is None:
            return None
        served = {v.group_version: self._resources(v.group_version) for v in group.versions}
        return workload_api_version(served, resource)

    def _resources(self, group_version: str) -> list[str]:
        """The resource names a group/version serves (its APIResourceList): the client has no typed
        call for a version it was not generated with, so the request is built as its own are."""
        request = self.api_client.param_serialize(
            method="GET", resource_path=f"/apis/{group_version}", auth_settings=["BearerToken"]
        )
        answer = self.api_client.call_api(*request, _request_timeout=self.request_timeout_s)
        answer.read()
        if answer.status == 404:  # listed in the group but not served (a version being removed)
            return []
        if not 200 <= answer.status < 300:
            raise ApiException(http_resp=answer)
        return [resource["name"] for resource in json.loads(answer.data).get("resources", [])]
