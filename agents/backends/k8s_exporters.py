"""Where each node's dcgm-exporter answers, from the cluster: the exporter's pod on that node.

The GPU Operator runs dcgm-exporter as a DaemonSet (namespace gpu-operator, label
app=nvidia-dcgm-exporter, container port `metrics` 9400); its pods' IPs change whenever one is
replaced, so a hand-typed Node.agent_url goes stale and a new node has none. The workers ask for
the exporters' pods at each poll instead (one list call) and scrape http://<pod IP>:<port>/metrics.
Only a Running, Ready pod with an IP counts: a node whose exporter is starting has no reading
yet, as when it is down. Plain Python over the `kubernetes` client, no Django.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Callable
from typing import Any

import urllib3
from kubernetes.client.exceptions import ApiException

log = logging.getLogger(__name__)

DCGM_SELECTOR = "app=nvidia-dcgm-exporter"  # the GPU Operator's DaemonSet's pods
METRICS_PORT_NAME, DCGM_PORT = "metrics", 9400  # its container port, and dcgm-exporter's default


def _ready(pod: Any) -> bool:
    status = pod.status
    if status is None or status.phase != "Running" or not status.pod_ip:
        return False
    return any(c.type == "Ready" and c.status == "True" for c in status.conditions or [])


def _port(pod: Any) -> int:
    for container in pod.spec.containers or []:
        for port in container.ports or []:
            if port.name == METRICS_PORT_NAME:
                return port.container_port
    return DCGM_PORT


def exporter_url(pod: Any) -> str | None:
    """The pod's /metrics address; None while it cannot be scraped (not Running, Ready, or placed)."""
    if not pod.spec or not pod.spec.node_name or not _ready(pod):
        return None
    host = pod.status.pod_ip
    if ipaddress.ip_address(host).version == 6:
        host = f"[{host}]"
    return f"http://{host}:{_port(pod)}/metrics"


def exporter_urls_from_pods(pods: list[Any]) -> dict[str, str]:
    """Node name -> its exporter's URL. Two ready pods on one node (a rolling update): the newer."""

    def created(pod: Any) -> tuple[bool, Any]:
        stamp = pod.metadata.creation_timestamp
        return stamp is not None, stamp

    urls = {}
    for pod in sorted(pods, key=created):
        url = exporter_url(pod)
        if url is not None:
            urls[pod.spec.node_name] = url
    return urls


def exporter_finder(
    core: Any, *, namespace: str, selector: str = DCGM_SELECTOR, timeout_s: float = 10.0
) -> Callable[[], dict[str, str]]:
    """A function the telemetry calls each poll: the exporters' URLs by node, {} when the API
    server cannot say (then only nodes with a typed agent_url are read, as before)."""

    def find() -> dict[str, str]:
        try:
            pods = core.list_namespaced_pod(namespace, label_selector=selector, _request_timeout=timeout_s)
        except (ApiException, urllib3.exceptions.HTTPError, OSError) as error:
            log.warning("cannot list the dcgm-exporter pods (%s in %s): %s", selector, namespace, error)
            return {}
        return exporter_urls_from_pods(pods.items)

    return find
