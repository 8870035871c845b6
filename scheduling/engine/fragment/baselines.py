"""The FGD paper's baselines, scored as the artifact's score plugins do: FGD, BestFit, DotProd,
GpuClustering and GpuPacking. Its sixth, Random, draws a node uniformly, which is no score the
live engine's placement can use (its ties go to a fixed order), so it has no scorer here.

Scores are integers 0..100 like kube-scheduler's, so small differences tie; `simulate fill` breaks
ties by a seeded node order (Features.score_ties="name"), as the artifact's scheduler does.
Normalisers follow the artifact: 128 cores and 8 GPUs.
"""

from __future__ import annotations

import math
from typing import Any

from .frag import FragModel
from .shapes import MILLI, NodeView, Request, place, share_options

MAX_CPU = 128_000  # milli-cores
MAX_GPU = 8 * MILLI  # milli-GPUs


def best_fit_share(node: NodeView, task: Request) -> int:
    """The GPU with the least free share that still fits."""
    return share_options(node, task)[0]


class _BestFitGpu:
    """Most baselines pick GPUs best-fit inside the chosen node."""

    uses_prior = False

    def share_pick(self, node: NodeView, task: Request, fm: FragModel, rng: Any) -> int:
        return best_fit_share(node, task)


class DotProdScorer(_BestFitGpu):
    """Tetris-style: the smaller free·request dot product wins, so it packs."""

    name = "dotprod"

    def score(self, node: NodeView, task: Request, fm: FragModel) -> int:
        dot = (node.cpu_left / MAX_CPU * task.cpu / MAX_CPU
               + node.idle / MAX_GPU * task.total_milli / MAX_GPU)
        return int(100 * (1 - 0.5 * dot))


class BestFitScorer(_BestFitGpu):
    """The least capacity left after placement wins."""

    name = "bestfit"

    def score(self, node: NodeView, task: Request, fm: FragModel) -> int:
        left = (0.5 * (node.cpu_left - task.cpu) / MAX_CPU
                + 0.5 * (node.idle - task.total_milli) / MAX_GPU)
        return int(100 * (1 - left))


class GpuClusteringScorer(_BestFitGpu):
    """Keep tasks of one class (share, k-GPU) together; bands by the tags already on a node."""

    name = "gpuclustering"

    def score(self, node: NodeView, task: Request, fm: FragModel) -> int:
        if task.num_gpu == 0:
            return 0
        tag = "share" if task.is_share else f"{task.num_gpu}gpu"
        within = 25 * (MAX_GPU - node.idle) // MAX_GPU  # fuller nodes first within a band
        if tag in node.tags:
            return within + (75 if len(node.tags) == 1 else 50)
        return within + (25 if not node.tags else 0)


class GpuPackingScorer(_BestFitGpu):
    """Prefer used GPUs, then free GPUs on used nodes, then the smallest idle nodes."""

    name = "gpupacking"

    def score(self, node: NodeView, task: Request, fm: FragModel) -> int:
        if task.gpu_milli <= 0:
            return 0
        fully_free = sum(1 for g in node.gpus if g == MILLI)
        if fully_free == len(node.gpus):
            return max(33 - fully_free, fully_free)
        # The GPUs used are the least-free ones that fit (gpus are sorted descending).
        used = [g for g in reversed(node.gpus) if g >= task.gpu_milli][:task.num_gpu]
        fresh = sum(1 for g in used if g == MILLI)
        if fresh:
            return max(50 - fresh, 33)
        free_pct = sum(g * 100 // MILLI for g in used)
        return max(100 - free_pct // 10, 50)


def fgd_score(drop: float) -> int:
    """int(100 * sigmoid(drop / 1000)): 50 for no change, 26 for one more fragmented GPU."""
    return int(1 / (1 + math.exp(-drop / 1000)) * 100)  # the artifact's float order


def fgd_drops(node: NodeView, task: Request, fm: FragModel) -> list[tuple[float, int | None]]:
    """(frag before - frag after, share GPU) for each way the task can go on the node."""
    before = fm.node(node)
    picks: list[int | None] = [*share_options(node, task)] if task.is_share else [None]
    return [(before - fm.node(place(node, task, pick)), pick) for pick in picks]


class FgdScorer:
    """Greedy descent on the expected fragmentation F_n(M), squashed into 0..100."""

    name = "fgd"
    uses_prior = True  # the typical shapes of its FragModel

    def _best(self, node: NodeView, task: Request, fm: FragModel) -> tuple[int, int | None]:
        best: tuple[int, int | None] | None = None
        for drop, pick in fgd_drops(node, task, fm):  # ascending free: ties keep the fuller GPU
            score = fgd_score(drop)
            if best is None or score > best[0]:
                best = (score, pick)
        assert best is not None
        return best

    def score(self, node: NodeView, task: Request, fm: FragModel) -> int:
        return self._best(node, task, fm)[0]

    def share_pick(self, node: NodeView, task: Request, fm: FragModel, rng: Any) -> int:
        pick = self._best(node, task, fm)[1]
        assert pick is not None
        return pick
