"""What-if: one cluster and workload, in the simulator's own files (cluster.json, jobs.csv), run as it
is and with one change through `simulate run`'s loop; the figures side by side, per team too.

The change is made to the cluster document, and both documents are read back through `load_cluster`
and `load_jobs`, so a what-if is checked exactly as a hand-written `simulate run` input is, and the
stored files replay with the CLI. The portal builds the documents from the live cluster
(scheduling/live_input.py); nothing here needs a database.
"""

from __future__ import annotations

import copy
import json
import tempfile
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from scheduling.engine.types import TIERS

from .jobs import DONE
from .knobs import DEFAULT_KNOBS
from .loop import Simulation
from .measure import percentile
from .policies import known_policies
from .spec import load_cluster, load_jobs

ADDED_PREFIX = "whatif-"
# The headline figures each side of the comparison keeps (the rest of Meter.result() is kept too).
SERIES_KEYS = ("t_h", "allocated", "useful")


class ChangeError(ValueError):
    """A change that cannot be made to this cluster, in words for the person who asked."""


@dataclass(frozen=True)
class Change:
    team: str = ""                # whose guarantee moves
    guarantee_delta: float = 0.0  # GPUs, may be negative
    add_model: str = ""           # GPU model of the added nodes (copies of an existing node of it)
    add_count: int = 0
    add_tier: str = "reserved"
    policy: str = ""              # "" keeps the baseline's policy

    def is_empty(self, baseline_policy: str) -> bool:
        return not (self.guarantee_delta and self.team) and not (self.add_count and self.add_model) \
            and self.policy in ("", baseline_policy)

    def describe(self, baseline_policy: str) -> list[str]:
        said = []
        if self.team and self.guarantee_delta:
            said.append(f"{self.team}: guarantee {self.guarantee_delta:+g} GPUs")
        if self.add_model and self.add_count:
            said.append(f"{self.add_count} more {self.add_model} node(s), {self.add_tier}")
        if self.policy and self.policy != baseline_policy:
            said.append(f"policy {baseline_policy} → {self.policy}")
        return said


def apply_change(cluster: dict, change: Change) -> dict:
    """A copy of a cluster.json document with the change made; ChangeError when it cannot be."""
    changed = copy.deepcopy(cluster)
    if change.team and change.guarantee_delta:
        _move_guarantee(changed, change.team, change.guarantee_delta)
    if change.add_model and change.add_count:
        _add_nodes(changed, change.add_model, change.add_count, change.add_tier)
    if change.policy and change.policy not in known_policies():
        raise ChangeError(f"unknown policy {change.policy!r}; known: {', '.join(sorted(known_policies()))}")
    return changed


def _move_guarantee(cluster: dict, team_name: str, delta: float) -> None:
    team = next((t for t in cluster.get("teams", []) if t["name"] == team_name), None)
    if team is None:
        raise ChangeError(f"there is no team {team_name!r}")
    guaranteed = float(team.get("guaranteed_gpus", 0)) + delta
    if guaranteed < 0:
        raise ChangeError(f"{team_name} guarantees {team.get('guaranteed_gpus', 0):g} GPUs; "
                          f"{delta:+g} would make it negative")
    team["guaranteed_gpus"] = guaranteed
    # A team may always hold its guarantee: a burst limit below it is raised with it.
    if team.get("burst_limit_gpus") is not None and team["burst_limit_gpus"] < guaranteed:
        team["burst_limit_gpus"] = guaranteed


def _add_nodes(cluster: dict, model: str, count: int, tier: str) -> None:
    if tier not in TIERS:
        raise ChangeError(f"unknown tier {tier!r}; use {'|'.join(TIERS)}")
    template = next((g for g in cluster["nodes"] if g["gpu_model"] == model), None)
    if template is None:
        models = sorted({g["gpu_model"] for g in cluster["nodes"]})
        raise ChangeError(f"the cluster has no {model} node to copy; it has {', '.join(models)}")
    if tier not in cluster.get("prices_per_gpu_hour", {}).get(model, {}):
        raise ChangeError(f"the rate card has no {tier} price for {model}")
    cluster["nodes"].append(dict(template, name_prefix=f"{ADDED_PREFIX}{model.lower()}-{tier}-", count=count,
                                 tier=tier, mig_enabled_gpus=0))


