"""The checkpoint channel of native pods (CONTRACTS.md, "Checkpoint channel", "Native pods"): pure
functions, no API calls and no Django.

Tessera cannot add a volume or an environment variable to a pod it did not create, and a plain
cluster has no mutating webhook to do it. So the pod's owner declares the channel in the pod
template: one projected volume holding the Secret `tessera-checkpoint-<name>` (optional: it exists
only once Tessera has bound one of the pods) and the pod's own annotations (downward API). <name>
is one the owner knows when writing the manifest: the pod group, else the controlling owner (the
Job), else the pod. Tessera creates the Secret, with the endpoint and a token for the channel,
before it binds the first pod, so the kubelet mounts it when the container starts.
"""

from __future__ import annotations

from typing import Any

from agents.backends.k8s_manifests import LABEL_MANAGED_BY, MANAGED_BY, TOKEN_KEY
from scheduling.kube_names import DNS_SUBDOMAIN

CHANNEL_PREFIX = "tessera-checkpoint-"
URL_KEY = "url"
# Where the SDK looks for the volume when the environment names nothing (sdk/, tessera_checkpoint).
CHANNEL_DIR = "/var/run/tessera"
ANNOTATION_INTERVAL = "tessera.io/checkpoint-interval-s"
DEFAULT_INTERVAL_S = 3600  # a native job with the channel and no annotation is asked once an hour


def channel_name(group: str | None, owner_name: str | None, pod_name: str) -> str:
    """The Secret a pod of this group / owner / name mounts; '' when that name cannot be one."""
    group = group.rsplit("/", 1)[-1] if group else group  # a Kubernetes PodGroup's: scheduling.k8s.io/<name>
    name = CHANNEL_PREFIX + (group or owner_name or pod_name)
    return name if len(name) <= 253 and DNS_SUBDOMAIN.match(name) else ""


def mounted_channels(pod: Any) -> frozenset[str]:
    """The checkpoint-channel Secrets (by name) the pod declares as volumes, plain or projected."""
    names = set()
    for volume in (pod.spec.volumes if pod.spec is not None else None) or []:
        if volume.secret is not None:
            names.add(volume.secret.secret_name or "")
        sources = volume.projected.sources if volume.projected is not None else None
        names.update(source.secret.name or "" for source in sources or [] if source.secret is not None)
    return frozenset(name for name in names if name.startswith(CHANNEL_PREFIX))


def channel_interval_s(annotations: dict[str, str]) -> int:
    """How often Tessera asks a channel's job for a checkpoint; ValueError when the annotation says
    no whole number of seconds (the intake checks its minimum as a portal submit's)."""
    value = (annotations.get(ANNOTATION_INTERVAL) or "").strip()
    if not value:
        return DEFAULT_INTERVAL_S
    try:
        seconds = int(value)
    except ValueError:
        seconds = -1
    if seconds < 1:
        raise ValueError(f"{ANNOTATION_INTERVAL}: {value!r} is not a whole number of seconds")
    return seconds


def channel_secret_manifest(name: str, namespace: str, token: str, url: str, owner: dict) -> dict:
    """The channel's Secret, owned by what makes the pods (a Job), else the pod, so the garbage
    collector removes it with them. No blockOwnerDeletion: that would need the owner's finalizers right."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {LABEL_MANAGED_BY: MANAGED_BY},
            "ownerReferences": [owner],
        },
        "stringData": {TOKEN_KEY: token, URL_KEY: url},
    }

