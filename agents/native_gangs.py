"""The intake's gang half (docs/reference/native-submission.md, "Gangs"): a native pod with the
pod-group label joins its group's job instead of making one, and every poll re-reads the waiting
gangs' PodGroups, so an object created (or changed) after the pods sizes the gang. The rows are
scheduling/native_gangs.py's; reading the cluster's words is agents/backends/k8s_gangs.py's.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from agents.backends.k8s_gangs import (
    SCHEDULING_GROUP_PREFIX,
    GangError,
    is_scheduling_group,
    podgroup_min_member,
    scheduling_podgroup_min_count,
)
from portal.models import Team
from scheduling.models import Job
from scheduling.native import NativeNeed
from scheduling.native_gangs import gang_join, gang_size, waiting_gangs

log = logging.getLogger(__name__)


class PodGroupCounts:
    """minMember of each PodGroup, one list per namespace and kind per poll: the scheduler-plugins
    ones (the backend's `pod_groups`) for a label's group, the Kubernetes ones (`scheduling_pod_groups`)
    for a group read from spec.schedulingGroup (k8s_gangs.is_scheduling_group)."""

    def __init__(self, backend: Any) -> None:
        # A backend without them (the simulated one): annotations only.
        self.readers = {
            False: getattr(backend, "pod_groups", None),
            True: getattr(backend, "scheduling_pod_groups", None),
        }
        self._seen: dict[tuple[bool, str], dict[str, dict]] = {}

    def _object(self, namespace: str, group: str) -> tuple[bool, dict | None]:
        kind = is_scheduling_group(group)
        reader = self.readers[kind]
        if reader is None:
            return kind, None
        if (kind, namespace) not in self._seen:
            self._seen[(kind, namespace)] = reader(namespace)
        return kind, self._seen[(kind, namespace)].get(group.removeprefix(SCHEDULING_GROUP_PREFIX) if kind else group)

    def min_member(self, namespace: str, group: str) -> int | None:
        """The PodGroup's minMember (a Kubernetes PodGroup's gang minCount); None when there is no
        such object. GangError when it has none usable."""
        kind, found = self._object(namespace, group)
        if found is None:
            return None
        if not kind:
            return podgroup_min_member(found)
        count = scheduling_podgroup_min_count(found)
        if count is None:
            raise GangError(f"PodGroup {group} has the basic policy: no gang")
        return count

    def is_gang(self, namespace: str, group: str) -> bool:
        """False for a pod whose Kubernetes PodGroup says `basic`: each of its pods is placed on its
        own, as the kube-scheduler would. Every other group is a gang (its count may come later)."""
        kind, found = self._object(namespace, group)
        if not kind or found is None:
            return True
        try:
            return scheduling_podgroup_min_count(found) is not None
        except GangError:
            return True  # the intake refuses it as a gang's pod, saying why


def gang_take_in(counts: PodGroupCounts, team: Team, need: NativeNeed, annotated: int | None, at: datetime) -> Job:
    """The pod joins its group's job (ValidationError or GangError: it cannot, and why)."""
    return gang_join(
        team=team, need=need, annotated=annotated, podgroup=counts.min_member(need.namespace, need.group), at=at
    )


def gangs_resize(counts: PodGroupCounts) -> int:
    """Size every waiting gang by its PodGroup as it is now; how many were looked at."""
    waiting = waiting_gangs()
    for job_id, namespace, group in waiting:
        try:
            count = counts.min_member(namespace, group)
        except GangError as error:  # the object says nothing usable: as if there were none
            log.info("job %s: PodGroup %s/%s ignored: %s", job_id, namespace, group, error)
            count = None
        gang_size(job_id, podgroup=count)
    return len(waiting)
