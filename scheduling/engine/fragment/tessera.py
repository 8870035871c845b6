"""tessera: FGD's fragmentation descent, made CPU-aware, with LP-priced share placement and
class affinity on ties. The live engine's placement scorer (Features.placement_scorer) and the
fill experiment's `tessera` (it was `tessera-fill` before the two became one).

On top of FGD's drop in expected fragmentation, a candidate placement loses
* STRAND_WEIGHT x the GPU milli it newly leaves the node's CPU unable to feed, at the workload's
  CPU per GPU (tasks without a gpu_spec only). When the workload is CPU-bound (its tasks, CPU-only
  ones included, ask more CPU per GPU than the cluster has), the CPU left will be shared with
  the CPU-only tasks to come, so a free GPU needs the CPU per GPU of all tasks (strand_cpg);
* RESERVE_WEIGHT x the node model's pressure (constrained demand over the model's capacity), for
  GPU tasks free to run on any model, so they keep off the models constrained tasks need;
* for a sharing task, HOLE_WEIGHT x the value, at the packing LP's prices, of the room it wastes
  on its GPU (packing.hole_values).
Among equal scores a node already holding only this task's class wins. The design, its measured
variants and the figures behind each weight: docs/designs/tessera-fill.md.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from .baselines import fgd_score
from .frag import FragModel
from .packing import hole_values, item_prices
from .shapes import MILLI, NodeView, Request, affinity_tag, place, share_options

STRAND_WEIGHT = 2.0  # milli of FGD drop lost per milli-GPU newly stranded by CPU
# A prior of fewer tasks says nothing of the CPU pressure: at the fill experiment's first
# doublings (1..512 arrivals) every openb trace shows one above 1 on some seed by chance.
PRESSURE_MIN_TASKS = 1024
RESERVE_WEIGHT = 1000.0  # milli of FGD drop lost, per unit of model pressure, by free GPU tasks
HOLE_WEIGHT = 15.0  # milli of FGD drop per milli of LP hole value a sharing task destroys


def affinity(node: NodeView, task: Request) -> int:
    """2: the node holds only this task's class; 1: this class among others; 0: otherwise."""
    tag = affinity_tag(task)
    if tag is None or tag not in node.tags:
        return 0
    return 2 if len(node.tags) == 1 else 1


def cpu_per_gpu(tasks: Iterable[Request]) -> float | None:
    """Mean milli-cores the GPU tasks ask per whole GPU, or None without GPU tasks."""
    cpu = milli = 0
    for t in tasks:
        if t.num_gpu:
            cpu += t.cpu
            milli += t.total_milli
    return cpu * MILLI / milli if milli else None


def strand_cpg(tasks: list[Request], cluster_cpg: float | None) -> float | None:
    """The CPU per GPU a free GPU needs: the GPU tasks' (cpu_per_gpu), or, once the prior holds
    PRESSURE_MIN_TASKS tasks that ask more CPU per GPU than the cluster has (CPU pressure above
    1), that of all tasks. Below that pressure the CPU-only tasks fit into the CPU the GPUs leave;
    above it they take their share of every node's CPU left, the GPUs only the rest."""
    cpg = cpu_per_gpu(tasks)
    milli = sum(t.total_milli for t in tasks)
    if cpg is None or not cluster_cpg or len(tasks) < PRESSURE_MIN_TASKS:
        return cpg
    all_cpg = sum(t.cpu for t in tasks) * MILLI / milli
    return all_cpg if all_cpg > cluster_cpg else cpg


def model_pressure(tasks: Iterable[Request], capacity: Mapping[str, int]) -> dict[str, float]:
    """Constrained GPU demand per model over the model's GPU milli, scaled to 100% arrived.

    A task allowed several models is split over them in proportion to their capacity.
    """
    tasks = list(tasks)
    demand: dict[str, float] = {}
    for t in tasks:
        if t.spec and t.num_gpu:
            allowed = [m for m in t.spec if capacity.get(m)]
            total = sum(capacity[m] for m in allowed)
            for m in allowed:
                demand[m] = demand.get(m, 0.0) + t.total_milli * capacity[m] / total
    arrived = sum(t.total_milli for t in tasks)
    scale = sum(capacity.values()) / arrived if arrived else 0.0
    return {m: demand.get(m, 0.0) * scale / c for m, c in capacity.items() if c}


