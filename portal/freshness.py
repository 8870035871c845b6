"""Per-team version numbers for the dashboard's short-lived caches.

Cached team data is keyed by the team's version, so a write that bumps the version makes every
reader build fresh data at once; the old entries simply expire. The portal services, the scheduler's
apply step and job releases (finish, preemption, node loss) bump it; any other write shows within
TEAM_CACHE_S.
"""

import time
from collections.abc import Iterable

from django.core.cache import cache
from django.db import transaction

TEAM_CACHE_S = 15


def _key(team_id: int) -> str:
    return f"portal:team-version:{team_id}"


def _start() -> int:
    # A lost version starts again from the clock, never from a number a reader may have seen.
    return time.time_ns() // 1000


def team_version(team_id: int) -> int:
    version = cache.get(_key(team_id))
    if version is None:
        cache.add(_key(team_id), _start(), timeout=None)
        version = cache.get(_key(team_id), 0)
    return version


def _bump(team_ids: set[int]) -> None:
    for team_id in team_ids:
        cache.add(_key(team_id), _start(), timeout=None)
        try:
            cache.incr(_key(team_id))
        except ValueError:  # evicted between add and incr
            cache.set(_key(team_id), _start(), timeout=None)


def teams_changed(team_ids: Iterable[int]) -> None:
    """Call from a write that changes what a team's dashboard or queue shows.

    Bumps now, so later reads in the same transaction see the change, and again after the commit,
    so a reader that cached the old rows between the first bump and the commit does not keep them.
    """
    ids = set(team_ids)
    if not ids:
        return
    _bump(ids)
    transaction.on_commit(lambda: _bump(ids))
