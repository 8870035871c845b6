"""Portal load benchmark: 100,000 jobs across 20 teams in PostgreSQL, gunicorn with 2 workers,
20 concurrent clients for 30 s on the dashboard, the queue API and the job list.

    python bench/portal_load.py [--seconds 30] [--clients 20] [--reload]

Uses its own database (tessera_bench_portal on 127.0.0.1:5432) and prints requests/s and
p50/p95/p99 latency per endpoint. Target: p95 <= 150 ms on a 2-core machine.
"""

import argparse
import http.client
import os
import random
import re
import statistics
import subprocess
import sys
import threading
import time
import uuid
from datetime import timedelta
from pathlib import Path

import psycopg
import requests

ROOT = Path(__file__).resolve().parents[1]
DB_NAME = "tessera_bench_portal"
DB_URL = f"postgres://postgres@127.0.0.1:5432/{DB_NAME}"
PORT = 8765
TEAMS, JOBS, NODES, GPUS_PER_NODE = 20, 100_000, 64, 8
ENV = {"DATABASE_URL": DB_URL, "DEBUG": "0", "ALLOWED_HOSTS": "127.0.0.1", "LOG_LEVEL": "WARNING",
       "SECRET_KEY": "bench-secret-key-not-for-production-0123456789", "REDIS_URL": "redis://127.0.0.1:6379/13"}
PASSWORD = "bench-lead-pass"


def ensure_database() -> None:
    with psycopg.connect(host="127.0.0.1", user="postgres", dbname="postgres", autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [DB_NAME]).fetchone():
            conn.execute(f'CREATE DATABASE "{DB_NAME}"')


def setup_django() -> None:
    os.environ.update(ENV)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tessera.settings")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", interactive=False, verbosity=0)


def load(reload: bool) -> None:
    from scheduling.models import Job

    if Job.objects.count() >= JOBS and not reload:
        print(f"{Job.objects.count()} jobs already loaded")
        return
    started = time.monotonic()
    _wipe()
    gpus = _cluster()
    teams = _tenancy()
    _jobs(teams, gpus)
    _samples(gpus)
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    print(f"loaded {Job.objects.count()} jobs in {time.monotonic() - started:.0f} s")


def _wipe() -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE scheduling_gpusample, scheduling_jobevent, scheduling_placement, scheduling_job, "
                       "scheduling_miginstance, scheduling_gpu, scheduling_node, scheduling_networkswitch, "
                       "portal_membership, portal_project, portal_team_allowed_priority_classes, portal_team, "
                       "portal_businessunit, authtoken_token, auth_user CASCADE")


def _cluster():
    from scheduling.models import CapacityTier, Gpu, NetworkSwitch, Node

    spine = NetworkSwitch.objects.create(name="spine", kind="spine")
    leaves = [NetworkSwitch.objects.create(name=f"leaf-{i}", kind="leaf", parent=spine) for i in range(4)]
    tier = CapacityTier.objects.get(name="reserved")
    nodes = Node.objects.bulk_create([
        Node(name=f"node-{i:03d}", tier=tier, leaf_switch=leaves[i % 4], gpu_model="H100-80GB",
             interconnect="nvswitch", cpu_cores=192, memory_gb=2048) for i in range(NODES)])
    return Gpu.objects.bulk_create([
        Gpu(node=node, index=i, model="H100-80GB", memory_gb=80, mig_capable=True, utilization=random.random(),
            uuid=f"GPU-{uuid.uuid4()}") for node in nodes for i in range(GPUS_PER_NODE)])


def _tenancy():
    from django.contrib.auth.hashers import make_password
    from django.contrib.auth.models import User

    from portal.models import BusinessUnit, Membership, Project, Team
    from scheduling.models import PriorityClass

    unit = BusinessUnit.objects.create(name="Bench")
    classes = list(PriorityClass.objects.all())
    password = make_password(PASSWORD)
    teams = []
    for i in range(TEAMS):
        team = Team.objects.create(name=f"team-{i:02d}", business_unit=unit, guaranteed_gpus=16, burst_limit_gpus=40)
        team.allowed_priority_classes.set(classes)
        Project.objects.create(team=team, name="main")
        user = User.objects.create(username=f"lead-{i:02d}", password=password)
        Membership.objects.create(user=user, team=team, role="lead")
        teams.append(team)
    return teams


def _jobs(teams, gpus) -> None:
    """Per team: 25 running (one whole GPU each), 1,000 waiting with reasons, the rest finished."""
    from django.utils import timezone

    from scheduling.models import Job, Placement, PriorityClass

    now, rng = timezone.now(), random.Random(7)
    training = PriorityClass.objects.get(name="training")
    per_team = JOBS // len(teams)
    jobs, running_gpu = [], {}
    for t, team in enumerate(teams):
        project = team.projects.get()
        for i in range(per_team):
            status = "running" if i < 25 else "pending" if i < 1025 else "completed"
            job = Job(team=team, project=project, name=f"job-{t}-{i}", kind="training", priority_class=training,
                      gpus=1, gpu_memory_gb=40, status=status, queue_order=i)
            if status == "pending":
                job.queue_position_team, job.queue_position_overall = i - 24, (i - 24) * len(teams) + t
                job.pending_reason_code, job.pending_reason = "burst-limit", "Team at its burst limit; waits for 1 GPU."
                job.estimated_start = now + timedelta(minutes=i)
            if status == "running":
                running_gpu[len(jobs)] = gpus[t * 25 + i]
            jobs.append(job)
    Job.objects.bulk_create(jobs, batch_size=5000)
    placements = []
    for n, job in enumerate(jobs):
        if n in running_gpu:
            placements.append(Placement(job=job, gpu=running_gpu[n], started_at=now - timedelta(hours=3)))
        elif job.status == "completed":
            began = now - timedelta(hours=rng.uniform(1, 24 * 14))
            placements.append(Placement(job=job, gpu=rng.choice(gpus), started_at=began,
                                        ended_at=began + timedelta(minutes=rng.uniform(5, 600)), end_reason="done"))
    Placement.objects.bulk_create(placements, batch_size=5000)


