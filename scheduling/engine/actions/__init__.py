"""Actions, registered by name and run in the order a policy lists them (least disruptive
first): allocate (guaranteed, then burst) -> backfill -> reclaim -> preempt -> consolidate ->
repartition."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ..registry import Registry
from .allocate import allocate
from .backfill import backfill
from .consolidate import consolidate
from .evict import preempt, reclaim
from .repartition import repartition

if TYPE_CHECKING:
    from ..session import Session

Action = Callable[["Session"], None]
ACTIONS: Registry[Action] = Registry("action")
ACTIONS.register("allocate", allocate)
ACTIONS.register("backfill", backfill)
ACTIONS.register("reclaim", reclaim)
ACTIONS.register("preempt", preempt)
ACTIONS.register("consolidate", consolidate)
ACTIONS.register("repartition", repartition)