class _TeamSimulation(Simulation):
    """`simulate run`'s loop, also remembering when each job finished and what each team held
    (GPU-hours, and their cost at the price of the node they were on), for the per-team figures."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.finished_at: dict[str, float] = {}
        self.team_gpu_s: dict[str, float] = defaultdict(float)
        self.team_cost: dict[str, float] = defaultdict(float)

    def on_finish(self, now: float, job, epoch: int) -> None:
        super().on_finish(now, job, epoch)
        if job.state == DONE:
            self.finished_at.setdefault(job.spec.job_id, now)

    def stop(self, job, now: float, saves: bool, cause: str = "finished") -> None:
        self._count_held(job, now)  # every release of pods passes here, as Meter.hold's calls do
        super().stop(job, now, saves, cause)

    def close(self, now: float) -> None:
        for job in self.holding.values():
            self._count_held(job, now)
        super().close(now)

    def _count_held(self, job, now: float) -> None:
        for member in job.bound.values():
            seconds = max(0.0, min(self.horizon, now) - max(0.0, member.since)) * member.units
            self.team_gpu_s[job.spec.team] += seconds
            self.team_cost[job.spec.team] += seconds / 3600 * self.infos[member.node].price


def team_figures(sim: _TeamSimulation) -> dict[str, dict]:
    """Per team: jobs, how many never started, wait from submission to first start (p50/p95; a job
    that never started counts as waiting until the end), mean completion time of finished jobs, and
    the GPU-hours held with their cost at the node's price."""
    by_team: dict[str, dict[str, list]] = {}
    for job in sim.jobs.values():
        entry = by_team.setdefault(job.spec.team, {"waits": [], "jct": [], "never": []})
        if job.first_start is None:
            entry["never"].append(job)
        start = sim.horizon if job.first_start is None else job.first_start
        entry["waits"].append(start - job.spec.submit_s)
        if job.spec.job_id in sim.finished_at:
            entry["jct"].append(sim.finished_at[job.spec.job_id] - job.spec.submit_s)
    return {team: {"jobs": len(e["waits"]), "not_started": len(e["never"]), "completed": len(e["jct"]),
                   "gpu_hours": round(sim.team_gpu_s[team] / 3600, 2), "cost": round(sim.team_cost[team], 2),
                   "wait_p50_s": _round(percentile(e["waits"], 50)),
                   "wait_p95_s": _round(percentile(e["waits"], 95)),
                   "jct_mean_s": _round(sum(e["jct"]) / len(e["jct"])) if e["jct"] else None}
            for team, e in sorted(by_team.items())}


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def run_side(cluster_path: Path, jobs_path: Path, policy: str, seed: int, horizon: float | None,
             progress=None) -> dict:
    """One side of the comparison: Meter.result() plus per-team figures and the time series.
    `progress(share)` is told how much of the simulated window has passed, 0..1."""
    spec = load_cluster(cluster_path)
    jobs = load_jobs(jobs_path, {t.name for t in spec.teams} or None)
    sim = _TeamSimulation(spec, jobs, policy, seed, DEFAULT_KNOBS, None, horizon)
    if progress is not None:
        sim.progress = lambda now: progress(min(1.0, now / sim.horizon) if sim.horizon > 0 else 1.0)
    result = sim.run()
    if progress is not None:
        progress(1.0)  # the last event may come well before the window's end
    series = sim.meter.series_result()
    return dict(result, policy=policy, gpus=spec.gpus, teams=team_figures(sim),
                series={key: [round(v, 4) for v in series[key]] for key in SERIES_KEYS})


def compare(cluster: dict, jobs_text: str, baseline_policy: str, change: Change, *,
            horizon: float | None = None, seed: int = 1, progress=None) -> dict:
    """Run the cluster as it is and changed. `progress(fraction)` is told 0..1 as simulated time
    passes over both runs. SpecError (bad input) and ChangeError propagate with their messages."""
    changed = apply_change(cluster, change)
    policies = (baseline_policy, change.policy or baseline_policy)
    sides = {}
    with tempfile.TemporaryDirectory(prefix="tessera-whatif-") as folder:
        jobs_path = Path(folder) / "jobs.csv"
        jobs_path.write_text(jobs_text, encoding="utf-8")
        for index, (name, document, policy) in enumerate((("baseline", cluster, policies[0]),
                                                          ("changed", changed, policies[1]))):
            path = Path(folder) / f"{name}.json"
            path.write_text(json.dumps(document, indent=2), encoding="utf-8")
            sides[name] = run_side(path, jobs_path, policy, seed, horizon, _half(progress, index))
    return {"changes": change.describe(baseline_policy), "changed_cluster": changed, **sides}


def _half(progress, index: int):
    """The first run is the first half of the progress, the second the second."""
    return None if progress is None else (lambda share: progress((index + share) / 2))
