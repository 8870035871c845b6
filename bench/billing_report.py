"""Chargeback benchmark: 1,000,000 usage intervals in PostgreSQL; time the report, CSV and PDF.

    python bench/billing_report.py [--intervals N] [--keep]

Creates (and afterwards drops) the database named in DATABASE_URL, default
postgres://postgres@127.0.0.1:5432/tessera_bench. The cluster is 512 nodes × 8 GPUs; each GPU runs
one job after another through 2025 (so no GPU is billed above 1), about 244 intervals a GPU.
Targets (issue 7): report ≤ 2 s, CSV streamed in constant memory, PDF ≤ 5 s.
"""

import argparse
import os
import random
import sys
import time
import tracemalloc
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/tessera_bench"
YEAR_START = datetime(2025, 1, 1, tzinfo=UTC)
YEAR_END = datetime(2026, 1, 1, tzinfo=UTC)
NODES, GPUS_PER_NODE = 512, 8
# model, tier, share of nodes
NODE_MIX = [("H100-80GB", "reserved", 0.4), ("H100-80GB", "on-demand", 0.1), ("A100-80GB", "reserved", 0.2),
            ("A100-80GB", "spot", 0.15), ("A100-40GB", "on-demand", 0.15)]
PRICES = {("H100-80GB", "reserved"): "3.64", ("H100-80GB", "on-demand"): "6.88", ("H100-80GB", "spot"): "2.75",
          ("A100-80GB", "reserved"): "2.71", ("A100-80GB", "on-demand"): "5.12", ("A100-80GB", "spot"): "2.05",
          ("A100-40GB", "reserved"): "2.17", ("A100-40GB", "on-demand"): "4.10", ("A100-40GB", "spot"): "1.64"}


def create_database(url: str) -> None:
    import psycopg

    parts = urlparse(url)
    name = parts.path.lstrip("/")
    with psycopg.connect(host=parts.hostname, port=parts.port or 5432, user=parts.username,
                         password=parts.password, dbname="postgres", autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}"')
        connection.execute(f'CREATE DATABASE "{name}"')


