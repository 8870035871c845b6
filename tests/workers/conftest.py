"""A small simulated cluster in PostgreSQL, real Celery workers on a queue of their own, and the
invariants every worker test ends with."""

import os
import subprocess
import sys
import time
import uuid
from decimal import Decimal
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.db.models import Count, Sum
from django.utils import timezone

from agents.backends.simulated import SimConfig, SimNode, SimulatedBackend
from agents.tasks import ping
from billing.models import UsageInterval
from portal.models import BusinessUnit, Project, Team
from scheduling.models import CapacityTier, Gpu, Job, NetworkSwitch, Node, Placement, PriorityClass

ROOT = Path(__file__).resolve().parents[2]
# Fast loops so a fault shows within seconds: a node is lost after 2 missed 1 s heartbeats.
WORKER_SETTINGS = {"TESSERA_POLL_INTERVAL_S": "1", "TESSERA_LOST_AFTER_MISSED": "2", "TESSERA_PREEMPT_GRACE_S": "20",
                   "TESSERA_CHECKPOINT_SAVE_S": "3", "TESSERA_ACTION_POLL_S": "1", "TESSERA_BACKEND": "simulated"}


@pytest.fixture
def sim(tmp_path, settings):
    settings.TESSERA_SIMULATED_STATE = str(tmp_path / "cluster.json")
    for key, value in WORKER_SETTINGS.items():
        if key != "TESSERA_BACKEND":
            setattr(settings, key, int(value))
    backend = SimulatedBackend(tmp_path / "cluster.json")
    backend.configure(SimConfig(speed=1.0, checkpoint_save_s=1.0, stop_s=0.0, repartition_s=0.5))
    return backend


@pytest.fixture
def cluster(sim):
    """Two nodes of 4 GPUs: r-01 (reserved, A100) and s-01 (spot, H100); one team that may use all 8."""
    tiers = {name: CapacityTier.objects.get_or_create(name=name, defaults={"reclaimable": name == "spot"})[0]
             for name in ("reserved", "on-demand", "spot")}
    PriorityClass.objects.get_or_create(name="training", defaults={"value": 200})
    PriorityClass.objects.get_or_create(name="production", defaults={"value": 1000, "preemptible": False})
    spine = NetworkSwitch.objects.create(name="spine-1", kind="spine")
    leaf = NetworkSwitch.objects.create(name="leaf-1", kind="leaf", parent=spine)
    for name, tier, model in (("r-01", "reserved", "A100-80GB"), ("s-01", "spot", "H100-80GB")):
        node = Node.objects.create(name=name, tier=tiers[tier], leaf_switch=leaf, gpu_model=model,
                                   interconnect="nvswitch", cpu_cores=64, memory_gb=512, last_heartbeat=timezone.now())
        for index in range(4):
            Gpu.objects.create(node=node, index=index, uuid=f"GPU-{name}-{index}", model=model, memory_gb=80)
        sim.ensure_node(SimNode(name=name, gpu_model=model, gpu_count=4, gpu_memory_mib=81920, tier=tier))
    unit = BusinessUnit.objects.create(name="Research", cost_center="CC-1")
    team = Team.objects.create(name="vision", business_unit=unit, guaranteed_gpus=Decimal(8),
                               burst_limit_gpus=Decimal(8))
    Project.objects.create(team=team, name="detection")
    return sim


def job_add(name, *, gpus=2, runtime_s=600, interval_s=None, model="", progress_s=0.0, image="") -> Job:
    team = Team.objects.get(name="vision")
    return Job.objects.create(team=team, project=team.projects.get(), name=name, kind="training",
                              priority_class=PriorityClass.objects.get(name="training"), gpus=gpus, gpu_memory_gb=40,
                              cpu_cores=8, memory_gb=64, expected_runtime_s=runtime_s, checkpoint_interval_s=interval_s,
                              gpu_models=model, progress_s=progress_s, image=image)


# Bounds on hanging, never performance claims: with eight suites on two cores a worker took more
# than 30 s to answer, and a test that timed out then said nothing about the code under test.
PATIENCE_S = 180


