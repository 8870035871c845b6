"""EXPERIMENTAL tessera (knobs via TX env)."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable
from typing import Any

from .frag import FragModel, TypicalShape
from .model import NodeState, Task, affinity_tag, place, share_options
from .policies import fgd_score

TX = os.environ.get("TX", "")
SB = int(os.environ.get("SB", "8000"))
CB = int(os.environ.get("CB", "4000"))
LAM = float(os.environ.get("LAM", "1.0"))
NU = float(os.environ.get("NU", "0.3"))
CF = float(os.environ.get("CF", "1.0"))


def weighted_shapes(tasks: Iterable[Task], gpu_weight: float = 0.0) -> list[TypicalShape]:
    counts: Counter = Counter()
    for t in tasks:
        counts[(t.cpu, t.gpu_milli, t.num_gpu, t.spec)] += 1 + gpu_weight * t.total_milli / 1000
    total = sum(counts.values())
    return [TypicalShape(cpu, milli, num, spec, w / total)
            for (cpu, milli, num, spec), w in counts.items()]


def affinity(node: NodeState, task: Task) -> int:
    tag = affinity_tag(task)
    if tag is None or tag not in node.tags:
        return 0
    return 2 if len(node.tags) == 1 else 1


def waste_table(tasks) -> list[float]:
    """w[r] for r in 0..1000 step 10: expected unusable part of a GPU with r free (rough)."""
    shares = Counter(t.gpu_milli for t in tasks if t.num_gpu == 1 and t.gpu_milli < 1000)
    sizes = sorted(shares)
    # best fill by unbounded subset sum over share sizes (ignores counts)
    best = [0] * 1001
    for r in range(1001):
        for s in sizes:
            if s <= r:
                best[r] = max(best[r], s + best[r - s])
    return [r - best[r] for r in range(1001)]


class TesseraPolicy:
    name = "tessera"
    cpg = 11000
    waste = None

    def for_workload(self, tasks):
        tasks = list(tasks)
        p = TesseraPolicy()
        g = [t for t in tasks if t.num_gpu]
        p.cpg = CF * sum(t.cpu for t in g) / max(1, sum(t.total_milli for t in g)) * 1000
        p.waste = waste_table(tasks)
        c = Counter()
        for t in tasks:
            for m in t.spec or ():
                c[m] += t.total_milli / len(t.spec)
        top = max(c.values(), default=0)
        p.reserve = {m: v / top for m, v in c.items()}
        return p

    def stranded(self, n):
        """GPU milli the node's CPU cannot feed at the workload's CPU per GPU."""
        short = self.cpg * n.idle / 1000 - n.cpu_left
        return max(0.0, short) / self.cpg * 1000

    def _key(self, node, task, fm, before, pick):
        after = place(node, task, pick)
        drop = before - fm.node(after)
        if "res" in TX and task.num_gpu and task.spec is None:
            drop -= NU * self.reserve.get(node.model, 0.0) * task.total_milli
        if "pen" in TX and not ("unc" in TX and task.spec is not None):
            delta = self.stranded(after) - self.stranded(node)
            drop -= LAM * (max(0.0, delta) if "pos" in TX else delta)
        key = [fgd_score(drop)]
        if "cpu" in TX and task.num_gpu == 0:
            key.append(int((after.cpu_left - self.cpg * after.idle / 1000) // CB))
        if "comp" in TX and task.is_share and self.waste is not None:
            key.append(-self.waste[pick - task.gpu_milli])
        key.append(affinity(node, task))
        if "short" in TX and task.num_gpu > 0:
            key.insert(1, -int(max(0, self.cpg * after.idle / 1000 - after.cpu_left) // SB))
        if "gsur" in TX and task.num_gpu > 0:
            key.append(int((after.cpu_left - self.cpg * after.idle / 1000) // 4000))
        return tuple(key)

    def _best(self, node: NodeState, task: Task, fm: FragModel) -> tuple[tuple, int | None]:
        before = fm.node(node)
        picks: list[int | None] = share_options(node, task) if task.is_share else [None]
        best = None
        for pick in picks:
            key = self._key(node, task, fm, before, pick)
            if best is None or key > best[0]:
                best = (key, pick)
        return best

    def score(self, node: NodeState, task: Task, fm: FragModel) -> Any:
        return self._best(node, task, fm)[0]

    def share_pick(self, node: NodeState, task: Task, fm: FragModel, rng: Any) -> int:
        return self._best(node, task, fm)[1]
