"""Placement policies registered by name; a bad name fails at start, loudly."""

from __future__ import annotations

from typing import Any, Protocol

from .frag import FragModel
from .model import NodeState, Task


class Policy(Protocol):
    """A node scorer plus the GPU rule for sharing tasks.

    score() must depend only on the node's state and the task's CPU and GPU request (never on
    memory), so a simulator may cache it per state; higher wins and ties are broken at random.
    """

    name: str
    uses_prior: bool  # scores against a workload prior (FragModel, for_workload): see prior.py

    def score(self, node: NodeState, task: Task, fm: FragModel) -> Any: ...

    def share_pick(self, node: NodeState, task: Task, fm: FragModel, rng: Any) -> int:
        """Free milli of the GPU a sharing task takes on the chosen node."""
        ...


class Registry:
    def __init__(self) -> None:
        self._policies: dict[str, Policy] = {}

    def register(self, policy: Policy) -> Policy:
        if policy.name in self._policies:
            raise ValueError(f"policy {policy.name!r} is already registered")
        self._policies[policy.name] = policy
        return policy

    def get(self, name: str) -> Policy:
        try:
            return self._policies[name]
        except KeyError:
            known = ", ".join(sorted(self._policies))
            raise KeyError(f"unknown policy {name!r}; known: {known}") from None

    def names(self) -> list[str]:
        return list(self._policies)


REGISTRY = Registry()