def wait_for(condition, timeout=PATIENCE_S, every=0.2, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out waiting for {what}")


class Workers:
    """Celery workers in subprocesses, all on one queue private to the test."""

    def __init__(self, state_path: str, env: dict[str, str] | None = None, queue: str = "", log: str = ""):
        self.queue = queue or f"workers-{uuid.uuid4().hex[:8]}"  # beat's tests name the queue beat sends to
        self.state_path = state_path
        self.log = log  # where the workers' warnings go ("": nowhere), for a test that says why it failed
        self.env = {**WORKER_SETTINGS, **(env or {})}  # a real cluster's tests name another backend
        self.processes: list[subprocess.Popen] = []

    def start(self, count=1, failpoints="") -> list[subprocess.Popen]:
        database = django_settings.DATABASES["default"]
        url = f"postgres://{database['USER']}@{database['HOST']}:{database['PORT'] or 5432}/{database['NAME']}"
        env = dict(os.environ, CELERY_TASK_ALWAYS_EAGER="0", DATABASE_URL=url, TESSERA_FAILPOINTS=failpoints,
                   TESSERA_SIMULATED_STATE=self.state_path, **self.env)
        out = open(self.log, "ab") if self.log else subprocess.DEVNULL  # noqa: SIM115 - closed below
        started = [subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "tessera", "worker", "--pool", "solo", "--queues", self.queue,
             "--loglevel", "WARNING", "--without-gossip", "--without-mingle", "--without-heartbeat",
             "--hostname", f"{self.queue}-{len(self.processes) + n}@%h"],
            cwd=ROOT, env=env, stdout=out, stderr=out) for n in range(count)]
        if self.log:
            out.close()  # each worker has its own copy
        self.processes += started
        for _ in started:  # each answers one ping; a solo worker takes one task at a time
            assert ping.apply_async(args=["up"], queue=self.queue).get(timeout=PATIENCE_S) == "pong:up"
        return started

    def run(self, task, *args, timeout=PATIENCE_S):
        return task.apply_async(args=args, queue=self.queue).get(timeout=timeout)

    def stop(self):
        """The test is over: SIGKILL, not Celery's warm shutdown, which took 3 to 6 s a worker. Nothing
        is left to finish: their queue is the test's own, and PostgreSQL rolls back a killed worker's
        transaction as its connection closes."""
        for process in self.processes:
            if process.poll() is None:
                process.kill()
        for process in self.processes:
            process.wait()


@pytest.fixture
def workers(cluster, settings):
    pool = Workers(settings.TESSERA_SIMULATED_STATE)
    yield pool
    pool.stop()


def assert_invariants(sim: SimulatedBackend, jobs: list[Job]):
    """No GPU double-allocated, no job lost, no interval billed twice."""
    for gpu in Gpu.objects.all():
        open_whole = gpu.placements.filter(ended_at__isnull=True, mig_instance__isnull=True)
        assert (open_whole.aggregate(total=Sum("share_milli"))["total"] or 0) <= 1000, f"{gpu} over-allocated"
    for job in Job.objects.filter(pk__in=[j.pk for j in jobs]):
        holds = job.placements.filter(ended_at__isnull=True).exists()
        assert holds == (job.status in ("running", "checkpointing")), f"{job} is {job.status}, holds={holds}"
    assert Job.objects.filter(pk__in=[j.pk for j in jobs]).count() == len(jobs)
    held = {}
    for pod in sim.poll_observations():
        if pod.status == "Running":
            for index in _pod_gpus(sim, pod):
                assert (pod.node_name, index) not in held, f"GPU {index} of {pod.node_name} runs two pods"
                held[(pod.node_name, index)] = pod.pod_name
    assert not Placement.objects.annotate(n=Count("usage_interval")).filter(n__gt=1).exists()
    for interval in UsageInterval.objects.select_related("placement"):
        assert interval.placement is not None
        assert interval.ended_at == interval.placement.ended_at, f"interval {interval.pk} out of step"
        overlapping = UsageInterval.objects.filter(job=interval.job, gpu=interval.gpu, started_at__lt=interval.ended_at
                                                   or timezone.now()).exclude(pk=interval.pk)
        assert not overlapping.exclude(ended_at__lte=interval.started_at).exists(), "billed twice for one GPU"


def _pod_gpus(sim, observation):
    import json

    state = json.loads(sim.path.read_text())
    return state["pods"][f"{observation.namespace}/{observation.pod_name}"]["gpus"]
