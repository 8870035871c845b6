"""Each team's GPU use decayed by a half-life, from the ledger, in one aggregate query.

For fair share over time (scheduling/engine/fair_history.py). No day buckets are needed: the decay
integral of an interval has a closed form, units x (2^-(age at end / h) - 2^-(age at start / h)) x
h / ln 2, so the database sums it exactly over every interval (open ones until now) that overlaps
the window of ten half-lives, with one GROUP BY team. Older use weighs under 0.1% and is left out,
so the query reads a bounded slice of the ledger (the ended_at index) however long it grows.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta

from django.db.models import F, FloatField, Min, Q, Sum, Value
from django.db.models.functions import Cast, Coalesce, Exp, Greatest, Least

from billing.models import UsageInterval
from billing.periods import Seconds, sql_moment
from scheduling.engine.fair_history import HORIZON_HALF_LIVES


def decayed_usage(now: datetime, half_life_s: float) -> tuple[Mapping[str, float], datetime | None]:
    """({team name: decayed GPU-unit-seconds at `now`}, the first use in the window or None)."""
    rate = math.log(2) / half_life_s
    cut = now - timedelta(seconds=HORIZON_HALF_LIVES * half_life_s)
    start = Greatest(F("started_at"), sql_moment(cut))
    end = Least(Coalesce(F("ended_at"), sql_moment(now)), sql_moment(now))

    def weight(moment):  # e^(-rate x age): 1 now, 1/2 one half-life ago
        age = Cast(Seconds(sql_moment(now), moment), FloatField())
        return Exp(Value(-rate, output_field=FloatField()) * age)

    gpu_s = Cast(F("gpu_fraction"), FloatField()) * (weight(end) - weight(start)) / Value(rate)
    rows = (UsageInterval.objects.filter(Q(ended_at__isnull=True) | Q(ended_at__gt=cut), started_at__lt=now)
            .values("team__name").annotate(gpu_s=Sum(gpu_s, output_field=FloatField()), first=Min("started_at"))
            .order_by())
    used, first = {}, None
    for row in rows:
        used[row["team__name"]] = max(0.0, float(row["gpu_s"] or 0.0))
        first = row["first"] if first is None else min(first, row["first"])
    return used, first.astimezone(UTC) if first else None
