"""Benchmark: one scheduling cycle over PostgreSQL with 0, 1,000 and 10,000 jobs waiting.

    python bench/cycle_queue.py [--pending 0,1000,10000] [--json PATH] [--before PATH]

Creates (and afterwards drops) the database named in DATABASE_URL, default
postgres://postgres@127.0.0.1:5432/tessera_bench_cycle. The cluster is 16 nodes × 8 GPUs, every
GPU held by a running job of team "busy"; one member of team "flood" has queued the waiting jobs
(1 GPU each, the same class as the running ones, so nothing is preempted and nothing fits: the
queue only grows, as in issue 15 item 1). For each queue length it times the whole cycle
(`scheduling.cycle.decide_and_apply`: snapshot, engine, apply) twice: the first cycle after the
jobs arrive (every job's queue position and reason written) and the next one (steady state).
`--before PATH` prints the figures saved by an earlier `--json PATH` run beside these.
"""

import argparse
import json
import os
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from billing_report import create_database, drop_database  # noqa: E402

DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/tessera_bench_cycle"
NODES, GPUS_PER_NODE = 16, 8
NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
PHASES = ("snapshot_s", "decide_s", "apply_s", "total_s")


def setup_django(url: str) -> None:
    os.environ["DATABASE_URL"] = url
    os.environ.setdefault("SECRET_KEY", "bench-secret-key-not-for-production-0123456789")
    os.environ.setdefault("DEBUG", "0")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tessera.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0, skip_checks=True)


def build_cluster():
    """16 full nodes of team busy's running jobs; returns team flood, its project, the class."""
    from django.contrib.auth.models import User

    from portal.models import BusinessUnit, Membership, Project, Team
    from scheduling.models import CapacityTier, Gpu, Job, NetworkSwitch, Node, Placement, PriorityClass

    unit = BusinessUnit.objects.create(name="Unit", cost_center="CC-1")
    busy, flood = (Team.objects.create(name=name, business_unit=unit) for name in ("busy", "flood"))
    training = PriorityClass.objects.get(name="training")
    for team in (busy, flood):
        team.allowed_priority_classes.add(training)
        Project.objects.create(team=team, name="main")
    member = User.objects.create_user("flooder")
    Membership.objects.create(user=member, team=flood, role="member")
    leaf = NetworkSwitch.objects.create(name="leaf", kind="leaf")
    reserved = CapacityTier.objects.get(name="reserved")
    started = NOW - timedelta(hours=1)
    for n in range(NODES):
        node = Node.objects.create(name=f"node-{n:02d}", tier=reserved, leaf_switch=leaf, gpu_model="H100-80GB",
                                   interconnect="nvswitch", cpu_cores=192, memory_gb=2048, last_heartbeat=NOW)
        gpus = Gpu.objects.bulk_create([Gpu(node=node, index=g, uuid=f"GPU-{n}-{g}", model="H100-80GB",
                                            memory_gb=80) for g in range(GPUS_PER_NODE)])
        job = Job.objects.create(team=busy, project=busy.projects.get(), name=f"run-{n}", kind="training",
                                 priority_class=training, gpus=GPUS_PER_NODE, gpu_memory_gb=80, status="running",
                                 started_at=started, submitted_at=started, queue_order=n + 1)
        Placement.objects.bulk_create([Placement(job=job, gpu=g, memory_gb=80, started_at=started) for g in gpus])
    return flood, flood.projects.get(), training, member


def queue(pending: int, flood, project, training, member) -> None:
    from scheduling.models import Job

    Job.objects.filter(team=flood).delete()
    Job.objects.bulk_create([
        Job(team=flood, project=project, submitted_by=member, name=f"flood-{i}", kind="training",
            priority_class=training, gpus=1, gpu_memory_gb=80, status="pending", queue_order=i + 1,
            submitted_at=NOW - timedelta(seconds=pending - i)) for i in range(pending)], batch_size=5000)


def cycle() -> dict:
    from scheduling.cycle import decide_and_apply

    began = time.perf_counter()
    report = decide_and_apply(policy="tessera", now=NOW)
    total = time.perf_counter() - began
    assert not report.applied.bound_jobs and not report.plan.preemptions, report.summary()
    return {"snapshot_s": report.snapshot_s, "decide_s": report.decide_s, "apply_s": report.apply_s,
            "total_s": total, "waiting": len(report.plan.pending)}


def measure(sizes: list[int]) -> dict:
    world = build_cluster()
    results = {}
    for pending in sizes:
        queue(pending, *world)
        first, steady = cycle(), cycle()
        assert first["waiting"] == pending, first
        results[str(pending)] = {"first": first, "steady": steady}
    return results


def print_table(results: dict, before: dict | None) -> None:
    columns = [(f"{size} pending", results[size], before.get(size) if before else None) for size in results]
    heads = []
    for name, _, old in columns:
        heads += [f"{name} before", f"{name} after"] if old else [name]
    print(f"{'seconds':22}" + "".join(f"{h:>22}" for h in heads))
    for which in ("first", "steady"):
        for phase in PHASES:
            cells = []
            for _, now, old in columns:
                cells += ([f"{old[which][phase]:.3f}"] if old else []) + [f"{now[which][phase]:.3f}"]
            print(f"{which + ' ' + phase:22}" + "".join(f"{c:>22}" for c in cells))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pending", default="0,1000,10000")
    parser.add_argument("--json", type=Path, help="save the figures here")
    parser.add_argument("--before", type=Path, help="figures of an earlier run, shown beside these")
    parser.add_argument("--keep", action="store_true", help="leave the database behind")
    args = parser.parse_args(argv)
    url = os.environ.get("BENCH_DATABASE_URL", DEFAULT_URL)
    create_database(url)
    try:
        setup_django(url)
        results = measure([int(size) for size in args.pending.split(",")])
    finally:
        if not args.keep:
            drop_database(url)
    before = json.loads(args.before.read_text()) if args.before else None
    print_table(results, before)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
