"""Binding a scorer to a workload prior: the task list it learns its typical shapes (FGD) and,
for tessera, CPU per GPU, model pressure and LP prices from."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import NamedTuple

from .frag import FragModel
from .registry import Scorer
from .shapes import Request


class Binding(NamedTuple):
    """A scorer as it scores with a given prior, and the typical shapes it scores against."""

    policy: Scorer
    fm: FragModel


def bind(policy: Scorer, tasks: Iterable[Request], capacity: Mapping[str, int] | None,
         cpu: int = 0) -> Binding:
    """The scorer with `tasks` as its prior; capacity is the cluster's GPU milli per model, cpu
    its milli-cores (0: unknown, as in the live engine's binding)."""
    tasks = list(tasks)
    learn = getattr(policy, "for_workload", None)
    return Binding(learn(tasks, capacity or None, cpu) if learn else policy,
                   FragModel.from_tasks(tasks))
