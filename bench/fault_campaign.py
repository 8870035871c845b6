"""Fault campaign: the real workers (Celery tasks and the cycle code over PostgreSQL and Redis, the
simulated cluster) under injected faults, with the invariants checked after each one.

    python bench/fault_campaign.py --faults 1000 [--seed 1] [--workers 2] [--json PATH]

Needs PostgreSQL (DATABASE_URL; a throw-away test database is made beside it) and redis-server on
the PATH (a private one on --redis-port, so "Redis down" hurts nobody else). The suite runs a short
campaign (tests/workers/test_fault_campaign.py). The seed fixes which fault comes when and where;
the timing of the processes it hits is real, so two runs of one seed may differ in detail.

Each fault is injected at a random point while tasks are in flight, then the cluster is healed
(processes resumed or restarted, nodes back) and the workers run until nothing is in flight; then
the invariants (check below) are read from the database and the simulated cluster.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

FAULTS = ("worker-kill", "worker-pause", "db-connection-loss", "redis-down", "duplicate-delivery",
          "reordered-delivery", "clock-skew", "malformed-report", "missing-report", "spot-reclaim", "node-loss",
          "backend-api-error")
PROCESS_FAULTS = {"worker-kill", "worker-pause", "db-connection-loss", "redis-down"}  # may leave a worker hung
# Fast loops so a fault shows within seconds: a node is lost after 2 missed 1 s heartbeats.
WORKER_SETTINGS = {"TESSERA_POLL_INTERVAL_S": "1", "TESSERA_LOST_AFTER_MISSED": "2", "TESSERA_PREEMPT_GRACE_S": "4",
                   "TESSERA_CHECKPOINT_SAVE_S": "1", "TESSERA_ACTION_POLL_S": "1", "TESSERA_BACKEND": "simulated"}
SKEWS_S = (0.0, 60.0, -30.0)  # worker 0 keeps true time, worker 1 runs a minute fast, worker 2 slow
NODES = (("r-01", "reserved", "A100-80GB"), ("r-02", "reserved", "A100-80GB"),
         ("s-01", "spot", "H100-80GB"), ("s-02", "spot", "H100-80GB"))
GPUS_PER_NODE = 4
TASKS = ("agents.run_cycle", "agents.poll_agents", "agents.reconcile", "agents.checkpoint_due",
         "agents.resume_actions")
TASK_TIMEOUT_S = 20
SETTLE_ROUNDS = 12
BILLING_SLACK_S = 1.0  # a placement is committed, then its pod bound: the dispatch in between
# A worker whose Django clock is skewed; the cluster (the simulated backend) keeps its own clock.
WORKER_MAIN = """
import datetime, os, sys
from django.utils import timezone
_true_now, _skew = timezone.now, datetime.timedelta(seconds=float(os.environ["CAMPAIGN_SKEW_S"]))
timezone.now = lambda: _true_now() + _skew
from celery.__main__ import main
sys.argv[0] = "celery"
main()
"""


@dataclass
class Report:
    seed: int
    faults: Counter = field(default_factory=Counter)
    violations: list[str] = field(default_factory=list)
    unsettled: int = 0
    task_errors: Counter = field(default_factory=Counter)
    jobs: Counter = field(default_factory=Counter)
    billed_without_pod_s: float = 0.0
    seconds: float = 0.0

    def as_dict(self) -> dict:
        return {"seed": self.seed, "faults": dict(self.faults), "faults_total": sum(self.faults.values()),
                "violations": len(self.violations), "violation_details": self.violations[:50],
                "unsettled": self.unsettled, "task_errors": dict(self.task_errors), "jobs": dict(self.jobs),
                "billed_without_pod_s": round(self.billed_without_pod_s, 3), "seconds": round(self.seconds, 1)}

    def table(self) -> str:
        lines = [f"fault campaign, seed {self.seed}: {sum(self.faults.values())} faults in {self.seconds:.0f} s",
                 f"{'fault':<22}{'injected':>9}"]
        lines += [f"{kind:<22}{self.faults[kind]:>9}" for kind in FAULTS]
        lines += [f"{'invariant violations':<22}{len(self.violations):>9}",
                  f"{'rounds not settled':<22}{self.unsettled:>9}",
                  f"billed seconds without a running pod (beyond {BILLING_SLACK_S:g} s bind slack): "
                  f"{self.billed_without_pod_s:.1f}",
                  "jobs by final state: " + ", ".join(f"{k} {v}" for k, v in sorted(self.jobs.items())),
                  "task outcomes other than success: " + (", ".join(f"{k} {v}" for k, v in
                                                                    sorted(self.task_errors.items())) or "none")]
        lines += [f"  violation: {v}" for v in self.violations[:20]]
        return "\n".join(lines)


class PrivateRedis:
    """A redis-server of the campaign's own, so stopping it hurts nobody else."""

    def __init__(self, port: int, workdir: Path) -> None:
        self.port, self.workdir, self.process = port, workdir, None
        self.url = f"redis://127.0.0.1:{port}/0"

    def start(self) -> None:
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", str(self.workdir)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        import redis

        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                redis.Redis.from_url(self.url, socket_connect_timeout=0.5).ping()
                return
            except redis.RedisError:
                time.sleep(0.05)
        raise RuntimeError(f"redis-server did not start on port {self.port}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()  # gone at once, its data with it: the cache and queued tasks are lost
            self.process.wait(timeout=10)


class Worker:
    def __init__(self, index: int, campaign: Campaign) -> None:
        self.index, self.campaign, self.process, self.generation = index, campaign, None, 0
        self.queue = f"{campaign.queue}-w{index}"
        self.skew_s = SKEWS_S[index % len(SKEWS_S)]

    def start(self) -> None:
        c = self.campaign
        env = dict(os.environ, CELERY_TASK_ALWAYS_EAGER="0", DATABASE_URL=c.database_url, REDIS_URL=c.redis.url,
                   REDIS_KEY_PREFIX=c.queue, TESSERA_SIMULATED_STATE=str(c.state_path), TESSERA_FAILPOINTS="",
                   CAMPAIGN_SKEW_S=str(self.skew_s), **WORKER_SETTINGS)
        self.generation += 1
        log = open(c.workdir / f"worker-{self.index}.log", "a")  # noqa: SIM115 (the child keeps it)
        self.process = subprocess.Popen(
            [sys.executable, "-c", WORKER_MAIN, "-A", "tessera", "worker", "--pool", "prefork", "--concurrency", "1",
             "--queues", f"{c.queue},{self.queue}", "--loglevel", "WARNING", "--without-gossip", "--without-mingle",
             "--without-heartbeat", "--hostname", f"{self.queue}-{self.generation}@%h"],
            cwd=ROOT, env=env, stdout=log, stderr=log, start_new_session=True)

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def signal(self, signum: int) -> None:
        """To the worker and its pool process alike, as a container's whole process tree."""
        if self.alive():
            os.killpg(self.process.pid, signum)

    def stop(self) -> None:
        if self.alive():
            self.signal(signal.SIGCONT)
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                pass
        if self.process is not None:
            try:  # the pool process too, whatever became of its parent
                os.killpg(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.process.wait()


class Campaign:
    """Drives the workers, injects faults, checks invariants. Needs Django set up on an empty,
    migrated PostgreSQL database that nothing else uses."""

    def __init__(self, *, seed: int, workdir: Path, redis_port: int, workers: int = 2) -> None:
        from celery import Celery
        from django.conf import settings

        from agents.backends.simulated import SimConfig, SimulatedBackend

        self.rng = random.Random(seed)
        self.report = Report(seed=seed)
        self.workdir = workdir
        self.queue = f"campaign-{seed}-{os.getpid()}"
        self.state_path = workdir / "cluster.json"
        database = settings.DATABASES["default"]
        self.database_url = (f"postgres://{database['USER']}@{database['HOST'] or '127.0.0.1'}:"
                             f"{database['PORT'] or 5432}/{database['NAME']}")
        self.redis = PrivateRedis(redis_port, workdir)
        # Not the current app: a Celery app made current here stays current after the campaign, and
        # every later task in the same process then talked to this private Redis, long stopped.
        self.app = Celery("campaign", broker=self.redis.url, backend=self.redis.url, set_as_current=False)
        options = {"global_keyprefix": f"{self.queue}:"}
        self.app.conf.update(broker_transport_options=options, result_backend_transport_options=options,
                             broker_connection_retry_on_startup=True)
        self.sim = SimulatedBackend(self.state_path)
        self.sim.configure(SimConfig(speed=4.0, checkpoint_save_s=0.5, stop_s=0.0, repartition_s=0.5))
        self.workers = [Worker(i, self) for i in range(workers)]
        self.job_ids: list[int] = []
        self.seen: set[str] = set()
        self.settings_backup = {}

    # -- set-up ---------------------------------------------------------------------------------

    def __enter__(self) -> Campaign:
        from django.conf import settings

        for key, value in WORKER_SETTINGS.items():  # the invariant checks read them too
            if key != "TESSERA_BACKEND":
                self.settings_backup[key] = getattr(settings, key)
                setattr(settings, key, int(value))
        self.redis.start()
        self._cluster()
        for worker in self.workers:
            worker.start()
        for worker in self.workers:
            self._wait_ready(worker)
        return self

    def __exit__(self, *exc) -> None:
        from django.conf import settings

        for worker in self.workers:
            worker.stop()
        self.redis.stop()
        for key, value in self.settings_backup.items():
            setattr(settings, key, value)

    def _cluster(self) -> None:
        from decimal import Decimal

        from django.utils import timezone

        from agents.backends.simulated import SimNode
        from portal.models import BusinessUnit, Project, Team
        from scheduling.models import CapacityTier, Gpu, NetworkSwitch, Node, PriorityClass

        tiers = {name: CapacityTier.objects.get_or_create(name=name, defaults={"reclaimable": name == "spot"})[0]
                 for name in ("reserved", "on-demand", "spot")}
        PriorityClass.objects.get_or_create(name="training", defaults={"value": 200})
        PriorityClass.objects.get_or_create(name="production", defaults={"value": 1000, "preemptible": False})
        spine = NetworkSwitch.objects.create(name="spine-c", kind="spine")
        leaf = NetworkSwitch.objects.create(name="leaf-c", kind="leaf", parent=spine)
        for name, tier, model in NODES:
            node = Node.objects.create(name=name, tier=tiers[tier], leaf_switch=leaf, gpu_model=model,
                                       interconnect="nvswitch", cpu_cores=64, memory_gb=512,
                                       last_heartbeat=timezone.now())
            for index in range(GPUS_PER_NODE):
                Gpu.objects.create(node=node, index=index, uuid=f"GPU-c-{name}-{index}", model=model, memory_gb=80)
            self.sim.ensure_node(SimNode(name=name, gpu_model=model, gpu_count=GPUS_PER_NODE,
                                         gpu_memory_mib=81920, tier=tier))
        unit = BusinessUnit.objects.create(name="Campaign", cost_center="CC-C")
        total = Decimal(len(NODES) * GPUS_PER_NODE)
        team = Team.objects.create(name="campaign", business_unit=unit, guaranteed_gpus=total, burst_limit_gpus=total)
        Project.objects.create(team=team, name="faults")

    def _wait_ready(self, worker: Worker, timeout: float = 90) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and worker.alive():
            try:
                if self.app.send_task("agents.ping", ("up",), queue=worker.queue).get(timeout=5) == "pong:up":
                    return True
            except Exception:  # noqa: BLE001 (not up yet: the broker, the worker, the result)
                time.sleep(0.2)
        return False

    # -- driving ----------------------------------------------------------------------------------

    def send(self, name: str, args=(), queue: str | None = None):
        try:
            return self.app.send_task(name, args, queue=queue or self.queue)
        except Exception as error:  # noqa: BLE001 (Redis away: the task is simply not sent)
            self.report.task_errors[f"send: {type(error).__name__}"] += 1
            return None

    def wait(self, results) -> None:
        for result in results:
            if result is None:
                continue
            try:
                result.get(timeout=TASK_TIMEOUT_S, propagate=True)
            except Exception as error:  # noqa: BLE001 (recorded: a lost task, a retry exhausted, a bug)
                self.report.task_errors[type(error).__name__] += 1

    def burst(self, queue: str | None = None) -> list:
        """The periodic tasks, all at once and in a random order, as beat and retries deliver them."""
        names = list(TASKS)
        self.rng.shuffle(names)
        return [self.send(name, queue=queue) for name in names]

    def submit(self) -> None:
        from portal.models import Team
        from scheduling.models import Job, PriorityClass

        team = Team.objects.get(name="campaign")
        waiting = Job.objects.filter(team=team, status__in=Job.WAITING_STATUSES).count()
        if waiting >= 10 or self.rng.random() < 0.35:
            return
        production = self.rng.random() < 0.2
        job = Job.objects.create(
            team=team, project=team.projects.get(), name=f"c{len(self.job_ids)}", kind="training",
            priority_class=PriorityClass.objects.get(name="production" if production else "training"),
            preemptible=not production, gpus=self.rng.choice((1, 1, 2, 4)), gpu_memory_gb=40, cpu_cores=4,
            memory_gb=32, expected_runtime_s=self.rng.randint(8, 60),
            checkpoint_interval_s=self.rng.choice((None, 5, 20)))
        self.job_ids.append(job.pk)

    # -- faults -------------------------------------------------------------------------------------

    def inject(self, kind: str) -> None:
        self.report.faults[kind] += 1
        getattr(self, "_" + kind.replace("-", "_"))()

    def _in_flight(self) -> list:
        results = self.burst()
        time.sleep(self.rng.uniform(0.0, 0.4))  # somewhere inside those tasks
        return results

    def _worker_kill(self) -> None:
        self._in_flight()
        self.rng.choice(self.workers).signal(signal.SIGKILL)

    def _worker_pause(self) -> None:
        self._in_flight()
        worker = self.rng.choice(self.workers)
        worker.signal(signal.SIGSTOP)
        time.sleep(self.rng.uniform(0.3, 3.0))
        worker.signal(signal.SIGCONT)

    def _db_connection_loss(self) -> None:
        from django.db import connection

        self._in_flight()
        with connection.cursor() as cursor:  # this database's other sessions only: the workers'
            cursor.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                           "WHERE datname = current_database() AND pid <> pg_backend_pid()")

    def _redis_down(self) -> None:
        self._in_flight()
        self.redis.stop()
        time.sleep(self.rng.uniform(0.3, 2.5))
        self.redis.start()

    def _duplicate_delivery(self) -> None:
        from scheduling.models import ActionRequest

        recent = list(ActionRequest.objects.order_by("-id").values_list("id", flat=True)[:4])
        results = []
        for name in TASKS:
            results += [self.send(name), self.send(name)]
        for action_id in recent:  # requested ones twice at once; finished ones redelivered late
            results += [self.send("agents.execute_action", (action_id,)) for _ in range(2)]
        self.wait(results)

    def _reordered_delivery(self) -> None:
        from scheduling.models import ActionRequest

        recent = list(ActionRequest.objects.order_by("-id").values_list("id", flat=True)[:6])
        sends = [("agents.execute_action", (action_id,)) for action_id in recent] + [(name, ()) for name in TASKS]
        self.rng.shuffle(sends)
        self.wait([self.send(name, args) for name, args in sends])

    def _clock_skew(self) -> None:
        skewed = [w for w in self.workers if w.skew_s] or self.workers
        worker = self.rng.choice(skewed)
        self.wait(self.burst(queue=worker.queue))

    def _report_fault(self, kind: str) -> None:
        name = self.rng.choice(NODES)[0]
        self.sim.report_fault(name, kind, self.rng.uniform(0.5, 3.5))
        self.wait(self.burst())

    def _malformed_report(self) -> None:
        self._report_fault(self.rng.choice(("malformed", "nan")))

    def _missing_report(self) -> None:
        self._report_fault("missing")

    def _spot_reclaim(self) -> None:
        name = self.rng.choice([n for n, tier, _ in NODES if tier == "spot"])
        self.sim.reclaim_node(name, self.rng.uniform(0.5, 3.0))
        self.wait(self.burst())

    def _node_loss(self) -> None:
        name = self.rng.choice(NODES)[0]
        self.sim.lose_node(name)
        end = time.monotonic() + self.rng.uniform(0.3, 3.5)
        while time.monotonic() < end:
            self.wait(self.burst())
        self.sim.revive_node(name)

    def _backend_api_error(self) -> None:
        self.sim.api_errors(self.rng.uniform(0.3, 2.0))
        self.wait(self.burst())

    # -- healing and settling ---------------------------------------------------------------------------

    def heal(self, kind: str) -> None:
        for worker in self.workers:
            worker.signal(signal.SIGCONT)
            if not worker.alive():
                worker.start()
        for worker in self.workers if kind in PROCESS_FAULTS else ():
            if not self._wait_ready(worker, timeout=20):  # hung after losing Redis: replace it
                self.report.task_errors["worker hung, restarted as its liveness probe would"] += 1
                worker.stop()
                worker.start()
                self._wait_ready(worker)
        self._restore_reclaimed()

    def _restore_reclaimed(self) -> None:
        """The provider hands a reclaimed node back once Tessera has written it off."""
        from scheduling.models import Node

        state = json.loads(self.state_path.read_text())
        lost = set(Node.objects.filter(state=Node.State.LOST).values_list("name", flat=True))
        for name, node in state["nodes"].items():
            if node["gone"] and name in lost:
                self.sim.restore_node(name)

    def settle(self) -> bool:
        for _ in range(SETTLE_ROUNDS):
            self.wait(self.burst())
            self._restore_reclaimed()
            if self._quiet():
                return True
            time.sleep(0.3)
        return False

    def _quiet(self) -> bool:
        from scheduling.models import ActionRequest, Node

        state = json.loads(self.state_path.read_text())
        pending_nodes = any(node["gone"] or node["reclaim_at"] for node in state["nodes"].values()) or \
            Node.objects.exclude(state=Node.State.READY).exists()
        return not pending_nodes and not ActionRequest.objects.filter(state="requested").exists() and \
            not orphan_pods(state)

    # -- the run ----------------------------------------------------------------------------------------

    def run(self, faults: int, progress: bool = False, kinds: tuple[str, ...] = FAULTS) -> Report:
        started = time.monotonic()
        self.settle()
        first = list(kinds)
        self.rng.shuffle(first)  # every kind early, then chance decides
        for number in range(1, faults + 1):
            self.submit()
            kind = first[number - 1] if number <= len(first) else self.rng.choice(kinds)
            self.inject(kind)
            self.heal(kind)
            settled = self.settle()
            self.report.unsettled += not settled
            found = [v for v in check(self.sim, self.job_ids) if v not in self.seen]  # each one once
            self.seen.update(found)
            self.report.violations += [f"#{number} {kind}: {v}" for v in found]
            for violation in found if progress else ():
                print(f"violation after fault #{number} ({kind}): {violation}", flush=True)
            if progress and number % 25 == 0:
                print(f"{number} faults, {len(self.report.violations)} violations, "
                      f"{time.monotonic() - started:.0f} s", flush=True)
        from scheduling.models import Job

        self.report.jobs = Counter(Job.objects.filter(pk__in=self.job_ids).values_list("status", flat=True))
        self.report.billed_without_pod_s = billed_without_pod(self.sim)[0]
        self.report.seconds = time.monotonic() - started
        return self.report


# -- invariants ------------------------------------------------------------------------------------------

def orphan_pods(state: dict) -> list[str]:
    """Running pods of no current run of a holding job (reconcile stops them)."""
    from agents.actions import job_pods
    from scheduling.models import Job

    holding = {str(job.pk): set(job_pods(job)) for job in Job.objects.filter(status__in=Job.HOLDING_STATUSES)}
    return [key for key, pod in state["pods"].items()
            if pod["phase"] == "Running" and pod["stop_at"] is None and not state["nodes"][pod["node"]]["gone"]
            and pod["name"] not in holding.get(pod["job_id"], set())]


def pod_lives(sim) -> dict[tuple[str, str, int], list[tuple[float, float]]]:
    """(job id, node, GPU index) -> the spans a pod of that job ran there, gone pods included."""
    state = json.loads(sim.path.read_text())
    now = sim.now()
    lives: dict[tuple[str, str, int], list[tuple[float, float]]] = {}
    pods = [{**pod, "ran_until": pod["ended_at"] if pod["ended_at"] is not None else now}
            for pod in state["pods"].values()]
    if sim.history_path.exists():
        pods += [json.loads(line) for line in sim.history_path.read_text().splitlines() if line]
    for pod in pods:
        for index in pod["gpus"]:
            lives.setdefault((pod["job_id"], pod["node"], index), []).append((pod["started_at"], pod["ran_until"]))
    return lives


def billed_without_pod(sim) -> tuple[float, list[str]]:
    """Seconds billed beyond the bind slack while no pod of the job ran on that GPU, in total, and
    the intervals that have any."""
    from django.utils import timezone

    from billing.models import UsageInterval

    lives, now, total, bad = pod_lives(sim), timezone.now().timestamp(), 0.0, []
    for interval in UsageInterval.objects.select_related("node", "gpu"):
        start, end = interval.started_at.timestamp(), (interval.ended_at.timestamp() if interval.ended_at else now)
        spans = sorted(lives.get((str(interval.job_id), interval.node.name, interval.gpu.index), []))
        uncovered = _uncovered(start + BILLING_SLACK_S, end, spans)
        if uncovered > BILLING_SLACK_S:
            total += uncovered
            bad.append(f"interval {interval.pk} (job {interval.job_id}, {interval.node.name}/gpu{interval.gpu.index}) "
                       f"billed {uncovered:.1f} s with no pod running: billed {start % 1000:.1f}-{end % 1000:.1f}, "
                       f"pods {[(round(a % 1000, 1), round(b % 1000, 1)) for a, b in spans]}")
    return total, bad


def _uncovered(start: float, end: float, spans: list[tuple[float, float]]) -> float:
    missing, cursor = 0.0, start
    for span_start, span_end in spans:
        if span_start > cursor:
            missing += max(0.0, min(span_start, end) - cursor)
        cursor = max(cursor, span_end)
        if cursor >= end:
            return missing
    return missing + max(0.0, end - cursor)


def check(sim, job_ids: list[int]) -> list[str]:
    """Every invariant, read at a settled moment; returns the violations in words."""
    from django.db.models import Count, Sum

    from billing.models import UsageInterval
    from scheduling.models import Gpu, Job, Placement

    found = []
    for gpu in Gpu.objects.select_related("node"):
        open_share = gpu.placements.filter(ended_at__isnull=True, mig_instance__isnull=True) \
            .aggregate(total=Sum("share_milli"))["total"] or 0
        if open_share > 1000:
            found.append(f"{gpu} allocated {open_share}/1000 in the database")
    state = json.loads(sim.path.read_text())
    held: dict[tuple[str, int], str] = {}
    for pod in state["pods"].values():
        if pod["phase"] == "Running" and not state["nodes"][pod["node"]]["gone"]:
            for index in pod["gpus"]:
                if (pod["node"], index) in held:
                    found.append(f"GPU {index} of {pod['node']} runs {held[(pod['node'], index)]} and {pod['name']}")
                held[(pod["node"], index)] = pod["name"]
    jobs = Job.objects.filter(pk__in=job_ids).annotate(open=Count("placements", filter=_open()))
    if jobs.count() != len(job_ids):
        found.append(f"{len(job_ids) - jobs.count()} job(s) lost from the database")
    for job in jobs:
        holding = job.status in Job.HOLDING_STATUSES
        if holding != (job.open > 0):
            found.append(f"job {job.pk} is {job.status} with {job.open} open placement(s)")
        if (job.status in Job.FINISHED_STATUSES) != (job.finished_at is not None):
            found.append(f"job {job.pk} is {job.status} with finished_at {job.finished_at}")
    found += _pods_of_holding_jobs(state, jobs)
    for placement in Placement.objects.annotate(n=Count("usage_interval")).exclude(n=1):
        found.append(f"placement {placement.pk} has {placement.n} usage intervals")
    for interval in UsageInterval.objects.select_related("placement").exclude(placement__isnull=True):
        if interval.ended_at != interval.placement.ended_at:
            found.append(f"interval {interval.pk} ends {interval.ended_at}, "
                         f"its placement {interval.placement.ended_at}")
    if UsageInterval.objects.filter(placement__isnull=True).exists():
        found.append("usage intervals without a placement")
    found += [f"orphan pod {key} still running" for key in orphan_pods(state)]
    found += billed_without_pod(sim)[1]
    return found


def _open():
    from django.db.models import Q

    return Q(placements__ended_at__isnull=True)


def _pods_of_holding_jobs(state: dict, jobs) -> list[str]:
    """Nothing lost: a job the database says runs has its pods in the cluster (bound and alive)."""
    from agents.actions import attempt_binds, job_pods

    found = []
    for job in jobs:
        if job.status not in job.HOLDING_STATUSES or any(a.state != "confirmed" for a in attempt_binds(job)):
            continue
        for pod in job_pods(job):
            live = state["pods"].get(f"{job.team.name}/{pod}")
            if live is None:
                found.append(f"job {job.pk} is {job.status} but its pod {pod} is gone from the cluster")
    return found


# -- the command ---------------------------------------------------------------------------------------------

def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--faults", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--redis-port", type=int, default=18611)
    parser.add_argument("--kinds", default=",".join(FAULTS), help="a comma-separated subset of: " + ", ".join(FAULTS))
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop the workers and Redis on the way out
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tessera.settings")
    os.environ.setdefault("SECRET_KEY", "fault-campaign-secret-key-not-for-production-0123456789")
    import django

    django.setup()
    from django.db import connection

    database = connection.settings_dict["NAME"]
    connection.creation.create_test_db(verbosity=0, autoclobber=True, keepdb=False)
    try:
        with tempfile.TemporaryDirectory(prefix="fault-campaign-") as workdir, \
                Campaign(seed=args.seed, workdir=Path(workdir), redis_port=args.redis_port,
                         workers=args.workers) as campaign:
            report = campaign.run(args.faults, progress=True, kinds=tuple(args.kinds.split(",")))
    finally:
        connection.creation.destroy_test_db(database, verbosity=0)
    print(report.table())
    if args.json:
        args.json.write_text(json.dumps(report.as_dict(), indent=1))
    return 1 if report.violations else 0


if __name__ == "__main__":
    sys.exit(main())
