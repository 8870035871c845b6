"""The fake API server's objects (tests/agents/fake_kube_api.py), their resourceVersions and pod
event history, and what each API operation does to them, as a real API server would."""

from __future__ import annotations

import copy
import itertools
import threading
import time
from collections.abc import Iterator
from typing import Any

from tests.agents.fake_kube_wire import ApiError, check_configmap_size, merge_patch, now, selector_matches, status_body

uids = itertools.count(1)


class FakeKubeStore:
    def __init__(self) -> None:
        self._cond = threading.Condition()
        self.nodes: dict[str, dict] = {}
        self.pods: dict[tuple[str, str], dict] = {}
        self.namespaces: set[str] = set()
        self.configmaps: dict[tuple[str, str], dict] = {}
        self.secrets: dict[tuple[str, str], dict] = {}
        self.events: dict[tuple[str, str], dict] = {}  # core/v1 Events by (namespace, name)
        self.services: dict[tuple[str, str], dict] = {}  # gangs' headless Services
        self.event_refusal: ApiError | None = None  # e.g. RBAC without events: 403 on every write
        # Each API patch's node labels after it, in order: what a node watch (mig-manager's) sees.
        self.node_label_log: list[tuple[str, dict[str, str]]] = []
        self._rv = 0
        self._events: list[tuple[int, str, dict]] = []  # pod events: (rv, type, object)
        self._oldest_rv = 0  # a watch from before this was compacted away: 410 Gone
        self._closing = False
        self._pod_refusal: ApiError | None = None
        self._binding_refusal: ApiError | None = None

    # -- state changes (callers hold the lock) -----------------------------------------------

    def _stamp(self, obj: dict) -> dict:
        self._rv += 1
        obj["metadata"]["resourceVersion"] = str(self._rv)
        return obj

    def _event(self, kind: str, pod: dict) -> None:
        self._stamp(pod)
        self._events.append((self._rv, kind, copy.deepcopy(pod)))
        self._cond.notify_all()

    def _get_pod(self, ns: str, name: str) -> dict:
        if (ns, name) not in self.pods:
            raise ApiError(404, "NotFound", f'pods "{name}" not found')
        return self.pods[(ns, name)]

    def _get_node(self, name: str) -> dict:
        if name not in self.nodes:
            raise ApiError(404, "NotFound", f'nodes "{name}" not found')
        return self.nodes[name]

    # -- API operations: (query, body, path params) -> (status, body) ------------------------

    def list_nodes(self, query: dict, body: Any) -> tuple[int, dict]:
        items = [copy.deepcopy(n) for n in self.nodes.values()
                 if selector_matches(query.get("labelSelector"), n["metadata"]["labels"])]
        return 200, {"kind": "NodeList", "apiVersion": "v1",
                     "metadata": {"resourceVersion": str(self._rv)}, "items": items}

    def get_node(self, query: dict, body: Any, name: str) -> tuple[int, dict]:
        return 200, copy.deepcopy(self._get_node(name))

    def patch_node(self, query: dict, body: Any, name: str) -> tuple[int, dict]:
        node = self._get_node(name)
        patched = self._stamp(merge_patch(node, body))
        self.node_label_log.append((name, dict(patched["metadata"]["labels"])))
        return 200, copy.deepcopy(patched)

    def get_namespace(self, query: dict, body: Any, ns: str) -> tuple[int, dict]:
        if ns not in self.namespaces:
            raise ApiError(404, "NotFound", f'namespaces "{ns}" not found')
        return 200, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns},
                     "status": {"phase": "Active"}}

    def get_configmap(self, query: dict, body: Any, ns: str, name: str) -> tuple[int, dict]:
        if (ns, name) not in self.configmaps:
            raise ApiError(404, "NotFound", f'configmaps "{name}" not found')
        return 200, copy.deepcopy(self.configmaps[(ns, name)])

    def create_configmap(self, query: dict, body: dict, ns: str) -> tuple[int, dict]:
        name = body["metadata"]["name"]
        if (ns, name) in self.configmaps:
            raise ApiError(409, "AlreadyExists", f'configmaps "{name}" already exists')
        check_configmap_size(body)
        self.configmaps[(ns, name)] = self._stamp(copy.deepcopy(body))
        return 201, copy.deepcopy(self.configmaps[(ns, name)])

    def patch_configmap(self, query: dict, body: Any, ns: str, name: str) -> tuple[int, dict]:
        current = self.get_configmap(query, None, ns, name)[1]
        wanted_version = (body.get("metadata") or {}).get("resourceVersion")
        if wanted_version and wanted_version != current["metadata"]["resourceVersion"]:  # a precondition
            raise ApiError(409, "Conflict", f'Operation cannot be fulfilled on configmaps "{name}": the object '
                                            "has been modified; please apply your changes to the latest version")
        patched = merge_patch(copy.deepcopy(current), body)
        check_configmap_size(patched)
        self.configmaps[(ns, name)] = self._stamp(patched)
        return 200, copy.deepcopy(patched)

    def create_secret(self, query: dict, body: dict, ns: str) -> tuple[int, dict]:
        name = body["metadata"]["name"]
        if (ns, name) in self.secrets:
            raise ApiError(409, "AlreadyExists", f'secrets "{name}" already exists')
        secret = copy.deepcopy(body)
        secret["metadata"].update(namespace=ns, uid=f"uid-{next(uids)}")
        self.secrets[(ns, name)] = self._stamp(secret)
        return 201, copy.deepcopy(secret)

    def create_service(self, query: dict, body: dict, ns: str) -> tuple[int, dict]:
        name = body["metadata"]["name"]
        if (ns, name) in self.services:
            raise ApiError(409, "AlreadyExists", f'services "{name}" already exists')
        service = copy.deepcopy(body)
        service["metadata"]["namespace"] = ns
        self.services[(ns, name)] = self._stamp(service)
        return 201, copy.deepcopy(self.services[(ns, name)])

    def list_services(self, query: dict, body: Any) -> tuple[int, dict]:
        items = [copy.deepcopy(s) for s in self.services.values()
                 if selector_matches(query.get("labelSelector"), s["metadata"].get("labels", {}))]
        return 200, {"kind": "ServiceList", "apiVersion": "v1", "metadata": {}, "items": items}

    def delete_service(self, query: dict, body: Any, ns: str, name: str) -> tuple[int, dict]:
        if self.services.pop((ns, name), None) is None:
            raise ApiError(404, "NotFound", f'services "{name}" not found')
        return 200, status_body(200, "", "")

    def create_pod(self, query: dict, body: dict, ns: str) -> tuple[int, dict]:
        if ns not in self.namespaces:
            raise ApiError(404, "NotFound", f'namespaces "{ns}" not found')
        name = body["metadata"]["name"]
        if (ns, name) in self.pods:
            raise ApiError(409, "AlreadyExists", f'pods "{name}" already exists')
        if self._pod_refusal is not None:
            raise self._pod_refusal
        pod = copy.deepcopy(body)
        pod["metadata"].update(namespace=ns, uid=f"uid-{next(uids)}", creationTimestamp=now())
        pod["status"] = {"phase": "Pending"}
        self.pods[(ns, name)] = pod
        self._event("ADDED", pod)
        return 201, copy.deepcopy(pod)

    def create_event(self, query: dict, body: dict, ns: str) -> tuple[int, dict]:
        if self.event_refusal is not None:
            raise self.event_refusal
        name = body["metadata"]["name"]
        if (ns, name) in self.events:
            raise ApiError(409, "AlreadyExists", f'events "{name}" already exists')
        if body["involvedObject"].get("namespace") != ns:  # the API server's own check
            raise ApiError(422, "Invalid", "involvedObject.namespace: does not match event.namespace")
        self.events[(ns, name)] = self._stamp(copy.deepcopy(body))
        return 201, copy.deepcopy(body)

    def patch_event(self, query: dict, body: Any, ns: str, name: str) -> tuple[int, dict]:
        if self.event_refusal is not None:
            raise self.event_refusal
        if (ns, name) not in self.events:
            raise ApiError(404, "NotFound", f'events "{name}" not found')
        return 200, copy.deepcopy(self._stamp(merge_patch(self.events[(ns, name)], body)))

    def get_pod(self, query: dict, body: Any, ns: str, name: str) -> tuple[int, dict]:
        return 200, copy.deepcopy(self._get_pod(ns, name))

    def list_pods(self, query: dict, body: Any, ns: str | None = None) -> tuple[int, dict]:
        items = [copy.deepcopy(p) for (pod_ns, _), p in self.pods.items()
                 if ns in (None, pod_ns)
                 and selector_matches(query.get("labelSelector"), p["metadata"].get("labels", {}))]
        return 200, {"kind": "PodList", "apiVersion": "v1",
                     "metadata": {"resourceVersion": str(self._rv)}, "items": items}

    def patch_pod(self, query: dict, body: Any, ns: str, name: str) -> tuple[int, dict]:
        pod = self._get_pod(ns, name)
        merge_patch(pod, body)
        self._event("MODIFIED", pod)
        return 200, copy.deepcopy(pod)

    def delete_pod(self, query: dict, body: Any, ns: str, name: str) -> tuple[int, dict]:
        pod = self._get_pod(ns, name)
        grace = int(query.get("gracePeriodSeconds", (body or {}).get("gracePeriodSeconds", 30)))
        if pod["metadata"].get("deletionTimestamp"):
            return 200, copy.deepcopy(pod)
        if grace == 0 or not pod["spec"].get("nodeName"):  # nothing runs it: gone at once
            self._event("DELETED", self.pods.pop((ns, name)))
            return 200, copy.deepcopy(pod)
        pod["metadata"].update(deletionTimestamp=now(), deletionGracePeriodSeconds=grace)
        self._event("MODIFIED", pod)
        return 200, copy.deepcopy(pod)

    def bind_pod(self, query: dict, body: dict, ns: str, name: str) -> tuple[int, dict]:
        pod = self._get_pod(ns, name)
        if self._binding_refusal is not None:
            raise self._binding_refusal
        target = body.get("target") or {}
        if target.get("kind") != "Node" or not target.get("name"):
            raise ApiError(422, "Invalid", "binding target must be a node")
        if pod["spec"].get("nodeName"):
            message = f'pod {name} is already assigned to node "{pod["spec"]["nodeName"]}"'
            raise ApiError(409, "Conflict", message)
        pod["spec"]["nodeName"] = target["name"]
        # As on a real server: Pending until its kubelet starts it (tests: set_pod_phase).
        pod["status"].update(phase="Pending", conditions=[{"type": "PodScheduled",
                                                          "status": "True"}])
        self._event("MODIFIED", pod)
        # Like the real server: a Status, not the Binding (the client's known deserialise trap).
        return 201, status_body(201, "", "")

    def watch_pods(self, query: dict, ns: str | None = None) -> Iterator[dict]:
        def wanted(obj: dict) -> bool:
            meta = obj["metadata"]
            return ns in (None, meta["namespace"]) and selector_matches(
                query.get("labelSelector"), meta.get("labels", {})
            )

        deadline = time.monotonic() + int(query.get("timeoutSeconds", 30))
        start = query.get("resourceVersion") or "0"
        with self._cond:
            if start == "0":  # no starting point: the current state first, as ADDED events
                first = [{"type": "ADDED", "object": copy.deepcopy(p)}
                         for p in self.pods.values() if wanted(p)]
                since: int | None = self._rv
            elif int(start) < self._oldest_rv:
                gone = status_body(410, "Expired", f"too old resource version: {start}")
                first, since = [{"type": "ERROR", "object": gone}], None
            else:
                first, since = [], int(start)
        yield from first
        while since is not None:
            with self._cond:
                new = [e for e in self._events if e[0] > since]
                if not new:
                    left = deadline - time.monotonic()
                    if left <= 0 or self._closing:
                        return
                    self._cond.wait(min(left, 0.2))
                    continue
                since = new[-1][0]
            yield from ({"type": kind, "object": obj} for _, kind, obj in new if wanted(obj))

    def pod_log(self, query: dict, body: Any, ns: str, name: str) -> tuple[int, str]:
        """The kubelet's answer through the API server: 400 while the container has not started."""
        pod = self._get_pod(ns, name)
        if pod.get("status", {}).get("phase", "Pending") == "Pending":
            container = pod["spec"]["containers"][0]["name"]
            raise ApiError(400, "BadRequest", f'container "{container}" in pod "{name}" is waiting to start: '
                                              "ContainerCreating")
        lines = pod.get("_log", "").splitlines(keepends=True)
        if "tailLines" in query:
            lines = lines[-int(query["tailLines"]):] if int(query["tailLines"]) else []
        text = "".join(lines)
        return 200, text[-int(query["limitBytes"]):] if "limitBytes" in query else text
