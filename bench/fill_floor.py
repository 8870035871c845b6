"""A lower bound, for ANY placement policy, on the unallocated GPUs of the fill experiment.

    .venv/bin/python bench/fill_floor.py --nodes ../shared/traces/alibaba-gpu-v2023/openb_node_list_gpu_node.csv \
        --trace ../shared/traces/alibaba-gpu-v2023/openb_pod_list_default.csv --seeds 42-51 [--policy tessera]

For each seed it rebuilds the experiment's own task sequence (scheduling.simulator.fill's
arrival_sequence, with the same seeded stream as experiment.run_one) and, for every event that
falls in the 100%-arrived bin (metrics.bin_events, the experiment's binning), bounds the GPU
milli that any policy can have allocated after that event. The bounds are then rounded and binned
exactly as metrics.allocation_rate does, so they compare one to one with the reported figure.

Three figures, from relaxations of the real problem (CPU, memory, GPU models and the node a GPU sits
on are all dropped, and every task may be placed or dropped freely, in hindsight):

* pairing: the 810-milli argument made exact. A share s > 500 needs a GPU of its own (two never
  fit together); its GPU keeps 1000 - s that only shares <= 1000 - s can fill. For a threshold
  tau, take the large shares L whose leftover is < tau (tau = 191: the 810s); only requests < tau
  can refill them, at most F = their total milli, so placing all of L wastes >= sum_L (1000 - s)
  - F. A policy may drop some instead: a dropped share is unallocated (arrived, not placed) and
  saves at most its own leftover 1000 - s < s of waste. With A the arrived milli and C the
  capacity, unallocated = C - A + dropped, so unallocated >= min over D in L of
  max(C - A + sum_D s, sum_{L-D} (1000 - s) - F), the min taken over a fractional D (a
  relaxation, so still a bound), and the best tau is kept.
* lp: the configuration LP of packing the prefix's GPU requests (a k-GPU task as k whole-GPU
  items) into the cluster's N GPUs of 1000 milli, maximising the milli placed. Its optimum bounds
  every integer packing, hence every policy. The bound used is the dual one, N*mu + sum n_i*lam_i,
  with lam >= 0 from the LP and mu recomputed exactly by a knapsack over all patterns that fit one
  GPU, so it is valid whatever the float error of the LP. It is above the pairing bound on every
  seed here: that one counts only the waste beside the large shares.
* lp<X% (--forced-until, default 95): the same LP for the policies that drop no GPU task arriving
  before X% of capacity (tessera and fgd drop their first near 95-96%; the table prints where).
  Those tasks get a value bonus, so the dual bound holds for packings that place them all. It is
  not a bound for every policy, only a measure of the room left to a policy of that kind.

tessera's hole term prices request sizes with the same LP, solved on its workload prior; the
LP (configuration_duals, over SciPy's HiGHS) and its knapsack (best_pattern) come from
scheduling/engine/fragment/packing.py.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scheduling.engine.fragment.packing import best_pattern, configuration_duals  # noqa: E402
from scheduling.engine.fragment.shapes import MILLI, Request  # noqa: E402
from scheduling.simulator.cli import parse_seeds  # noqa: E402
from scheduling.simulator.fill.loop import arrival_sequence  # noqa: E402
from scheduling.simulator.fill.metrics import bin_events  # noqa: E402
from scheduling.simulator.fill.prior import PRIORS, split_by_creation  # noqa: E402
from scheduling.simulator.fill.traces import load_nodes, load_tasks  # noqa: E402

# ---- bounds -----------------------------------------------------------------------------------

Item = tuple[int, bool]  # (per-GPU milli, forced: must be placed)
FORCE_BONUS = 10_000.0  # value added to a forced item; > any loss from placing it


def prefix_items(tasks: list[Request], ends: list[int], forced: int = 0) -> dict[int, Counter[Item]]:
    """For each k in ends (ascending), in one pass: the per-GPU request sizes of tasks[:k] -> count;
    a k-GPU task is k items (their being on distinct GPUs of one node is dropped: a relaxation).
    The first `forced` tasks are marked as placed."""
    out: dict[int, Counter[Item]] = {}
    items: Counter[Item] = Counter()
    done = 0
    for k in ends:
        for i in range(done, k):
            t = tasks[i]
            if t.num_gpu:
                items[(t.gpu_milli, i < forced)] += t.num_gpu
        done = k
        out[k] = Counter(items)
    return out


def sizes_of(items: Counter[Item]) -> Counter[int]:
    out: Counter[int] = Counter()
    for (s, _), k in items.items():
        out[s] += k
    return out


def _value(item: Item) -> float:
    return item[0] + (FORCE_BONUS if item[1] else 0.0)


def dual_bound(items: Counter[Item], n_gpus: int, lam: dict[Item, float]) -> float:
    """An upper bound on the milli placed by any packing that places every forced item.

    For any lam >= 0 and mu = max over one-GPU patterns of sum a_i*(value_i - lam_i), weak
    duality gives placed + BONUS*forced <= N*mu + sum n_i*lam_i."""
    kinds = sorted(items)
    lam_v = [max(0.0, lam.get(t, 0.0)) for t in kinds]
    mu, _ = best_pattern([s for s, _ in kinds],
                         [_value(t) - x for t, x in zip(kinds, lam_v, strict=True)],
                         [items[t] for t in kinds])
    n_forced = sum(k for (_, f), k in items.items() if f)
    return (n_gpus * max(0.0, mu) + sum(items[t] * x for t, x in zip(kinds, lam_v, strict=True))
            - FORCE_BONUS * n_forced)


def lp_duals(items: Counter[Item], n_gpus: int, pool: set) -> dict[Item, float]:
    """lam (item duals) of the configuration LP; pool keeps the patterns across calls."""
    kinds = sorted(items)
    lam = configuration_duals(kinds, [s for s, _ in kinds], [_value(t) for t in kinds],
                              [items[t] for t in kinds], n_gpus, pool)
    return dict(zip(kinds, lam, strict=True))


def pairing_bound(items: Counter[int], capacity: int, arrived: int) -> float:
    """The large-share argument (module docstring), in milli: the best over thresholds tau."""
    best = max(0.0, capacity - arrived)
    for tau in sorted({MILLI - s + 1 for s in items if 500 < s < MILLI}):
        # Large shares whose leftover is < tau; only items < tau (all <= 500) can refill them.
        large = sorted(s for s, k in items.items() if 500 < s < MILLI and MILLI - s < tau
                       for _ in range(k))
        fill = sum(s * k for s, k in items.items() if s < tau)
        best = max(best, _drop_or_waste(capacity - arrived, large, fill))
    return best


def _drop_or_waste(base: float, large: list[int], fill: int) -> float:
    """min over a fractional dropped set D of max(base + sum_D s, sum_rest (1000-s) - fill).

    Dropping s costs s unallocated and saves at most 1000 - s of waste; the cheapest saving per
    milli dropped is the smallest s, so drop in ascending order (fractional knapsack)."""
    waste = sum(MILLI - s for s in large) - fill
    if waste <= base:
        return base
    for s in large:
        save = MILLI - s
        if base + s >= waste - save:  # the two terms cross inside this share
            t = (waste - base) / (s + save)
            return base + t * s
        base += s
        waste -= save
    return max(base, waste)


# ---- per seed ---------------------------------------------------------------------------------

def seed_bounds(nodes, trace, seed: int, forced_until: float, lp_only: bool = False) -> dict:
    """The bounds for one seed's arrival sequence; lp_only: the lp column alone (quicker)."""
    n_gpus = sum(n.num_gpu for n in nodes)
    cap = MILLI * n_gpus
    seq = arrival_sequence(trace, cap, random.Random(seed))  # as run_one draws it
    arrived, pct, prefix_at, n_forced = 0, [], [], 0
    for i, t in enumerate(seq):
        arrived += t.total_milli
        p = 100 * arrived / cap
        if p <= forced_until:
            n_forced = i + 1
        if round(p) in (99, 100, 101):  # all bin_events can use for bin 100
            pct.append(p)
            prefix_at.append(i + 1)
    picks = sorted({prefix_at[0], prefix_at[len(prefix_at) // 2], prefix_at[-1]})
    out: dict = {"seed": seed, "events": len(prefix_at)}
    for label, forced in (("lp", 0), ("lp_forced", n_forced))[:1 if lp_only else 2]:
        pool: set = set()
        prefix = prefix_items(seq, prefix_at, forced)
        duals = [lp_duals(prefix[k], n_gpus, pool) for k in picks]
        alloc = []
        for k in prefix_at:
            items = prefix[k]
            placed = sum(s * c for (s, _), c in items.items())
            used = min([float(placed)] + [dual_bound(items, n_gpus, lam) for lam in duals])
            alloc.append(round(100 * used / cap, 2))
        out[label] = 100 - round(bin_events(pct, alloc)[100], 2)
    if lp_only:
        return out
    pair_alloc = []
    prefix = prefix_items(seq, prefix_at)
    for k in prefix_at:
        sizes = sizes_of(prefix[k])
        placed = sum(s * c for s, c in sizes.items())
        pair_alloc.append(round(100 * (cap - pairing_bound(sizes, cap, placed)) / cap, 2))
    out["pairing"] = 100 - round(bin_events(pct, pair_alloc)[100], 2)
    last = seq[:prefix_at[-1]]
    big = [t for t in last if 500 < t.gpu_milli < MILLI and t.num_gpu == 1]
    out.update(n810=sum(1 for t in big if t.gpu_milli == 810), n_large=len(big),
               cpu_pct=100 * sum(t.cpu for t in last) / sum(n.cpu for n in nodes))
    return out


def policy_result(nodes, trace, policy_name: str, seed: int,
                  prior: str = "online") -> tuple[float, float | None]:
    """(unallocated % at 100% arrived, arrived % at the first dropped GPU task), run exactly as
    experiment.run_one runs it."""
    from scheduling.simulator.fill.experiment import simulate
    from scheduling.simulator.fill.metrics import allocation_rate

    cap = MILLI * sum(n.num_gpu for n in nodes)
    seq, result = simulate(nodes, trace, policy_name, seed, prior)
    first, used = None, 0
    for t, a, u in zip(seq, result.arrived, result.used, strict=True):
        if t.num_gpu and u == used:
            first = 100 * a / cap
            break
        used = u
    return 100 - allocation_rate(result)[100], first


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", required=True, type=Path)
    ap.add_argument("--trace", required=True, type=Path)
    ap.add_argument("--seeds", type=parse_seeds, default=parse_seeds("42-51"))
    ap.add_argument("--forced-until", type=float, default=95.0, metavar="PCT",
                    help="the lp_forced column: the bound for policies that drop no GPU task "
                         "arriving before PCT%% of capacity (default 95)")
    ap.add_argument("--policy", action="append", default=[],
                    help="also run this policy per seed (repeatable); its column is the "
                         "unallocated %% and, in brackets, the arrived %% of its first drop")
    ap.add_argument("--prior", choices=PRIORS, default="online",
                    help="the policies' workload prior, as simulate fill --prior; past-half "
                         "bounds and runs the trace's later half")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    nodes, trace = load_nodes(args.nodes), load_tasks(args.trace)
    workload = split_by_creation(trace)[1] if args.prior == "past-half" else trace
    forced_head = f"lp<{args.forced_until:g}%"
    print(f"lower bounds on unallocated GPU % at 100% arrived, {args.trace.stem}, prior {args.prior}")
    print(f"{'seed':>5}{'events':>7}{'large':>7}{'810m':>6}{'cpu%':>7}{'pairing':>9}{'lp':>7}"
          f"{forced_head:>10}" + "".join(f"{p:>17}" for p in args.policy))
    rows = []
    for seed in args.seeds:
        row = seed_bounds(nodes, workload, seed, args.forced_until)
        cells = ""
        for p in args.policy:
            row[p], row[f"{p}_first_drop"] = policy_result(nodes, trace, p, seed, args.prior)
            first = row[f"{p}_first_drop"]
            cells += f"{row[p]:>9.2f} [{first:5.1f}]" if first else f"{row[p]:>9.2f} [  -  ]"
        rows.append(row)
        print(f"{seed:>5}{row['events']:>7}{row['n_large']:>7}{row['n810']:>6}"
              f"{row['cpu_pct']:>7.1f}{row['pairing']:>9.2f}{row['lp']:>7.2f}"
              f"{row['lp_forced']:>10.2f}{cells}", flush=True)
    keys = ["pairing", "lp", "lp_forced", *args.policy]
    mean = {k: sum(r[k] for r in rows) / len(rows) for k in keys}
    print(f"{'mean':>5}{'':>27}{mean['pairing']:>9.2f}{mean['lp']:>7.2f}{mean['lp_forced']:>10.2f}"
          + "".join(f"{mean[p]:>9.2f}{'':>8}" for p in args.policy))
    print("pairing, lp: bounds for any policy. lp<X%: for policies that drop no GPU task arriving "
          "before X% of capacity.\nlarge = shares > 500m in the prefix at the bin's last event; "
          "cpu% = that prefix's CPU request over the cluster's cores.")
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "mean": mean}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
