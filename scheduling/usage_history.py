"""Each team's decayed GPU use, as the snapshot gives it to the engine (engine/fair_history.py).

The ledger (usage intervals) is billing's, a layer above scheduling, so billing registers its
reader here when it starts (billing/apps.py), as it does the rate card's. A snapshot built with no
reader registered is an error, never an empty history (which would silently turn fairness over
time off). The half-life is TESSERA_FAIRSHARE_HALF_LIFE_H (default 168 h: 7 days).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime

from django.conf import settings

from scheduling.engine.fair_history import window_start
from scheduling.engine.types import UsageHistory

# (now, half-life in seconds) -> ({team name: decayed GPU-unit-seconds}, first use in the window or None)
UsageReader = Callable[[datetime, float], tuple[Mapping[str, float], datetime | None]]

_reader: UsageReader | None = None


def usage_reader_set(reader: UsageReader) -> None:
    global _reader
    _reader = reader


def half_life_s() -> float:
    return settings.TESSERA_FAIRSHARE_HALF_LIFE_H * 3600.0


def usage_history_at(now: datetime) -> UsageHistory:
    if _reader is None:
        raise RuntimeError("no usage reader is registered (billing registers one when its app is ready)")
    half_life = half_life_s()
    used, first = _reader(now, half_life)
    since = max(first.timestamp(), window_start(now.timestamp(), half_life)) if first else now.timestamp()
    return UsageHistory(half_life_s=half_life, since=since,
                        team_gpu_s=tuple(sorted((team, float(v)) for team, v in used.items() if v > 0)))
