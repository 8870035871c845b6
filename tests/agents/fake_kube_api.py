"""A small stateful fake of the Kubernetes API server, on real HTTP, for backend tests.

It speaks just enough of /api/v1 for the Kubernetes backend: nodes (list, get, merge-patch),
namespaces (get), pods (create, get, list, merge-patch, delete with grace, the binding
subresource), secrets (create) and watch=true streams of pod events (chunked JSON lines, resourceVersion, 410 Gone
after `compact()`). Tests drive the rest of the cluster (kubelet, mig-manager) through hooks:
`set_node_labels`, `set_pod_phase`, `finish_deletion`. Hooks for what a real API server does
that a plain store would not (docs/reference/kube-control-plane.md): admission refusals
(`refuse_pods`), a restart that refuses connections (`down`, `up`), a bound pod that stays
`Pending` until its kubelet starts it, deletions by the cluster (`evict`, `finish_deletion`), pods
that cannot start (`wait_container`), the 1 MiB ConfigMap limit and resourceVersion preconditions.
The HTTP side (routing, Status errors, patches, selectors, watch streams) is fake_kube_wire.py.
"""

from __future__ import annotations

import copy
import itertools
import re
import threading
import time
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from typing import Any

from tests.agents.fake_kube_wire import (
    ApiError,
    Handler,
    check_configmap_size,
    merge_patch,
    now,
    selector_matches,
    status_body,
)

_uids = itertools.count(1)


class FakeKubeApi:
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
        self.requests: list[tuple[str, str]] = []  # (method, path) in arrival order
        # Each API patch's node labels after it, in order: what a node watch (mig-manager's) sees.
        self.node_label_log: list[tuple[str, dict[str, str]]] = []
        self._rv = 0
        self._events: list[tuple[int, str, dict]] = []  # pod events: (rv, type, object)
        self._oldest_rv = 0  # a watch from before this was compacted away: 410 Gone
        self._closing = False
        self._server: ThreadingHTTPServer | None = None
        self._port = 0
        self._pod_refusal: ApiError | None = None
        self._binding_refusal: ApiError | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> str:
        self._server = ThreadingHTTPServer(
            ("127.0.0.1", self._port), type("Handler", (Handler,), {"api": self})
        )
        self._server.daemon_threads = True
        self._port = self._server.server_address[1]
        threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()
        return f"http://127.0.0.1:{self._port}"

    def stop(self) -> None:
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        if self._server:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def down(self) -> None:
        """The API server restarts: connections are refused (the client raises MaxRetryError)."""
        self.stop()

    def up(self) -> None:
        """Back on the same port, with the same objects."""
        self._closing = False
        self.start()

    # -- test hooks (the parts of a cluster the tests play) ----------------------------------

    def add_namespace(self, name: str) -> None:
        with self._cond:
            self.namespaces.add(name)

    def add_node(self, name: str, labels: dict | None = None, allocatable: dict | None = None,
                 ready: bool = True, unschedulable: bool = False,
                 taints: list | None = None) -> None:
        node = {
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "uid": f"uid-{next(_uids)}", "labels": dict(labels or {})},
            "spec": {"unschedulable": unschedulable, "taints": taints or []},
            "status": {
                "allocatable": allocatable or {"cpu": "8", "memory": "32Gi"},
                "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
            },
        }
        with self._cond:
            self.nodes[name] = self._stamp(node)

    def set_node_labels(self, name: str, labels: dict[str, str | None]) -> None:
        with self._cond:
            self._stamp(merge_patch(self.nodes[name], {"metadata": {"labels": labels}}))

    def set_pod_phase(self, namespace: str, name: str, phase: str, reason: str | None = None,
                      exit_code: int | None = None, message: str | None = None) -> None:
        with self._cond:
            pod = self.pods[(namespace, name)]
            pod["status"]["phase"] = phase
            if message:
                pod["status"]["message"] = message
            if exit_code is not None:
                terminated = {"exitCode": exit_code, "reason": reason or "Completed"}
                pod["status"]["containerStatuses"] = [
                    {"name": "job", "ready": False, "restartCount": 0, "image": "",
                     "imageID": "", "state": {"terminated": terminated}}
                ]
            elif reason:
                pod["status"]["reason"] = reason
            self._event("MODIFIED", pod)

    def add_pod(self, namespace: str, manifest: dict) -> None:
        """A pod someone else created (another scheduler, a stale run, another installation)."""
        with self._cond:
            self.pods.pop((namespace, manifest["metadata"]["name"]), None)
            self.create_pod({}, manifest, namespace)

    def evict(self, namespace: str, name: str, grace: int = 30) -> None:
        """The cluster deletes the pod gracefully: a drain's eviction, the taint manager."""
        with self._cond:
            pod = self.pods[(namespace, name)]
            pod["metadata"].update(deletionTimestamp=now(), deletionGracePeriodSeconds=grace)
            self._event("MODIFIED", pod)

    def wait_container(self, namespace: str, name: str, reason: str, message: str = "") -> None:
        """The kubelet cannot start the container (ImagePullBackOff, CreateContainerConfigError)."""
        with self._cond:
            pod = self.pods[(namespace, name)]
            pod["status"]["containerStatuses"] = [
                {"name": "job", "ready": False, "restartCount": 0, "image": "", "imageID": "",
                 "state": {"waiting": {"reason": reason, "message": message}}}]
            self._event("MODIFIED", pod)

    def refuse_pods(self, message: str | None, code: int = 403, reason: str = "Forbidden") -> None:
        """Admission refuses every new pod, as Priority, ResourceQuota or LimitRange do (None: stop)."""
        with self._cond:
            self._pod_refusal = None if message is None else ApiError(code, reason, message)

    def refuse_bindings(self, message: str | None, code: int = 403, reason: str = "Forbidden") -> None:
        """An admission webhook on pods/binding refuses every binding (None: stop)."""
        with self._cond:
            self._binding_refusal = None if message is None else ApiError(code, reason, message)

    def finish_deletion(self, namespace: str, name: str) -> None:
        """The kubelet is done with a terminating pod, or PodGC force-deletes one: it leaves the API."""
        with self._cond:
            self._event("DELETED", self.pods.pop((namespace, name)))

    def compact(self) -> None:
        """Forget the event history, as etcd compaction does."""
        with self._cond:
            self._events.clear()
            self._oldest_rv = self._rv

    def pod(self, namespace: str, name: str) -> dict | None:
        with self._cond:
            return copy.deepcopy(self.pods.get((namespace, name)))

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
        secret["metadata"].update(namespace=ns, uid=f"uid-{next(_uids)}")
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
        pod["metadata"].update(namespace=ns, uid=f"uid-{next(_uids)}", creationTimestamp=now())
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

    # -- routing -----------------------------------------------------------------------------

    def set_pod_log(self, namespace: str, name: str, text: str) -> None:
        """What the pod's container printed (the kubelet's part)."""
        with self._cond:
            self._get_pod(namespace, name)["_log"] = text

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

    def fail_next(self, count: int, code: int = 503, reason: str = "ServiceUnavailable") -> None:
        """Answer the next `count` requests with an error, as an overloaded API server does."""
        self._failures = [(code, reason)] * count

    def handle(self, method: str, path: str, query: dict, body: Any) -> tuple[int, dict]:
        failures = getattr(self, "_failures", None)
        if failures:
            code, reason = failures.pop()
            raise ApiError(code, reason, "injected by the test")
        for verb, pattern, operation in ROUTES:
            found = re.match(pattern, path)
            if verb == method and found:
                with self._cond:
                    self.requests.append((method, path))
                    return getattr(self, operation)(query, body, **found.groupdict())
        raise ApiError(404, "NotFound", f"no route for {method} {path}")


