"""Benchmark: scheduling cycles on a large synthetic cluster, tessera beside k8s-default.

    python bench/engine_cycle.py --nodes 1000 --pending 10000 [--json PATH] [--profile]

Builds N nodes × 8 GPUs (mixed models, half MIG-capable; half of those start in MIG mode) and
P pending mixed jobs, then runs cycles until nothing more is placed, confirming each plan as a
perfect backend would (`scheduling.engine.replay.apply_plan`). Placements are binds (one per
job member, i.e. per pod); only the time inside `schedule()` counts.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scheduling.engine import Gpu, Job, Node, Queue, Snapshot, schedule  # noqa: E402
from scheduling.engine.fair_history import empty_history  # noqa: E402
from scheduling.engine.replay import apply_plan  # noqa: E402
from scheduling.engine.types import PRIORITY_CLASSES  # noqa: E402

MIG_MODELS = [("H100-80GB", 80.0), ("A100-80GB", 80.0), ("H200-141GB", 141.0)]
OTHER_MODELS = [("L40S", 48.0, "pcie"), ("V100-32GB", 32.0, "nvlink-pairs")]
TEAMS = [f"team-{i}" for i in range(10)]
NOW = 1_000_000.0
MAX_CYCLES = 20


def build_nodes(count: int, rng: random.Random) -> tuple[Node, ...]:
    nodes = []
    for i in range(count):
        tier = rng.choices(["reserved", "on-demand", "spot"], [5, 3, 2])[0]
        if i % 2 == 0:
            model, memory = MIG_MODELS[(i // 2) % len(MIG_MODELS)]
            interconnect, mig = "nvswitch", i % 4 == 0
        else:
            model, memory, interconnect = OTHER_MODELS[(i // 2) % len(OTHER_MODELS)]
            mig = False
        gpus = tuple(Gpu(index=g, uuid=f"n{i}-{g}", model=model, memory_gb=memory, mig_enabled=mig,
                         mig_instances=(), layout_changed_at=None, healthy=True, mig_capable=True)
                     for g in range(8))
        nodes.append(Node(name=f"node-{i:04d}", tier=tier, leaf=f"leaf-{i // 32}",
                          spine=f"spine-{i // 128}", gpu_model=model, interconnect=interconnect,
                          cpu_cores=128, memory_gb=2048, gpus=gpus, state="ready", nics=8, nic_gb_s=48.0,
                          price_per_gpu_hour=None,
                          # the GPUs MIG cannot split serve shares through MPS, as an inference pool would
                          sharing="none" if i % 2 == 0 else "mps", share_replicas=1 if i % 2 == 0 else 8))
    return tuple(nodes)


def build_jobs(count: int, rng: random.Random) -> tuple[Job, ...]:
    jobs = []
    for i in range(count):
        team = rng.choice(TEAMS)
        roll = rng.random()
        common = dict(id=f"job-{i:05d}", team=team, project="", submitted_at=NOW - count + i,
                      queue_order=i, expected_runtime_s=rng.choice([600, 3600, 14400]), gpu_milli=0,
                      gpu_models=(), last_checkpoint_at=None, preemptible=True, accepts_no_isolation=False)
        if roll < 0.45:
            cls = rng.choice(["production", "interactive"])
            jobs.append(Job(kind="inference", priority_class=cls,
                            priority=PRIORITY_CLASSES[cls], gpus=0,
                            gpu_memory_gb=rng.choice([4, 8, 15, 18, 30, 38, 60]), gang_size=1,
                            cpu_cores=4, memory_gb=32, checkpoint_interval_s=None, **common))
        elif roll < 0.80:
            gpus = rng.choice([1, 1, 2, 4, 8])
            gang = rng.choice([1, 1, 1, 2, 4]) if gpus == 8 else 1
            jobs.append(Job(kind="training", priority_class="training",
                            priority=PRIORITY_CLASSES["training"], gpus=gpus, gang_size=gang,
                            gpu_memory_gb=rng.choice([0, 30, 60]), cpu_cores=8 * gpus,
                            memory_gb=64 * gpus, checkpoint_interval_s=rng.choice([None, 900]),
                            **common))
        else:
            fractional = rng.random() < 0.5
            jobs.append(Job(kind="batch", priority_class="best-effort",
                            priority=PRIORITY_CLASSES["best-effort"],
                            gpus=0 if fractional else 1,
                            gpu_memory_gb=rng.choice([6, 12, 20]) if fractional else 0, gang_size=1,
                            cpu_cores=2, memory_gb=16, checkpoint_interval_s=None, **common))
    return tuple(jobs)


def build_snapshot(nodes: int, pending: int, seed: int) -> Snapshot:
    rng = random.Random(seed)
    cluster = build_nodes(nodes, rng)
    total = 8 * nodes
    queues = tuple(Queue(team=t, guaranteed_gpus=round(total * 0.07), burst_limit_gpus=None, weight=1 + i % 3)
                   for i, t in enumerate(TEAMS))
    return Snapshot(now=NOW, nodes=cluster, pending=build_jobs(pending, rng), running=(), queues=queues,
                    in_flight=(), spine_oversubscription=1.0, nominations=(),
                    usage_history=empty_history(NOW), clock_speed=1.0)


def run_policy(snapshot: Snapshot, policy: str) -> dict:
    state, placements, jobs, seconds, cycles, first = snapshot, 0, 0, 0.0, 0, None
    while cycles < MAX_CYCLES:
        cycles += 1
        began = time.perf_counter()
        plan = schedule(state, policy)
        took = time.perf_counter() - began
        seconds += took
        if first is None:
            first = dict(plan.timings, placements=len(plan.binds))
        placements += len(plan.binds)
        jobs += len({b.job_id for b in plan.binds})
        if not plan.binds and not plan.repartitions and not plan.preemptions:
            break
        state = apply_plan(state, plan, now=state.now + 60)
    gpus = sum(len(n.gpus) for n in snapshot.nodes)
    used = sum(a.milli for r in state.running for a in r.allocations) / 1000
    return {"placements": placements, "jobs": jobs, "cycles": cycles,
            "cycle_s": round(seconds, 3), "placements_per_s": round(placements / seconds, 1),
            "first_cycle_s": round(first["total"], 3),
            "first_cycle_placements_per_s": round(first["placements"] / first["total"], 1),
            "gpu_allocated_pct": round(100 * used / gpus, 1), "pending_left": len(state.pending),
            "first_cycle_timings_s": {k: round(v, 3) for k, v in first.items()
                                      if k != "placements"}}


def print_table(results: dict) -> None:
    names = list(results)
    rows = ["placements", "jobs", "cycles", "cycle_s", "placements_per_s", "first_cycle_s",
            "first_cycle_placements_per_s", "gpu_allocated_pct", "pending_left"]
    print(f"{'':30}" + "".join(f"{n:>14}" for n in names))
    for row in rows:
        print(f"{row:30}" + "".join(f"{results[n][row]:>14}" for n in names))
    for name in names:
        timings = ", ".join(f"{k} {v}" for k, v in results[name]["first_cycle_timings_s"].items())
        print(f"first cycle, {name}: {timings}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pending", type=int, default=10000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--policies", default="tessera,k8s-default")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--profile", action="store_true", help="cProfile the tessera run")
    args = parser.parse_args(argv)
    snapshot = build_snapshot(args.nodes, args.pending, args.seed)
    results = {}
    for policy in args.policies.split(","):
        if args.profile and policy == "tessera":
            profiler = cProfile.Profile()
            results[policy] = profiler.runcall(run_policy, snapshot, policy)
            pstats.Stats(profiler).sort_stats("cumulative").print_stats(25)
        else:
            results[policy] = run_policy(snapshot, policy)
    print_table(results)
    if args.json:
        args.json.write_text(json.dumps({"policies": results}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
