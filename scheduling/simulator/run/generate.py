"""`simulate generate --scenario mixed`: a cluster and a workload of realistic shape.

The shape (families.Shape; `--family` presets) sets the node mix, MIG, spine, gang sizes, GPU-model
constraints, serving share, load and diurnal swing. The default shape is today's scenario:
HGX H100 (NVSwitch, 8×NDR) on reserved and spot, HGX A100-80GB on on-demand, leaves of
8 nodes, 2 leaves per spine at 2:1 oversubscription, a quarter of the reserved nodes in MIG mode.
Workload: inference services sized from real model footprints (engine.memory.memory_need_gb)
with diurnal replica counts; notebooks in working hours; best-effort evaluations; training of
1-64 GPUs with heavy-tailed durations resampled from Philly's runtimes (else a lognormal).
Demand exceeds capacity in the window itself: the run opens on the training in flight in a
busy cluster (length-biased, part done), and the training stream is re-drawn until everything
asked for inside the window comes to the shape's load (± LOAD_TOLERANCE) times the cluster's
GPU-hours.
"""

from __future__ import annotations

import csv
import functools
import itertools
import json
import math
import random
import warnings
from pathlib import Path

from scheduling.engine.memory import memory_need_gb

from .families import Shape, check_shape
from .output import write_atomic
from .serving import need_from_rate
from .spec import jobs_csv

# The traces lie in shared/ beside (or above) the checkout, never inside it: a git worktree sits
# one level deeper than the main checkout, so look up the tree rather than at one fixed depth.
PHILLY_RELATIVE = Path("shared") / "traces" / "philly" / "philly_runtime.csv"
PHILLY_CANDIDATES = tuple(p / PHILLY_RELATIVE for p in Path(__file__).resolve().parents[3:])

PRICES = {"H100-80GB": {"reserved": 2.5, "on-demand": 6.9, "spot": 2.8},
          "A100-80GB": {"reserved": 1.5, "on-demand": 4.1, "spot": 1.7},
          # p4d.24xlarge (8x A100-40GB) $32.77/h on demand; capacity block $1.844/GPU-h; spot at
          # 60% off, mid "50-65% below on-demand" (docs/reference/performance-figures.md §4).
          "A100-40GB": {"reserved": 1.84, "on-demand": 4.1, "spot": 1.64}}
MODEL_ORDER = ("H100-80GB", "A100-80GB", "A100-40GB")  # newest first: what a constraint names
NICS = {"nvswitch": (8, 400), "nvlink-pairs": (2, 200), "pcie": (2, 200)}  # (NICs, Gb/s each)

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
# Requests/s one replica serves at peak (the autoscaler's per-replica target), the scenarios'
# assumption; with the model's size it gives the replica's throughput need (serving.py).
REQUESTS_PER_S = {"embed-0.3b": 10.0, "llama-7b-int8": 1.0, "llama-13b-fp16": 1.5, "llama-7b-fp16": 1.5,
                  "llama-13b-int8": 1.0, "llama-70b-int8": 0.8, "llama-70b-fp16": 1.5}
# (name, business unit, guaranteed share, burst share, weight, share of training submissions)
TEAMS = (("search", "consumer", 0.14, 0.40, 1.0, 0.0), ("ads", "consumer", 0.14, 0.45, 1.0, 0.15),
         ("research", "labs", 0.22, 0.75, 1.5, 0.35), ("vision", "labs", 0.14, 0.50, 1.0, 0.25),
         ("nlp", "labs", 0.14, 0.60, 1.0, 0.25), ("platform", "infra", 0.04, 0.20, 0.5, 0.0))
BACKLOG = 1.0   # training GPUs in flight when the window opens / the cluster's GPUs (at load 1.3)
LOAD_TOLERANCE = 0.05  # the realised load is the shape's within this
MAX_DRAWS = 64
ADAPT_AFTER = 8  # draws at the shape's rate before the rate is corrected towards the load


def generate(scenario: str, shape: Shape, seed: int, out: Path) -> tuple[Path, Path]:
    if scenario != "mixed":
        raise ValueError(f"unknown scenario {scenario!r}; known: mixed")
    shape = check_shape(shape)
    rng = random.Random(seed)
    cluster = make_cluster(shape)
    gpus, horizon = shape.gpus, shape.hours * 3600
    models = cluster_models(cluster)
    rows = services(rng, shape, models, horizon) + notebooks(rng, gpus, horizon)
    rows += evaluations(rng, gpus, models, horizon)
    rows += overloading_training(seed, rows, shape, models, horizon)
    rows.sort(key=lambda r: (r["submit_s"], r["job_id"]))
    out.mkdir(parents=True, exist_ok=True)
    cluster_path, jobs_path = out / "cluster.json", out / "jobs.csv"
    write_atomic(cluster_path, json.dumps(cluster, indent=2) + "\n")
    write_atomic(jobs_path, jobs_csv(rows))
    return cluster_path, jobs_path


