"""Node scorers registered by name: the fragmentation-aware scorers and the FGD paper's
baselines, one registry for the live engine's placement and the fill experiment."""

from __future__ import annotations

from typing import Any, Protocol

from ..registry import Registry
from .frag import FragModel
from .shapes import NodeView, Request


class Scorer(Protocol):
    """A node scorer plus the GPU rule for sharing requests.

    score() must depend only on the node's view and the request's CPU and GPU ask (never on
    memory), so a caller may cache it per view; higher wins and ties are the caller's to break.
    """

    name: str
    uses_prior: bool  # scores against a workload prior (FragModel, for_workload): see learn.py

    def score(self, node: NodeView, task: Request, fm: FragModel) -> Any: ...

    def share_pick(self, node: NodeView, task: Request, fm: FragModel, rng: Any) -> int:
        """Free milli of the GPU a sharing request takes on the chosen node."""
        ...


SCORERS: Registry[Scorer] = Registry("placement scorer")
