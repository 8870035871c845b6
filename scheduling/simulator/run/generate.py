"""`simulate generate --scenario mixed`: a cluster and a workload of realistic shape.

Cluster: HGX H100 (NVSwitch, 8×NDR) on reserved and spot, HGX A100-80GB on on-demand, leaves of
8 nodes, 2 leaves per spine at 2:1 oversubscription, a quarter of the reserved nodes in MIG mode.
Workload: inference services sized from real model footprints (engine.memory.memory_need_gb)
with diurnal replica counts; notebooks in working hours; best-effort evaluations; training of
1-64 GPUs with heavy-tailed durations resampled from Philly's runtimes (else a lognormal).
Demand exceeds capacity in the window itself: the run opens on the training in flight in a
busy cluster (length-biased, part done), and the training stream is re-drawn until everything
asked for inside the window comes to LOAD_BAND times the cluster's GPU-hours.
"""

from __future__ import annotations

import csv
import functools
import io
import itertools
import json
import math
import random
from pathlib import Path

from scheduling.engine.memory import memory_need_gb

from .output import write_atomic
from .spec import COLUMNS

# The traces lie in shared/ beside (or above) the checkout, never inside it: a git worktree sits
# one level deeper than the main checkout, so look up the tree rather than at one fixed depth.
PHILLY_RELATIVE = Path("shared") / "traces" / "philly" / "philly_runtime.csv"
PHILLY_CANDIDATES = tuple(p / PHILLY_RELATIVE for p in Path(__file__).resolve().parents[3:])

PRICES = {"H100-80GB": {"reserved": 2.5, "on-demand": 6.9, "spot": 2.8},
          "A100-80GB": {"reserved": 1.5, "on-demand": 4.1, "spot": 1.7}}

# (team, service, billions of parameters, precision, KV cache GB, GPUs, replicas at peak per 256 GPUs)
SERVICES = (
    ("search", "embed-0.3b", 0.33, "fp16", 0.0, 0, 24),
    ("search", "llama-7b-int8", 7, "int8", 1.5, 0, 20),
    ("search", "llama-13b-fp16", 13, "fp16", 6.0, 0, 10),
    ("ads", "llama-7b-fp16", 7, "fp16", 4.0, 0, 16),
    ("ads", "llama-13b-int8", 13, "int8", 4.0, 0, 12),
    ("ads", "llama-70b-int8", 70, "int8", 16.0, 2, 3),
    ("search", "llama-70b-fp16", 70, "fp16", 20.0, 4, 2),
)
# (name, business unit, guaranteed share, burst share, weight, share of training submissions)
TEAMS = (("search", "consumer", 0.14, 0.40, 1.0, 0.0), ("ads", "consumer", 0.14, 0.45, 1.0, 0.15),
         ("research", "labs", 0.22, 0.75, 1.5, 0.35), ("vision", "labs", 0.14, 0.50, 1.0, 0.25),
         ("nlp", "labs", 0.14, 0.60, 1.0, 0.25), ("platform", "infra", 0.04, 0.20, 0.5, 0.0))
TRAINING_SIZES = ((1, 0.30), (2, 0.12), (4, 0.18), (8, 0.22), (16, 0.10), (32, 0.05), (64, 0.03))
OVERLOAD = 1.3  # offered training GPU-hours / the GPU-hours the cluster has
BACKLOG = 1.0   # training GPUs in flight when the window opens / the cluster's GPUs
LOAD_BAND = (1.25, 1.35)  # all demand's GPU-hours inside the window / the cluster's GPU-hours
MAX_DRAWS = 64


def generate(scenario: str, gpus: int, hours: float, seed: int, out: Path) -> tuple[Path, Path]:
    if scenario != "mixed":
        raise ValueError(f"unknown scenario {scenario!r}; known: mixed")
    if gpus < 24 or gpus % 8:
        raise ValueError("--gpus must be a multiple of 8, at least 24")
    rng = random.Random(seed)
    cluster = make_cluster(gpus)
    horizon = hours * 3600
    rows = services(rng, gpus, horizon) + notebooks(rng, gpus, horizon) + evaluations(rng, gpus, horizon)
    rows += overloading_training(seed, rows, gpus, horizon)
    rows.sort(key=lambda r: (r["submit_s"], r["job_id"]))
    out.mkdir(parents=True, exist_ok=True)
    cluster_path, jobs_path = out / "cluster.json", out / "jobs.csv"
    write_atomic(cluster_path, json.dumps(cluster, indent=2) + "\n")
    write_atomic(jobs_path, _csv(rows))
    return cluster_path, jobs_path


