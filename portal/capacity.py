"""How many GPU units the cluster has, as tenancy needs it to check a guarantee.

Tenancy is the bottom layer and cannot import scheduling, which owns the GPU rows, so scheduling
registers its counter here when its app is ready (scheduling/apps.py), as billing does with the
rate card (scheduling/prices.py). With none registered, guarantees are not checked against it.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal

CapacityReader = Callable[[], Decimal]

_reader: CapacityReader | None = None


def capacity_reader_set(reader: CapacityReader) -> None:
    global _reader
    _reader = reader


def cluster_gpus() -> Decimal | None:
    return None if _reader is None else _reader()
