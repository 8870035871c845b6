"""The intake's gang half (docs/reference/native-submission.md, "Gangs"): a native pod with the
pod-group label joins its group's job instead of making one, and every poll re-reads the waiting
gangs' PodGroups, so an object created (or changed) after the pods sizes the gang. The rows are
scheduling/native_gangs.py's; reading the cluster's words is agents/backends/k8s_gangs.py's.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from agents.backends.k8s_gangs import GangError, podgroup_min_member
from portal.models import Team
from scheduling.models import Job
from scheduling.native import NativeNeed
from scheduling.native_gangs import gang_join, gang_size, waiting_gangs

log = logging.getLogger(__name__)


class PodGroupCounts:
    """minMember of each PodGroup, one list per namespace per poll (the backend's `pod_groups`)."""

    def __init__(self, backend: Any) -> None:
        self.pod_groups = getattr(backend, "pod_groups", None)  # a backend without them: annotations only
        self._seen: dict[str, dict[str, dict]] = {}

    def min_member(self, namespace: str, group: str) -> int | None:
        """The PodGroup's minMember; None when there is no such object. GangError when it has none usable."""
        if self.pod_groups is None:
            return None
        if namespace not in self._seen:
            self._seen[namespace] = self.pod_groups(namespace)
        found = self._seen[namespace].get(group)
        return podgroup_min_member(found) if found is not None else None


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
