"""The FGD fragmentation measure (ATC'23, the artifact's pkg/utils/frag.go).

A node's free GPU milli counts as fragmented to the extent that the typical tasks could not use
it: F_n(M) = sum_m p_m * F_n(m), with F_n(m) the free milli that task shape m cannot use.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import Counter
from collections.abc import Iterable
from typing import NamedTuple

from .shapes import NodeView, Request, gpus_fit, model_allowed

POPULARITY_THRESHOLD = 95  # percent of tasks the typical shapes must cover


class TypicalShape(NamedTuple):
    cpu: int
    gpu_milli: int
    num_gpu: int
    spec: frozenset[str] | None
    p: float  # share of the target workload, sums to 1 over the list


def _spec_text(spec: frozenset[str] | None) -> str:
    return "|".join(sorted(spec)) if spec else ""


def typical_shapes(tasks: Iterable[Request], threshold: float = POPULARITY_THRESHOLD
                   ) -> list[TypicalShape]:
    """The most common task shapes covering threshold % of tasks, frequencies renormalised.

    Shapes ignore memory. Equal counts are ordered as the artifact's reverse sort does: larger
    CPU, then larger GPU share, GPU count and model text first.
    """
    counts = Counter((t.cpu, t.gpu_milli, t.num_gpu, t.spec) for t in tasks)
    total = sum(counts.values())
    if total == 0:
        return []
    ranked = sorted(counts.items(), reverse=True,
                    key=lambda kv: (kv[1], kv[0][0], kv[0][1], kv[0][2], _spec_text(kv[0][3])))
    chosen, covered = [], 0
    for shape, count in ranked:
        if covered >= threshold * total / 100:
            break
        chosen.append((shape, count))
        covered += count
    return [TypicalShape(cpu, milli, num, spec, count / covered)
            for (cpu, milli, num, spec), count in chosen]


def shape_frag(model: str, cpu_left: int, gpus: tuple[int, ...], shape: TypicalShape) -> int:
    """F_n(m) in milli-GPUs: all idle milli, except the Q3 case where the shape fits."""
    idle = sum(gpus)
    if shape.gpu_milli == 0 or not model_allowed(model, shape.spec):
        return idle  # CPU-only shape (XL/XR) or model not allowed (NoAccess)
    if cpu_left >= shape.cpu and gpus_fit(gpus, shape.num_gpu, shape.gpu_milli):
        return sum(g for g in gpus if g < shape.gpu_milli)  # Q3: only the too-small GPUs
    return idle  # Q1, Q2, Q4


def node_frag(model: str, cpu_left: int, gpus: tuple[int, ...],
              shapes: Iterable[TypicalShape]) -> float:
    """F_n(M), the node's expected fragmentation in milli-GPUs: sum over shapes of p *
    shape_frag, inlined (the fill experiment asks it for every new node state), same sum order."""
    if not gpus or gpus[0] == 0:
        return 0.0
    idle = sum(gpus)
    n_gpus = len(gpus)
    total = 0.0
    for s in shapes:
        milli, num = s.gpu_milli, s.num_gpu
        if (milli and (s.spec is None or model in s.spec) and cpu_left >= s.cpu
                and (num == 0 or (n_gpus >= num and gpus[num - 1] >= milli))):
            total += s.p * sum(g for g in gpus if g < milli)  # Q3: only the too-small GPUs
        else:
            total += s.p * idle
    return total


class FragModel:
    """The target workload plus a cache of node frag by (model, CPU left, free GPUs).

    Only a placement changes a node, so most lookups hit; the artifact caches the same key.
    """

    def __init__(self, shapes: list[TypicalShape]):
        self.shapes = shapes
        self._cache: dict[tuple, float] = {}
        # CPU left counts only through which shapes' CPU it covers: nodes whose CPU left covers
        # the same shapes share a cache entry (the frag of the first one asked, equal for all).
        self._cpus = sorted({s.cpu for s in shapes})

    @classmethod
    def from_tasks(cls, tasks: Iterable[Request]) -> FragModel:
        return cls(typical_shapes(tasks))

    def frag(self, model: str, cpu_left: int, gpus: tuple[int, ...]) -> float:
        key = (model, bisect_right(self._cpus, cpu_left), gpus)
        value = self._cache.get(key)
        if value is None:
            value = self._cache[key] = node_frag(model, cpu_left, gpus, self.shapes)
        return value

    def node(self, node: NodeView) -> float:
        return self.frag(node.model, node.cpu_left, node.gpus)
