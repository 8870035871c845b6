"""Benchmark: scheduling cycles on a large synthetic cluster, tessera beside k8s-default.

    python bench/engine_cycle.py --nodes 1000 --pending 10000 [--runs 3] [--json PATH] [--profile]
    python bench/engine_cycle.py --sweep --runs 3   # 250..4,000 nodes, 10 pending per node

Builds N nodes × 8 GPUs (mixed models, half MIG-capable; half of those start in MIG mode) and
P pending mixed jobs, then runs cycles until nothing more is placed, confirming each plan as a
perfect backend would (`scheduling.engine.replay.apply_plan`). Placements are binds (one per
job member, i.e. per pod); only the time inside `schedule()` counts. The last cycle, which
plans nothing (the cluster is as full as it gets), is the steady state the live loop repeats
while the rest of the queue waits.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import random
import statistics
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
SWEEP = [250, 500, 1000, 2000, 4000]
PENDING_PER_NODE = 10


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
                      gpu_models=(), last_checkpoint_at=None, preemptible=True, accepts_no_isolation=False,
                      mig_profile="")
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
    """Cycles until one plans nothing (or MAX_CYCLES): that last one is the idle steady state,
    the cycle the live loop repeats every period while the queue waits for capacity."""
    state, placements, jobs, seconds, cpu, cycles, first, last = snapshot, 0, 0, 0.0, 0.0, 0, None, None
    settled = False
    while cycles < MAX_CYCLES:
        cycles += 1
        began, began_cpu = time.perf_counter(), time.process_time()
        plan = schedule(state, policy)
        took, took_cpu = time.perf_counter() - began, time.process_time() - began_cpu
        seconds += took
        cpu += took_cpu
        last = dict(plan.timings, placements=len(plan.binds), cpu=took_cpu)
        if first is None:
            first = last
        placements += len(plan.binds)
        jobs += len({b.job_id for b in plan.binds})
        if not plan.binds and not plan.repartitions and not plan.preemptions:
            settled = True
            break
        state = apply_plan(state, plan, now=state.now + 60)
    gpus = sum(len(n.gpus) for n in snapshot.nodes)
    used = sum(a.milli for r in state.running for a in r.allocations) / 1000
    return {"placements": placements, "jobs": jobs, "cycles": cycles,
            "cycle_s": seconds, "placements_per_s": placements / seconds,
            "cycle_cpu_s": cpu, "placements_per_cpu_s": placements / cpu,
            "first_cycle_s": first["total"], "first_cycle_cpu_s": first["cpu"],
            "first_cycle_placements_per_s": first["placements"] / first["total"],
            "steady_cycle_s": last["total"] if settled else None,
            "steady_cycle_cpu_s": last["cpu"] if settled else None,
            "gpu_allocated_pct": 100 * used / gpus, "pending_left": len(state.pending),
            "first_cycle_timings_s": _phases(first), "steady_cycle_timings_s": _phases(last)}


def _phases(cycle: dict) -> dict:
    """Wall seconds per action of a cycle (the engine's own timings)."""
    return {k: v for k, v in cycle.items() if k not in ("placements", "cpu")}


def median_run(runs: list[dict]) -> dict:
    """Per figure, the median over runs (timings too); counts are the same in every run."""
    out = {}
    for key, value in runs[0].items():
        if isinstance(value, dict):
            out[key] = median_run([r[key] for r in runs])
        elif value is None or any(r[key] is None for r in runs):
            out[key] = None
        else:
            out[key] = statistics.median(r[key] for r in runs)
    return out


# Wall seconds are what the targets name; CPU seconds (this process only) are the figure that
# survives a shared machine, where wall time can be several times the work.
COLUMNS = [("placements", "placed", "{:.0f}"), ("placements_per_s", "placed/s", "{:,.0f}"),
           ("placements_per_cpu_s", "placed/cpu-s", "{:,.0f}"), ("first_cycle_s", "1st cycle s", "{:.3f}"),
           ("steady_cycle_s", "steady s", "{:.3f}"), ("steady_cycle_cpu_s", "steady cpu", "{:.3f}"),
           ("gpu_allocated_pct", "alloc %", "{:.1f}")]


def _cell(fmt: str, value) -> str:
    return "-" if value is None else fmt.format(value)


def print_table(results: dict, runs: int) -> None:
    """One row per size, each policy's figures side by side (medians of `runs` runs)."""
    policies = list(next(iter(results.values())))
    width = 13 * len(COLUMNS)
    print(f"medians of {runs} run(s); steady = the last cycle, which planned nothing; cpu = process CPU s")
    print(" " * 15 + "".join(f" | {p:^{width}}" for p in policies))
    print(f"{'nodes':>6} {'pending':>8}" + "".join(" | " + "".join(f"{h:>13}" for _, h, _ in COLUMNS)
                                                 for _ in policies))
    for (nodes, pending), by_policy in results.items():
        print(f"{nodes:>6} {pending:>8}" + "".join(" | " + "".join(f"{_cell(fmt, by_policy[p][key]):>13}"
                                                                   for key, _, fmt in COLUMNS)
                                                 for p in policies))
    for (nodes, _pending), by_policy in results.items():
        for policy, result in by_policy.items():
            for which in ("first", "steady"):
                timings = ", ".join(f"{k} {v:.3f}" for k, v in result[f"{which}_cycle_timings_s"].items())
                print(f"{which} cycle, {policy}, {nodes} nodes: {timings}")


def parse_sizes(args: argparse.Namespace) -> list[tuple[int, int]]:
    nodes = SWEEP if args.sweep else [int(n) for n in args.nodes.split(",")]
    if args.pending is not None and len(nodes) == 1:
        return [(nodes[0], args.pending)]
    return [(n, PENDING_PER_NODE * n) for n in nodes]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", default="1000", help="node count, or several comma-separated")
    parser.add_argument("--pending", type=int, help=f"default {PENDING_PER_NODE} per node")
    parser.add_argument("--sweep", action="store_true",
                        help=f"nodes {','.join(map(str, SWEEP))}, {PENDING_PER_NODE} pending per node")
    parser.add_argument("--runs", type=int, default=1, help="report the median of this many runs")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--policies", default="tessera,k8s-default")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--profile", action="store_true", help="cProfile the tessera run")
    args = parser.parse_args(argv)
    results: dict[tuple[int, int], dict[str, dict]] = {}
    for nodes, pending in parse_sizes(args):
        snapshot = build_snapshot(nodes, pending, args.seed)
        results[(nodes, pending)] = {}
        for policy in args.policies.split(","):
            runs = []
            for _ in range(args.runs):
                if args.profile and policy == "tessera":
                    profiler = cProfile.Profile()
                    runs.append(profiler.runcall(run_policy, snapshot, policy))
                    pstats.Stats(profiler).sort_stats("cumulative").print_stats(30)
                else:
                    runs.append(run_policy(snapshot, policy))
            results[(nodes, pending)][policy] = median_run(runs)
    print_table(results, args.runs)
    if args.json:
        rows = [{"nodes": n, "pending": p, "runs": args.runs, "policies": by_policy}
                for (n, p), by_policy in results.items()]
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