def make_cluster(shape: Shape) -> dict:
    """Node groups in leaves of 8 nodes, 2 leaves per spine. Each part of the mix gets its share
    of the nodes (the first part the rest); within a part the MIG-capable nodes come first, and
    of a reserved part's MIG-capable nodes `mig_share` start in MIG mode. `mps_share` of all nodes,
    taken from the first part's nodes not in MIG mode (MIG-incapable ones first: MPS cannot share
    a MIG GPU, and a node left MIG-capable can still be repartitioned), run the device plugin in MPS
    mode with `mps_replicas` replicas per GPU."""
    unpriced = [p.model for p in shape.nodes if p.model not in PRICES]
    if unpriced:
        raise ValueError(f"--nodes: no prices for {', '.join(unpriced)}; known: {', '.join(PRICES)}")
    nodes = shape.gpus // 8
    counts = [max(1, round(nodes * p.share)) if p.share is not None else 0 for p in shape.nodes]
    counts[0] = nodes - sum(counts)
    if counts[0] < 1:
        raise ValueError("--nodes: the shares leave no node to the first part")
    plan = []  # (prefix, part, count, mig_capable, MIG-mode GPUs per node, MPS)
    for index, (part, count) in enumerate(zip(shape.nodes, counts, strict=True)):
        stem = f"{part.model.split('-')[0].lower()}{'-pcie' if part.interconnect == 'pcie' else ''}"
        tier = {"reserved": "res", "on-demand": "od", "spot": "spot"}[part.tier]
        capable = round(count * shape.mig_capable_share)
        mig = max(1, int(capable * shape.mig_share)) if part.tier == "reserved" and capable and shape.mig_share else 0
        mps = min(round(nodes * shape.mps_share), count - mig) if index == 0 else 0
        mps_plain = min(mps, count - capable)  # MIG-incapable nodes first
        plan += [(f"{stem}-mig-", part, mig, True, 8, False),
                 (f"{stem}-{tier}-", part, capable - mig - (mps - mps_plain), True, 0, False),
                 (f"{stem}-{tier}-mps-", part, mps - mps_plain, True, 0, True),
                 (f"{stem}-{tier}-nomig-", part, count - capable - mps_plain, False, 0, False),
                 (f"{stem}-{tier}-nomig-mps-", part, mps_plain, False, 0, True)]
    groups, slot = [], 0
    for prefix, part, count, capable, mig_gpus, mps in plan:
        nics, gbps = NICS[part.interconnect]
        sharing = {"gpu_sharing": "mps", "gpu_replicas": shape.mps_replicas} if mps else {}
        while count > 0:
            leaf = slot // 8
            take = min(count, 8 - slot % 8)
            groups.append({"name_prefix": f"{prefix}l{leaf + 1}-", "count": take, "gpu_model": part.model,
                           "gpus_per_node": 8, "interconnect": part.interconnect, "cpu_cores": 192,
                           "memory_gb": 2048, "leaf": f"leaf-{leaf + 1}", "spine": f"spine-{leaf // 2 + 1}",
                           "tier": part.tier, "mig_capable": capable, "mig_enabled_gpus": mig_gpus,
                           "nic_gbps": gbps, "nics": nics, **sharing})
            slot, count = slot + take, count - take
    gpus = shape.gpus
    teams = [{"name": n, "business_unit": bu, "guaranteed_gpus": round(g * gpus),
              "burst_limit_gpus": round(b * gpus), "weight": w} for n, bu, g, b, w, _ in TEAMS]
    prices = {m: PRICES[m] for m in dict.fromkeys(p.model for p in shape.nodes)}
    return {"nodes": groups, "spine_oversubscription": shape.spine_oversubscription, "prices_per_gpu_hour": prices,
            "spot": {"reclaims_per_node_hour": 0.02, "notice_s": 120, "replace_s": 1800}, "teams": teams}


