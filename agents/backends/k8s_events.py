"""Events on a job's pods, so `kubectl describe pod` tells what Tessera did: Scheduled, Preempted,
CheckpointRequested (issue 13, point 6). core/v1 Events with involvedObject = the pod.

An event is a courtesy to whoever reads the pod: recording one never fails or delays the action it
describes. A repeat (same pod, reason and message) lands on the same event with its count raised,
as the kubelet's recorder does; that needs `patch` on events, which deploy/rbac.yaml may withhold:
then the first event stays, count 1.
"""

from __future__ import annotations

import logging
import socket
from collections import OrderedDict
from datetime import UTC, datetime
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from agents.backends import k8s_manifests as m

log = logging.getLogger(__name__)
COUNTS_KEPT = 4096  # repeats remembered per process; a forgotten one counts from 2 again


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class PodEvents:
    def __init__(self, core: client.CoreV1Api, timeout_s: float, instance: str | None = None) -> None:
        self.core, self.timeout_s = core, timeout_s
        self.instance = instance or socket.gethostname()
        self._counts: OrderedDict[str, int] = OrderedDict()

    def record(self, pod: Any, reason: str, message: str, *, warning: bool = False) -> str | None:
        """Record an event on `pod` (a client V1Pod); its name, or None when the cluster refused it."""
        meta = pod.metadata
        at = _now()
        body = m.event_manifest(pod={"name": meta.name, "namespace": meta.namespace, "uid": meta.uid or ""},
                                reason=reason, message=message, warning=warning, at=at, instance=self.instance)
        name = body["metadata"]["name"]
        count = self._counts.get(name, 1) + 1  # if it is a repeat
        try:
            created = self._create_or_raise(meta.namespace, body, {"count": count, "lastTimestamp": at})
            self._remember(name, 1 if created else count)
        except Exception as exc:  # noqa: BLE001 - an event must never fail the action it describes
            log.warning("event %s on pod %s/%s not recorded: %s", reason, meta.namespace, meta.name,
                        getattr(exc, "reason", None) or exc)
            return None
        return name

    def record_waiting(self, job_id: str, namespace: str, reason_code: str, message: str, count: int) -> bool:
        """Say why a job without pods waits (m.waiting_event_manifest). `count` is how many times it
        has waited for this reason (the caller keeps that): above 1, the event exists and is
        raised to it; at 1, an existing one (a lost count) is left as it is. False when refused."""
        at = _now()
        body = m.waiting_event_manifest(job_id=job_id, namespace=namespace, reason_code=reason_code,
                                        message=message, at=at, instance=self.instance, count=count)
        raised = {"count": count, "lastTimestamp": at, "message": body["message"]} if count > 1 else None
        try:
            self._create_or_raise(namespace, body, raised)
        except Exception as exc:  # noqa: BLE001 - an event must never fail the cycle that found the reason
            log.warning("Waiting event for job %s in %s not recorded: %s", job_id, namespace,
                        getattr(exc, "reason", None) or exc)
            return False
        return True

    def _create_or_raise(self, namespace: str, body: dict, raised: dict | None) -> bool:
        """Create the event `body`; when it exists already (409: a repeat), merge `raised` into it
        (None: leave it as it is). True when created; any other refusal raises."""
        try:
            self.core.create_namespaced_event(namespace, body, _request_timeout=self.timeout_s)
            return True
        except ApiException as exc:
            if exc.status != 409:
                raise
        if raised is not None:
            self.core.patch_namespaced_event(body["metadata"]["name"], namespace, raised,
                                             _content_type=m.MERGE_PATCH, _request_timeout=self.timeout_s)
        return False

    def _remember(self, name: str, count: int) -> None:
        self._counts[name] = count
        self._counts.move_to_end(name)
        while len(self._counts) > COUNTS_KEPT:
            self._counts.popitem(last=False)
