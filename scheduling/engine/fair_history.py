"""Fair share over time: who has had more than its share lately goes after the others (pure).

A team's past use is its GPU-unit-seconds weighted by 2^-(age / half-life) (default 7 days), as
Slurm's and KAI's decayed usage. It is normalised by what the cluster could have given over the
same decayed window (capacity now x the decayed length of the window since the records start),
as KAI does, so "0.2" means a fifth of the cluster, and compared with the team's share, its
guarantee over all guarantees: the ratio 1.8 reads "used 1.8x its share".

Work still running adds an entry penalty, as Kueue's Admission Fair Sharing charges a workload's
request on admission: its units over capacity, decaying from its start. A team that just started
a burst therefore ranks behind the others at once, before the ledger has seen much of it; and
each job placed this cycle raises its team's ratio before the next job is ranked.

The ratio orders only what is lent beyond guarantees (the burst passes of allocate) and whose
borrowed GPUs reclaim takes back first. It never decides who gets a guarantee. Teams are ranked
before their users, as Slurm's Fair Tree does: within a team the lead's order still holds.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from .types import Queue, UsageHistory

HALF_LIFE_S = 7 * 86400.0
# Use older than this many half-lives weighs under 0.1%: it is left out, so the live ledger query
# reads a bounded window (the "last 7 days" of the dashboard is the half-life, not a cut-off).
HORIZON_HALF_LIVES = 10
EPSILON = 1e-9


def decay(age_s: float, half_life_s: float) -> float:
    """The weight of use `age_s` ago: 1/2 after one half-life, 1/4 after two."""
    return 2.0 ** (-max(0.0, age_s) / half_life_s)


def window_start(now: float, half_life_s: float) -> float:
    return now - HORIZON_HALF_LIVES * half_life_s


def decayed_gpu_s(units: float, start: float, end: float, now: float, half_life_s: float) -> float:
    """`units` held from `start` to `end`, weighted by age at `now`: the exact integral of
    units x 2^-((now - t) / h) dt over the part of [start, end] inside the window."""
    start = max(start, window_start(now, half_life_s))
    end = min(end, now)
    if end <= start:
        return 0.0
    scale = half_life_s / math.log(2)
    return units * scale * (decay(now - end, half_life_s) - decay(now - start, half_life_s))


def empty_history(now: float, half_life_s: float = HALF_LIFE_S) -> UsageHistory:
    return UsageHistory(half_life_s=half_life_s, since=now, team_gpu_s=())


def share_weights(queues: Iterable[Queue]) -> dict[str, float]:
    """Each team's share: its guarantee over all guarantees (by weight where none has one)."""
    queues = list(queues)
    total = sum(q.guaranteed_gpus for q in queues)
    if total > EPSILON:
        return {q.team: q.guaranteed_gpus / total for q in queues}
    weights = sum(max(q.weight, 0.0) for q in queues)
    return {q.team: (max(q.weight, 0.0) / weights if weights > EPSILON else 0.0) for q in queues}


def usage_shares(history: UsageHistory, capacity_gpus: float, now: float) -> dict[str, float]:
    """Each team's decayed use as a fraction of the decayed capacity since the records start."""
    window = decayed_gpu_s(capacity_gpus, history.since, now, now, history.half_life_s)
    if window <= EPSILON:
        return {}
    return {team: gpu_s / window for team, gpu_s in history.team_gpu_s}


def ratio(used_share: float, share: float) -> float:
    """Use over share; a team with no share that used anything ranks after every team with one."""
    if share <= EPSILON:
        return math.inf if used_share > EPSILON else 0.0
    return used_share / share


def ratios(history: UsageHistory, queues: Iterable[Queue], capacity_gpus: float, now: float,
           entry: Mapping[str, float] | None = None) -> dict[str, float]:
    """Every team's fair-share ratio: (decayed use + entry penalty) over its share. `entry` is
    each team's running units weighted by decay since their start (the penalty's numerator)."""
    queues = list(queues)
    shares = share_weights(queues)
    used = usage_shares(history, capacity_gpus, now)
    entry = entry or {}
    teams = set(shares) | set(used) | set(entry)
    cap = max(capacity_gpus, EPSILON)
    return {t: ratio(used.get(t, 0.0) + entry.get(t, 0.0) / cap, shares.get(t, 0.0)) for t in teams}
