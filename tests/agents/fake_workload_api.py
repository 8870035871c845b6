"""The fake API server (fake_kube_api.py) serving the Kubernetes Workload API as v1.37 does, for the
backend tests: API discovery (`/apis`, `/apis/scheduling.k8s.io/<version>`) and namespaced
`workloads` and `podgroups` in scheduling.k8s.io/v1beta1, which it checks against the official
v1.37 schemas (kubernetes-validate, strict, pinned in requirements/dev.txt: the schemas Kubernetes
publishes, Apache-2.0) and refuses with 422 as a real server refuses an invalid object.

The real control plane of tests/kube is v1.20 and serves none of it; this is the only place the
reading of Workload-API gangs is exercised (README, "Bring your own workloads").
"""

from __future__ import annotations

import copy
import re
from typing import Any

import kubernetes_validate

from tests.agents.fake_kube_api import FakeKubeApi
from tests.agents.fake_kube_wire import ApiError

K8S_VERSION = "1.37.0"  # the newest release the pinned kubernetes-validate ships schemas for
GROUP, VERSION = "scheduling.k8s.io", "v1beta1"
KINDS = {"workloads": "Workload", "podgroups": "PodGroup"}
_OBJECTS = rf"^/apis/{re.escape(GROUP)}/{VERSION}/namespaces/(?P<ns>[^/]+)/(?P<plural>workloads|podgroups)$"


def assert_valid(manifest: dict) -> None:
    """The object is valid against the v1.37 schema (kubernetes_validate.ValidationError if not)."""
    kubernetes_validate.validate(manifest, K8S_VERSION, strict=True)


class FakeWorkloadApi(FakeKubeApi):
    def __init__(self, served: bool = True) -> None:
        super().__init__()
        self.served = served  # False: an API server with the GenericWorkload gate off, as before v1.36
        self.objects: dict[tuple[str, str, str], dict] = {}  # (plural, namespace, name)

    def handle(self, method: str, path: str, query: dict, body: Any) -> tuple[int, dict]:
        with self._cond:
            self.requests.append((method, path))
        if method == "GET" and path.rstrip("/") == "/apis":
            return 200, self._groups()
        if method == "GET" and path.startswith(f"/apis/{GROUP}/") and path.count("/") == 3:
            return self._resources(path.rpartition("/")[2])
        found = re.match(_OBJECTS, path)
        if found and self.served:
            with self._cond:
                if method == "POST":
                    return self._create(found["plural"], found["ns"], body)
                if method == "GET":
                    return 200, self._list(found["plural"], found["ns"])
        return super().handle(method, path, query, body)

    def _groups(self) -> dict:
        versions = ["v1", *([VERSION] if self.served else [])]
        return {
            "kind": "APIGroupList",
            "apiVersion": "v1",
            "groups": [
                {
                    "name": GROUP,
                    "versions": [{"groupVersion": f"{GROUP}/{v}", "version": v} for v in versions],
                    "preferredVersion": {"groupVersion": f"{GROUP}/v1", "version": "v1"},
                }
            ],
        }

    def _resources(self, version: str) -> tuple[int, dict]:
        plurals = {"v1": ["priorityclasses"], VERSION: list(KINDS) if self.served else []}.get(version)
        if not plurals:
            raise ApiError(404, "NotFound", f"{GROUP}/{version} is not served")
        kinds = {"priorityclasses": "PriorityClass", **KINDS}
        resources = [
            {"name": p, "singularName": p[:-1], "namespaced": p != "priorityclasses", "kind": kinds[p],
             "verbs": ["create", "get", "list", "watch", "delete"]}
            for p in plurals
        ]
        return 200, {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": f"{GROUP}/{version}",
                     "resources": resources}

    def _create(self, plural: str, namespace: str, body: dict) -> tuple[int, dict]:
        try:
            assert_valid(body)
        except kubernetes_validate.ValidationError as exc:
            raise ApiError(422, "Invalid", str(exc).splitlines()[0]) from None
        name = body["metadata"]["name"]
        if (plural, namespace, name) in self.objects:
            raise ApiError(409, "AlreadyExists", f"{plural} {name!r} already exists")
        stored = copy.deepcopy(body)
        stored["metadata"].update(namespace=namespace, uid=f"{plural}-{name}", resourceVersion="1")
        self.objects[(plural, namespace, name)] = stored
        return 201, copy.deepcopy(stored)

    def _list(self, plural: str, namespace: str) -> dict:
        items = [copy.deepcopy(o) for (p, ns, _), o in sorted(self.objects.items()) if (p, ns) == (plural, namespace)]
        return {"kind": f"{KINDS[plural]}List", "apiVersion": f"{GROUP}/{VERSION}", "metadata": {}, "items": items}