def _samples(gpus) -> None:
    from django.utils import timezone

    from scheduling.models import GpuSample

    now = timezone.now().replace(minute=0, second=0, microsecond=0)
    GpuSample.objects.bulk_create([GpuSample(gpu=g, at=now - timedelta(hours=h), utilization=random.random(),
                                             memory_used_gb=40) for g in gpus for h in range(24)], batch_size=5000)


def serve():
    try:
        requests.get(f"http://127.0.0.1:{PORT}/healthz", timeout=1)
    except requests.ConnectionError:
        pass
    else:
        raise SystemExit(f"port {PORT} is taken (a server left from an earlier run?); stop it first")
    env = dict(os.environ, **ENV)
    command = [str(Path(sys.executable).parent / "gunicorn"), "tessera.wsgi", "-w", "2", "-b", f"127.0.0.1:{PORT}",
               "--log-level", "warning"]
    server = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, start_new_session=True)
    for _ in range(150):  # workers boot slowly on a busy machine
        try:
            if requests.get(f"http://127.0.0.1:{PORT}/healthz", timeout=5).ok:
                return server
        except requests.RequestException:
            time.sleep(0.2)
    server.terminate()
    raise SystemExit("gunicorn did not start")


def signed_in(team: int) -> requests.Session:
    session = requests.Session()
    base = f"http://127.0.0.1:{PORT}"
    page = session.get(f"{base}/accounts/login/").text
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)[1]
    response = session.post(f"{base}/accounts/login/", data={
        "username": f"lead-{team:02d}", "password": PASSWORD, "csrfmiddlewaretoken": token},
        headers={"Referer": f"{base}/accounts/login/"}, allow_redirects=False)
    assert response.status_code == 302, "sign-in failed"
    return session


ENDPOINTS = {
    "dashboard": "/teams/{team}/",
    "queue API": "/api/v1/teams/{team}/queue/",
    "job list API": "/api/v1/jobs/",
}


def _get(path: str, cookie: str) -> int:
    """One GET on a fresh connection (gunicorn's sync workers close each one anyway).

    http.client instead of requests: the load generator shares the 2 cores with the server, and
    requests spends several times more CPU per call; the server does the same work either way.
    """
    connection = http.client.HTTPConnection("127.0.0.1", PORT, timeout=30)
    try:
        connection.request("GET", path, headers={"Cookie": cookie})
        response = connection.getresponse()
        response.read()
        return response.status
    finally:
        connection.close()


def drive(seconds: float, clients: int) -> dict[str, list[float]]:
    timings = {name: [] for name in ENDPOINTS}
    errors = []
    cookies = ["; ".join(f"{k}={v}" for k, v in signed_in(i % TEAMS).cookies.items()) for i in range(clients)]
    deadline = time.monotonic() + seconds

    def client(number: int) -> None:
        cookie, team = cookies[number], f"team-{number % TEAMS:02d}"
        names = list(ENDPOINTS)
        i = number
        while time.monotonic() < deadline:
            name = names[i % len(names)]
            i += 1
            began = time.perf_counter()
            status = _get(ENDPOINTS[name].format(team=team), cookie)
            elapsed = time.perf_counter() - began
            if status != 200:
                errors.append((name, status))
            timings[name].append(elapsed)

    threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
    cpu = time.process_time()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    print(f"load generator CPU: {time.process_time() - cpu:.1f} s over {seconds:.0f} s; "
          f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if errors:
        print(f"{len(errors)} errors, e.g. {errors[:3]}")
    return timings


def server_cpu_s(server) -> float:
    """CPU seconds of gunicorn's workers so far (Linux /proc); 0 where that cannot be read."""
    try:
        children = Path(f"/proc/{server.pid}/task/{server.pid}/children").read_text().split()
        ticks = sum(sum(int(x) for x in Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[11:13])
                    for pid in children)
    except OSError:
        return 0.0
    return ticks / os.sysconf("SC_CLK_TCK")


def report(timings: dict[str, list[float]], seconds: float) -> None:
    print("\n| endpoint | requests | req/s | p50 ms | p95 ms | p99 ms |\n|---|---:|---:|---:|---:|---:|")
    for name, values in timings.items():
        if len(values) < 2:
            print(f"| {name} | {len(values)} | - | - | - | - |")
            continue
        cuts = statistics.quantiles(values, n=100)
        print(f"| {name} | {len(values)} | {len(values) / seconds:.1f} | {1000 * statistics.median(values):.0f} | "
              f"{1000 * cuts[94]:.0f} | {1000 * cuts[98]:.0f} |")
    total = sum(len(v) for v in timings.values())
    print(f"| all | {total} | {total / seconds:.1f} | | | |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--reload", action="store_true", help="Wipe and load the data again.")
    args = parser.parse_args()
    ensure_database()
    setup_django()
    load(args.reload)
    server = serve()
    try:
        cpu = server_cpu_s(server)
        timings = drive(args.seconds, args.clients)
        served = sum(len(v) for v in timings.values())
        # The noise-proof number: server CPU per request does not depend on what else the machine runs.
        print(f"gunicorn workers' CPU per request: {1000 * (server_cpu_s(server) - cpu) / max(1, served):.1f} ms")
        report(timings, args.seconds)
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()


if __name__ == "__main__":
    main()