_POD = r"^/api/v1/namespaces/(?P<ns>[^/]+)/pods/(?P<name>[^/]+)"
ROUTES = [
    ("GET", r"^/api/v1/nodes$", "list_nodes"),
    ("GET", r"^/api/v1/nodes/(?P<name>[^/]+)$", "get_node"),
    ("PATCH", r"^/api/v1/nodes/(?P<name>[^/]+)$", "patch_node"),
    ("GET", r"^/api/v1/namespaces/(?P<ns>[^/]+)$", "get_namespace"),
    ("GET", r"^/api/v1/pods$", "list_pods"),
    ("GET", r"^/api/v1/namespaces/(?P<ns>[^/]+)/pods$", "list_pods"),
    ("POST", r"^/api/v1/namespaces/(?P<ns>[^/]+)/pods$", "create_pod"),
    ("GET", _POD + "$", "get_pod"),
    ("PATCH", _POD + "$", "patch_pod"),
    ("DELETE", _POD + "$", "delete_pod"),
    ("POST", _POD + "/binding$", "bind_pod"),
    ("GET", _POD + "/log$", "pod_log"),
    ("GET", r"^/api/v1/namespaces/(?P<ns>[^/]+)/configmaps/(?P<name>[^/]+)$", "get_configmap"),
    ("PATCH", r"^/api/v1/namespaces/(?P<ns>[^/]+)/configmaps/(?P<name>[^/]+)$", "patch_configmap"),
    ("POST", r"^/api/v1/namespaces/(?P<ns>[^/]+)/configmaps$", "create_configmap"),
    ("POST", r"^/api/v1/namespaces/(?P<ns>[^/]+)/secrets$", "create_secret"),
    ("POST", r"^/api/v1/namespaces/(?P<ns>[^/]+)/events$", "create_event"),
    ("POST", r"^/api/v1/namespaces/(?P<ns>[^/]+)/services$", "create_service"),
    ("GET", r"^/api/v1/services$", "list_services"),
    ("DELETE", r"^/api/v1/namespaces/(?P<ns>[^/]+)/services/(?P<name>[^/]+)$", "delete_service"),
    ("PATCH", r"^/api/v1/namespaces/(?P<ns>[^/]+)/events/(?P<name>[^/]+)$", "patch_event"),
]
