"""The live demo's workload (`make demo` only, after `demo_load`): a cluster that stays busy.

`demo_load` is the small, fixed data set the tests build on. What `make demo` shows on top of it
must keep showing what the README shows while the embedded loop runs the simulated cluster at 60
times real speed (a day of work passes in 24 minutes):

- production services on MIG slices of every partitioned GPU, running until someone stops them
  (a service has no end, so it is given a year), which also keeps those GPUs partitioned;
- long training jobs on most whole GPUs (days of work: hours of demo), so the queue does not drain;
- from the start, waiting jobs with different reasons: teams at their burst limit, and jobs whose
  GPU model is busy;
- 24 hours of measured utilisation behind the charts, per GPU and per MIG slice (as dcgm-exporter
  measures slices; the simulated backend then reports each running slice the same way).
"""

import math
from datetime import timedelta
from decimal import Decimal

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from portal.models import Team
from scheduling.models import Gpu, GpuSample, Job, MigInstance, MigSample, Placement, PriorityClass
from ui.demo import _place_mig, _place_whole

DAY = 24 * 3600
SERVICE_RUNTIME_S = 365 * DAY  # a service runs until stopped; the simulated pods need some end
SAMPLE_EVERY = timedelta(minutes=15)
# team: (guaranteed, burst): search and fraud run beyond their guarantee, up to their burst limit
QUOTAS = {"search": (8, 14)}
# team, project, user, name, GPUs (node, indexes), started hours ago, runtime days
TRAINING = [
    ("llm-platform", "foundation", "dave", "llama-70b-pretrain", [("h100-02", range(8)), ("h100-03", range(8))],
     20, 30),
    ("search", "query-understanding", "alice", "query-encoder-train", [("h100-04", range(4, 8))], 3, 4),
    ("search", "ranking", "bob", "ranker-pretrain", [("a100-01", range(8))], 6, 5),
    ("vision", "detection", "erin", "segformer-train", [("a100-02", range(8))], 10, 4),
    ("fraud", "scoring", "admin", "fraud-gnn-train", [("a100-04", range(8))], 4, 4),
]
# Started when their team already held its guarantee: they run on lent capacity (the dashboard's "borrowed").
BORROWED = {"query-encoder-train", "fraud-gnn-train"}
# team, project, user, name, (node, GPU index, MIG start slot), started hours ago
SERVICES = [
    ("search", "query-understanding", "bob", "query-rewrite-serving", ("h100-04", 1, 0), 50),
    ("recsys", "feeds", "alice", "feeds-embedder-serving", ("h100-04", 0, 2), 30),
    ("llm-platform", "evals", "dave", "judge-serving", ("h100-04", 2, 4), 40),
    ("vision", "detection", "erin", "detector-serving", ("h100-04", 3, 2), 26),
]
# team, project, user, name, GPUs, GPU models, runtime hours: each waits from the first cycle
WAITING = [
    ("search", "ranking", "alice", "ranker-ablation", 1, "H100-80GB", 6),
    ("llm-platform", "foundation", "dave", "llama-70b-sft", 8, "H100-80GB", 12),
    ("fraud", "scoring", "admin", "fraud-gnn-sweep", 4, "", 5),
]
# Older demo jobs given the durations of the workload above.
RUNTIMES = {"llama-13b-pretrain": 30 * DAY, "feeds-two-tower": 3 * DAY}


