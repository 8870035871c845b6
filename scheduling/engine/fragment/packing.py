"""The configuration LP of packing GPU requests into GPUs of 1000 milli, and what its prices say.

Each request size s is an item; a pattern is a multiset of items that fits one GPU; the LP picks
patterns for N GPUs to place the most milli. Its item duals lam_s price each size (the milli an
optimal packing gives up per such request). tessera prices share placement with them;
bench/fill_floor.py bounds every policy with the same LP's dual.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping

from scipy.optimize import linprog

from .shapes import MILLI, Request


def simplex_max(c: list[float], rows: list[list[float]], b: list[float]
                ) -> tuple[float, list[float]]:
    """max c.x subject to rows.x <= b, x >= 0 (SciPy's HiGHS). Returns the optimum and the
    rows' dual prices (>= 0: what one more unit of each right-hand side would add)."""
    res = linprog([-x for x in c], A_ub=rows, b_ub=b, bounds=(0, None), method="highs")
    if res.status != 0:
        raise ArithmeticError(f"LP not solved: {res.message}")
    return -res.fun, [max(0.0, -m) for m in res.ineqlin.marginals]


def best_pattern(sizes: list[int], values: list[float], caps: list[int]
                 ) -> tuple[float, tuple[int, ...]]:
    """Max sum a_i*values_i over a_i <= caps_i with sum a_i*sizes_i <= 1000 (one GPU)."""
    g = math.gcd(MILLI, *sizes)
    width = MILLI // g
    best: list[tuple[float, tuple[int, ...]]] = [(0.0, (0,) * len(sizes))] * (width + 1)
    for i, (s, v, k) in enumerate(zip(sizes, values, caps, strict=True)):
        if v <= 0:
            continue
        w = s // g
        for _ in range(min(k, MILLI // s)):
            for cap in range(width, w - 1, -1):
                val, pat = best[cap - w]
                if val + v > best[cap][0] + 1e-9:
                    best[cap] = (val + v, pat[:i] + (pat[i] + 1,) + pat[i + 1:])
    return max(best, key=lambda vp: vp[0])


def configuration_duals(kinds: list, sizes: list[int], values: list[float], caps: list[int],
                        n_gpus: int, pool: set | None = None) -> list[float]:
    """Item duals of the configuration LP: up to caps[i] items of kind i (sizes[i] milli, worth
    values[i]) packed into n_gpus GPUs of 1000 milli for the most value, by column generation.
    `pool` carries patterns, as ((kind, count), ...), across calls; those asking for a kind not
    offered now, or for more of one than offered, sit out."""
    pool = set() if pool is None else pool
    index = {k: i for i, k in enumerate(kinds)}
    for i, kind in enumerate(kinds):
        pool.add(((kind, min(caps[i], MILLI // sizes[i])),))
    lam = [0.0] * len(kinds)
    for _ in range(1000):
        pats = sorted(p for p in pool if all(k in index and caps[index[k]] >= n for k, n in p))
        c = [float(sum(values[index[k]] * n for k, n in p)) for p in pats]
        rows = [[1.0] * len(pats)] + [[float(dict(p).get(k, 0)) for p in pats] for k in kinds]
        _, duals = simplex_max(c, rows, [n_gpus, *caps])
        mu, lam = duals[0], duals[1:]
        val, pat = best_pattern(sizes, [v - x for v, x in zip(values, lam, strict=True)], caps)
        if val - mu <= 1e-6:
            break
        pool.add(tuple((k, n) for k, n in zip(kinds, pat, strict=True) if n))
    return lam


def item_prices(tasks: Iterable[Request], n_gpus: int) -> dict[int, float]:
    """Dual prices, per per-GPU request size, of packing the task list, scaled to fill n_gpus
    exactly, into n_gpus GPUs of 1000 milli (the configuration LP).

    A price is what one such request gives up, in milli, in an optimal packing: 0 for the
    sizes that always fit, up to its own size for those the optimum would rather leave out.
    """
    items: Counter[int] = Counter()
    for t in tasks:
        if t.num_gpu:
            items[t.gpu_milli] += t.num_gpu
    placed = sum(s * k for s, k in items.items())
    if not placed or n_gpus <= 0:
        return {}
    scale = n_gpus * MILLI / placed
    sizes = sorted(items)
    caps = [max(1, round(items[s] * scale)) for s in sizes]
    lam = configuration_duals(sizes, sizes, [float(s) for s in sizes], caps, n_gpus)
    return {s: max(0.0, x) for s, x in zip(sizes, lam, strict=True)}


def hole_values(prices: Mapping[int, float]) -> list[float]:
    """V[h]: the most a free share of h milli on one GPU can still earn, at those prices
    (requests of size s earning s - price_s, any number of each)."""
    sizes = [s for s in prices if 0 < s <= MILLI]
    g = math.gcd(MILLI, *sizes) if sizes else MILLI
    best = [0.0] * (MILLI // g + 1)
    for s in sorted(sizes):
        v, w = s - prices[s], s // g
        if v <= 0:
            continue
        for cap in range(w, len(best)):
            best[cap] = max(best[cap], best[cap - w] + v)
    for cap in range(1, len(best)):
        best[cap] = max(best[cap], best[cap - 1])
    return [best[h // g] for h in range(MILLI + 1)]