def cluster_models(cluster: dict) -> tuple[tuple[str, float], ...]:
    """(model, GPU memory GB) of the cluster's GPU models, newest first."""
    models = dict.fromkeys(g["gpu_model"] for g in cluster["nodes"])
    ordered = sorted(models, key=lambda m: MODEL_ORDER.index(m) if m in MODEL_ORDER else len(MODEL_ORDER))
    return tuple((m, float(m.rsplit("-", 1)[1].removesuffix("GB"))) for m in ordered)


def diurnal(t: float, amplitude: float = 0.7) -> float:
    """Share of peak inference load at time t (s): low at night, peak mid-afternoon."""
    return 1 - amplitude / 2 + amplitude / 2 * math.sin(2 * math.pi * (t / 3600 - 9) / 24)


def catalogue_share() -> float:
    """Peak serving GPUs of the service catalogue / 256 GPUs (a sub-GPU replica counts its memory
    over 80 GB): what `inference_share` None means."""
    return sum(peak * (count or memory_need_gb(params, precision, "inference", kv_cache_gb=kv) / 80)
               for _, _, params, precision, kv, count, peak in SERVICES) / 256


def services(rng: random.Random, shape: Shape, models, horizon: float) -> list[dict]:
    """Replicas of each service follow its diurnal target, re-evaluated every 30 minutes; a
    replica runs while the target stays above its index (an autoscaler's scale-out/in)."""
    rows, step, gpus = [], 1800.0, shape.gpus
    scale = 1.0 if shape.inference_share is None else shape.inference_share / catalogue_share()
    for team, name, params, precision, kv, count, peak in SERVICES:
        size = max(1, count)
        need = memory_need_gb(params, precision, "inference", kv_cache_gb=kv)
        per_gpu = round(need / size, 1)
        peak_replicas = max(1, round(peak * scale * gpus / 256))
        steps = int(horizon // step) + 1
        targets = [max(1, round(peak_replicas * diurnal(i * step, shape.diurnal_amplitude)))
                   for i in range(steps)]
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
                    rows[-1]["gpu_model"] = fitting_models("", per_gpu, models)
                    rows[-1]["gpu_need"] = round(need_from_rate(params, REQUESTS_PER_S[name]), 3)
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


def evaluations(rng: random.Random, gpus: int, models, horizon: float) -> list[dict]:
    rows, rate = [], 8 * gpus / 256 / 3600
    t = 0.0
    while (t := t + rng.expovariate(rate)) < horizon:
        whole = rng.random() < 0.5
        rows.append(_row(f"eval-{len(rows)}", rng.choice(("platform", "research", "nlp")), "evals",
                         "batch", "best-effort", t, _lognormal(rng, 1800, 0.8, 300, 4 * 3600),
                         1 if whole else 0, 60.0 if whole else 16.0, 8 if whole else 4))
        rows[-1]["gpu_model"] = fitting_models("", rows[-1]["gpu_mem_gb"], models)
    return rows


def overloading_training(seed: int, rows: list[dict], shape: Shape, models, horizon: float) -> list[dict]:
    """Training that brings demand to the shape's load in this window, not just on average: with
    heavy-tailed runtimes one draw may offer 1.0x the cluster and the next 1.5x, so streams are
    drawn (each from its own seed) until the realised load is within LOAD_TOLERANCE; after
    ADAPT_AFTER misses the arrival rate is corrected by how far the last draw was off."""
    base = offered_gpu_hours(rows, horizon)
    capacity = shape.gpus * horizon / 3600
    low, high = shape.load - LOAD_TOLERANCE, shape.load + LOAD_TOLERANCE
    rate = shape.load
    for draw in range(MAX_DRAWS):
        stream = training(random.Random(f"{seed}/training/{draw}"), shape, models, horizon, rate)
        offered = offered_gpu_hours(stream, horizon)
        if low <= (base + offered) / capacity <= high:
            return stream
        if draw + 1 >= ADAPT_AFTER and offered > 0:
            rate *= max(0.05, shape.load * capacity - base) / offered
    raise ValueError(f"no training stream within {low:.2f}..{high:.2f} of capacity in {MAX_DRAWS} draws")


def offered_gpu_hours(rows: list[dict], horizon: float) -> float:
    """GPU-hours the jobs ask for inside [0, horizon] on an ideal placement (a sub-GPU job
    counts its memory over an 80 GB GPU's)."""
    total = 0.0
    for row in rows:
        inside = max(0.0, min(row["duration_s"], horizon - row["submit_s"]))
        total += (row["gpus"] or row["gpu_mem_gb"] / 80) * inside / 3600
    return total


def training(rng: random.Random, shape: Shape, models, horizon: float, rate_factor: float) -> list[dict]:
    durations = philly_durations()
    if not durations:
        durations = tuple(_lognormal(rng, 1200, 1.8, 600, 86400) for _ in range(5000))
    cumulative = list(itertools.accumulate(durations))  # what choices(weights=) would build per call

    def sample() -> float:
        return rng.choice(durations)

    def length_biased() -> float:
        return rng.choices(durations, cum_weights=cumulative)[0]
    gpus = shape.gpus
    mean_gpus = sum(s * p for s, p in shape.gang_mix) / sum(p for _, p in shape.gang_mix)
    mean_s = sum(durations) / len(durations)
    rate = rate_factor * gpus / (mean_gpus * mean_s)
    rows, t, backlog = [], 0.0, 0
    # The window opens on a cluster in steady state, not an empty one: the training in flight
    # (running or queued) at a random instant, BACKLOG x the cluster's GPUs of it. Jobs in
    # flight at an instant are length-biased (a job is there in proportion to how long it
    # runs) and have a uniform share of their work left; drawn otherwise, the backlog is
    # mostly ten-minute jobs that are gone within the hour and the first hours see an idle,
    # under-asked cluster, a warm-up no real cluster has.
    while backlog < BACKLOG * min(1.0, shape.load / 1.3) * gpus:
        left = length_biased() * rng.random()
        rows.append(_training_row(rng, len(rows), rng.uniform(0, 60), left, shape, models))
        backlog += rows[-1]["gpus"]
    while (t := t + rng.expovariate(rate)) < horizon:
        rows.append(_training_row(rng, len(rows), t, sample(), shape, models))
    return rows


def model_choices(share: float, models) -> tuple[str, ...]:
    """What a training job's gpu_model is drawn from: unconstrained (""), the newest model, or
    the two newest; `share` of the options constrained (4 options where that is exact, else 20)."""
    n = 4 if float(share * 4).is_integer() else 20
    constrained = round(share * n)
    newest, pair = models[0][0], "|".join(m for m, _ in models[:2])
    return ("",) * (n - constrained) + (newest,) * (constrained - constrained // 2) + (pair,) * (constrained // 2)


def fitting_models(constraint: str, memory: float, models) -> str:
    """Narrow a job's models to those with the memory it needs (a user pins a model the job fits
    on, or it fails with OOM); unchanged when every model it may use fits."""
    allowed = [(m, gb) for m, gb in models if not constraint or m in constraint.split("|")]
    if all(gb >= memory for _, gb in allowed):
        return constraint
    return "|".join(m for m, gb in allowed if gb >= memory) or models[0][0]


def _training_row(rng: random.Random, number: int, submit: float, duration: float, shape: Shape,
                  models) -> dict:
    gpus = shape.gpus
    size = rng.choices([s for s, _ in shape.gang_mix], [p for _, p in shape.gang_mix])[0]
    if size > gpus // 4:
        size = 8
    big = size >= 16
    checkpoints = rng.random() < 0.8
    row = _row(f"train-{number}", rng.choices([t[0] for t in TEAMS], [t[5] for t in TEAMS])[0], "training",
               "training", "best-effort" if rng.random() < 0.1 else "training", submit, duration, size,
               rng.choice((32.0, 48.0, 64.0, 72.0, 78.0)), 12 * size)
    row.update(gpu_model=fitting_models(rng.choice(model_choices(shape.model_constraint_share, models)),
                                        row["gpu_mem_gb"], models),
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
    # Said aloud: the same seed then generates a different workload, and a run from a checkout
    # that does not sit beside shared/ would otherwise measure it without a word.
    warnings.warn(f"Philly runtimes not found ({PHILLY_RELATIVE} above {Path(__file__).parents[3]}): "
                  "training durations are drawn from a lognormal instead, so figures differ from the README's",
                  stacklevel=2)
    return ()


def _lognormal(rng: random.Random, median: float, sigma: float, low: float, high: float) -> float:
    return round(min(high, max(low, median * math.exp(rng.gauss(0, sigma)))), 1)


def _row(job_id, team, project, kind, priority, submit, duration, gpus, memory, cpu) -> dict:
    return {"job_id": job_id, "team": team, "project": project, "kind": kind, "priority": priority,
            "submit_s": round(submit, 1), "duration_s": round(max(60.0, duration), 1), "gpus": gpus,
            "gpu_mem_gb": memory, "cpu_cores": cpu, "gpu_model": "", "checkpoint_interval_s": "",
            "checkpoint_s": "", "comm_fraction": "", "preemptible": "", "gpu_need": ""}
