"""The rate card as the scheduler sees it: $ per GPU-hour per (GPU model, tier) at a moment.

Registered with scheduling (scheduling/prices.py) when the billing app is ready, so each snapshot's
nodes carry the price billing will charge for them.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from billing.ledger import rate_windows_between
from billing.periods import day_start


def prices_at(moment: datetime) -> dict[tuple[str, str], float]:
    day = moment.astimezone(UTC).date()
    windows = rate_windows_between(day_start(day), day_start(day + timedelta(days=1)))
    return {(w.gpu_model, w.tier): float(w.price) for w in windows if w.low <= moment < w.high}
