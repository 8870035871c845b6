"""Fair share: how many GPU units each team deserves this cycle (pure; table-tested).

Every team first gets what it wants up to its guarantee. Capacity left over is lent to teams
that want more, in proportion to their weight, never beyond their burst limit or their demand
(water-filling, as in Volcano's proportion plugin).
"""

from __future__ import annotations

from dataclasses import dataclass

EPSILON = 1e-9


@dataclass(frozen=True)
class TeamDemand:
    guaranteed: float
    burst_limit: float | None  # None: no limit
    weight: float
    demand: float  # units in use + units pending


def deserved_shares(capacity: float, teams: dict[str, TeamDemand]) -> dict[str, float]:
    deserved = {t: min(d.demand, d.guaranteed) for t, d in teams.items()}
    left = capacity - sum(deserved.values())

    def cap(team: str) -> float:
        d = teams[team]
        limit = d.demand if d.burst_limit is None else min(d.demand, d.burst_limit)
        return max(limit, deserved[team])

    while left > EPSILON:
        hungry = [t for t in sorted(teams) if cap(t) - deserved[t] > EPSILON]
        weight = sum(max(teams[t].weight, EPSILON) for t in hungry)
        if not hungry:
            break
        given = 0.0
        for team in hungry:
            offer = left * max(teams[team].weight, EPSILON) / weight
            take = min(offer, cap(team) - deserved[team])
            deserved[team] += take
            given += take
        left -= given
        if given <= EPSILON:
            break
    return deserved
