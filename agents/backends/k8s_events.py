"""Events on a job's pods, so `kubectl describe pod` tells what Tessera did: Scheduled, Preempted,
CheckpointRequested (issue 13, point 6). core/v1 Events with involvedObject = the pod; and the
Waiting events of jobs that have no pod yet. The Event objects are built here too (event_manifest,
waiting_event_manifest), beside the recorder that sends them.

An event is a courtesy to whoever reads the pod: recording one never fails or delays the action it
describes. A repeat (same pod, reason and message) lands on the same event with its count raised,
as the kubelet's recorder does; that needs `patch` on events, which deploy/rbac.yaml may withhold:
then the first event stays, count 1.
"""

from __future__ import annotations

import hashlib
import logging
import socket
from collections import OrderedDict
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from agents.backends import k8s_manifests as m

log = logging.getLogger(__name__)
COUNTS_KEPT = 4096  # repeats remembered per process; a forgotten one counts from 2 again
EVENT_COMPONENT = "tessera"  # source.component and reportingComponent: `kubectl describe` shows it
EVENT_MESSAGE_MAX = 1024  # what the API server's event validation allows


def event_name(pod_name: str, pod_uid: str, reason: str, message: str) -> str:
    """One name per (pod, reason, message): a repeat answers 409, and the backend counts it on the
    same event, as the kubelet's recorder folds repeats into one event with a count."""
    digest = hashlib.sha256(f"{pod_uid}\0{reason}\0{message}".encode()).hexdigest()[:16]
    return m.check_name(f"{pod_name[:200]}.{digest}", m.DNS_SUBDOMAIN, 253, "event name")


def event_manifest(*, pod: Mapping[str, str], reason: str, message: str, warning: bool, at: str,
                   instance: str) -> dict:
    """A core/v1 Event about a pod (`pod`: name, namespace, uid), dated `at` (RFC 3339)."""
    message = message[:EVENT_MESSAGE_MAX]
    return {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": event_name(pod["name"], pod["uid"], reason, message), "namespace": pod["namespace"],
                     "labels": {m.LABEL_MANAGED_BY: m.MANAGED_BY}},
        "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": pod["name"], "namespace": pod["namespace"],
                           "uid": pod["uid"]},
        "reason": reason, "message": message, "type": "Warning" if warning else "Normal",
        "source": {"component": EVENT_COMPONENT}, "reportingComponent": EVENT_COMPONENT,
        "reportingInstance": instance[:128], "firstTimestamp": at, "lastTimestamp": at, "count": 1,
    }


# A portal job that waits has no pod yet: its Waiting events name the job itself. No such resource
# exists in the cluster (nothing checks an involvedObject); `kubectl get events -n <team>` lists them.
WAITING_OBJECT = {"apiVersion": "tessera.io/v1", "kind": "TesseraJob"}


def waiting_event_manifest(*, job_id: str, namespace: str, reason_code: str, message: str, at: str,
                           instance: str, count: int = 1) -> dict:
    """The Event that says why job `job_id` waits: reason `Waiting`, the engine's sentence, one per
    (job, reason code), so a return to an earlier reason raises that event's count."""
    name = m.check_name(f"tessera-job-{job_id}.waiting-{reason_code}", m.DNS_SUBDOMAIN, 253, "event name")
    return {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": name, "namespace": namespace,
                     "labels": {m.LABEL_MANAGED_BY: m.MANAGED_BY, m.LABEL_JOB: job_id}},
        "involvedObject": {**WAITING_OBJECT, "name": f"job-{job_id}", "namespace": namespace},
        "reason": "Waiting", "message": message[:EVENT_MESSAGE_MAX], "type": "Normal",
        "source": {"component": EVENT_COMPONENT}, "reportingComponent": EVENT_COMPONENT,
        "reportingInstance": instance[:128], "firstTimestamp": at, "lastTimestamp": at, "count": count,
    }


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
        body = event_manifest(pod={"name": meta.name, "namespace": meta.namespace, "uid": meta.uid or ""},
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
        """Say why a job without pods waits (waiting_event_manifest). `count` is how many times it
        has waited for this reason (the caller keeps that): above 1, the event exists and is
        raised to it; at 1, an existing one (a lost count) is left as it is. False when refused."""
        at = _now()
        body = waiting_event_manifest(job_id=job_id, namespace=namespace, reason_code=reason_code,
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
