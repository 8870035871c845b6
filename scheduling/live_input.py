"""The live cluster and its recent history as the simulator's input files (cluster.json, jobs.csv).

The window is the last `hours`: every job that held or wanted GPUs in it is a jobs.csv row, submitted
at its offset into the window (0 for one that was already there), lasting what it ran inside the
window, or what it still expected to run for one that runs or waits now. So a what-if replays the
last day's demand on a changed cluster. Jobs cancelled before they ever ran are left out (nobody
needs their GPUs any more), and so are finished jobs that never ran in the window.

The formats are the simulator's (scheduling/simulator/run/spec.py); `dump_snapshot --simulator DIR`
writes the same two files for `simulate run`.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from django.db.models import Max, Q
from django.utils import timezone

from portal.models import Team
from scheduling.engine.mig import geometry_for
from scheduling.engine.types import JOB_KINDS, PRIORITY_CLASSES, TIERS
from scheduling.models import CapacityTier, Job, NetworkSwitch, Node, Placement
from scheduling.prices import prices_at
from scheduling.simulator.run.spec import jobs_csv
from scheduling.snapshot import DEFAULT_RUNTIME_S


@dataclass
class LiveInput:
    cluster: dict                 # a cluster.json document
    rows: list[dict]              # jobs.csv rows
    window_s: float               # the simulated window: start of history to now
    notes: list[str] = field(default_factory=list)  # what was approximated, in words

    @property
    def jobs_text(self) -> str:
        return jobs_csv(self.rows)

    def write(self, folder: Path) -> tuple[Path, Path]:
        folder.mkdir(parents=True, exist_ok=True)
        cluster, jobs = folder / "cluster.json", folder / "jobs.csv"
        cluster.write_text(json.dumps(self.cluster, indent=2) + "\n", encoding="utf-8")
        jobs.write_text(self.jobs_text, encoding="utf-8")
        return cluster, jobs


def live_input(hours: float, now: datetime | None = None) -> LiveInput:
    now = now or timezone.now()
    start = now - timedelta(hours=hours)
    notes: list[str] = []
    cluster = live_cluster(now, notes)
    rows = live_jobs(start, now, notes)
    return LiveInput(cluster=cluster, rows=rows, window_s=(now - start).total_seconds(), notes=notes)


# --- cluster.json ---------------------------------------------------------------------------

def live_cluster(now: datetime, notes: list[str]) -> dict:
    prices = prices_at(now)
    groups: dict[tuple, dict] = {}
    nodes = (Node.objects.exclude(state=Node.State.LOST).select_related("tier", "leaf_switch__parent")
             .prefetch_related("gpus").order_by("name"))
    for node in nodes:
        group = _node_group(node)
        if group is None:
            notes.append(f"node {node.name} has no GPUs and is left out")
            continue
        key = tuple(sorted((k, v) for k, v in group.items()))
        if key in groups:
            groups[key]["count"] += 1
        else:
            groups[key] = dict(group, count=1)
    named = []
    for number, group in enumerate(groups.values(), start=1):
        prefix = f"{group['leaf']}-{group['gpu_model']}-{group['tier']}-{number}-".lower()
        named.append({"name_prefix": prefix, **group})
    notice = CapacityTier.objects.filter(name="spot").values_list("reclaim_notice_s", flat=True).first()
    return {
        "nodes": named,
        "spine_oversubscription": _spine_oversubscription(),
        "prices_per_gpu_hour": _prices(named, prices, notes),
        # Reclaims are random: a replay without them compares the changes, not two draws of luck.
        "spot": {"reclaims_per_node_hour": 0.0, "notice_s": float(notice or 120)},
        "teams": [{"name": t.name, "business_unit": t.business_unit.name, "guaranteed_gpus": float(t.guaranteed_gpus),
                   "burst_limit_gpus": float(t.burst_limit_gpus), "weight": t.weight}
                  for t in Team.objects.select_related("business_unit").order_by("name")],
    }


def _node_group(node: Node) -> dict | None:
    gpus = list(node.gpus.all())
    if not gpus or len(gpus) > 16:
        return None
    mig_capable = all(g.mig_capable for g in gpus) and geometry_for(node.gpu_model) is not None
    leaf = node.leaf_switch
    return {
        "gpu_model": node.gpu_model, "gpus_per_node": len(gpus), "interconnect": node.interconnect,
        "cpu_cores": node.cpu_cores, "memory_gb": node.memory_gb, "leaf": leaf.name,
        "spine": leaf.parent.name if leaf.parent else "spine-1", "tier": node.tier.name,
        "mig_capable": mig_capable, "mig_enabled_gpus": sum(g.mig_enabled for g in gpus) if mig_capable else 0,
        "nic_gbps": node.nic_gbps, "nics": max(1, node.nics), "gpu_memory_gb": min(g.memory_gb for g in gpus),
        # the device plugin's sharing, so a what-if shares where the cluster does (the spec's rule: 1 with none)
        "gpu_sharing": node.gpu_sharing, "gpu_replicas": node.gpu_replicas if node.gpu_sharing != "none" else 1,
    }


def _prices(groups: list[dict], prices, notes: list[str]) -> dict[str, dict[str, float]]:
    """$ per GPU-hour of each model present at every tier the rate card prices it (so a what-if may
    add spot nodes where there are none yet). The simulator needs each node's tier and on-demand
    (it compares with it): one missing is taken from another tier of the model, said in notes."""
    table: dict[str, dict[str, float]] = defaultdict(dict)
    for model in sorted({g["gpu_model"] for g in groups}):
        table[model] = {tier: float(prices[(model, tier)]) for tier in TIERS if prices.get((model, tier)) is not None}
    for group in groups:
        model, known = group["gpu_model"], table[group["gpu_model"]]
        for tier in (group["tier"], "on-demand"):
            if tier not in known:
                known[tier] = next(iter(known.values()), 0.0)
                notes.append(f"no {tier} rate for {model} in the rate card; used ${known[tier]:g}/GPU-hour")
    return dict(table)


def _spine_oversubscription() -> float:
    value = NetworkSwitch.objects.filter(kind="spine").aggregate(worst=Max("oversubscription"))["worst"]
    return float(value or 1.0)


# --- jobs.csv -------------------------------------------------------------------------------

def live_jobs(start: datetime, now: datetime, notes: list[str]) -> list[dict]:
    jobs = (Job.objects.filter(submitted_at__lt=now)
            .filter(Q(finished_at__isnull=True) | Q(finished_at__gt=start))
            .exclude(status=Job.Status.CANCELLED, started_at__isnull=True))
    intervals = _run_intervals(jobs, now)
    rows, unknown, running_then, waiting_then = [], set(), 0, 0
    for job in jobs.select_related("team", "project", "priority_class").order_by("submitted_at", "id"):
        before, inside, holding = _ran(intervals.get(job.pk, []), start, now)
        duration = _duration(job, before, inside)
        if duration is None:
            continue
        if job.submitted_at < start:
            running_then, waiting_then = running_then + holding, waiting_then + (not holding)
        priority = _priority(job.priority_class.name, job.priority_class.value, unknown)
        rows.append({
            "job_id": str(job.pk), "team": job.team.name, "project": job.project.name,
            "kind": job.kind if job.kind in JOB_KINDS else "batch", "priority": priority,
            "submit_s": round(max(0.0, (job.submitted_at - start).total_seconds()), 1),
            "duration_s": round(max(1.0, duration), 1), "gpus": job.gpus,
            "gpu_mem_gb": job.gpu_memory_gb or (0.0 if job.gpus else 1.0), "cpu_cores": job.cpu_cores,
            "gpu_model": "|".join(job.allowed_gpu_models), "checkpoint_interval_s": job.checkpoint_interval_s or "",
            "checkpoint_s": job.checkpoint_save_s or "", "preemptible": str(job.preemptible).lower()})
    if running_then:
        notes.append(f"{running_then} job(s) running when the window opened are placed afresh at its start, "
                     "with what they had left to run")
    if waiting_then:
        notes.append(f"{waiting_then} job(s) waiting when the window opened count their wait from then")
    notes += [f"priority class {name!r} is not one the simulator knows; replayed as the nearest by value"
              for name in sorted(unknown)]
    return rows


def _run_intervals(jobs, now: datetime) -> dict[int, list[tuple[datetime, datetime]]]:
    found: dict[int, list] = defaultdict(list)
    rows = Placement.objects.filter(job__in=jobs.values("pk")).values_list("job_id", "started_at", "ended_at")
    for job_id, started, ended in rows.iterator(chunk_size=2000):
        found[job_id].append((started, ended or now))
    return found


def _ran(intervals, start: datetime, now: datetime) -> tuple[float, float, bool]:
    """Seconds the job held GPUs before the window and inside it (members running at once count
    once), and whether it held them as the window opened."""
    merged: list[list[datetime]] = []
    for low, high in sorted(intervals):
        if merged and low <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], high)
        else:
            merged.append([low, high])
    before = sum(max(0.0, (min(high, start) - low).total_seconds()) for low, high in merged)
    inside = sum(max(0.0, (min(high, now) - max(low, start)).total_seconds()) for low, high in merged)
    return before, inside, any(low <= start < high for low, high in merged)


def _duration(job: Job, before: float, inside: float) -> float | None:
    if job.status in Job.FINISHED_STATUSES:
        return inside or None  # a finished job that never ran in the window asked for nothing in it
    expected = float(job.expected_runtime_s or job.max_runtime_s or DEFAULT_RUNTIME_S)
    return max(expected - before, inside, 60.0)


def _priority(name: str, value: int, unknown: set[str]) -> str:
    if name in PRIORITY_CLASSES:
        return name
    unknown.add(name)
    return min(PRIORITY_CLASSES, key=lambda known: (abs(PRIORITY_CLASSES[known] - value), known))