_PRICE_CACHE: dict[tuple, dict[int, float]] = {}


def _cached_prices(tasks: list[Request], n_gpus: int) -> dict[int, float]:
    """item_prices, once per (request sizes, GPUs): every seed of a run binds the same list."""
    key = (tuple(sorted(Counter(t.gpu_milli for t in tasks for _ in range(t.num_gpu)).items())),
           n_gpus)
    if key not in _PRICE_CACHE:
        _PRICE_CACHE[key] = item_prices(tasks, n_gpus)
    return _PRICE_CACHE[key]


def stranded(node: NodeView, cpg: float) -> float:
    """Free GPU milli the node's CPU left cannot feed at cpg milli-cores per GPU."""
    short = cpg * node.idle / MILLI - node.cpu_left
    return max(0.0, short) * MILLI / cpg


class TesseraScorer:
    name = "tessera"
    uses_prior = True  # FGD's typical shapes, and what for_workload learns

    def __init__(self, cpg: float | None = None, pressure: Mapping[str, float] | None = None,
                 prices: Mapping[int, float] | None = None):
        self.cpg = cpg  # None (unbound): no CPU term, plain FGD plus affinity
        self.pressure = dict(pressure or {})
        self.prices = dict(prices or {})  # empty (unbound, or no node list): no hole term
        self.holes = hole_values(self.prices) if self.prices else None

    def for_workload(self, tasks: Iterable[Request], capacity: Mapping[str, int] | None = None,
                     cpu: int = 0) -> TesseraScorer:
        """A copy bound to the workload's CPU per GPU and, given the cluster's GPU milli per
        model, each model's pressure and the LP prices of the request sizes; given the cluster's
        milli-cores too (`cpu`), its CPU pressure (strand_cpg). `tasks` is the workload prior's
        list (prior.bind), never more than the prior allows."""
        tasks = list(tasks)
        if not capacity:
            return TesseraScorer(cpu_per_gpu(tasks))
        gpu_milli = sum(capacity.values())
        cluster_cpg = cpu * MILLI / gpu_milli if cpu and gpu_milli else None
        return TesseraScorer(strand_cpg(tasks, cluster_cpg), model_pressure(tasks, capacity),
                             _cached_prices(tasks, gpu_milli // MILLI))

    def _drop(self, node: NodeView, after: NodeView, task: Request, fm: FragModel,
              before: float) -> float:
        drop = before - fm.node(after)
        if self.cpg and task.spec is None:
            newly = stranded(after, self.cpg) - stranded(node, self.cpg)
            drop -= STRAND_WEIGHT * max(0.0, newly)
        if task.spec is None and task.num_gpu:
            drop -= RESERVE_WEIGHT * self.pressure.get(node.model, 0.0)
        return drop

    def _best(self, node: NodeView, task: Request, fm: FragModel) -> tuple[tuple, int | None]:
        before = fm.node(node)
        picks: list[int | None] = [*share_options(node, task)] if task.is_share else [None]
        best: tuple[tuple, int | None] | None = None
        for pick in picks:  # ascending free: on equal keys the fuller GPU is kept
            after = place(node, task, pick)
            drop = self._drop(node, after, task, fm, before)
            if pick is not None and self.holes is not None:
                drop += HOLE_WEIGHT * self._hole_gain(pick, task.gpu_milli)
            key = (fgd_score(drop), affinity(node, task))
            if best is None or key > best[0]:
                best = (key, pick)
        assert best is not None
        return best

    def _hole_gain(self, free: int, milli: int) -> float:
        """What the share earns at LP prices, less the value its GPU's free share loses."""
        assert self.holes is not None
        return self.holes[free - milli] + milli - self.prices.get(milli, 0.0) - self.holes[free]

    def score(self, node: NodeView, task: Request, fm: FragModel) -> Any:
        return self._best(node, task, fm)[0]

    def share_pick(self, node: NodeView, task: Request, fm: FragModel, rng: Any) -> int:
        pick = self._best(node, task, fm)[1]
        assert pick is not None
        return pick
