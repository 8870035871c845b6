"""The price of a GPU-hour per (GPU model, tier) at a moment, as the snapshot gives it to the engine.

The rate card is billing's, a layer above scheduling, so billing registers its reader here when it
starts (billing/apps.py), as it connects its signal receivers. A snapshot built with no reader
registered is an error, never a price of 0; a model and tier with no rate in force get None.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime

PriceList = Mapping[tuple[str, str], float]  # (GPU model, tier name) -> $ per GPU-hour
PriceReader = Callable[[datetime], PriceList]

_reader: PriceReader | None = None


def price_reader_set(reader: PriceReader) -> None:
    global _reader
    _reader = reader


def prices_at(moment: datetime) -> PriceList:
    if _reader is None:
        raise RuntimeError("no rate card reader is registered (billing registers one when its app is ready)")
    return _reader(moment)
