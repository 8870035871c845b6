"""Gangs of native pods as the cluster describes them: which group a pod is in, and how many of the
group's pods must exist first. Pure functions over plain dicts (a PodGroup object as the API returns
it, a pod's labels and annotations); scheduling/native_gangs.py keeps the gang's job.

The convention is the scheduler-plugins coscheduling one, which Kubeflow's training operator,
JobSet users and plain Jobs already follow: a pod carries the label `scheduling.x-k8s.io/pod-group:
<name>`, and the `PodGroup` object of that name in the pod's namespace (CRD
`podgroups.scheduling.x-k8s.io`, version v1alpha1) says `spec.minMember`, how many of its pods must
be placeable together before any is bound. A controller that creates no PodGroup object (a plain
batch/v1 Job) puts the annotation `tessera.io/min-member: "<N>"` on its pods instead; the object,
when there is one, wins.

The Kubernetes Workload API (KEP-4671: `scheduling.k8s.io` `workloads`, alpha from v1.35 and off by
default; pods point at it with `spec.workloadRef`) is found by API discovery
(`workload_api_version`). The v1.20 control plane the tests run has none of it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
MIN_MEMBER_ANNOTATION = "tessera.io/min-member"
PODGROUP_GROUP, PODGROUP_VERSION, PODGROUP_PLURAL = "scheduling.x-k8s.io", "v1alpha1", "podgroups"
WORKLOAD_GROUP, WORKLOAD_RESOURCE = "scheduling.k8s.io", "workloads"
# Far above any gang a cluster of ours runs; a typo ("40000") is refused rather than waited on forever.
MAX_MEMBERS = 4096
# A PodGroup's name is an object name (a DNS subdomain); as a label value it is also at most 63.
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
_VERSION = re.compile(r"^v(\d+)(?:(alpha|beta)(\d+))?$")


class GangError(ValueError):
    """A pod's gang cannot be read; the message says what to fix, for an Event on the pod."""


def pod_group_name(labels: Mapping[str, str] | None) -> str | None:
    """The pod's group from its label; None for a pod that is no gang member."""
    name = (labels or {}).get(POD_GROUP_LABEL)
    if not name:
        return None
    if len(name) > 63 or not _NAME.match(name):
        raise GangError(
            f"label {POD_GROUP_LABEL}={name!r} is not a PodGroup name "
            "(lower-case letters, digits, '-' and '.', at most 63)"
        )
    return name


def _count(value: Any, where: str) -> int:
    # bool is an int in Python, and YAML's `true` is no member count.
    if isinstance(value, bool) or not isinstance(value, int):
        raise GangError(f"{where} must be a whole number, not {value!r}")
    if not 1 <= value <= MAX_MEMBERS:
        raise GangError(f"{where} must be between 1 and {MAX_MEMBERS}, not {value}")
    return value


def podgroup_min_member(podgroup: Mapping[str, Any]) -> int:
    """`spec.minMember` of a PodGroup object. The CRD's schema says minimum 1 and leaves it
    optional; the coscheduling plugin treats a missing one as 0, which would gang nothing, so
    Tessera refuses it instead of guessing."""
    name = (podgroup.get("metadata") or {}).get("name", "?")
    spec = podgroup.get("spec") or {}
    if "minMember" not in spec:
        raise GangError(f"PodGroup {name} has no spec.minMember")
    return _count(spec["minMember"], f"PodGroup {name} spec.minMember")


def annotation_min_member(annotations: Mapping[str, str] | None) -> int | None:
    """The fallback annotation's count; None when the pod has none."""
    raw = (annotations or {}).get(MIN_MEMBER_ANNOTATION)
    if raw is None:
        return None
    text = raw.strip()
    if not text.isdigit():  # "4.0", "-1", "four": refused, never rounded
        raise GangError(f"annotation {MIN_MEMBER_ANNOTATION}={raw!r} must be a whole number")
    return _count(int(text), f"annotation {MIN_MEMBER_ANNOTATION}")


def workload_api_version(resources_by_group_version: Mapping[str, Iterable[str]]) -> str | None:
    """The `scheduling.k8s.io` version that serves `workloads` (the Kubernetes Workload API), from
    API discovery: group/version -> the resource names it serves. None where the server has none
    (v1.20 serves scheduling.k8s.io/v1 and v1beta1 with priorityclasses only)."""
    versions = [
        gv
        for gv, resources in resources_by_group_version.items()
        if gv.startswith(f"{WORKLOAD_GROUP}/") and WORKLOAD_RESOURCE in set(resources)
    ]
    return max(versions, key=_version_rank, default=None)


def _version_rank(group_version: str) -> tuple[int, int, int]:
    """Kubernetes' order of versions: v1 > v1beta2 > v1beta1 > v1alpha2 (not the alphabet's)."""
    match = _VERSION.match(group_version.rpartition("/")[2])
    if match is None:
        return (-1, 0, 0)
    major, maturity, minor = match.groups()
    return ({"alpha": 0, "beta": 1, None: 2}[maturity], int(major), int(minor or 0))
