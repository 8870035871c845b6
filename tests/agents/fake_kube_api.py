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
The stored objects and the API operations on them are fake_kube_store.py; the HTTP side (routing,
Status errors, patches, selectors, watch streams) is fake_kube_wire.py.
"""

from __future__ import annotations

import copy
import re
import threading
from http.server import ThreadingHTTPServer
from typing import Any

from tests.agents.fake_kube_store import FakeKubeStore, uids
from tests.agents.fake_kube_wire import ApiError, Handler, merge_patch, now


class FakeKubeApi(FakeKubeStore):
    def __init__(self) -> None:
        super().__init__()
        self.requests: list[tuple[str, str]] = []  # (method, path) in arrival order
        self._server: ThreadingHTTPServer | None = None
        self._port = 0

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
            "metadata": {"name": name, "uid": f"uid-{next(uids)}", "labels": dict(labels or {})},
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

    def set_pod_log(self, namespace: str, name: str, text: str) -> None:
        """What the pod's container printed (the kubelet's part)."""
        with self._cond:
            self._get_pod(namespace, name)["_log"] = text

    # -- routing -----------------------------------------------------------------------------

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