def drop_database(url: str) -> None:
    from django.db import connections

    connections.close_all()
    import psycopg

    parts = urlparse(url)
    with psycopg.connect(host=parts.hostname, port=parts.port or 5432, user=parts.username,
                         password=parts.password, dbname="postgres", autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{parts.path.lstrip("/")}"')


def setup_django(url: str) -> None:
    os.environ["DATABASE_URL"] = url
    os.environ.setdefault("SECRET_KEY", "bench-secret-key-not-for-production-0123456789")
    os.environ.setdefault("DEBUG", "0")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tessera.settings")
    import django

    django.setup()
    from django.core.management import call_command
    from django.test.utils import setup_test_environment

    setup_test_environment()  # lets the test client talk to the app
    call_command("migrate", verbosity=0, skip_checks=True)


def create_tenancy_and_cluster(rng):
    """6 business units, 40 teams, 120 projects, 20,000 jobs, 512 nodes, 4,096 GPUs, the rate card."""
    from billing.models import Rate
    from portal.models import BusinessUnit, Project, Team
    from scheduling.models import CapacityTier, Gpu, Job, NetworkSwitch, Node, PriorityClass

    units = BusinessUnit.objects.bulk_create([BusinessUnit(name=f"Unit {i}", cost_center=f"CC-{i}00")
                                              for i in range(1, 7)])
    teams = Team.objects.bulk_create([Team(name=f"team-{i:02d}", business_unit=units[i % 6]) for i in range(40)])
    projects = Project.objects.bulk_create([Project(team=t, name=f"project-{j}", cost_code=f"P{t.pk}{j}")
                                            for t in teams for j in range(3)])
    training = PriorityClass.objects.get(name="training")
    jobs = Job.objects.bulk_create([
        Job(team=p.team, project=p, name=f"job-{i}", kind="training", priority_class=training, gpus=1,
            status="completed") for i in range(20000) for p in [projects[i % len(projects)]]], batch_size=5000)
    tiers = {t.name: t for t in CapacityTier.objects.all()}
    leaf = NetworkSwitch.objects.create(name="leaf", kind="leaf")
    nodes, kinds = [], []
    for model, tier, share in NODE_MIX:
        kinds += [(model, tier)] * round(share * NODES)
    for i, (model, tier) in enumerate(kinds):
        nodes.append(Node(name=f"node-{i:04d}", tier=tiers[tier], leaf_switch=leaf, gpu_model=model,
                          interconnect="nvswitch", cpu_cores=192, memory_gb=2048))
    nodes = Node.objects.bulk_create(nodes)
    gpus = Gpu.objects.bulk_create([Gpu(node=n, index=g, uuid=f"GPU-{n.name}-{g}", model=n.gpu_model, memory_gb=80)
                                    for n in nodes for g in range(GPUS_PER_NODE)])
    for (model, tier), price in PRICES.items():
        # Two price changes in mid-month, so the report splits intervals at rate changes too.
        change = date(2025, 6, 15) if tier == "on-demand" else date(2025, 7, 16)
        Rate.objects.create(gpu_model=model, tier=tiers[tier], price_per_gpu_hour=price, valid_from=date(2024, 1, 1),
                            valid_to=change)
        Rate.objects.create(gpu_model=model, tier=tiers[tier], price_per_gpu_hour=str(float(price) * 0.9),
                            valid_from=change)
    job_keys = [(j.pk, j.team_id, j.project_id, j.team.business_unit_id) for j in jobs]
    gpu_keys = [(g.pk, g.node_id, g.model, g.node.tier_id) for g in gpus]
    return units, job_keys, gpu_keys


def interval_rows(rng, job_keys, gpu_keys, total):
    """Each GPU runs jobs back to back with idle gaps; mean cycle ≈ 36 h so 4,096 GPUs give ~1M."""
    per_gpu = total // len(gpu_keys)
    span = (YEAR_END - YEAR_START).total_seconds()
    mean = span / per_gpu
    for gpu_id, node_id, model, tier_id in gpu_keys:
        at = YEAR_START + timedelta(seconds=rng.uniform(0, mean))
        for n in range(per_gpu):
            job, team, project, unit = rng.choice(job_keys)
            length = timedelta(seconds=rng.uniform(0.2, 1.5) * mean)
            end = at + length
            last = n == per_gpu - 1 and end > YEAR_END - timedelta(days=3)
            yield (job, team, project, unit, node_id, gpu_id, model, tier_id, "1.000000", at,
                   None if last else end, "" if last else "completed")
            at = end + timedelta(seconds=rng.uniform(0, 0.3) * mean)


def load_intervals(rows) -> int:
    from django.db import connection

    columns = ("job_id, team_id, project_id, business_unit_id, node_id, gpu_id, gpu_model, tier_id, gpu_fraction, "
               "started_at, ended_at, end_reason")
    count = 0
    with connection.cursor() as cursor:
        raw = cursor.cursor  # the psycopg cursor under Django's wrapper
        with raw.copy(f"COPY billing_usageinterval ({columns}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)
                count += 1
        raw.execute("ANALYZE billing_usageinterval")
    return count


def measure(label, action):
    """Seconds of a plain run, then the Python heap peak of a second run under tracemalloc (which is slow)."""
    started = time.perf_counter()
    detail = action()
    seconds = time.perf_counter() - started
    tracemalloc.start()
    action()
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    return label, seconds, peak, detail


def drain(response) -> str:
    assert response.status_code == 200, response.status_code
    size = lines = 0
    for chunk in response.streaming_content:
        size += len(chunk)
        lines += chunk.count(b"\n")
    return f"{lines - 1:,} rows, {size / 1024:,.0f} KiB"


def run_benchmarks(units):
    from django.contrib.auth.models import User
    from django.test import Client

    from billing.chargeback import chargeback_report
    from billing.periods import Month

    client = Client()
    client.force_login(User.objects.create(username="bench-finance", is_staff=True))
    unit = units[0].pk

    def page(url):
        response = client.get(url)
        assert response.status_code == 200, (url, response.status_code, response.content[:300])
        return f"{len(response.content) / 1024:,.0f} KiB"

    chargeback_report(Month(2025, 10))  # warm the connection and the planner once, on another month
    return [
        measure("monthly report (selector)", lambda: _nodes(chargeback_report(Month(2025, 11)))),
        measure("monthly report page (HTML + chart)", lambda: page("/billing/?month=2025-11")),
        measure("CSV, 1 month (streamed)", lambda: drain(client.get("/billing/export.csv?month=2025-11"))),
        measure("CSV, 12 months (streamed)", lambda: drain(client.get("/billing/export.csv?from=2025-01&to=2025-12"))),
        measure("PDF statement, 1 unit", lambda: f"{len(client.get(f'/billing/statement.pdf?month=2025-11&business_unit={unit}').content) / 1024:,.0f} KiB"),  # noqa: E501
        measure("procurement page", lambda: page("/billing/procurement/?month=2025-11")),
    ]


def _nodes(report) -> str:
    return f"{len(list(report.total.walk()))} tree nodes, ${report.total.cost:,.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--intervals", type=int, default=1_000_000)
    parser.add_argument("--keep", action="store_true", help="keep the database afterwards")
    parser.add_argument("--load-only", action="store_true", help="load the data, skip the timings (implies --keep)")
    options = parser.parse_args()
    url = os.environ.get("DATABASE_URL", DEFAULT_URL)
    if not url.startswith("postgres"):
        sys.exit("The benchmark needs PostgreSQL: set DATABASE_URL=postgres://…")
    create_database(url)
    setup_django(url)
    rng = random.Random(2025)
    started = time.perf_counter()
    units, job_keys, gpu_keys = create_tenancy_and_cluster(rng)
    loaded = load_intervals(interval_rows(rng, job_keys, gpu_keys, options.intervals))
    print(f"loaded {loaded:,} intervals over 2025 on {len(gpu_keys):,} GPUs in {time.perf_counter() - started:.1f} s")
    if options.load_only:
        return
    try:
        results = run_benchmarks(units)
    finally:
        if not options.keep:
            drop_database(url)
    targets = {"monthly report page (HTML + chart)": 2.0, "monthly report (selector)": 2.0,
               "PDF statement, 1 unit": 5.0}
    print(f"\n{'step':38} {'seconds':>8} {'peak MiB':>9}  {'target':>8}  detail")
    for label, seconds, peak, detail in results:
        target = f"≤ {targets[label]:.0f} s" if label in targets else ""
        verdict = ("ok" if seconds <= targets[label] else "SLOW") if label in targets else ""
        print(f"{label:38} {seconds:8.2f} {peak:9.1f}  {target:>8} {verdict:4} {detail}")
    print("\npeak MiB is Python heap traced by tracemalloc during the step; the CSV's stays flat as months grow.")


if __name__ == "__main__":
    main()
