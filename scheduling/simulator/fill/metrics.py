"""Metrics binned by arrived GPU request, as the artifact's merge_*_discrete.py scripts do.

Each task is one event. Its bin is the arrived request as a whole percent of capacity (Python's
round, like pandas'). A bin is the mean of its events; an empty bin takes the mean of the events
in the bins one either side; a bin with no such events is left out.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence

from .loop import FillResult

MAX_BIN = 130


def bin_events(arrived_pct: Sequence[float], values: Sequence[float],
               max_bin: int = MAX_BIN) -> dict[int, float]:
    by_bin: dict[int, list[float]] = defaultdict(list)
    for pct, value in zip(arrived_pct, values, strict=True):
        by_bin[int(round(pct))].append(value)
    out: dict[int, float] = {}
    for b in range(max_bin + 1):
        events = by_bin.get(b)
        if not events:
            events = by_bin.get(b - 1, []) + by_bin.get(b, []) + by_bin.get(b + 1, [])
        if events:
            out[b] = sum(events) / len(events)
    return out


def allocation_rate(result: FillResult) -> dict[int, float]:
    cap = result.capacity_milli
    arrived = [100 * a / cap for a in result.arrived]
    alloc = [round(100 * u / cap, 2) for u in result.used]  # the artifact rounds each event
    return {b: round(v, 2) for b, v in bin_events(arrived, alloc).items()}


def frag_ratio(result: FillResult) -> dict[int, float]:
    """Sum_n F_n(M) / Sum_n idle_n, in percent."""
    cap = result.capacity_milli
    arrived = [100 * a / cap for a in result.arrived]
    ratio = [100 * f / i if i else 0.0 for f, i in zip(result.frag, result.idle, strict=True)]
    return bin_events(arrived, ratio)


def mean_over_runs(runs: Iterable[dict[int, float]], decimals: int = 2) -> dict[int, float]:
    """Per bin, the mean over the runs that have the bin."""
    sums: dict[int, list[float]] = defaultdict(list)
    for run in runs:
        for b, v in run.items():
            sums[b].append(v)
    return {b: round(sum(vs) / len(vs), decimals) for b, vs in sorted(sums.items())}