@transaction.atomic
def demo_workload_load() -> None:
    now = timezone.now()
    for name, (guaranteed, burst) in QUOTAS.items():
        Team.objects.filter(name=name).update(guaranteed_gpus=Decimal(guaranteed), burst_limit_gpus=Decimal(burst))
    for name, runtime in RUNTIMES.items():
        Job.objects.filter(name=name).update(expected_runtime_s=runtime)
    Job.objects.filter(kind="inference", priority_class__name="production").update(max_runtime_s=SERVICE_RUNTIME_S)
    classes = {c.name: c for c in PriorityClass.objects.all()}
    teams = {t.name: t for t in Team.objects.prefetch_related("projects")}

    def job(team, project, user, name, **fields):
        return Job.objects.create(team=teams[team], project=teams[team].projects.get(name=project),
                                  submitted_by_id=_user_id(user), name=name, **fields)

    for team, project, user, name, where, hours, days in TRAINING:
        gpus = sum(len(indexes) for _node, indexes in where)
        started = now - timedelta(hours=hours)
        training = job(team, project, user, name, kind="training", priority_class=classes["training"], gpus=gpus,
                       gpu_memory_gb=70, cpu_cores=12 * gpus, memory_gb=128 * gpus, checkpoint_interval_s=1800,
                       expected_runtime_s=days * DAY, status="running", started_at=started,
                       borrowed=name in BORROWED)
        for node, indexes in where:
            _place_whole(training, node, indexes, started)
    for team, project, user, name, (node, index, slot), hours in SERVICES:
        started = now - timedelta(hours=hours)
        instance = MigInstance.objects.get(gpu__node__name=node, gpu__index=index, start_slot=slot)
        service = job(team, project, user, name, kind="inference", priority_class=classes["production"],
                      gpu_memory_gb=instance.memory_gb, cpu_cores=4, memory_gb=32, preemptible=False,
                      max_runtime_s=SERVICE_RUNTIME_S, status="running", started_at=started)
        _place_mig(service, node, index, start_slot=slot, started=started)
    for order, (team, project, user, name, gpus, models, hours) in enumerate(WAITING, start=10):
        job(team, project, user, name, kind="training", priority_class=classes["training"], gpus=gpus,
            gpu_models=models, gpu_memory_gb=70, cpu_cores=12 * gpus, memory_gb=128 * gpus,
            checkpoint_interval_s=1800, expected_runtime_s=hours * 3600, queue_order=order)
    _measured_day(now)
    _measured_slices(now)


def _user_id(username: str) -> int:
    return User.objects.only("pk").get(username=username).pk


def _measured_day(now) -> None:
    """What the node agents would have sampled over the last day on the GPUs held then."""
    since = now - timedelta(hours=24)
    samples = []
    # A GPU in MIG mode has no whole-GPU reading (NVML and DCGM measure none); its slices have theirs.
    for gpu in Gpu.objects.filter(placements__ended_at__isnull=True, mig_enabled=False).distinct() \
            .prefetch_related("placements__job"):
        held = [p for p in gpu.placements.all() if p.ended_at is None]
        if not held:  # the isnull join also matches a GPU that never held anything (no history yet)
            continue
        first = max(since, min(p.started_at for p in held))
        serving = all(p.job.kind == "inference" for p in held)
        at, utilisation = first, 0.0
        while at <= now:
            hour = (at - since).total_seconds() / 3600
            if serving:  # follows the day's traffic
                utilisation = 0.35 + 0.25 * math.sin(math.pi * hour / 12) ** 2 + 0.02 * (gpu.index % 3)
            else:  # training: busy, a dip at each checkpoint
                utilisation = 0.78 + 0.04 * (gpu.index % 4) + (0.1 if int(at.minute) else -0.15)
            samples.append(GpuSample(gpu=gpu, at=at, utilization=round(min(utilisation, 1.0), 3),
                                     memory_used_gb=round(gpu.memory_gb * (0.4 if serving else 0.85), 1)))
            at += SAMPLE_EVERY
        Gpu.objects.filter(pk=gpu.pk).update(utilization=samples[-1].utilization,
                                             memory_used_gb=samples[-1].memory_used_gb)
    GpuSample.objects.bulk_create(samples, ignore_conflicts=True)


def _measured_slices(now) -> None:
    """What dcgm-exporter would have measured over the last day on each MIG slice a service holds:
    its own activity (the day's traffic, offset per slot) and memory."""
    since = now - timedelta(hours=24)
    samples = []
    for placement in Placement.objects.filter(ended_at__isnull=True, mig_instance__isnull=False) \
            .select_related("mig_instance"):
        instance = placement.mig_instance
        at = max(since, placement.started_at)
        while at <= now:
            hour = (at - since).total_seconds() / 3600
            busy = 0.30 + 0.45 * math.sin(math.pi * (hour + instance.start_slot) / 12) ** 2
            samples.append(MigSample(mig_instance=instance, at=at, utilization=round(busy, 3),
                                     memory_used_gb=round(instance.memory_gb * 0.7, 1)))
            at += SAMPLE_EVERY
        if samples and samples[-1].mig_instance is instance:
            MigInstance.objects.filter(pk=instance.pk).update(
                utilization=samples[-1].utilization, memory_used_gb=samples[-1].memory_used_gb,
                measured_at=samples[-1].at)
    MigSample.objects.bulk_create(samples, ignore_conflicts=True)