def make_cluster(gpus: int) -> dict:
    nodes = gpus // 8
    on_demand = max(1, round(nodes * 0.19))
    spot = max(1, round(nodes * 0.31))
    reserved = nodes - on_demand - spot
    mig = max(1, reserved // 4)
    plan = [("h100-mig-", "H100-80GB", "reserved", mig, 8), ("h100-res-", "H100-80GB", "reserved", reserved - mig, 0),
            ("h100-spot-", "H100-80GB", "spot", spot, 0), ("a100-od-", "A100-80GB", "on-demand", on_demand, 0)]
    groups, slot = [], 0
    for prefix, model, tier, count, mig_gpus in plan:
        while count > 0:
            leaf = slot // 8
            take = min(count, 8 - slot % 8)
            groups.append({"name_prefix": f"{prefix}l{leaf + 1}-", "count": take, "gpu_model": model,
                           "gpus_per_node": 8, "interconnect": "nvswitch", "cpu_cores": 192,
                           "memory_gb": 2048, "leaf": f"leaf-{leaf + 1}", "spine": f"spine-{leaf // 2 + 1}",
                           "tier": tier, "mig_capable": True, "mig_enabled_gpus": mig_gpus,
                           "nic_gbps": 400, "nics": 8})
            slot, count = slot + take, count - take
    teams = [{"name": n, "business_unit": bu, "guaranteed_gpus": round(g * gpus),
              "burst_limit_gpus": round(b * gpus), "weight": w} for n, bu, g, b, w, _ in TEAMS]
    return {"nodes": groups, "spine_oversubscription": 2.0, "prices_per_gpu_hour": PRICES,
            "spot": {"reclaims_per_node_hour": 0.02, "notice_s": 120, "replace_s": 1800}, "teams": teams}


def diurnal(t: float) -> float:
    """Share of peak inference load at time t (s): low at night, peak mid-afternoon."""
    return 0.65 + 0.35 * math.sin(2 * math.pi * (t / 3600 - 9) / 24)


def services(rng: random.Random, gpus: int, horizon: float) -> list[dict]:
    """Replicas of each service follow its diurnal target, re-evaluated every 30 minutes; a
    replica runs while the target stays above its index (an autoscaler's scale-out/in)."""
    rows, step = [], 1800.0
    for team, name, params, precision, kv, count, peak in SERVICES:
        size = max(1, count)
        need = memory_need_gb(params, precision, "inference", kv_cache_gb=kv)
        per_gpu = round(need / size, 1)
        peak_replicas = max(1, round(peak * gpus / 256))
        steps = int(horizon // step) + 1
        targets = [max(1, round(peak_replicas * diurnal(i * step))) for i in range(steps)]
        for replica in range(peak_replicas):
            start = None
            for i, target in enumerate(targets + [0]):
                if target > replica and start is None:
                    start = i
                elif target <= replica and start is not None:
                    submit = start * step + (rng.uniform(0, 120) if start else 0.0)
                    end = i * step if i < steps else horizon + 3600
                    rows.append(_row(f"{name}-r{replica}-{start}", team, name, "inference", "production",
                                     submit, end - submit, count, per_gpu, 8 * size))
                    start = None
    return rows


def notebooks(rng: random.Random, gpus: int, horizon: float) -> list[dict]:
    rows, rate = [], 12 * gpus / 256 / 3600
    t = 0.0
    while (t := t + rng.expovariate(rate)) < horizon:
        if not 8 <= (t / 3600) % 24 < 19:
            continue  # people work days
        team = rng.choice(("research", "vision", "nlp", "ads"))
        memory = rng.choice((8.0, 12.0, 18.0, 18.0, 30.0))
        rows.append(_row(f"nb-{len(rows)}", team, "notebooks", "interactive", "interactive", t,
                         _lognormal(rng, 1.5 * 3600, 0.6, 600, 8 * 3600), 0, memory, 4))
    return rows


def evaluations(rng: random.Random, gpus: int, horizon: float) -> list[dict]:
    rows, rate = [], 8 * gpus / 256 / 3600
    t = 0.0
    while (t := t + rng.expovariate(rate)) < horizon:
        whole = rng.random() < 0.5
        rows.append(_row(f"eval-{len(rows)}", rng.choice(("platform", "research", "nlp")), "evals",
                         "batch", "best-effort", t, _lognormal(rng, 1800, 0.8, 300, 4 * 3600),
                         1 if whole else 0, 60.0 if whole else 16.0, 8 if whole else 4))
    return rows


def overloading_training(seed: int, rows: list[dict], gpus: int, horizon: float) -> list[dict]:
    """Training whose demand exceeds capacity in this window, not just on average: with
    heavy-tailed runtimes one draw may offer 1.0x the cluster and the next 1.5x, so streams are
    drawn (each from its own seed) until the realised load falls in LOAD_BAND."""
    base = offered_gpu_hours(rows, horizon)
    capacity = gpus * horizon / 3600
    for draw in range(MAX_DRAWS):
        stream = training(random.Random(f"{seed}/training/{draw}"), gpus, horizon)
        if LOAD_BAND[0] <= (base + offered_gpu_hours(stream, horizon)) / capacity <= LOAD_BAND[1]:
            return stream
    raise ValueError(f"no training stream within {LOAD_BAND} of capacity in {MAX_DRAWS} draws")


def offered_gpu_hours(rows: list[dict], horizon: float) -> float:
    """GPU-hours the jobs ask for inside [0, horizon] on an ideal placement (a sub-GPU job
    counts its memory over an 80 GB GPU's)."""
    total = 0.0
    for row in rows:
        inside = max(0.0, min(row["duration_s"], horizon - row["submit_s"]))
        total += (row["gpus"] or row["gpu_mem_gb"] / 80) * inside / 3600
    return total


def training(rng: random.Random, gpus: int, horizon: float) -> list[dict]:
    durations = philly_durations()
    if not durations:
        durations = tuple(_lognormal(rng, 1200, 1.8, 600, 86400) for _ in range(5000))
    cumulative = list(itertools.accumulate(durations))  # what choices(weights=) would build per call

    def sample() -> float:
        return rng.choice(durations)

    def length_biased() -> float:
        return rng.choices(durations, cum_weights=cumulative)[0]
    mean_gpus = sum(s * p for s, p in TRAINING_SIZES)
    mean_s = sum(durations) / len(durations)
    rate = OVERLOAD * gpus / (mean_gpus * mean_s)
    rows, t, backlog = [], 0.0, 0
    # The window opens on a cluster in steady state, not an empty one: the training in flight
    # (running or queued) at a random instant, BACKLOG x the cluster's GPUs of it. Jobs in
    # flight at an instant are length-biased (a job is there in proportion to how long it
    # runs) and have a uniform share of their work left; drawn otherwise, the backlog is
    # mostly ten-minute jobs that are gone within the hour and the first hours see an idle,
    # under-asked cluster, a warm-up no real cluster has.
    while backlog < BACKLOG * gpus:
        left = length_biased() * rng.random()
        rows.append(_training_row(rng, len(rows), rng.uniform(0, 60), left, gpus))
        backlog += rows[-1]["gpus"]
    while (t := t + rng.expovariate(rate)) < horizon:
        rows.append(_training_row(rng, len(rows), t, sample(), gpus))
    return rows


def _training_row(rng: random.Random, number: int, submit: float, duration: float, gpus: int) -> dict:
    size = rng.choices([s for s, _ in TRAINING_SIZES], [p for _, p in TRAINING_SIZES])[0]
    if size > gpus // 4:
        size = 8
    big = size >= 16
    checkpoints = rng.random() < 0.8
    row = _row(f"train-{number}", rng.choices([t[0] for t in TEAMS], [t[5] for t in TEAMS])[0], "training",
               "training", "best-effort" if rng.random() < 0.1 else "training", submit, duration, size,
               rng.choice((32.0, 48.0, 64.0, 72.0, 78.0)), 12 * size)
    row.update(gpu_model=rng.choice(("", "", "H100-80GB", "H100-80GB|A100-80GB")),
               comm_fraction=0.0 if size == 1 else round(rng.uniform(0.1, 0.3) if big else
                                                         rng.uniform(0.05, 0.15), 3),
               checkpoint_interval_s=rng.choice((1800, 3600)) if checkpoints else "",
               checkpoint_s=round(_lognormal(rng, 90 if big else 15, 0.7, 3, 600), 1) if checkpoints else "")
    return row


@functools.cache
def philly_durations() -> tuple[float, ...]:
    """Philly job runtimes (s), clipped to 10 min..24 h so that a 48 h run sees whole jobs."""
    for path in PHILLY_CANDIDATES:
        if path.exists():
            with open(path, newline="") as handle:
                values = [float(r["runtime"]) for r in csv.DictReader(handle) if r.get("runtime")]
            return tuple(min(86400.0, max(600.0, v)) for v in values if v > 0)
    return ()


def _lognormal(rng: random.Random, median: float, sigma: float, low: float, high: float) -> float:
    return round(min(high, max(low, median * math.exp(rng.gauss(0, sigma)))), 1)


def _row(job_id, team, project, kind, priority, submit, duration, gpus, memory, cpu) -> dict:
    return {"job_id": job_id, "team": team, "project": project, "kind": kind, "priority": priority,
            "submit_s": round(submit, 1), "duration_s": round(max(60.0, duration), 1), "gpus": gpus,
            "gpu_mem_gb": memory, "cpu_cores": cpu, "gpu_model": "", "checkpoint_interval_s": "",
            "checkpoint_s": "", "comm_fraction": "", "preemptible": ""}


def _csv(rows: list[dict]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(COLUMNS), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()
