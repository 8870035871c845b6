"""`simulate sweep`: every policy on every scenario of some families and seeds, summarised as
per-policy medians and worst cases, and win/tie/loss counts of each policy against each other.

Scenarios are generated afresh (seeded, so the same every time) into a temporary folder; the run
seed of each scenario is its generator seed. Reported seeds are the split's (families.REPORTING or
families.TUNING), so a reported figure never comes from a tuning scenario.
"""

from __future__ import annotations

import statistics
import tempfile
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from .families import FAMILIES, REPORTING, TUNING, Shape, family_shape
from .knobs import Knobs

TIE = 0.005  # utilisation differences below this count as a tie
# (label, key, sub-key, higher is better, format)
SUMMARY = (
    ("gpu_utilization (net)", "gpu_utilization", None, True, "{:.3f}"),
    ("gpu_allocation", "gpu_allocation", None, True, "{:.3f}"),
    ("training_goodput (GPU-h/h)", "training_goodput", None, True, "{:.1f}"),
    ("jct_p95_s training", "jct_p95_s", "training", False, "{:,.0f}"),
    ("  ... unfinished at their age", "jct_p95_with_unfinished_s", "training", False, "{:,.0f}"),
    ("production_wait_p99_s", "production_wait_p99_s", None, False, "{:,.0f}"),
    ("preemptions", "preemptions", None, False, "{:,.0f}"),
    ("lost_gpu_hours", "lost_gpu_hours", None, False, "{:,.1f}"),
    ("idle_gpu_hours", "idle_gpu_hours", None, False, "{:,.1f}"),
    ("oom_failures", "oom_failures", None, False, "{:,.0f}"),
    ("cost_per_useful_gpu_hour ($)", "cost_per_useful_gpu_hour", None, False, "{:.2f}"),
)


@dataclass(frozen=True)
class Task:
    family: str
    seed: int
    policy: str
    shape: Shape
    knobs: Knobs


def split_plan(split: str, families: list[str] | None, seeds: int) -> tuple[list[str], list[int]]:
    plan = TUNING if split == "tuning" else REPORTING
    names = families or list(plan["families"])
    if split == "tuning":
        refused = [f for f in names if f not in TUNING["families"]]
        if refused:
            raise ValueError(f"families {', '.join(refused)} are for reporting only (families.TUNING)")
    for name in names:
        family_shape(name)  # a clear error for an unknown one
    first = plan["first_seed"]
    return names, list(range(first, first + seeds))


def run_task(task: Task) -> dict:
    from .generate import generate
    from .loop import run_policy
    from .spec import load_cluster, load_jobs

    with tempfile.TemporaryDirectory(prefix="tessera-sweep-") as folder:
        cluster_path, jobs_path = generate("mixed", task.shape, task.seed, Path(folder))
        spec = load_cluster(cluster_path)
        jobs = load_jobs(jobs_path, {t.name for t in spec.teams})
    try:
        result, _ = run_policy(spec, jobs, task.policy, task.seed, task.knobs)
    except Exception as exc:  # one broken run must not cost the sweep; it is reported
        result = {"error": f"{type(exc).__name__}: {exc}"}
    return {"family": task.family, "seed": task.seed, "policy": task.policy, **result}


def run_sweep(tasks: list[Task], processes: int = 1, on_done=None) -> list[dict]:
    results = []
    if processes <= 1:
        for task in tasks:
            results.append(run_task(task))
            if on_done:
                on_done(results[-1])
        return results
    with ProcessPoolExecutor(max_workers=processes) as pool:
        for result in pool.map(run_task, tasks):
            results.append(result)
            if on_done:
                on_done(result)
    return results


def value(result: dict, key: str, sub: str | None) -> float | None:
    v = result.get(key)
    if sub is not None:
        v = (v or {}).get(sub)
    return v


def summarise(results: list[dict], policies: list[str]) -> dict:
    """Per family (and over all): per policy and metric, median and worst over the seeds; win/tie/
    loss of every policy against every other on net utilisation, scenario by scenario."""
    out: dict = {"families": {}, "wins": {}, "errors": [r for r in results if "error" in r]}
    results = [r for r in results if "error" not in r]
    families = list(dict.fromkeys(r["family"] for r in results))
    for scope in families + ["all"]:
        rows = [r for r in results if scope == "all" or r["family"] == scope]
        table = {}
        for policy in policies:
            mine = [r for r in rows if r["policy"] == policy]
            cells = {}
            for _, key, sub, higher, _ in SUMMARY:
                values = [v for r in mine if (v := value(r, key, sub)) is not None]
                if values:
                    cells[_name(key, sub)] = {"median": statistics.median(values),
                                              "worst": min(values) if higher else max(values)}
            table[policy] = cells
        out["families"][scope] = table
    scenarios: dict[tuple, dict[str, float]] = {}
    for r in results:
        scenarios.setdefault((r["family"], r["seed"]), {})[r["policy"]] = r["gpu_utilization"]
    for a in policies:
        for b in policies:
            if a == b:
                continue
            wtl = [0, 0, 0]
            for utils in scenarios.values():
                if a in utils and b in utils:
                    diff = utils[a] - utils[b]
                    wtl[0 if diff > TIE else 2 if diff < -TIE else 1] += 1
            out["wins"].setdefault(a, {})[b] = wtl
    return out


def strongest_baseline(summary: dict, family: str, ours: str = "tessera") -> str | None:
    table = summary["families"][family]
    rivals = [(cells["gpu_utilization"]["median"], p) for p, cells in table.items()
              if p != ours and "gpu_utilization" in cells]
    return max(rivals)[1] if rivals else None


def format_summary(summary: dict, policies: list[str]) -> str:
    width = max(16, *(len(p) + 2 for p in policies))
    lines = []
    for scope, table in summary["families"].items():
        title = "all families" if scope == "all" else f"family {scope}: {FAMILIES[scope][0]}"
        lines += [title, "median (worst)".ljust(30) + "".join(p.rjust(width) for p in policies)]
        for label, key, sub, _, fmt in SUMMARY:
            cells = []
            for p in policies:
                cell = table.get(p, {}).get(_name(key, sub))
                cells.append("-" if cell is None else
                             f"{fmt.format(cell['median'])} ({fmt.format(cell['worst'])})")
            lines.append(label.ljust(30) + "".join(c.rjust(width) for c in cells))
        best = strongest_baseline(summary, scope)
        if best:
            lines.append(f"strongest baseline by median utilisation (tessera aside): {best}")
        lines.append("")
    lines += [f"net utilisation, scenario by scenario: wins/ties/losses of the row against the column "
              f"(tie: within {TIE})", "".ljust(18) + "".join(p.rjust(width) for p in policies)]
    for a in policies:
        cells = ["-" if a == b else "/".join(map(str, summary["wins"][a][b])) for b in policies]
        lines.append(a.ljust(18) + "".join(c.rjust(width) for c in cells))
    for r in summary["errors"]:
        lines.append(f"FAILED {r['family']}/{r['seed']}/{r['policy']}: {r['error']}")
    return "\n".join(lines)


def _name(key: str, sub: str | None) -> str:
    return key if sub is None else f"{key}.{sub}"
