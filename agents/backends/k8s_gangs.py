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

The Kubernetes Workload API (KEP-4671, `scheduling.k8s.io`, behind the GenericWorkload feature gate)
is read in its shape since v1.36: a `Workload` holds `spec.podGroupTemplates`, a controller makes a
`PodGroup` object per running group with the template's `spec.schedulingPolicy` copied in (`gang:
{minCount: N}` or `basic: {}`), and each pod names its PodGroup in `spec.schedulingGroup.podGroupName`.
Tessera reads the pod's field and the PodGroup's policy, which is all a gang needs (the Workload is
the template the PodGroup came from). Such a pod's group is `scheduling.k8s.io/<name>` here, which
no label value can be, so the two conventions never mix. Which version serves `podgroups`
(v1alpha2 in v1.36, v1beta1 in v1.37) is found by API discovery. v1.35's first alpha (Workload
`spec.podGroups`, pods' `spec.workloadRef`) was replaced in v1.36 and is not read. The v1.20 control
plane the tests run serves none of it: there the label is the only way to form a gang.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
MIN_MEMBER_ANNOTATION = "tessera.io/min-member"
PODGROUP_GROUP, PODGROUP_VERSION, PODGROUP_PLURAL = "scheduling.x-k8s.io", "v1alpha1", "podgroups"
WORKLOAD_GROUP, WORKLOAD_RESOURCE, SCHEDULING_PODGROUPS = "scheduling.k8s.io", "workloads", "podgroups"
SCHEDULING_GROUP_PREFIX = f"{WORKLOAD_GROUP}/"  # a group read from spec.schedulingGroup (NativePod.group)
_GROUP_NAME_MAX = 253  # an object name; NativePod.group holds the prefix too
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


def scheduling_group_name(podgroup_name: str | None) -> str | None:
    """The pod's group from `spec.schedulingGroup.podGroupName` (the Kubernetes PodGroup API), as
    Tessera keys it: `scheduling.k8s.io/<name>`; None when the pod names none."""
    if not podgroup_name:
        return None
    if len(podgroup_name) > _GROUP_NAME_MAX - len(SCHEDULING_GROUP_PREFIX) or not _NAME.match(podgroup_name):
        raise GangError(f"spec.schedulingGroup.podGroupName={podgroup_name!r} is not a PodGroup name Tessera can keep")
    return SCHEDULING_GROUP_PREFIX + podgroup_name


def is_scheduling_group(group: str) -> bool:
    """The group came from spec.schedulingGroup, not from the scheduler-plugins label."""
    return group.startswith(SCHEDULING_GROUP_PREFIX)


def scheduling_podgroup_min_count(podgroup: Mapping[str, Any]) -> int | None:
    """`spec.schedulingPolicy.gang.minCount` of a scheduling.k8s.io PodGroup; None for the `basic`
    policy (no gang: each pod is placed on its own). The API server requires exactly one of the two
    and minCount of at least 1; anything else is refused rather than guessed."""
    name = (podgroup.get("metadata") or {}).get("name", "?")
    policy = (podgroup.get("spec") or {}).get("schedulingPolicy") or {}
    if "gang" in policy:
        gang = policy["gang"] or {}
        if "minCount" not in gang:
            raise GangError(f"PodGroup {name} has no spec.schedulingPolicy.gang.minCount")
        return _count(gang["minCount"], f"PodGroup {name} spec.schedulingPolicy.gang.minCount")
    if "basic" in policy:
        return None
    raise GangError(f"PodGroup {name} has neither a gang nor a basic spec.schedulingPolicy")


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


def workload_api_version(
    resources_by_group_version: Mapping[str, Iterable[str]], resource: str = WORKLOAD_RESOURCE
) -> str | None:
    """The newest `scheduling.k8s.io` version that serves `resource` (`workloads`, or the
    `podgroups` Tessera reads), from API discovery: group/version -> the resource names it serves.
    None where the server has none (v1.20 serves scheduling.k8s.io/v1 and v1beta1 with
    priorityclasses only)."""
    versions = [
        gv
        for gv, resources in resources_by_group_version.items()
        if gv.startswith(SCHEDULING_GROUP_PREFIX) and resource in set(resources)
    ]
    return max(versions, key=_version_rank, default=None)


def _version_rank(group_version: str) -> tuple[int, int, int]:
    """Kubernetes' order of versions: v1 > v1beta2 > v1beta1 > v1alpha2 (not the alphabet's)."""
    match = _VERSION.match(group_version.rpartition("/")[2])
    if match is None:
        return (-1, 0, 0)
    major, maturity, minor = match.groups()
    return ({"alpha": 0, "beta": 1, None: 2}[maturity], int(major), int(minor or 0))
